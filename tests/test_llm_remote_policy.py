"""The remote LLM backend's policy with a fake HTTP transport (no engine): address parsing, retries
with backoff for the first token only, timeouts, cancellation, errors. The real engine is in
tests/test_llm_remote.py."""

from __future__ import annotations

import asyncio
import json

import pytest

httpx2 = pytest.importorskip("httpx2")
pytest.importorskip("openai")

from headstart.clock import FakeClock  # noqa: E402
from headstart.config import LLMConfig  # noqa: E402
from headstart.events import ReplyDone, TokenDelta  # noqa: E402
from headstart.llm.engine import LLMError  # noqa: E402
from headstart.llm.remote import RemoteLLM, RemoteLLMError  # noqa: E402
from headstart.llm.remote_config import (  # noqa: E402
    RemoteEndpoint,
    RetryPolicy,
    api_key_from_environ,
    is_remote_llm,
    parse_llm_url,
)

CONFIG = LLMConfig(model="openai://h:1/m", soft_max_tokens=None)


# -- the address ------------------------------------------------------------------------------------


def test_parse_plain_and_https_addresses():
    e = parse_llm_url("openai://127.0.0.1:8080/smollm2")
    assert (e.base_url, e.model, e.warmup, e.cache_prompt, e.api_key) == (
        "http://127.0.0.1:8080/v1", "smollm2", True, False, None)
    e = parse_llm_url("openai+https://api.example.com/Qwen/Qwen2.5-0.5B-Instruct?cache_prompt=1&warmup=0", "k")
    assert e.base_url == "https://api.example.com/v1"
    assert e.model == "Qwen/Qwen2.5-0.5B-Instruct"  # hub ids keep their slash
    assert (e.cache_prompt, e.warmup, e.api_key) == (True, False, "k")
    assert parse_llm_url("openai+http://[::1]:9/m?base=/api/v1").base_url == "http://[::1]:9/api/v1"
    assert "sk-secret" not in repr(parse_llm_url("openai://h:1/m", "sk-secret"))  # the key never shows


@pytest.mark.parametrize("url, words", [
    ("openai://h:1/", "no model"),
    ("openai:///m", "no host"),
    ("openai://h:99999/m", "port"),
    ("openai://u:p@h:1/m", "credentials"),
    ("openai://h:1/m?speed=2", "unknown option"),
    ("openai://h:1/m?warmup=maybe", "expected 0 or 1"),
    ("http://h:1/m", "not a remote"),
])
def test_bad_addresses_say_what_is_wrong(url, words):
    with pytest.raises(ValueError, match=words):
        parse_llm_url(url)


def test_remote_addresses_are_told_from_model_names():
    assert is_remote_llm("openai://h:1/m") and is_remote_llm("OpenAI+HTTPS://h/m")
    assert not any(is_remote_llm(n) for n in ("qwen2.5-coder-0.5b", "Qwen/Qwen2.5", "/models/x", "openai"))


def test_api_key_comes_from_the_environment_headstart_first():
    assert api_key_from_environ({"OPENAI_API_KEY": "b", "HEADSTART_OPENAI_API_KEY": "a"}) == "a"
    assert api_key_from_environ({"OPENAI_API_KEY": " b "}) == "b"
    assert api_key_from_environ({"HEADSTART_OPENAI_API_KEY": ""}) is None


# -- the policy (plain, no I/O) ---------------------------------------------------------------------


def test_backoff_doubles_and_is_capped():
    p = RetryPolicy(backoff_base_s=0.25, backoff_max_s=1.0, max_attempts=10, first_token_deadline_s=100)
    assert [p.backoff_s(a) for a in range(5)] == [0.25, 0.5, 1.0, 1.0, 1.0]


def test_retry_only_before_the_first_token_within_attempts_and_deadline():
    p = RetryPolicy(max_attempts=3, backoff_base_s=0.5, backoff_max_s=4, first_token_deadline_s=5.0)
    assert p.next_delay_s(0, 0.1, retryable=True, got_token=False) == 0.5
    assert p.next_delay_s(1, 0.1, retryable=True, got_token=False) == 1.0
    assert p.next_delay_s(2, 0.1, retryable=True, got_token=False) is None  # 3 attempts made
    assert p.next_delay_s(0, 0.1, retryable=True, got_token=True) is None  # the user heard text
    assert p.next_delay_s(0, 0.1, retryable=False, got_token=False) is None  # e.g. HTTP 404
    assert p.next_delay_s(0, 4.6, retryable=True, got_token=False) is None  # past the deadline
    assert p.attempt_timeout_s(4.0) == pytest.approx(1.0)  # the last attempt gets what is left


@pytest.mark.parametrize("field", ["connect_timeout_s", "first_token_timeout_s", "stall_timeout_s"])
def test_policy_rejects_nonpositive_timeouts(field):
    with pytest.raises(ValueError, match=field):
        RetryPolicy(**{field: 0})


# -- a fake engine behind a fake transport ----------------------------------------------------------


def _chunk(text=None, finish=None):
    delta = {} if text is None else {"content": text}
    body = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def _sse(pieces, finish="stop"):
    return b"".join(_chunk(p) for p in pieces) + _chunk(finish=finish) + b"data: [DONE]\n\n"


class FakeEngine:
    """Answers chat requests from a script: each request takes the next behaviour."""

    def __init__(self, *behaviours):
        self.behaviours = list(behaviours)
        self.requests: list[dict] = []
        self.closed_streams = 0

    async def handle(self, request):
        body = json.loads(request.content)
        self.requests.append({"body": body, "auth": request.headers.get("authorization")})
        behaviour = self.behaviours.pop(0) if len(self.behaviours) > 1 else self.behaviours[0]
        return await behaviour(self, body)


def answer(pieces, finish="stop"):
    async def run(engine, body):
        if not body.get("stream"):
            return httpx2.Response(200, json={"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                                              "choices": [{"index": 0, "finish_reason": "length",
                                                           "message": {"role": "assistant", "content": "x"}}]})
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=_sse(pieces, finish))
    return run


def status(code):
    async def run(engine, body):
        return httpx2.Response(code, json={"error": {"message": f"fake status {code}"}})
    return run


def refuse():
    async def run(engine, body):
        raise httpx2.ConnectError("connection refused")
    return run


def stream_then(pieces, end):
    """Stream `pieces`, then `end`: "hang" (never another byte) or "break" (the connection drops)."""
    async def run(engine, body):
        gate = asyncio.Event()

        async def body_bytes():
            try:
                for p in pieces:
                    yield _chunk(p)
                if end == "break":
                    raise httpx2.ReadError("connection reset by peer")
                await gate.wait()  # hangs until the client closes the stream
            finally:
                engine.closed_streams += 1

        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body_bytes())
    return run


def remote(engine, **policy):
    defaults = dict(backoff_base_s=0.5, backoff_max_s=2.0, first_token_timeout_s=5.0, stall_timeout_s=5.0,
                    warmup_timeout_s=5.0)
    defaults.update(policy)
    return RemoteLLM(RemoteEndpoint("http://engine.test/v1", "m", api_key="sekret"), RetryPolicy(**defaults),
                     http_client_factory=lambda: httpx2.AsyncClient(transport=httpx2.MockTransport(engine.handle)))


async def collect(stream):
    events = []
    async for event in stream:
        events.append(event)
    return events


def run(coro):
    return asyncio.run(coro)


def test_a_streamed_reply_arrives_as_deltas_then_done_with_timing_and_the_key():
    engine = FakeEngine(answer(["Hello", " there", "."]))

    async def main():
        llm = remote(engine)
        stream = llm.reply_stream([{"role": "user", "content": "hi"}], CONFIG, clock=FakeClock())
        return stream, await collect(stream)

    stream, events = run(main())
    assert [e.text for e in events if isinstance(e, TokenDelta)] == ["Hello", " there", "."]
    assert events[-1] == ReplyDone(text="Hello there.", num_tokens=3, reason="eos")
    body = engine.requests[0]["body"]
    assert body["stream"] is True and body["model"] == "m" and body["max_tokens"] == CONFIG.max_new_tokens
    assert body["messages"][0] == {"role": "system", "content": CONFIG.system_prompt}
    assert "cache_prompt" not in body  # only with ?cache_prompt=1
    assert engine.requests[0]["auth"] == "Bearer sekret"
    assert stream.stats.ttft_s is not None and len(stream.stats.token_times_s) == 3


def test_length_finish_is_max_tokens_and_the_soft_budget_ends_at_a_sentence():
    engine = FakeEngine(answer(["One", ".", " Two", " three", ".", " Four"], finish="length"))

    async def main():
        llm = remote(engine)
        a = await collect(llm.reply_stream([], CONFIG))
        b = await collect(llm.reply_stream([], LLMConfig(soft_max_tokens=3)))
        return a, b

    a, b = run(main())
    assert a[-1].reason == "max_tokens" and a[-1].text == "One. Two three. Four"
    assert b[-1] == ReplyDone(text="One. Two three.", num_tokens=5, reason="max_tokens")


def test_retries_with_backoff_until_the_engine_answers():
    engine = FakeEngine(refuse(), status(503), answer(["ok"]))
    clock = FakeClock()

    async def main():
        stream = remote(engine).reply_stream([], CONFIG, clock=clock)
        return stream, await collect(stream)

    stream, events = run(main())
    assert events[-1].text == "ok" and stream.num_attempts == 3
    assert clock.now() == pytest.approx(0.5 + 1.0)  # two backoffs on the injected clock


def test_a_dead_engine_gives_a_clear_error_after_the_attempts():
    engine = FakeEngine(refuse())

    async def main():
        stream = remote(engine, max_attempts=3).reply_stream([], CONFIG, clock=FakeClock())
        with pytest.raises(RemoteLLMError) as info:
            await collect(stream)
        return stream, info.value

    stream, error = run(main())
    assert isinstance(error, LLMError) and error.code == "llm_unavailable"
    assert "engine.test" in str(error) and "3 attempts" in str(error) and "refused" in str(error)
    assert len(engine.requests) == 3


def test_a_refused_request_is_not_retried():
    engine = FakeEngine(status(404))

    async def main():
        with pytest.raises(RemoteLLMError) as info:
            await collect(remote(engine).reply_stream([], CONFIG, clock=FakeClock()))
        return info.value

    error = run(main())
    assert error.code == "llm_rejected" and "HTTP 404" in str(error) and "fake status 404" in str(error)
    assert len(engine.requests) == 1


def test_no_first_token_in_time_is_retried_then_an_error():
    engine = FakeEngine(stream_then([], "hang"))

    async def main():
        with pytest.raises(RemoteLLMError, match="first token"):
            await collect(remote(engine, max_attempts=2, first_token_timeout_s=0.3).reply_stream(
                [], CONFIG, clock=FakeClock()))

    run(main())
    assert len(engine.requests) == 2 and engine.closed_streams == 2  # every hung request was closed


def test_a_reply_that_breaks_off_after_tokens_is_not_retried():
    engine = FakeEngine(stream_then(["Half", " a"], "break"))

    async def main():
        events = []
        with pytest.raises(RemoteLLMError) as info:
            async for event in remote(engine).reply_stream([], CONFIG, clock=FakeClock()):
                events.append(event)
        return events, info.value

    events, error = run(main())
    assert [e.text for e in events] == ["Half", " a"]  # what the user got stays; nothing is repeated
    assert error.code == "llm_broken" and "after 2 tokens" in str(error)
    assert len(engine.requests) == 1


def test_a_stalled_reply_ends_with_an_error_not_a_hang():
    engine = FakeEngine(stream_then(["Hi"], "hang"))

    async def main():
        with pytest.raises(RemoteLLMError, match="next token"):
            await collect(remote(engine, stall_timeout_s=0.3).reply_stream([], CONFIG, clock=FakeClock()))

    run(main())
    assert engine.closed_streams == 1


def test_cancel_closes_the_request_and_drops_undelivered_text():
    engine = FakeEngine(stream_then(["A", "B", "C"], "hang"))

    async def main():
        stream = remote(engine, stall_timeout_s=30).reply_stream([], CONFIG, clock=FakeClock())
        seen = []
        async for event in stream:
            seen.append(event)
            if isinstance(event, TokenDelta):
                stream.cancel()  # barge-in after the first delta
        await stream.wait_finished()
        return seen

    seen = run(main())
    assert seen == [TokenDelta("A"), ReplyDone(text="A", num_tokens=1, reason="cancelled")]
    assert engine.closed_streams == 1


def test_cancel_before_the_request_starts_still_ends_the_stream():
    engine = FakeEngine(answer(["x"]))

    async def main():
        stream = remote(engine).reply_stream([], CONFIG)
        stream.cancel()
        stream.cancel()  # idempotent
        return await collect(stream)

    assert run(main()) == [ReplyDone(text="", num_tokens=0, reason="cancelled")]
    assert engine.requests == []


# -- the turn: warm-ups and the held reply ----------------------------------------------------------


def test_partials_send_coalesced_one_token_warmups_of_the_stable_text():
    engine = FakeEngine(answer(["Paris."]))

    async def main():
        llm = remote(engine)
        llm.endpoint = RemoteEndpoint("http://engine.test/v1", "m", cache_prompt=True)
        turn = llm.live_turn([{"role": "system", "content": "S"}], CONFIG)
        for text in ("What", "What is", "What is the", "What is the capi", "What is the capital"):
            turn.update(text)  # all before the loop runs: coalesced
        await turn.wait_idle()
        turn.update("What is the capital")  # same stable text: nothing new
        await turn.wait_idle()
        events = await collect(turn.reply("What is the capital of France?"))
        return turn, events

    turn, events = run(main())
    warmups = [r["body"] for r in engine.requests if not r["body"].get("stream")]
    assert [w["messages"][-1]["content"] for w in warmups] == ["What is the"]
    assert all(w["max_tokens"] == 1 and w["cache_prompt"] is True for w in warmups)
    assert warmups[0]["messages"][0] == {"role": "system", "content": "S"}
    assert turn.num_warmups == 1 and events[-1].text == "Paris."


def test_warmup_off_sends_none_and_failed_warmups_never_touch_the_reply():
    engine = FakeEngine(status(500), answer(["fine"]))

    async def main():
        llm = remote(engine)
        turn = llm.live_turn([], CONFIG)
        turn.update("hello there friend")
        await turn.wait_idle()
        events = await collect(turn.reply("hello there friend"))
        llm.endpoint = RemoteEndpoint("http://engine.test/v1", "m", warmup=False)
        quiet = llm.live_turn([], CONFIG)
        quiet.update("hello there friend")
        await quiet.wait_idle()
        return turn, events

    turn, events = run(main())
    assert len(turn.errors) == 1 and "HTTP 500" in str(turn.errors[0])
    assert events[-1].text == "fine"
    assert len(engine.requests) == 2  # one failed warm-up, one reply; no warm-up with warmup=0


def test_a_closed_turn_refuses_more_work():
    engine = FakeEngine(answer(["x"]))

    async def main():
        turn = remote(engine).live_turn([], CONFIG)
        turn.close()
        turn.close()
        with pytest.raises(RuntimeError, match="start a new turn"):
            turn.update("more")
        with pytest.raises(ValueError, match="str"):
            turn.reply(None)

    run(main())


def test_bench_llm_with_a_model_name_for_llm_points_to_model():
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "headstart", "bench", "llm", "--llm", "smollm2-135m"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "--model smollm2-135m" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
