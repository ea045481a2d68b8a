"""Shutting the server down (SIGTERM, SIGINT): new websockets are refused, every session hears
`session.ending`, a reply in progress finishes within the drain limit, every socket closes with 1001
and `headstart serve` exits 0.

First on a real server on loopback whose stages are scripted (tests/fakes.py: the drain's logic, fast),
then as a real `headstart serve` process with the small real models, sent a real SIGTERM."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import replace

import numpy as np
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from headstart.clock import MonotonicClock
from headstart.config import PipelineConfig, SessionConfig
from headstart.events import EndOfTurn, FinalTranscript, SpeechEnded, SpeechStarted
from headstart.server.server import ServerConfig, VoiceServer
from headstart.session.components import Components

FRAME = bytes(640)  # 20 ms of silence at 16 kHz

# a scripted user turn (audio time -> event), and a user who has started to speak and goes on
TURN = [(0.3, SpeechStarted(0.3)), (1.0, SpeechEnded(1.0)), (1.1, FinalTranscript("Tell me something.", 1.0)),
        (1.2, EndOfTurn(1.2, 0.2))]
MID_UTTERANCE = [(0.3, SpeechStarted(0.3))]


class Peer:
    """A test client that reads everything: events in order, reply audio bytes, and how it was closed."""

    def __init__(self, ws) -> None:
        self.ws = ws
        self.events: list[dict] = []
        self.audio_bytes = 0
        self.close_code: int | None = None
        self.closed_at: float | None = None
        self.changed = asyncio.Event()
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        try:
            async for message in self.ws:
                if isinstance(message, bytes):
                    self.audio_bytes += len(message)
                else:
                    self.events.append(json.loads(message))
                self.changed.set()
        except ConnectionClosed:
            pass
        self.close_code = self.ws.close_code  # the close frame's code; 1006: none came
        self.closed_at = time.monotonic()
        self.changed.set()

    def types(self) -> list[str]:
        return [e["type"] for e in self.events if e["type"] != "transcript.partial"]

    async def until(self, kind: str, timeout_s: float = 30.0) -> dict:
        async def wait() -> dict:
            while True:
                found = [e for e in self.events if e["type"] == kind]
                if found:
                    return found[0]
                if self.closed_at is not None:
                    raise AssertionError(f"closed ({self.close_code}) before {kind}: {self.types()}")
                self.changed.clear()
                await self.changed.wait()
        try:
            return await asyncio.wait_for(wait(), timeout_s)
        except TimeoutError:
            raise AssertionError(f"no {kind} within {timeout_s} s: {self.types()}") from None


async def open_peer(url: str) -> Peer:
    ws = await connect(url, max_size=None)
    peer = Peer(ws)
    await ws.send('{"type": "session.start"}')
    await peer.until("session.started", 10)
    return peer


async def scripted_server(scripts: list, *, drain_s: float, seconds_per_word: float = 0.25):
    """A VoiceServer serving (`serve_forever`, as `headstart serve` does) with a scripted listener per
    session (`scripts`, in the order the sessions start), an LLM held until `llm.gate` is set, and a
    scripted voice; reply audio leaves at real-time pace (1 s ahead of playback)."""
    from fakes import ScriptedLLM, ScriptedListener, ScriptedTTS

    clock = MonotonicClock()
    llm = ScriptedLLM(clock, default="Here is something for you.")
    config = replace(PipelineConfig(), session=SessionConfig(eou="none"))
    components = Components(config=config, asr=None, llm=llm, tts=ScriptedTTS(seconds_per_word))
    server = VoiceServer(components, ServerConfig(port=0, drain_s=drain_s, playback_lead_s=1.0), clock=clock,
                         listener=lambda eou, acoustic: ScriptedListener(scripts.pop(0), eou, acoustic))
    await server.start()
    serving = asyncio.create_task(server.serve_forever())
    return server, serving, llm


async def speak(peer: Peer, seconds: float) -> None:
    for _ in range(int(round(seconds / 0.02))):
        await peer.ws.send(FRAME)


async def refused_handshake(port: int) -> int:
    """The HTTP status a websocket handshake gets (101: it was accepted)."""
    try:
        async with connect(f"ws://127.0.0.1:{port}/ws", open_timeout=5):
            return 101
    except InvalidStatus as exc:
        return exc.response.status_code


def test_a_drain_lets_the_reply_in_progress_finish_then_closes_everyone_with_1001():
    async def main():
        server, serving, llm = await scripted_server([TURN, MID_UTTERANCE], drain_s=10.0)
        url = f"ws://127.0.0.1:{server.port}/ws"
        try:
            replying, speaking = await open_peer(url), await open_peer(url)
            await speak(replying, 1.5)  # its turn ends: a reply starts, held at the LLM
            await replying.until("reply.started")
            await speak(speaking, 0.5)  # speech started, no end
            await speaking.until("vad.speech_started")
            asked_at = time.monotonic()
            server.request_shutdown()
            ending = await speaking.until("session.ending")
            await replying.until("session.ending")
            refused = await refused_handshake(server.port)
            await speak(replying, 2.0)  # audio during the drain: read and dropped, no error, no turn
            llm.gate.set()  # the reply in progress goes on
            done = await replying.until("reply.done")
            await replying.until("metrics.turn")
            await asyncio.wait_for(serving, 10)
            await asyncio.wait_for(asyncio.gather(replying.task, speaking.task), 5)
            return replying, speaking, ending, done, refused, time.monotonic() - asked_at
        finally:
            await server.close()

    replying, speaking, ending, done, refused, took_s = asyncio.run(asyncio.wait_for(main(), 60))
    assert ending == {"type": "session.ending", "reason": "shutdown", "drain_ms": 10000.0}
    assert refused == 503
    assert done["text"] == "Here is something for you." and replying.audio_bytes > 0
    assert replying.close_code == 1001 and speaking.close_code == 1001
    types = replying.types()
    assert types.index("session.ending") < types.index("reply.done") < types.index("metrics.turn") == len(types) - 1
    # the user who was speaking: no turn, no error, closed at once (it had no reply in progress)
    assert speaking.types() == ["session.started", "vad.speech_started", "session.ending"]
    assert speaking.closed_at < replying.closed_at
    assert took_s < 10


def test_a_reply_that_cannot_finish_within_the_drain_limit_is_cut_off_by_the_close_1001():
    """A 0.5 s drain limit and a reply of ~6 s of audio sent in real time: the connection closes with
    1001 at the limit, and `serve_forever` returns."""
    async def main():
        server, serving, llm = await scripted_server([TURN], drain_s=0.5, seconds_per_word=1.2)
        try:
            peer = await open_peer(f"ws://127.0.0.1:{server.port}/ws")
            llm.gate.set()
            await speak(peer, 1.5)
            await peer.until("reply.audio.start")
            asked_at = time.monotonic()
            server.request_shutdown()
            await asyncio.wait_for(serving, 10)
            await asyncio.wait_for(peer.task, 5)
            return peer, time.monotonic() - asked_at
        finally:
            await server.close()

    peer, took_s = asyncio.run(asyncio.wait_for(main(), 60))
    assert peer.close_code == 1001
    assert "session.ending" in peer.types() and "reply.done" not in peer.types()
    assert 0.4 < took_s < 0.5 + VoiceServer.CLOSE_GRACE_S + 1.0


def test_a_second_shutdown_request_stops_waiting():
    async def main():
        server, serving, llm = await scripted_server([TURN], drain_s=30.0)
        try:
            peer = await open_peer(f"ws://127.0.0.1:{server.port}/ws")
            await speak(peer, 1.5)
            await peer.until("reply.started")  # held at the LLM: it would wait the whole 30 s
            server.request_shutdown()
            await peer.until("session.ending")
            asked_at = time.monotonic()
            server.request_shutdown()
            await asyncio.wait_for(serving, 10)
            await asyncio.wait_for(peer.task, 5)
            return peer, time.monotonic() - asked_at
        finally:
            await server.close()

    peer, took_s = asyncio.run(asyncio.wait_for(main(), 60))
    assert peer.close_code == 1001 and took_s < 3


# -- `serve` in a process of its own, scripted stages: the signal plumbing ----------------------------------

SERVE_SCRIPTED = """
import sys
from dataclasses import replace

sys.path.insert(0, "tests")
from fakes import ScriptedLLM, ScriptedTTS

from headstart.clock import MonotonicClock
from headstart.config import PipelineConfig, SessionConfig
from headstart.server.server import ServerConfig, serve
from headstart.session.components import Components

config = replace(PipelineConfig(), session=SessionConfig(eou="none"))
components = Components(config=config, asr=None, llm=ScriptedLLM(MonotonicClock()), tts=ScriptedTTS())
serve(components, ServerConfig(port=0, drain_s=5.0))
components.close()
"""


def test_sigint_to_a_serving_process_drains_and_exits_0():
    """`serve` (what `headstart serve` runs) in a child process with scripted stages: Ctrl-C's SIGINT
    is handled like SIGTERM (before: KeyboardInterrupt tore the loop down under its sessions)."""
    import re
    import signal
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    child = subprocess.Popen([sys.executable, "-c", SERVE_SCRIPTED], cwd=root, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    try:
        line = child.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert match, line + child.stdout.read() if child.poll() is not None else line

        async def main():
            peer = await open_peer(f"ws://127.0.0.1:{match.group(1)}/ws")
            child.send_signal(signal.SIGINT)
            ending = await peer.until("session.ending", 10)
            await asyncio.wait_for(peer.task, 10)
            return peer, ending

        peer, ending = asyncio.run(asyncio.wait_for(main(), 30))
        exit_code = child.wait(30)
        output = child.stdout.read()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
    assert ending == {"type": "session.ending", "reason": "shutdown", "drain_ms": 5000.0}
    assert peer.close_code == 1001
    assert exit_code == 0, output
    assert "SIGINT: shutting down: 1 session(s), at most 5 s" in output and "headstart: stopped" in output, output
    assert "Traceback" not in output, output


# -- a real `headstart serve` process and a real SIGTERM --------------------------------------------------


def pcm16(samples: np.ndarray) -> bytes:
    return (np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes()


async def stream(ws, data: bytes, pace_s: float = 0.02) -> None:
    """Send `data` in 20 ms frames one per `pace_s` (0: at once, as a client flushing its buffer), then
    silence at real-time pace like a live microphone, until the connection closes."""
    try:
        for lo in range(0, len(data), 640):
            await ws.send(data[lo:lo + 640])
            await asyncio.sleep(pace_s)
        while True:
            await ws.send(FRAME)
            await asyncio.sleep(0.02)
    except ConnectionClosed:
        pass


def serve_process(tmp_path, drain_s: float):
    """`headstart serve` with the small real models (SmolLM2-135M, 24 new tokens) and `--drain-s`."""
    from tests.prepared import model_path
    from tests.remote_engine import free_port, start_headstart_serve

    model_path("smollm2-135m")  # skips with the command to run when it is not prepared
    port = free_port()
    process = start_headstart_serve(port, "smollm2-135m", tmp_path / "serve.log", "--max-new-tokens", "24",
                                    "--drain-s", str(drain_s))
    return process, port


async def reply_in_progress(port: int) -> tuple[Peer, asyncio.Task]:
    """A session that asked a question and is receiving the reply's audio, played in real time (it
    sends no playback reports: the server paces the audio as real-time playback)."""
    from headstart.corpus import recordings as data

    peer = await open_peer(f"ws://127.0.0.1:{port}/ws")
    question = np.concatenate([data.default_recording().read(), np.zeros(40000, np.float32)])
    mic = asyncio.create_task(stream(peer.ws, pcm16(question), pace_s=0.0))
    await peer.until("reply.audio.start", 120)
    return peer, mic


@pytest.mark.slow
def test_sigterm_lets_the_reply_in_progress_finish_and_closes_both_sessions_with_1001(tmp_path):
    """A real SIGTERM to `headstart serve` with one session receiving a reply and one whose user is
    mid-utterance (before: the process died in 0.3 s and both sockets dropped, 1006)."""
    import signal

    from headstart.corpus import recordings as data

    drain_s = 30.0
    process, port = serve_process(tmp_path, drain_s)

    async def main():
        speaking = await open_peer(f"ws://127.0.0.1:{port}/ws")
        sentence = data.recording("librivox-0870").read()  # 7 s of reading aloud: still going at the signal
        speaking_mic = asyncio.create_task(stream(speaking.ws, pcm16(sentence)))
        await speaking.until("vad.speech_started", 60)
        replying, replying_mic = await reply_in_progress(port)
        process.proc.send_signal(signal.SIGTERM)
        signalled_at = time.monotonic()
        await replying.until("session.ending", 10)
        refused = await refused_handshake(port)  # during the drain: the reply still goes on
        await replying.until("reply.done", drain_s)
        await asyncio.wait_for(asyncio.gather(replying.task, speaking.task), drain_s)
        exit_code = await asyncio.to_thread(process.proc.wait, 30)
        exited_s = time.monotonic() - signalled_at
        for mic in (speaking_mic, replying_mic):
            mic.cancel()
        return replying, speaking, refused, exit_code, exited_s

    try:
        replying, speaking, refused, exit_code, exited_s = asyncio.run(main())
    finally:
        process.stop()
    log = process.log.read_text(errors="replace")
    assert exit_code == 0, log[-2000:]
    assert exited_s < drain_s, log[-2000:]
    assert "SIGTERM: shutting down: 2 session(s)" in log and "headstart: stopped" in log, log[-2000:]
    assert refused == 503
    for peer in (replying, speaking):
        ending = next(e for e in peer.events if e["type"] == "session.ending")
        assert ending == {"type": "session.ending", "reason": "shutdown", "drain_ms": drain_s * 1000}
        assert peer.close_code == 1001, peer.types()
        assert "error" not in peer.types(), peer.events
    types = replying.types()
    assert types.index("reply.audio.start") < types.index("session.ending") < types.index("reply.done")
    done = next(e for e in replying.events if e["type"] == "reply.done")
    assert replying.audio_bytes / 2 / 24_000 == pytest.approx(done["audio_ms"] / 1000, abs=0.01)  # all of it
    # the user cut off mid-utterance: no final transcript, no turn, no reply
    assert not {"transcript.final", "turn.end", "reply.started"} & set(speaking.types()), speaking.types()
    assert speaking.closed_at < replying.closed_at


@pytest.mark.slow
def test_sigterm_with_a_reply_longer_than_the_drain_limit_still_closes_1001_and_exits_0(tmp_path):
    import signal

    drain_s = 0.5
    process, port = serve_process(tmp_path, drain_s)

    async def main():
        replying, mic = await reply_in_progress(port)  # seconds of audio, sent in real time
        process.proc.send_signal(signal.SIGTERM)
        signalled_at = time.monotonic()
        await asyncio.wait_for(replying.task, 10)
        closed_s = time.monotonic() - signalled_at
        exit_code = await asyncio.to_thread(process.proc.wait, 30)
        mic.cancel()
        return replying, closed_s, exit_code

    try:
        replying, closed_s, exit_code = asyncio.run(main())
    finally:
        process.stop()
    log = process.log.read_text(errors="replace")
    assert exit_code == 0, log[-2000:]
    assert replying.close_code == 1001, replying.types()
    assert "session.ending" in replying.types() and "reply.done" not in replying.types()
    assert closed_s < drain_s + VoiceServer.CLOSE_GRACE_S + 1.0
