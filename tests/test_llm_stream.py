"""The async reply stream over the real SmolLM2-135M engine: deltas arrive as they are produced, on
the "llm" thread; cancel; a model error mid-generation reaches the consumer at once and the next
request works (cases.md); TTFT/TPOT on an injected clock."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace

import pytest

from headstart.clock import FakeClock
from headstart.config import LLMConfig
from headstart.events import ReplyDone, TokenDelta
from headstart.llm.engine import LLMEngine, LLMError
from headstart.llm.sampling import Sampling
from headstart.llm.stream import generate_stream, with_system_prompt
from tests.prepared import llm_engine

pytestmark = pytest.mark.models  # loads a real prepared model (make test-unit leaves it out)

MODEL = "smollm2-135m"
CAPITAL = [{"role": "user", "content": "What is the capital of France?"}]
STORY = [{"role": "user", "content": "Tell me a long story about a robot who learns to paint."}]
HANG_GUARD_S = 120.0  # only against a hang; never reached when things work

CONFIG = LLMConfig(model=MODEL, max_new_tokens=40, system_prompt="")


@pytest.fixture(scope="module")
def engine() -> LLMEngine:
    return llm_engine(CONFIG)


async def _collect(stream) -> list:
    async def run():
        return [event async for event in stream]

    return await asyncio.wait_for(run(), HANG_GUARD_S)


def test_with_system_prompt():
    user = [{"role": "user", "content": "hi"}]
    assert with_system_prompt(user, "be brief") == [{"role": "system", "content": "be brief"}] + user
    assert with_system_prompt(user, "") == user
    system = [{"role": "system", "content": "mine"}] + user
    assert with_system_prompt(system, "be brief") == system


def test_a_reply_streams_deltas_then_one_done(engine, llm_pool):
    async def main():
        return await _collect(generate_stream(engine, CAPITAL, CONFIG, llm_pool))

    events = asyncio.run(main())
    *deltas, done = events
    assert isinstance(done, ReplyDone) and all(isinstance(d, TokenDelta) for d in deltas)
    assert deltas and all(d.text for d in deltas)
    ids = [t for d in deltas for t in d.token_ids]
    assert done.text == "".join(d.text for d in deltas) == engine.tokenizer.decode(ids, skip_special_tokens=True)
    assert done.reason == "eos" and done.num_tokens == len(ids) < CONFIG.max_new_tokens
    assert "Paris" in done.text
    # The same tokens as the engine's own greedy loop.
    prompt = engine.render_prompt(CAPITAL)
    assert ids == list(engine.generate(prompt, CONFIG.max_new_tokens, Sampling()))


def test_the_token_loop_runs_on_the_llm_thread(engine, llm_pool, monkeypatch):
    names = []
    real_forward = engine.model.forward

    def recording(*args, **kwargs):
        names.append(threading.current_thread().name)
        return real_forward(*args, **kwargs)

    monkeypatch.setattr(engine.model, "forward", recording)

    async def main():
        return await _collect(generate_stream(engine, CAPITAL, CONFIG, llm_pool))

    asyncio.run(main())
    assert names and all(name.startswith("llm") for name in names)


def test_tokens_arrive_while_the_reply_is_still_being_generated(engine, llm_pool):
    config = replace(CONFIG, max_new_tokens=60)

    async def main():
        stream = generate_stream(engine, STORY, config, llm_pool)
        events = []
        async for event in stream:
            events.append(event)
            if isinstance(event, TokenDelta) and len(events) == 1:
                # Delivered as produced: the llm thread is still busy with this reply.
                assert not stream._future.done()
                assert len(stream.stats.token_times_s) < config.max_new_tokens
                stream.cancel()
        return events

    events = asyncio.run(asyncio.wait_for(main(), HANG_GUARD_S))
    first, done = events[0], events[-1]
    assert isinstance(done, ReplyDone) and done.reason == "cancelled"
    assert len(events) == 2  # nothing after the cancel reaches the consumer
    assert done.text == first.text and done.num_tokens == len(first.token_ids)


def test_cancel_drops_text_still_queued(engine, llm_pool):
    config = replace(CONFIG, max_new_tokens=8)

    async def main():
        stream = generate_stream(engine, STORY, config, llm_pool)
        await asyncio.wait_for(stream.wait_finished(), HANG_GUARD_S)  # all 8 tokens queued, unread
        stream.cancel()
        stream.cancel()  # idempotent
        return await _collect(stream), stream

    events, stream = asyncio.run(main())
    assert events == [ReplyDone(text="", num_tokens=0, reason="cancelled")]
    assert len(stream.stats.token_times_s) == 8


def test_cancel_before_the_llm_thread_starts(engine, llm_pool):
    gate = threading.Event()
    engine.reset()

    async def main():
        blocker = asyncio.get_running_loop().run_in_executor(llm_pool, gate.wait)
        stream = generate_stream(engine, CAPITAL, CONFIG, llm_pool)
        stream.cancel()
        gate.set()
        await blocker
        return await _collect(stream)

    events = asyncio.run(main())
    assert events == [ReplyDone(text="", num_tokens=0, reason="cancelled")]
    assert engine.num_tokens == 0  # not even the prefill ran


def test_a_consumer_that_stops_reading_stops_the_generation(engine, llm_pool):
    config = replace(CONFIG, max_new_tokens=60)

    async def main():
        stream = generate_stream(engine, STORY, config, llm_pool)
        async for _event in stream:
            break
        await asyncio.wait_for(stream.wait_finished(), HANG_GUARD_S)
        return stream

    stream = asyncio.run(main())
    assert stream.cancelled
    assert len(stream.stats.token_times_s) < config.max_new_tokens


def test_stop_string_ends_the_reply_before_it(engine, llm_pool):
    config = replace(CONFIG, stop=("Paris",))

    async def main():
        return await _collect(generate_stream(engine, CAPITAL, config, llm_pool))

    *deltas, done = asyncio.run(main())
    assert done.reason == "stop"
    assert "Paris" not in done.text and done.text == "".join(d.text for d in deltas)
    assert done.text.rstrip().endswith("is")


def test_max_tokens_reason(engine, llm_pool):
    config = replace(CONFIG, max_new_tokens=4)

    async def main():
        return await _collect(generate_stream(engine, STORY, config, llm_pool))

    done = asyncio.run(main())[-1]
    assert done.reason == "max_tokens" and done.num_tokens == 4


def test_an_error_mid_generation_reaches_the_consumer_and_the_next_request_works(engine, llm_pool, monkeypatch):
    async def reply():
        return await _collect(generate_stream(engine, CAPITAL, CONFIG, llm_pool))

    clean = asyncio.run(reply())[-1]
    calls = {"n": 0}
    real_forward = engine.model.forward

    def failing(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 4:
            raise RuntimeError("injected model failure")
        return real_forward(*args, **kwargs)

    monkeypatch.setattr(engine.model, "forward", failing)

    async def failing_reply():
        received = []
        with pytest.raises(LLMError, match="injected model failure") as info:
            async for event in generate_stream(engine, CAPITAL, CONFIG, llm_pool):
                received.append(event)
        return received, info.value

    received, error = asyncio.run(asyncio.wait_for(failing_reply(), HANG_GUARD_S))
    assert isinstance(error.__cause__, RuntimeError)
    assert received and all(isinstance(e, TokenDelta) for e in received)  # text before the error came through
    assert calls["n"] == 4  # it stopped at the failure
    monkeypatch.undo()
    again = asyncio.run(reply())[-1]
    assert again == clean


class _ScriptedEngine:
    """Stands in for the engine in the timing test: prefill costs 0.2 s and each decode step 0.05 s
    on the fake clock."""

    def __init__(self, tokenizer, token_ids, clock: FakeClock):
        self.tokenizer, self.token_ids, self.clock = tokenizer, token_ids, clock

    def render_prompt(self, messages):
        return [1, 2, 3]

    def generate(self, prompt_ids, max_new_tokens, sampling):
        def tokens():
            self.clock.advance(0.2)
            for i, token in enumerate(self.token_ids[:max_new_tokens]):
                if i:
                    self.clock.advance(0.05)
                yield token

        return tokens()


def test_ttft_and_tpot_on_an_injected_clock(engine, llm_pool):
    clock = FakeClock(start_s=10.0)
    ids = engine.tokenizer("Hello there, how are you today?", add_special_tokens=False)["input_ids"]
    scripted = _ScriptedEngine(engine.tokenizer, ids, clock)

    async def main():
        stream = generate_stream(scripted, CAPITAL, CONFIG, llm_pool, clock=clock)
        events = await _collect(stream)
        return stream, events

    stream, events = asyncio.run(main())
    stats = stream.stats
    assert stats.requested_at_s == 10.0
    assert stats.ttft_s == pytest.approx(0.2)
    assert stats.tpot_s == pytest.approx(0.05)
    assert len(stats.token_times_s) == len(ids)
    assert stats.done_at_s == pytest.approx(10.2 + 0.05 * (len(ids) - 1))
    assert events[-1] == ReplyDone(text="Hello there, how are you today?", num_tokens=len(ids), reason="max_tokens"
                                   if len(ids) >= CONFIG.max_new_tokens else "eos")


def test_stream_needs_a_running_loop(engine, llm_pool):
    with pytest.raises(RuntimeError):
        generate_stream(engine, CAPITAL, CONFIG, llm_pool)
