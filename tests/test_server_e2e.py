"""The server end to end over a real loopback websocket with the real small models (whisper-tiny.en,
smollm2-135m, the default voice hibari) and real recordings: a spoken turn, barge-in before and after the first reply
audio, a false barge-in that resumes, a disconnect mid-reply, concurrent and idle sessions, and tool calls
(`tool.call` / `tool.result` for a released tool reply, none for a held one that is dropped)."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest
from websockets.asyncio.client import connect

from headstart.audio import resample
from headstart.corpus import recordings as data
from headstart.corpus.wer import word_error_rate
from headstart.server.server import ServerConfig, VoiceServer
from tests.prepared import cpu_has_vnni

pytestmark = pytest.mark.slow

# Trailing silence after a user utterance: the endpointer may wait up to EndpointConfig.max_silence_s
# (2.0 s) of *audio* when the EOU signal says the text reads unfinished; a live microphone keeps sending,
# a test client must send that much.

FRAME = 320  # 20 ms at 16 kHz


def pcm(samples: np.ndarray) -> bytes:
    return (np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes()


def silence(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * 16000), dtype=np.float32)


class Client:
    """A test client: records every event, collects reply audio per reply; as an `instant` player it
    reports every received audio byte as played (so the server's pacing never waits)."""

    def __init__(self, ws, instant: bool = True) -> None:
        self.ws = ws
        self.instant = instant
        self.events: list[dict] = []
        self.audio: dict[str, int] = {}  # reply id -> bytes received
        self.log: list[tuple[str, object]] = []  # ("event", type) / ("audio", reply id)
        self.current: str | None = None
        self.changed = asyncio.Event()
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for message in self.ws:
            if isinstance(message, bytes):
                self.audio[self.current] = self.audio.get(self.current, 0) + len(message)
                self.log.append(("audio", self.current))
                if self.instant:
                    await self.ws.send(json.dumps({"type": "playback.position", "reply_id": self.current,
                                                   "position_ms": self.audio[self.current] / 2 / 22.05}))
            else:
                event = json.loads(message)
                self.events.append(event)
                self.log.append(("event", event["type"]))
                if event["type"] == "reply.audio.start":
                    self.current = event["reply_id"]
            self.changed.set()

    def of(self, kind: str) -> list[dict]:
        return [e for e in self.events if e["type"] == kind]

    async def wait_for(self, predicate, timeout: float = 60.0):
        async def loop():
            while True:
                found = predicate()
                if found:
                    return found
                self.changed.clear()
                await self.changed.wait()
        try:
            return await asyncio.wait_for(loop(), timeout)
        except TimeoutError:
            summary = [e if e["type"] != "reply.text.delta" else e["text"] for e in self.events
                       if e["type"] not in ("transcript.partial",)]
            raise AssertionError(f"timed out after {timeout} s; events: {summary}") from None

    async def send_audio(self, samples: np.ndarray) -> None:
        for lo in range(0, samples.shape[0], FRAME):
            await self.ws.send(pcm(samples[lo : lo + FRAME]))
            await asyncio.sleep(0)


async def serve(components, **overrides) -> VoiceServer:
    settings = {"port": 0, "max_audio_speed": 1000.0, "audio_burst_s": 60.0, "playback_lead_s": 1.0, **overrides}
    config = ServerConfig(**settings)
    server = VoiceServer(components, config)
    await server.start()
    return server


async def open_client(server, instant=True) -> Client:
    ws = await connect(f"ws://127.0.0.1:{server.port}/ws", max_size=None)
    client = Client(ws, instant)
    await ws.send('{"type": "session.start", "sample_rate": 16000}')
    await client.wait_for(lambda: client.of("session.started"), 10)
    return client


def test_a_spoken_turn_two_concurrent_sessions_and_an_idle_one(components):
    rec_a, rec_b = data.default_recording(), data.recording("conf-full")

    async def main():
        server = await serve(components)
        try:
            a, b = await open_client(server), await open_client(server)
            busy = set(server.connections)
            idle = await open_client(server)
            (idle_conn,) = server.connections - busy

            async def turn(client, rec):
                await client.send_audio(np.concatenate([rec.read(), silence(2.5)]))
                await client.wait_for(lambda: client.of("metrics.turn"), 120)

            await asyncio.gather(turn(a, rec_a), turn(b, rec_b))
            assert idle.events == [e for e in idle.events if e["type"] == "session.started"]
            assert idle_conn.session.tasks == []  # an idle session runs nothing but its reader and writer
            for client in (a, b, idle):
                await client.ws.close()
            return a, b
        finally:
            await server.close()

    a, b = asyncio.run(main())
    started = a.of("session.started")[0]
    # the LLM as loaded: the default precision passes the exactness self-test, so prompt lookup is on
    assert started["llm"] == {"model": "smollm2-135m", "precision": "float32+int8", "exact": True,
                              "speculative": "prompt_lookup"}, started
    for client, rec in ((a, rec_a), (b, rec_b)):
        kinds = [e["type"] for e in client.events]
        for kind in ("vad.speech_started", "vad.speech_stopped", "transcript.final", "turn.end", "reply.started",
                     "reply.text.delta", "reply.audio.start", "reply.done", "metrics.turn"):
            assert kind in kinds, (kind, kinds)
        assert kinds.index("turn.end") < kinds.index("reply.started") < kinds.index("reply.audio.start")
        final = client.of("transcript.final")[0]["text"]
        assert word_error_rate(rec.text, final) <= 0.25, final
        (start,) = client.of("reply.audio.start")
        # the voice's own rate (no output rate asked for): the default voice, hibari, speaks at 24 kHz
        assert start["sample_rate"] == 24_000 and start["format"] == "pcm16"
        done = client.of("reply.done")[0]
        assert done["text"].strip() and done["reply_id"] == start["reply_id"]
        assert client.audio[start["reply_id"]] / 2 / 24_000 == pytest.approx(done["audio_ms"] / 1000, abs=0.01)
        metrics = client.of("metrics.turn")[0]
        assert metrics["interrupted"] is False
        for key in ("vad_end_to_final_ms", "vad_end_to_turn_end_ms", "vad_end_to_first_token_ms",
                    "vad_end_to_first_audio_ms", "ttft_ms", "tts_ttfa_ms"):
            assert isinstance(metrics[key], float) and metrics[key] >= 0, key


def interruption_scenario(components, *, when: str):
    """Ask (goforward), then speak again (conf-full) `when` = "after_audio" (0.3 s into the reply's
    audio), "into_audio" (1.0 s into it: the VAD's quick barge-in start is armed) or "before_audio"
    (right at the end of turn)."""
    first, second = data.default_recording(), data.recording("conf-full")

    async def main():
        server = await serve(components)
        try:
            client = await open_client(server, instant=False)  # plays in real time
            await client.send_audio(np.concatenate([first.read(), silence(2.5)]))
            if when in ("after_audio", "into_audio"):
                await client.wait_for(lambda: ("audio", client.current) in client.log if client.current else None)
                await asyncio.sleep(0.3 if when == "after_audio" else 1.0)
            else:
                await client.wait_for(lambda: client.of("turn.end"))
            await client.send_audio(np.concatenate([second.read(), silence(2.5)]))
            await client.wait_for(lambda: len(client.of("reply.started")) >= 2 and client.of("reply.interrupted"))
            await client.wait_for(lambda: len(client.of("metrics.turn")) >= 1)
            await client.ws.close()
            return client
        finally:
            await server.close()

    client = asyncio.run(main())
    r1 = client.of("reply.started")[0]["reply_id"]
    (interrupted,) = client.of("reply.interrupted")
    assert interrupted["reply_id"] == r1 and interrupted["flush"] is True and interrupted["reason"] == "barge_in"
    paused_at = client.log.index(("event", "reply.paused"))
    interrupted_at = client.log.index(("event", "reply.interrupted"))
    assert paused_at < interrupted_at
    assert ("audio", r1) not in client.log[paused_at:], "audio of a paused reply was sent"
    said = "".join(e["text"] for e in client.events if e["type"] == "reply.text.delta" and e["reply_id"] == r1)
    assert said.replace(" ", "").startswith(interrupted["heard_text"].replace(" ", ""))
    assert word_error_rate(second.text, client.of("transcript.final")[-1]["text"]) <= 0.3
    assert client.of("reply.started")[1]["transcript"] == client.of("transcript.final")[-1]["text"]
    if when != "into_audio":  # (1 s in, all of a short reply's audio may have been sent: still playing)
        assert not any(e["type"] == "reply.done" and e["reply_id"] == r1 for e in client.events)
    return client, interrupted, r1


@pytest.mark.xfail(not cpu_has_vnni(), strict=False,
                   reason="seen on an AVX2-only EPYC (and at the commit before the package moves): the user's "
                   "speech start 0.3 s into the reply is held back as possible echo and no reply.paused comes "
                   "before the words interrupt. Open: the echo guard's decision there")
def test_barge_in_after_the_first_audio_keeps_only_what_was_heard(components):
    client, interrupted, r1 = interruption_scenario(components, when="after_audio")
    assert client.audio.get(r1, 0) > 0
    assert interrupted["played_ms"] > 0


def test_barge_in_well_into_the_reply_pauses_on_the_vads_quick_start(components, monkeypatch):
    """1 s into the reply's audio the session arms the VAD's barge-in start (64 ms of speech instead
    of 150 ms, `VADConfig.bargein_min_speech_s`): the pause comes from it, then the words interrupt."""
    from headstart.voice.vad import SpeechHysteresis

    quick: list[int] = []
    confirmed = SpeechHysteresis._barge_in_confirmed

    def spy(self, end_sample: int) -> bool:
        ok = confirmed(self, end_sample)
        if ok:
            quick.append(end_sample)
        return ok

    monkeypatch.setattr(SpeechHysteresis, "_barge_in_confirmed", spy)
    client, interrupted, r1 = interruption_scenario(components, when="into_audio")
    assert len(quick) == 1, quick  # the barge-in only: not the question before the reply
    assert client.audio.get(r1, 0) > 0 and interrupted["played_ms"] >= 500
    (started_1, started_2) = client.of("vad.speech_started")
    assert started_2["audio_ms"] <= quick[0] / 16 <= started_2["audio_ms"] + 400  # heard near its start


def test_barge_in_before_the_first_audio_drops_every_chunk(components):
    client, interrupted, r1 = interruption_scenario(components, when="before_audio")
    if client.log.index(("event", "reply.paused")) < next(
            (i for i, item in enumerate(client.log) if item == ("event", "reply.audio.start")), len(client.log)):
        assert client.audio.get(r1, 0) == 0
        assert interrupted["heard_text"] == "" and interrupted["played_ms"] == 0


def test_a_backchannel_pauses_then_resumes_the_reply(components):
    from headstart.config import ThreadPlan, TTSConfig
    from headstart.tts.engines import load_synthesizer

    espeak = load_synthesizer(TTSConfig(engine="espeak"), ThreadPlan())
    uh_huh = resample(np.concatenate(list(espeak.synthesize("Uh-huh."))).astype(np.float32), espeak.sample_rate, 16000)

    async def main():
        server = await serve(components)
        try:
            client = await open_client(server, instant=False)
            await client.send_audio(np.concatenate([data.default_recording().read(), silence(2.5)]))
            await client.wait_for(lambda: ("audio", client.current) in client.log if client.current else None)
            await client.send_audio(np.concatenate([0.5 * uh_huh, silence(1.0)]))
            await client.wait_for(lambda: client.of("reply.resumed"), 30)
            await client.wait_for(lambda: client.of("reply.done"), 60)
            await client.ws.close()
            return client
        finally:
            await server.close()

    client = asyncio.run(main())
    assert client.of("reply.paused") and not client.of("reply.interrupted")
    assert len(client.of("reply.started")) == 1  # "uh-huh" got no reply of its own
    r1 = client.of("reply.started")[0]["reply_id"]
    resumed_at = client.log.index(("event", "reply.resumed"))
    assert ("audio", r1) in client.log[resumed_at:]  # the rest of the reply played
    assert client.of("reply.done")[0]["reply_id"] == r1


def test_disconnect_one_second_into_reply_audio_ends_every_task(components):
    """cases.md (server): the client disconnects 1 s into the reply audio."""
    async def main():
        server = await serve(components, playback_lead_s=0.3)  # the reply is still sending at 1 s
        try:
            client = await open_client(server, instant=False)
            (connection,) = server.connections
            await client.send_audio(np.concatenate([data.default_recording().read(), silence(2.5)]))
            await client.wait_for(lambda: ("audio", client.current) in client.log if client.current else None)
            await asyncio.sleep(1.0)
            session = connection.session
            tasks = session.tasks  # its listener's and its reply's
            assert session.reply_active and any(t.get_name().startswith(("session-reply-", "session-held-")) for t in tasks)
            client.ws.transport.abort()  # gone, without a closing handshake
            loop = asyncio.get_running_loop()
            start = loop.time()
            await asyncio.wait_for(connection.ended.wait(), 1.0)
            elapsed = loop.time() - start
            assert all(t.done() for t in tasks) and session.tasks == [] and connection.writer.done()
            leftover = [t for t in asyncio.all_tasks() if t.get_name().startswith(("session-", "server-", "tts-stream"))
                        and not t.done()]
            assert leftover == []
            return elapsed
        finally:
            await server.close()

    assert asyncio.run(main()) < 1.0


# -- tools ---------------------------------------------------------------------------------------------


def spoken(components, text: str) -> np.ndarray:
    """`text` in the components' own voice, at 16 kHz (the ASR hears the project's TTS well)."""
    tts = components.tts
    return resample(np.concatenate(list(tts.synthesize(text))).astype(np.float32), tts.sample_rate, 16000)


def test_tool_calls_over_the_wire_and_none_for_a_dropped_held_reply(components):
    """Tools on (the real matcher): "Set a timer for one minute." is held as a tool reply while the user
    pauses, then dropped when they go on speaking: no `tool.call` and no timer. "What time is it?" is
    released: `tool.call` (get_time) and `tool.result` between `reply.started` and the reply's words,
    which are the tool's answer. The end of turn waits 4 s of silence (a fixed silence, no EOU signal
    for the endpointer) so that the held reply's fate is the test's to choose."""
    from dataclasses import replace

    config = components.config
    tools_on = replace(components, config=replace(
        config, session=replace(config.session, tools=True),
        endpoint=replace(config.endpoint, semantic=False, silence_s=4.0)))
    timer_request = spoken(components, "Set a timer for one minute.")
    go_on = spoken(components, "No wait, what is the capital of France?")
    time_request = spoken(components, "What time is it?")

    async def held_tool_reply(session) -> None:
        while not (session.head_start.held is not None and session.head_start.held.tool is not None):  # noqa: ASYNC110
            await asyncio.sleep(0.02)

    async def main():
        server = await serve(tools_on)
        try:
            client = await open_client(server)
            (connection,) = server.connections
            session = connection.session
            assert session.toolbox is not None
            # 1. held, then dropped: the user goes on speaking before the end of turn
            await client.send_audio(np.concatenate([silence(0.3), timer_request, silence(1.0)]))
            await asyncio.wait_for(held_tool_reply(session), 60)
            held = session.head_start.held
            await client.send_audio(np.concatenate([go_on, silence(0.5)]))
            await client.wait_for(lambda: "capital" in " ".join(e["text"] for e in client.of("transcript.final")).lower())
            assert held.cancelled
            await client.ws.send('{"type": "input.commit"}')
            await client.wait_for(lambda: client.of("metrics.turn"), 120)
            assert client.of("tool.call") == [] and session.toolbox.timers.find() == []
            # 2. released: the tool runs once, between the reply's start and its words
            await client.send_audio(np.concatenate([silence(0.3), time_request, silence(1.0)]))
            await asyncio.wait_for(held_tool_reply(session), 60)
            await client.ws.send('{"type": "input.commit"}')
            await client.wait_for(lambda: len(client.of("metrics.turn")) >= 2, 120)
            await client.ws.close()
            return client
        finally:
            await server.close()

    client = asyncio.run(main())
    first, second = client.of("metrics.turn")
    assert first["preemptive_misses"] >= 1 and "capital" in first["transcript"].lower()
    (call,) = client.of("tool.call")
    (result,) = client.of("tool.result")
    started = client.of("reply.started")[-1]
    assert call["reply_id"] == started["reply_id"] == result["reply_id"] == second["reply_id"]
    assert (call["name"], call["arguments"]) == ("get_time", {}) and call["call_id"] == result["call_id"]
    assert result["ok"] is True and "error" not in result and result["duration_ms"] >= 0
    assert result["result"].startswith("It's ") and second["reply"] == result["result"]
    assert second["preemptive"] == "hit"  # the held tool reply was released
    replies = [e["type"] for e in client.events if e["type"].startswith(("reply.", "tool."))]
    at = replies.index("tool.call")
    assert replies[at - 1:at + 3] == ["reply.started", "tool.call", "tool.result", "reply.text.delta"]
