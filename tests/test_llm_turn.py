"""Incremental prefill from partial transcripts and preemptive replies on the real SmolLM2-135M in
float32: the cache after word-by-word partials gives the one-shot logits, a held reply adopted on a
hit yields exactly what a fresh run yields, a miss is rolled back and regenerated, the stale-cache
guard fires, and in the async form confirmed work overtakes preemptive work."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace

import pytest
import torch

from headstart.config import LLMConfig, ThreadPlan
from headstart.events import ReplyDone, TokenDelta
from headstart.llm.engine import LLMEngine
from headstart.llm.live import LiveTurn
from headstart.llm.sampling import Sampling
from headstart.llm.shaping import SentenceBudget, ends_sentence
from headstart.llm.speculative import Decoder, PromptLookupDrafter
from headstart.llm.stream import generate_stream, llm_executor
from headstart.llm.turn import PreemptionStats, TurnPrefill, TurnState, stable_text

MODEL = "smollm2-135m"
CONFIG = LLMConfig(model=MODEL, dtype="float32", max_new_tokens=16, soft_max_tokens=None,
                   system_prompt="Answer in one short sentence.")
HISTORY = [
    {"role": "system", "content": CONFIG.system_prompt},
    {"role": "user", "content": "Hi, who are you?"},
    {"role": "assistant", "content": "I am a helpful voice assistant."},
]
FINAL = "What is the capital of France?"
HANG_GUARD_S = 120.0


@pytest.fixture(scope="module")
def engine() -> LLMEngine:
    from headstart.models import ModelNotPreparedError, resolve_model

    try:
        path = resolve_model(MODEL)
    except ModelNotPreparedError as exc:
        pytest.skip(str(exc))
    return LLMEngine.load(path, CONFIG, ThreadPlan())


def _partials(text: str) -> list[str]:
    words = text.split(" ")
    out = []
    for i in range(1, len(words) + 1):
        word = words[i - 1]
        out += [" ".join(words[: i - 1] + [word[: max(1, len(word) // 2)]]), " ".join(words[:i])]
    return out


def _fresh(engine: LLMEngine, prompt: list[int], n: int = 16, sampling: Sampling = Sampling()) -> list[int]:
    engine.reset()
    return list(engine.generate(prompt, n, sampling))


def test_stable_text_drops_the_growing_last_word():
    assert stable_text("What is the capi") == "What is the"
    assert stable_text("What") == ""
    assert stable_text("") == ""
    assert stable_text("Hello  there") == "Hello"
    assert stable_text("one two\nthree") == "one two"


def test_incremental_prefill_equals_one_shot_and_leaves_only_the_tail(engine):
    engine.reset()
    prefill = TurnPrefill(engine, HISTORY)
    final = prefill.prompt_ids(FINAL)
    for text in _partials(FINAL):
        prefill.update(text)
        # Committed: a prefix of the final prompt up to the stable word boundary, never the last word.
        assert engine.tokens == tuple(final[: engine.num_tokens])
        assert engine.tokens == tuple(prefill.stable_ids(text))
    tail = len(final) - engine.num_tokens
    assert tail <= 8  # the last word, the end of the user message and the assistant header
    incremental = engine.prefill(final)
    one_shot = _fresh_logits(engine, final)
    torch.testing.assert_close(incremental, one_shot, rtol=1e-4, atol=1e-4)


def _fresh_logits(engine: LLMEngine, ids: list[int]) -> torch.Tensor:
    engine.reset()
    return engine.prefill(ids)


def test_a_partial_that_changes_an_earlier_word_is_rolled_back(engine):
    engine.reset()
    prefill = TurnPrefill(engine, HISTORY)
    prefill.update("My favourite animal is the cat and")
    changed = "My favourite animal is the dog and I"
    prefill.update(changed)
    assert engine.tokens == tuple(prefill.stable_ids(changed))
    final = prefill.prompt_ids(changed)
    torch.testing.assert_close(engine.prefill(final), _fresh_logits(engine, final), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("sampling", [Sampling(), Sampling(temperature=0.9, top_p=0.95, seed=11)])
def test_a_preemptive_hit_yields_exactly_what_a_fresh_run_yields(engine, sampling):
    engine.reset()
    stats = PreemptionStats()
    state = TurnState(Decoder(engine), HISTORY, 16, sampling, stats)
    for text in _partials(FINAL)[:-1]:
        state.update(text)
    state.preempt(FINAL)
    while state.preempt_step(max_held_tokens=5):
        pass
    assert len(state.preemptive.held) == 5
    state.update(FINAL)  # the same text again: the held reply stays
    prompt, tokens, adopted = state.finish(FINAL)
    got = list(tokens)
    assert adopted == 5 and (stats.hits, stats.misses, stats.wasted_tokens) == (1, 0, 0)
    assert got == _fresh(engine, prompt, 16, sampling)


def test_a_preemptive_miss_is_rolled_back_and_regenerated(engine):
    engine.reset()
    stats = PreemptionStats()
    state = TurnState(Decoder(engine), HISTORY, 16, Sampling(), stats)
    state.preempt("What is the capital of Spain")
    while state.preempt_step(max_held_tokens=4):
        pass
    prompt, tokens, adopted = state.finish(FINAL)
    got = list(tokens)
    assert adopted == 0 and (stats.hits, stats.misses, stats.wasted_tokens) == (0, 1, 4)
    assert got == _fresh(engine, prompt)
    assert "Paris" in engine.tokenizer.decode(got)


def test_speech_that_goes_on_drops_the_held_reply(engine):
    engine.reset()
    stats = PreemptionStats()
    state = TurnState(Decoder(engine), HISTORY, 16, Sampling(), stats)
    state.preempt("What is the capital")
    state.preempt_step(3)
    state.preempt_step(3)
    state.update("What is the capital of France")
    assert state.preemptive is None and (stats.misses, stats.wasted_tokens) == (1, 2)
    prompt, tokens, _ = state.finish(FINAL)
    assert list(tokens) == _fresh(engine, prompt)


def test_the_stale_cache_guard_fires_for_a_held_reply(engine):
    engine.reset()
    stats = PreemptionStats()
    state = TurnState(Decoder(engine), HISTORY, 16, Sampling(), stats)
    state.preempt(FINAL)
    state.preempt_step(8)
    state.preempt_step(8)
    # Someone else uses the engine meanwhile: the held reply must not extend that cache.
    engine.prefill(engine.render_prompt([{"role": "user", "content": "Something else entirely"}]))
    assert state.preempt_step(8) is False
    assert state.preemptive is None and stats.misses == 1
    prompt, tokens, adopted = state.finish(FINAL)
    assert adopted == 0 and list(tokens) == _fresh(engine, prompt)


def test_a_preemptive_hit_with_prompt_lookup_is_exact(engine):
    engine.reset()
    state = TurnState(Decoder(engine, PromptLookupDrafter()), HISTORY, 16, Sampling())
    state.preempt(FINAL)
    while state.preempt_step(6):
        pass
    prompt, tokens, adopted = state.finish(FINAL)
    assert adopted == 6 and list(tokens) == _fresh(engine, prompt)


def test_sentence_budget():
    assert ends_sentence("Paris is the capital.") and ends_sentence('He said "yes!" ')
    assert ends_sentence("First line\n") and ends_sentence("東京です。")
    assert not ends_sentence("It costs 3.") and not ends_sentence("Ask J.")
    assert not ends_sentence("The capital is") and not ends_sentence("")
    budget = SentenceBudget(5)
    assert not budget.push(3, "One. Two.") and budget.push(5, "One. Two.")
    assert not budget.push(9, "One. Two and")
    assert not SentenceBudget(None).push(1000, "Done.")
    with pytest.raises(ValueError):
        SentenceBudget(0)


# -- the async form -------------------------------------------------------------------------------


@pytest.fixture
def executor():
    pool = llm_executor()
    yield pool
    pool.shutdown(wait=True)


async def _collect(stream) -> list:
    async def run():
        return [event async for event in stream]

    return await asyncio.wait_for(run(), HANG_GUARD_S)


def test_live_turn_hit_streams_the_fresh_reply_at_once(engine, executor):
    config = replace(CONFIG, preemptive_max_tokens=4)

    async def fresh():
        engine.reset()
        return await _collect(generate_stream(engine, [*HISTORY[1:], {"role": "user", "content": FINAL}],
                                              config, executor))

    async def live():
        engine.reset()
        stats = PreemptionStats()
        turn = LiveTurn(engine, HISTORY, config, executor, stats=stats)
        for text in _partials(FINAL):
            turn.update(text)
        turn.preempt(FINAL)
        await asyncio.wait_for(turn.wait_idle(), HANG_GUARD_S)
        assert turn.held_tokens == 4 and not turn.errors
        stream = turn.reply(FINAL)
        events = await _collect(stream)
        with pytest.raises(RuntimeError):
            turn.update("more")  # the turn is over
        return events, stream.stats, stats

    expected = asyncio.run(fresh())
    events, reply_stats, stats = asyncio.run(live())
    assert events == expected
    assert isinstance(events[-1], ReplyDone) and "Paris" in events[-1].text
    assert reply_stats.num_adopted_tokens == 4 and (stats.hits, stats.misses) == (1, 0)


def test_confirmed_reply_overtakes_queued_preemptive_work(engine, executor):
    config = replace(CONFIG, preemptive_max_tokens=1000)
    gate = threading.Event()

    async def main():
        engine.reset()
        stats = PreemptionStats()
        turn = LiveTurn(engine, HISTORY, config, executor, stats=stats)
        blocker = asyncio.get_running_loop().run_in_executor(executor, gate.wait)
        turn.update("What is the capital of")
        turn.preempt("What is the capital of Spain?")
        stream = turn.reply(FINAL)  # confirmed while the preemptive work is still queued
        gate.set()
        await blocker
        return await _collect(stream), stream.stats, stats

    events, reply_stats, stats = asyncio.run(main())
    assert "Paris" in events[-1].text
    assert reply_stats.num_adopted_tokens == 0 and (stats.hits, stats.misses, stats.wasted_tokens) == (0, 0, 0)


def test_live_turn_preemption_yields_between_tokens(engine, executor):
    config = replace(CONFIG, preemptive_max_tokens=1000, max_new_tokens=200)

    async def main():
        engine.reset()
        stats = PreemptionStats()
        turn = LiveTurn(engine, HISTORY, config, executor, stats=stats)
        turn.preempt("Tell me a very long story about a robot.")
        while turn.held_tokens < 3:
            await asyncio.sleep(0.01)
        stream = turn.reply(FINAL)  # a miss, confirmed mid-preemption
        events = await _collect(stream)
        return events, stats

    events, stats = asyncio.run(main())
    assert isinstance(events[-1], ReplyDone) and "Paris" in events[-1].text
    assert stats.misses == 1 and 3 <= stats.wasted_tokens < 200  # it stopped within a token or so
    assert all(isinstance(e, TokenDelta) for e in events[:-1])

