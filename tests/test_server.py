"""The websocket server without model work: HTTP routes, security gates, limits and bad frames.

The session here has real VAD but no ASR/LLM/TTS loaded: these tests send nothing a model would see."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from headstart.clock import FakeClock
from headstart.config import PipelineConfig
from headstart.server.rate_limit import AudioRateLimit
from headstart.server.server import ServerConfig, VoiceServer
from headstart.session.session import Components


class _NoTTS:
    """A `Synthesizer` (headstart/seams.py) these tests never reach: it says nothing."""

    sample_rate = 22050
    name = "none"

    def synthesize(self, text: str):
        raise AssertionError("no synthesis in these tests")

    def warm_up(self) -> None:
        pass


class _NoTurn:
    """An `LLMTurn` that prefills nothing."""

    def update(self, user_text: str) -> None:
        pass

    def reply(self, final_text: str):
        raise AssertionError("no reply in these tests")

    def close(self) -> None:
        pass


class _NoLLM:
    """An `LLMBackend` with no model: a session may open a turn (the head start's prewarm), never a reply."""

    max_positions = None

    def reply_stream(self, messages, config, executor, clock=None):
        raise AssertionError("no reply in these tests")

    def live_turn(self, messages_before, config, executor, clock=None) -> _NoTurn:
        return _NoTurn()

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def warm_up(self) -> None:
        pass


def no_model_components() -> Components:
    return Components(config=PipelineConfig(), asr=None, llm=_NoLLM(), tts=_NoTTS())


@pytest.fixture
def run():
    """Run one coroutine on a fresh loop (no pytest-asyncio in the dev extras)."""
    def runner(coro, timeout=20):
        return asyncio.run(asyncio.wait_for(coro, timeout))
    return runner


async def started_server(tmp_path=None, **overrides) -> VoiceServer:
    config = ServerConfig(port=0, **overrides)
    server = VoiceServer(no_model_components(), config, static_dir=tmp_path)
    await server.start()
    return server


async def recv_json(ws, timeout=5.0) -> dict:
    while True:
        message = await asyncio.wait_for(ws.recv(), timeout)
        if isinstance(message, str):
            return json.loads(message)


def http_get(port: int, path: str, headers: str = "") -> tuple[int, bytes]:
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}\r\n".encode())
        data = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def test_healthz_and_static_files_safe_from_traversal(run, tmp_path):
    web = tmp_path / "web"
    web.mkdir()
    (web / "index.html").write_text("<h1>headstart</h1>")
    (web / "app.js").write_text("console.log(1)")
    (web / ".secret").write_text("no")
    (tmp_path / "outside.txt").write_text("secret")

    async def main():
        server = await started_server(web)
        port = server.port
        try:
            results = {}
            for path in ["/healthz", "/", "/app.js", "/../outside.txt", "/%2e%2e/outside.txt",
                         "/..%2foutside.txt", "/.secret", "/nope.html", "//etc/passwd", "/%00", "/app.js/"]:
                results[path] = await asyncio.to_thread(http_get, port, path)
            return results
        finally:
            await server.close()

    results = run(main())
    status, body = results["/healthz"]
    assert status == 200 and json.loads(body)["status"] == "ok"
    assert results["/"] == (200, b"<h1>headstart</h1>")
    assert results["/app.js"] == (200, b"console.log(1)")
    for path in ["/../outside.txt", "/%2e%2e/outside.txt", "/..%2foutside.txt", "/.secret", "/nope.html",
                 "//etc/passwd", "/%00", "/app.js/"]:
        assert results[path][0] == 404, path
        assert b"secret" not in results[path][1]


def test_message_over_the_limit_closes_1009(run):
    """cases.md (server): a 20-byte text message to a server whose limit is 10 bytes."""
    async def main():
        server = await started_server(max_message_bytes=10)
        try:
            async with connect(f"ws://127.0.0.1:{server.port}/ws") as ws:
                await ws.send('{"type": "session.x"}'[:20])
                with pytest.raises(ConnectionClosed) as info:
                    await asyncio.wait_for(ws.recv(), 5)
                return info.value.rcvd.code
        finally:
            await server.close()

    assert run(main()) == 1009


def test_token_origin_and_session_cap(run):
    async def main():
        server = await started_server(token="s3cret", max_sessions=1)
        url = f"ws://127.0.0.1:{server.port}/ws"
        try:
            with pytest.raises(InvalidStatus) as info:
                async with connect(url):
                    pass
            assert info.value.response.status_code == 401
            with pytest.raises(InvalidStatus):
                async with connect(url, additional_headers={"Authorization": "Bearer wrong"}):
                    pass
            with pytest.raises(InvalidStatus) as info:  # a page from another site
                async with connect(url + "?token=s3cret", origin="https://evil.example"):
                    pass
            assert info.value.response.status_code == 403
            async with connect(url, additional_headers={"Authorization": "Bearer s3cret"},
                               origin="http://localhost:8765") as first:
                await first.send('{"type": "session.start"}')
                assert (await recv_json(first))["type"] == "session.started"
                with pytest.raises(InvalidStatus) as info:  # the cap
                    async with connect(url + "?token=s3cret"):
                        pass
                assert info.value.response.status_code == 503
            await asyncio.sleep(0.05)
            async with connect(url + "?token=s3cret") as again:  # the slot is free again
                await again.send('{"type": "session.start"}')
                assert (await recv_json(again))["type"] == "session.started"
        finally:
            await server.close()

    run(main())


def test_bad_frames_get_error_events_and_the_session_goes_on(run):
    """cases.md (server): PCM where JSON was expected and the reverse; wrong rate. (An odd length is no
    error: the byte stream is what counts, tests/test_server_wire.py.)"""
    async def main():
        server = await started_server()
        codes = []
        try:
            async with connect(f"ws://127.0.0.1:{server.port}/ws") as ws:
                pcm = (np.random.default_rng(0).standard_normal(1600) * 300).astype("<i2").tobytes()
                assert len(pcm) == 3200
                await ws.send(pcm)  # audio before the session started (JSON was expected)
                codes.append((await recv_json(ws))["code"])
                await ws.send('{"type": "session.start", "sample_rate": 44100}')
                codes.append((await recv_json(ws))["code"])
                await ws.send('{"type": "session.start"}')
                started = await recv_json(ws)
                assert started["type"] == "session.started"
                assert started["input"] == {"sample_rate": 16000, "format": "pcm16"}
                assert started["output"]["sample_rate"] == 22050
                await ws.send(b'{"type": "input.commit"}')  # JSON in a binary frame
                codes.append((await recv_json(ws))["code"])
                await ws.send(pcm.decode("latin-1"))  # PCM bytes in a text frame
                codes.append((await recv_json(ws))["code"])
                await ws.send(pcm[:641])  # odd byte length: its last byte waits for the next frame, no error
                await ws.send('{"type": "session.start"}')
                codes.append((await recv_json(ws))["code"])
                await ws.send("{oops")
                codes.append((await recv_json(ws))["code"])
                await ws.send('{"type": "playback.position", "reply_id": "r9", "position_ms": 10}')
                await ws.send(np.zeros(320, "<i2").tobytes())  # a good (silent) frame: no answer
                await ws.send('{"type": "nope"}')
                codes.append((await recv_json(ws))["code"])
                await ws.send('{"type": "session.end"}')
                with pytest.raises(ConnectionClosed) as info:
                    await asyncio.wait_for(ws.recv(), 5)
                assert info.value.rcvd.code == 1000
        finally:
            await server.close()
        return codes

    assert run(main()) == ["not_started", "unsupported_rate", "unexpected_binary", "malformed_json",
                           "already_started", "malformed_json", "unknown_type"]


def test_invalid_utf8_text_frame_is_a_defined_close():
    async def main():
        server = await started_server()
        try:
            async with connect(f"ws://127.0.0.1:{server.port}/ws") as ws:
                # a text frame whose payload is not UTF-8 (sent raw, as a hostile client would)
                ws.protocol.send_text(b"\xff\xfe\x00\x01")
                ws.send_data()
                with pytest.raises(ConnectionClosed) as info:
                    await asyncio.wait_for(ws.recv(), 5)
                return info.value.rcvd.code
        finally:
            await server.close()

    assert asyncio.run(main()) == 1007


def test_audio_rate_limit_on_a_fake_clock():
    clock = FakeClock()
    limit = AudioRateLimit(clock, speed=4.0, burst_s=2.0)
    assert all(limit.allow(0.02) for _ in range(100))  # the 2 s burst
    assert not limit.allow(0.02)
    clock.advance(0.1)  # refills 0.4 s of audio
    assert sum(limit.allow(0.02) for _ in range(50)) == 20


def test_the_default_allowance_takes_a_reconnect_flush_and_keeps_a_real_time_client_whole():
    """ServerConfig's defaults: a client that reconnects and flushes 15 s of audio at once, then goes on
    in real time for an hour, is never refused; a minute at once is the bound."""
    config = ServerConfig()
    clock = FakeClock()
    limit = AudioRateLimit(clock, config.max_audio_speed, config.audio_burst_s)
    assert all(limit.allow(0.02) for _ in range(750))  # 15 s at once
    for _ in range(3600 * 50):  # an hour of 20 ms frames in real time
        clock.advance(0.02)
        assert limit.allow(0.02)
    assert limit.allow(59.9)  # by now the whole minute is back in hand ...
    assert not limit.allow(0.2)  # ... and no more


def test_audio_beyond_the_allowance_gets_one_error_and_a_close_1008(run):
    """A client far beyond the allowance is told once and closed (before: each frame was dropped with an
    error of its own, and the words in them were lost); its slot is free, the server goes on."""
    async def main():
        server = await started_server(max_audio_speed=1.0, audio_burst_s=0.1, max_sessions=1)
        try:
            async with connect(f"ws://127.0.0.1:{server.port}/ws") as ws:
                await ws.send('{"type": "session.start"}')
                await recv_json(ws)
                for _ in range(200):
                    try:
                        await ws.send(np.zeros(320, "<i2").tobytes())
                    except ConnectionClosed:
                        break
                codes = []
                with pytest.raises(ConnectionClosed) as info:
                    while True:
                        codes.append((await recv_json(ws))["code"])
                close = info.value.rcvd
            await asyncio.sleep(0.05)
            async with connect(f"ws://127.0.0.1:{server.port}/ws") as again:  # the one slot is free
                await again.send('{"type": "session.start"}')
                assert (await recv_json(again))["type"] == "session.started"
            return codes, close
        finally:
            await server.close()

    codes, close = run(main())
    assert codes == ["rate_limited"]
    assert close is not None and close.code == 1008


def test_odd_length_frames_reach_the_session_as_the_exact_sample_stream(run):
    """Frames of 641 and 639 bytes in turn, a 1-byte frame and an empty one: the session's listener gets
    every sample of the byte stream, bit for bit, and the client gets no error."""
    from fakes import ScriptedListener

    heard: list[np.ndarray] = []

    class RecordingListener(ScriptedListener):
        async def push(self, frame) -> None:
            heard.append(np.asarray(frame.samples).copy())
            await super().push(frame)

    stream = (np.random.default_rng(1).standard_normal(16000) * 3000).astype("<i2").tobytes()
    frames, lo = [b"\x01", b""], 0
    stream = b"\x01" + stream[1:]  # the 1-byte frame is the first sample's low byte
    lo = 1
    while lo < len(stream):
        size = 641 if len(frames) % 2 == 0 else 639
        frames.append(stream[lo:lo + size])
        lo += size

    async def main():
        server = VoiceServer(no_model_components(), ServerConfig(port=0),
                             listener=lambda eou, acoustic: RecordingListener([], eou, acoustic))
        await server.start()
        try:
            async with connect(f"ws://127.0.0.1:{server.port}/ws") as ws:
                await ws.send('{"type": "session.start"}')
                assert (await recv_json(ws))["type"] == "session.started"
                for frame in frames:
                    await ws.send(frame)
                await ws.send('{"type": "fuzz.sentinel"}')  # answered once every frame before it was taken
                return await recv_json(ws)
        finally:
            await server.close()

    answer = run(main())
    assert answer["code"] == "unknown_type" and "fuzz.sentinel" in answer["message"]  # and no error before it
    expected = np.frombuffer(stream, "<i2").astype(np.float32) / 32768
    np.testing.assert_array_equal(np.concatenate(heard), expected)


def test_a_reply_the_voice_cannot_speak_reaches_the_client_as_reply_unspeakable(run):
    """A reply only in Japanese: the voice says the fallback sentence, and the client hears why
    (`reply.unspeakable` with the reply's own text) before its `reply.done`."""
    from dataclasses import replace

    from fakes import ScriptedLLM, ScriptedListener, ScriptedTTS

    from headstart.clock import MonotonicClock
    from headstart.config import SessionConfig
    from headstart.events import EndOfTurn, FinalTranscript, SpeechEnded, SpeechStarted
    from headstart.tts.base import UNSPEAKABLE_FALLBACK

    turn = [(0.3, SpeechStarted(0.3)), (1.0, SpeechEnded(1.0)), (1.1, FinalTranscript("How do you say noon in Japanese?", 1.0)),
            (1.2, EndOfTurn(1.2, 0.2))]

    async def main():
        clock = MonotonicClock()
        llm = ScriptedLLM(clock, default="正午です。")
        llm.gate.set()
        tts = ScriptedTTS()
        config = replace(PipelineConfig(), session=SessionConfig(eou="none"))
        server = VoiceServer(Components(config=config, asr=None, llm=llm, tts=tts), ServerConfig(port=0), clock=clock,
                             listener=lambda eou, acoustic: ScriptedListener(turn, eou, acoustic))
        await server.start()
        try:
            async with connect(f"ws://127.0.0.1:{server.port}/ws") as ws:
                await ws.send('{"type": "session.start"}')
                events = [await recv_json(ws)]
                for _ in range(75):
                    await ws.send(bytes(640))
                while events[-1]["type"] != "metrics.turn":
                    events.append(await recv_json(ws, 10))
                return events, tts.spoken
        finally:
            await server.close()
            server.components.close()

    events, spoken = run(main())
    assert spoken == [UNSPEAKABLE_FALLBACK]
    types = [e["type"] for e in events]
    (unspeakable,) = [e for e in events if e["type"] == "reply.unspeakable"]
    (started,) = [e for e in events if e["type"] == "reply.started"]
    assert unspeakable == {"type": "reply.unspeakable", "reply_id": started["reply_id"], "text": "正午です。",
                           "spoken": UNSPEAKABLE_FALLBACK}
    assert types.index("reply.audio.start") < types.index("reply.unspeakable") < types.index("reply.done")
    assert [e["text"] for e in events if e["type"] == "reply.done"] == ["正午です。"]


# -- fuzz: hostile frames -----------------------------------------------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from headstart.server.protocol import CLIENT_TYPES, ProtocolError, parse_client_text  # noqa: E402

SENTINEL = '{"type": "fuzz.sentinel"}'
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
_events = st.fixed_dictionaries(
    {"type": st.sampled_from(sorted(CLIENT_TYPES - {"session.end"}) + ["x", ""])},
    optional={"sample_rate": _json_values | st.sampled_from([16000, 8000, 48000]), "format": _json_values,
              "reply_id": _json_values, "position_ms": _json_values},
)
_frames = st.one_of(
    st.binary(max_size=400),  # raw bytes: odd lengths, or short audio
    st.text(max_size=200),  # arbitrary text
    _events.map(json.dumps),  # well-formed JSON with hostile fields
    _events.map(lambda e: json.dumps(e).encode()),  # JSON in a binary frame
)


def expected_error(frame) -> str | None:
    if isinstance(frame, bytes):
        if frame[:1] == b"{" and frame[-1:] == b"}":
            try:
                if isinstance(json.loads(frame), dict):
                    return "unexpected_binary"
            except ValueError:
                pass
        return None  # audio of any byte length: an odd byte waits for the next frame
    try:
        message = parse_client_text(frame)
    except ProtocolError as exc:
        return exc.code
    return "already_started" if message.type == "session.start" else None


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_frames, min_size=1, max_size=12))
def test_fuzz_hostile_frames_never_crash_or_hang(frames):
    frames = [f for f in frames if not (isinstance(f, str) and '"session.end"' in f)]

    async def main():
        server = await started_server(max_audio_speed=1000.0, audio_burst_s=60.0)
        try:
            async with connect(f"ws://127.0.0.1:{server.port}/ws") as ws:
                await ws.send('{"type": "session.start"}')
                assert (await recv_json(ws))["type"] == "session.started"
                for frame in frames:
                    await ws.send(frame)
                    await ws.send(SENTINEL)
                    errors = []
                    while True:
                        event = await recv_json(ws)
                        assert event["type"] == "error", event
                        if "fuzz.sentinel" in event["message"]:
                            break
                        errors.append(event["code"])
                    expected = expected_error(frame)
                    assert errors == ([expected] if expected else []), (frame, errors)
            # the server is still healthy afterwards
            status, _ = await asyncio.to_thread(http_get, server.port, "/healthz")
            assert status == 200
        finally:
            await server.close()

    asyncio.run(asyncio.wait_for(main(), 30))


# -- an empty token ------------------------------------------------------------------


@pytest.mark.parametrize("argv, env", [(["--token", ""], None), (["--token", "  "], None), ([], "")])
def test_an_empty_token_is_refused_at_start_up(argv, env, monkeypatch, capsys):
    """`--token "$T"` with T unset (or HEADSTART_TOKEN set but empty) must not serve without a token:
    the command refuses to start, before loading any model, and says why."""
    from headstart.server import server as server_module
    from headstart.cli import main

    loaded = []
    monkeypatch.setattr(Components, "load", classmethod(lambda cls, *a, **k: loaded.append(1)))
    monkeypatch.setattr(server_module.VoiceServer, "serve_forever", lambda self: pytest.fail("served"))
    if env is None:
        monkeypatch.delenv("HEADSTART_TOKEN", raising=False)
    else:
        monkeypatch.setenv("HEADSTART_TOKEN", env)
    assert main(["serve", "--port", "0", *argv]) == 2
    assert "empty" in capsys.readouterr().err and not loaded
    with pytest.raises(ValueError, match="empty"):
        ServerConfig(token="")


# -- a slow consumer -----------------------------------------------------------------


def test_a_slow_consumer_gets_an_error_and_close_1008_not_a_dropped_connection(run):
    """A real client on loopback that reads one message per 50 ms while the server has minutes of reply
    audio for it: the server notices the unread backlog (a ping behind its data, not answered within
    `max_send_lag_s`), frees the session's slot, and the client, once it has read its way through what
    was queued, gets an `error` "slow_consumer" and a close with 1008 (before: the keepalive's 1011,
    lost behind the audio: 1006 after ~40 s). The reply comes through the public API: the client's
    audio drives a scripted listener (the server's `listener` seam) to a turn, a scripted LLM answers
    and a scripted voice speaks 300 s, all of it sent at once (a playback lead longer than the reply)."""
    import socket
    import time
    from dataclasses import replace

    from fakes import ScriptedLLM, ScriptedListener, ScriptedTTS

    from headstart.clock import MonotonicClock
    from headstart.config import SessionConfig
    from headstart.events import EndOfTurn, FinalTranscript, SpeechEnded, SpeechStarted

    turn = [(0.3, SpeechStarted(0.3)), (1.0, SpeechEnded(1.0)), (1.1, FinalTranscript("Say something long.", 1.0)),
            (1.2, EndOfTurn(1.2, 0.2))]

    async def main():
        clock = MonotonicClock()
        llm = ScriptedLLM(clock, default="One two three four.")
        llm.gate.set()
        tts = ScriptedTTS(seconds_per_word=75.0)  # 4 words: 300 s of reply audio, ready at once
        config = replace(PipelineConfig(), session=SessionConfig(eou="none"))
        server = VoiceServer(Components(config=config, asr=None, llm=llm, tts=tts),
                             ServerConfig(port=0, max_send_lag_s=1.0, send_probe_s=0.2, playback_lead_s=1000.0),
                             clock=clock, listener=lambda eou, acoustic: ScriptedListener(turn, eou, acoustic))
        await server.start()
        started = time.monotonic()
        try:
            async with connect(f"ws://127.0.0.1:{server.port}/ws") as ws:
                # a small receive buffer keeps the backlog (and this test) short; the server's side is its own
                ws.transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 * 1024)
                await ws.send('{"type": "session.start"}')
                assert (await recv_json(ws))["type"] == "session.started"
                for _ in range(75):  # 1.5 s of the user's audio in 20 ms frames: the scripted turn ends
                    await ws.send(bytes(640))
                texts, num_audio, slot_freed = [], 0, None
                while True:
                    try:
                        message = await asyncio.wait_for(ws.recv(), 10)
                    except ConnectionClosed as exc:
                        return exc.rcvd, texts, num_audio, slot_freed, time.monotonic() - started
                    if isinstance(message, bytes):
                        num_audio += 1
                    else:
                        texts.append(json.loads(message))
                        if texts[-1]["type"] == "error" and slot_freed is None:
                            # the server frees the slot before it sends the error (reading its slow_consumer flag
                            # instead raced the release: the flag is set before the output has stopped)
                            slot_freed = server.active_sessions == 0
                    if num_audio:
                        await asyncio.sleep(0.05)  # the slow consumer: ~2.5 s behind once its buffers are full
        finally:
            await server.close()
            server.components.close()

    close, texts, num_audio, slot_freed, took_s = run(main(), timeout=60)
    assert close is not None and close.code == 1008, close  # a close frame, not a dropped connection
    assert [t["code"] for t in texts if t["type"] == "error"] == ["slow_consumer"], texts
    assert "reply.audio.start" in [t["type"] for t in texts]
    assert 10 < num_audio < 3000  # it got some of the reply's 3000 frames, then the server stopped sending
    assert slot_freed
    assert took_s < 30


def test_the_websockets_floor_has_the_fixes_the_server_relies_on():
    """pyproject.toml allowed websockets>=13: 13.x-14.1 crash (asyncio implementation) when a pong comes
    for a cancelled ping, which the slow-consumer probe can leave behind, and take no regular expression
    in `origins` (LOCAL_ORIGINS); both came in 14.2 (its changelog)."""
    import re
    import tomllib
    from importlib.metadata import version
    from pathlib import Path

    from packaging.requirements import Requirement
    from packaging.version import Version

    project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]
    (spec,) = [Requirement(d).specifier for d in project["dependencies"] if re.match(r"websockets\b", d)]
    assert not spec.contains("14.1") and not spec.contains("13.1") and spec.contains("14.2")
    assert spec.contains(Version(version("websockets")))


def test_every_reply_event_is_sent_with_its_own_reply_id():
    """The session's events carry their reply id (the LLM's text deltas too): the server writes it as
    it comes, so a delta is never labelled with the reply the server saw start last."""
    from headstart.events import TokenDelta
    from headstart.server.session_frames import session_frames
    from headstart.session.reply import ReplyStarted

    out = [*session_frames(ReplyStarted("r8", "hello")), *session_frames(TokenDelta("Hi", (1,), "r9"))]
    started, delta = [json.loads(frame) for frame in out]
    assert started["type"] == "reply.started" and started["reply_id"] == "r8"
    assert delta == {**delta, "type": "reply.text.delta", "reply_id": "r9", "text": "Hi"}


def test_session_started_names_the_voice_rate_and_zero_without_a_voice(run):
    """`output.sample_rate` is the Synthesizer's `sample_rate` (headstart/seams.py); components without
    a TTS (None) say 0."""
    async def main():
        rates = []
        for tts in (_NoTTS(), None):
            server = VoiceServer(Components(config=PipelineConfig(), asr=None, llm=_NoLLM(), tts=tts), ServerConfig(port=0))
            await server.start()
            try:
                async with connect(f"ws://127.0.0.1:{server.port}/ws") as ws:
                    await ws.send('{"type": "session.start"}')
                    rates.append((await recv_json(ws))["output"]["sample_rate"])
            finally:
                await server.close()
                server.components.close()
        return rates

    assert run(main()) == [22050, 0]


async def scripted_tool_server(turn: list, clock=None) -> VoiceServer:
    """A server with tools on whose stages are scripted (tests/fakes.py): the client's audio drives the
    `turn` script (the server's `listener` seam), the real matcher and tools answer."""
    from dataclasses import replace

    from fakes import ScriptedLLM, ScriptedListener, ScriptedTTS

    from headstart.clock import MonotonicClock
    from headstart.config import SessionConfig

    clock = clock or MonotonicClock()
    llm = ScriptedLLM(clock, default="I do not know.")
    llm.gate.set()
    config = replace(PipelineConfig(), session=SessionConfig(eou="none", tools=True))
    server = VoiceServer(Components(config=config, asr=None, llm=llm, tts=ScriptedTTS()),
                         ServerConfig(port=0), clock=clock,
                         listener=lambda eou, acoustic: ScriptedListener(turn, eou, acoustic))
    await server.start()
    return server


async def talk_until(ws, done, seconds: float = 1.5) -> list[dict]:
    """Send `seconds` of silent audio (the scripted turn runs on it), then read events until `done(events)`."""
    for _ in range(int(seconds / 0.02)):
        await ws.send(bytes(640))
    events: list[dict] = []
    while not done(events):
        events.append(await recv_json(ws, timeout=10))
    return events


def test_tool_events_and_a_timer_that_fires_reach_the_client(run):
    """Over a real websocket: "Set a timer for 1 second." gets `tool.call` and `tool.result` between
    `reply.started` and the reply's words; a second later `timer.fired` (its member "kind" once broke the
    encoder, and with it the connection's whole output) and the announcement as a reply of its own."""
    from headstart.events import EndOfTurn, FinalTranscript, SpeechEnded, SpeechStarted

    turn = [(0.3, SpeechStarted(0.3)), (1.0, SpeechEnded(1.0)), (1.1, FinalTranscript("Set a timer for 1 second.", 1.0)),
            (1.2, EndOfTurn(1.2, 0.9))]

    async def main():
        server = await scripted_tool_server(turn)
        try:
            async with connect(f"ws://127.0.0.1:{server.port}/ws") as ws:
                await ws.send('{"type": "session.start"}')
                assert (await recv_json(ws))["type"] == "session.started"
                return await talk_until(ws, lambda events: len([e for e in events if e["type"] == "reply.done"]) >= 2)
        finally:
            await server.close()
            server.components.close()

    events = run(main())
    kinds = [e["type"] for e in events]
    (call,), (result,), (fired,) = ([e for e in events if e["type"] == k] for k in ("tool.call", "tool.result", "timer.fired"))
    first, second = [e for e in events if e["type"] == "reply.started"]
    assert call == {"type": "tool.call", "reply_id": first["reply_id"], "call_id": call["call_id"], "name": "timer_start",
                    "arguments": {"seconds": 1.0}}
    assert result == {**result, "call_id": call["call_id"], "ok": True, "result": "Timer set for one second."}
    assert kinds.index("reply.started") < kinds.index("tool.call") < kinds.index("tool.result") < kinds.index("reply.text.delta")
    assert (fired["kind"], fired["label"], fired["text"]) == ("timer", "one second", "Your one second timer is done.")
    assert second["transcript"] == "" and kinds.index("timer.fired") < kinds.index("reply.started", kinds.index("timer.fired"))
    assert [e["text"] for e in events if e["type"] == "reply.done"] == ["Timer set for one second.",
                                                                         "Your one second timer is done."]


def test_an_event_the_wire_cannot_carry_is_an_error_and_the_output_goes_on(run, monkeypatch):
    from headstart.events import EndOfTurn, FinalTranscript, SpeechEnded, SpeechStarted
    from headstart.server import connection
    from headstart.session.reply import ToolResult

    frames = connection.session_frames

    def broken(event):
        if isinstance(event, ToolResult):
            raise ValueError("cannot encode this")
        return frames(event)

    monkeypatch.setattr(connection, "session_frames", broken)
    turn = [(0.3, SpeechStarted(0.3)), (1.0, SpeechEnded(1.0)), (1.1, FinalTranscript("What time is it?", 1.0)),
            (1.2, EndOfTurn(1.2, 0.9))]

    async def main():
        server = await scripted_tool_server(turn)
        try:
            async with connect(f"ws://127.0.0.1:{server.port}/ws") as ws:
                await ws.send('{"type": "session.start"}')
                assert (await recv_json(ws))["type"] == "session.started"
                return await talk_until(ws, lambda events: any(e["type"] == "metrics.turn" for e in events))
        finally:
            await server.close()
            server.components.close()

    events = run(main())
    (error,) = [e for e in events if e["type"] == "error"]
    assert error["code"] == "internal" and "cannot encode this" in error["message"]
    assert [e["type"] for e in events if e["type"].startswith("tool.")] == ["tool.call"]
    assert next(e for e in events if e["type"] == "reply.done")["text"].startswith("It's ")
