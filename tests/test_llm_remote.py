"""The remote LLM backend against a real engine: llama-cpp-python's OpenAI-compatible server, started
by these tests on loopback and serving the prepared GGUF of smollm2-135m. A streamed reply, the
prefix-cache warm-up effect (the engine's own count of prompt tokens it still had to evaluate;
TTFT figures are reported, not asserted), cancellation, the engine going away mid-reply, and a full
spoken turn through `headstart serve --llm openai://...` that survives the engine's death.

Skipped with the reason when llama-cpp-python[server] is not installed (`make llama-server-env`)."""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid

import numpy as np
import pytest

from remote_engine import LLAMA_SERVER_MISSING, MODEL_ALIAS, free_port, start_headstart_serve, start_llama_server

pytestmark = [pytest.mark.slow, pytest.mark.skipif(LLAMA_SERVER_MISSING is not None,
                                                   reason=LLAMA_SERVER_MISSING or "")]

QUESTION = "What is the capital of France?"
PREFIX_HIT = re.compile(r"(\d+) prefix-match hit, remaining (\d+) prompt tokens to eval")


@pytest.fixture(scope="module")
def gguf():
    from headstart.models.store import ModelError, gguf_path

    try:
        return gguf_path("smollm2-135m")
    except ModelError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def engine(gguf, tmp_path_factory):
    port = free_port()
    process = start_llama_server(gguf, port, tmp_path_factory.mktemp("engine") / "engine.log")
    yield process, f"openai://127.0.0.1:{port}/{MODEL_ALIAS}"
    process.stop()


def _llm(url: str):
    from headstart.llm.remote import RemoteLLM
    from headstart.llm.remote_config import RetryPolicy

    return RemoteLLM.from_url(url, policy=RetryPolicy(first_token_timeout_s=60, stall_timeout_s=30,
                                                      warmup_timeout_s=60, first_token_deadline_s=90))


def _config(**overrides):
    from headstart.config import LLMConfig

    settings = dict(model="remote", max_new_tokens=24, soft_max_tokens=None, temperature=0.0)
    settings.update(overrides)
    return LLMConfig(**settings)


async def _collect(stream):
    return [event async for event in stream]


def test_a_reply_streams_from_the_engine(engine):
    from headstart.events import ReplyDone, TokenDelta

    _, url = engine

    async def main():
        llm = _llm(url)
        stream = llm.reply_stream([{"role": "user", "content": QUESTION}], _config())
        events = await _collect(stream)
        await llm.aclose()
        return stream, events

    stream, events = asyncio.run(main())
    deltas = [e for e in events if isinstance(e, TokenDelta)]
    done = events[-1]
    assert isinstance(done, ReplyDone) and done.reason in ("eos", "max_tokens")
    assert len(deltas) >= 2 and "".join(d.text for d in deltas) == done.text
    assert "paris" in done.text.lower(), done.text
    assert stream.stats.ttft_s > 0 and len(stream.stats.token_times_s) == len(deltas)


def test_warmups_from_partials_leave_only_the_tail_to_prefill(engine, record_property):
    """The engine's own log says how many prompt tokens it still had to evaluate at end of turn:
    plain (history cached, the user's words not) vs after warm-ups from the partial transcripts."""
    from headstart.corpus.texts import CONVERSATION, FINAL_USER_TEXT
    from headstart.bench.llm_remote import OTHER_USER_TEXT, _first_token, _partials

    process, url = engine
    config = _config(max_new_tokens=4)

    def remaining_after(marker: int) -> list[int]:
        return [int(m.group(2)) for m in PREFIX_HIT.finditer(process.output()[marker:])]

    async def main():
        llm = _llm(url)
        system = {"role": "system", "content": f"{config.system_prompt} ({uuid.uuid4().hex})"}
        history = [system, *CONVERSATION]
        final = [*history, {"role": "user", "content": FINAL_USER_TEXT}]
        other = [*history, {"role": "user", "content": OTHER_USER_TEXT}]
        await llm.warm_up_prompt(other, config)
        mark = len(process.output())
        plain_ttft, _ = await _first_token(llm.reply_stream(final, config), 4)
        await asyncio.sleep(0.3)  # the engine logs after the request
        plain = remaining_after(mark)
        await llm.warm_up_prompt(other, config)
        turn = llm.live_turn(history, config)
        for text in _partials(FINAL_USER_TEXT):
            turn.update(text)
            await turn.wait_idle()
        assert not turn.errors, turn.errors
        mark = len(process.output())
        warm_ttft, _ = await _first_token(turn.reply(FINAL_USER_TEXT), 4)
        await asyncio.sleep(0.3)
        warm = remaining_after(mark)
        await llm.aclose()
        return plain_ttft, warm_ttft, plain, warm, turn.num_warmups

    plain_ttft, warm_ttft, plain, warm, warmups = asyncio.run(main())
    record_property("ttft_plain_s", plain_ttft)
    record_property("ttft_warmup_s", warm_ttft)
    print(f"\nremote TTFT: plain {plain_ttft:.3f} s, after {warmups} warm-ups {warm_ttft:.3f} s; "
          f"prompt tokens left to evaluate: plain {plain}, warm {warm}")
    assert warmups >= 5
    assert plain and warm, "the engine logged no prefix-match lines"
    # plain: the user's ~25 words + the template tail; warm: only the last word + the tail
    assert plain[0] >= 20 and warm[0] <= 12 and warm[0] * 2 <= plain[0], (plain, warm)


def test_cancel_frees_the_engine_for_the_next_request(engine):
    """A barge-in closes the request: the engine sees the client leave and stops generating (it
    would otherwise keep the one model busy for the whole long reply); the next request is answered."""
    from headstart.events import TokenDelta

    process, url = engine
    long_reply = _config(max_new_tokens=400)

    async def main():
        llm = _llm(url)
        mark = len(process.output())
        stream = llm.reply_stream([{"role": "user", "content": "Count from one to two hundred in words."}],
                                  long_reply)
        seen = 0
        async for event in stream:
            if isinstance(event, TokenDelta):
                seen += 1
                if seen == 3:
                    stream.cancel()
        done = event
        await stream.wait_finished()
        t0 = time.perf_counter()
        events = await _collect(llm.reply_stream([{"role": "user", "content": QUESTION}], _config()))
        next_s = time.perf_counter() - t0
        await llm.aclose()
        return done, events, process.output()[mark:], next_s

    done, events, log, next_s = asyncio.run(main())
    assert done.reason == "cancelled" and done.num_tokens == 3
    assert events[-1].text.strip()
    assert "Disconnected from client" in log, log[-2000:]  # llama-cpp-python's server noticed and stopped
    runs = [int(n) for n in re.findall(r"\beval time =\s+[\d.]+ ms /\s+(\d+) runs", log)]
    print(f"\ncancelled after 3 deltas; decode runs logged since: {runs}; next reply took {next_s:.2f} s")
    assert all(n < 200 for n in runs), runs  # no 400-token generation ran on


def test_the_engine_going_away_mid_reply_is_an_error_and_it_recovers(gguf, tmp_path):
    from headstart.events import TokenDelta
    from headstart.llm.remote import RemoteLLMError

    port = free_port()
    url = f"openai://127.0.0.1:{port}/{MODEL_ALIAS}"
    process = start_llama_server(gguf, port, tmp_path / "engine.log")

    async def main():
        from headstart.llm.remote import RemoteLLM
        from headstart.llm.remote_config import RetryPolicy

        llm = RemoteLLM.from_url(url, policy=RetryPolicy(first_token_timeout_s=60, stall_timeout_s=10,
                                                         backoff_base_s=0.1))
        stream = llm.reply_stream([{"role": "user", "content": "Count from one to two hundred in words."}],
                                  _config(max_new_tokens=400))
        got = []
        with pytest.raises(RemoteLLMError) as broken:
            async for event in stream:
                if isinstance(event, TokenDelta):
                    got.append(event.text)
                    if len(got) == 2:
                        process.kill()
        t0 = time.perf_counter()
        with pytest.raises(RemoteLLMError) as down:
            await _collect(llm.reply_stream([{"role": "user", "content": QUESTION}], _config()))
        down_s = time.perf_counter() - t0
        await llm.aclose()
        return got, broken.value, down.value, down_s

    try:
        got, broken, down, down_s = asyncio.run(main())
    finally:
        process.stop()
    assert len(got) >= 2
    assert broken.code == "llm_broken" and "broke off" in str(broken)
    assert down.code == "llm_unavailable" and f"127.0.0.1:{port}" in str(down) and "3 attempts" in str(down)
    assert down_s < 5  # refused at once, three tries with short backoff: no stall

    process = start_llama_server(gguf, port, tmp_path / "engine2.log")  # the engine comes back

    async def again():
        llm = _llm(url)
        events = await _collect(llm.reply_stream([{"role": "user", "content": QUESTION}], _config()))
        await llm.aclose()
        return events

    try:
        assert "paris" in asyncio.run(again())[-1].text.lower()
    finally:
        process.stop()


def test_a_spoken_turn_through_headstart_serve_on_the_remote_engine(gguf, tmp_path):
    """`headstart serve --llm openai://...`: a real recording gets a spoken reply from the engine;
    with the engine gone the next turn gets an `error` event and the session goes on; once the
    engine is back the next turn is answered again."""
    from websockets.asyncio.client import connect

    from headstart.corpus import recordings as data
    from headstart.corpus.wer import word_error_rate

    engine_port, serve_port = free_port(), free_port()
    url = f"openai://127.0.0.1:{engine_port}/{MODEL_ALIAS}"
    engine = start_llama_server(gguf, engine_port, tmp_path / "engine.log")
    serve = start_headstart_serve(serve_port, url, tmp_path / "serve.log", "--max-new-tokens", "24")
    rec = data.default_recording()
    audio = np.concatenate([rec.read(), np.zeros(24000, dtype=np.float32)])
    pcm = (np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes()
    state = {"engine": engine}

    async def say(ws, events):
        """Send the recording at 2x real time; return the events up to metrics.turn or error."""
        start = len(events)
        for lo in range(0, len(pcm), 1280):
            await ws.send(pcm[lo:lo + 1280])
            await asyncio.sleep(0.02)
        while True:
            message = await asyncio.wait_for(ws.recv(), 90)
            if isinstance(message, bytes):
                events.append({"type": "audio", "bytes": len(message)})
                continue
            event = json.loads(message)
            events.append(event)
            if event["type"] == "reply.audio.start" or event["type"] == "reply.text.delta":
                pass
            if event["type"] in ("metrics.turn", "error"):
                return events[start:]

    async def main():
        events: list[dict] = []
        async with connect(f"ws://127.0.0.1:{serve_port}/ws", max_size=None) as ws:
            await ws.send(json.dumps({"type": "session.start", "sample_rate": 16000}))
            first = await say(ws, events)
            state["engine"].kill()
            second = await say(ws, events)
            state["engine"] = start_llama_server(gguf, engine_port, tmp_path / "engine2.log")
            third = await say(ws, events)
        return first, second, third

    try:
        first, second, third = asyncio.run(main())
    finally:
        serve.stop()
        state["engine"].stop()

    kinds = [e["type"] for e in first]
    for kind in ("transcript.final", "turn.end", "reply.started", "reply.text.delta", "reply.audio.start",
                 "audio", "reply.done", "metrics.turn"):
        assert kind in kinds, (kind, kinds)
    final = next(e for e in first if e["type"] == "transcript.final")["text"]
    assert word_error_rate(rec.text, final) <= 0.25, final
    done = next(e for e in first if e["type"] == "reply.done")
    metrics = next(e for e in first if e["type"] == "metrics.turn")
    assert done["text"].strip() and metrics["reply_audio_ms"] > 0
    # a preemptive hit may have its first token out before the end of turn: a TTFT of 0 is legitimate
    assert metrics["ttft_ms"] >= 0 if metrics["preemptive"] == "hit" else metrics["ttft_ms"] > 0, metrics
    print(f"\nserve over the remote engine: reply {done['text']!r}, ttft {metrics['ttft_ms']} ms, "
          f"vad end -> first audio {metrics['vad_end_to_first_audio_ms']} ms, preemptive {metrics['preemptive']}")

    error = second[-1]
    assert error["type"] == "error" and error["code"] == "llm_unavailable", second[-3:]
    assert f"127.0.0.1:{engine_port}" in error["message"]
    assert not any(e["type"] == "audio" for e in second)
    assert any(e["type"] == "reply.done" and e["text"].strip() for e in third), [e["type"] for e in third]
