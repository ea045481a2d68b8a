"""Turn manners over a real loopback server with the real small models (whisper-tiny.en, smollm2-135m,
the default voice) and real recordings: push-to-talk (`input.commit` ends the turn at once and the audio
timeline goes on), `reply.interrupt` with a reply id (a stale id interrupts nothing), and echo (the
session's own reply audio coming back through the "microphone" starts no turn and no barge-in; with
each voice, piper-joe and hibari)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace

import numpy as np
import pytest
from test_server_e2e import FRAME, Client, open_client, pcm, serve, silence
from websockets.asyncio.client import connect

from headstart.audio import resample
from headstart.corpus import recordings as data

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def components_of(components):
    """`components_of(engine)`: the same components with TTS engine `engine` (the default's are
    `components`; another voice loads its own once)."""
    from headstart.session.session import Components

    loaded = {components.config.tts.engine: components}

    def get(engine: str):
        if engine not in loaded:
            config = components.config
            loaded[engine] = Components.load(replace(config, tts=replace(config.tts, engine=engine)))
        return loaded[engine]

    yield get
    for engine, other in loaded.items():
        if other is not components:
            other.close()


class RecordingClient(Client):
    """A Client that also keeps each reply's PCM16 bytes (to play them back as echo)."""

    def __init__(self, ws, instant: bool = True) -> None:
        self.audio_pcm: dict[str, bytes] = {}
        super().__init__(ws, instant)

    async def _read(self) -> None:
        async for message in self.ws:
            if isinstance(message, bytes):
                self.audio_pcm[self.current] = self.audio_pcm.get(self.current, b"") + message
                self.audio[self.current] = self.audio.get(self.current, 0) + len(message)
                self.log.append(("audio", self.current))
            else:
                event = json.loads(message)
                self.events.append(event)
                self.log.append(("event", event["type"]))
                if event["type"] == "reply.audio.start":
                    self.current = event["reply_id"]
            self.changed.set()


async def open_recording_client(server) -> RecordingClient:
    ws = await connect(f"ws://127.0.0.1:{server.port}/ws", max_size=None)
    client = RecordingClient(ws, instant=False)
    await ws.send('{"type": "session.start", "sample_rate": 16000}')
    await client.wait_for(lambda: client.of("session.started"), 10)
    return client


def speech_only(name: str) -> np.ndarray:
    rec = data.recording(name)
    return rec.read()[: int((rec.speech_end_s + 0.05) * 16000)]


def test_push_to_talk_commit_ends_the_turn_and_the_timeline_goes_on(components):
    speech = speech_only(data.default_recording().name)

    async def main():
        server = await serve(components)
        try:
            client = await open_client(server)
            ends = []
            for n in (1, 2):
                await client.send_audio(speech)  # released right at the last word: no trailing silence
                await client.ws.send('{"type": "input.commit"}')
                await client.wait_for(lambda: len(client.of("turn.end")) >= n, 60)
                ends.append(client.of("turn.end")[-1])
                await client.wait_for(lambda: len(client.of("metrics.turn")) >= n, 120)
            await client.ws.close()
            return client, ends
        finally:
            await server.close()

    client, ends = asyncio.run(main())
    speech_ms = speech.shape[0] / 16
    # the end of turn is where the user released the button, on one timeline across turns
    assert ends[0]["audio_ms"] == pytest.approx(speech_ms, abs=40)
    assert ends[1]["audio_ms"] == pytest.approx(2 * speech_ms, abs=40)
    finals = [e["text"] for e in client.of("transcript.final")]
    assert len(finals) == 2 and all("forward" in t.lower() for t in finals), finals
    assert len(client.of("reply.done")) == 2


def test_reply_interrupt_with_a_stale_id_interrupts_nothing(components):
    rec = data.default_recording()

    async def main():
        server = await serve(components)
        try:
            client = await open_client(server, instant=False)  # plays in real time: the reply lasts
            await client.send_audio(np.concatenate([rec.read(), silence(2.5)]))
            await client.wait_for(lambda: client.of("reply.audio.start"), 120)
            reply_id = client.of("reply.started")[0]["reply_id"]
            await client.ws.send(json.dumps({"type": "reply.interrupt", "reply_id": reply_id + "-old"}))
            await client.wait_for(lambda: client.of("error"), 10)
            assert client.of("reply.interrupted") == []
            await client.ws.send(json.dumps({"type": "reply.interrupt", "reply_id": reply_id}))
            await client.wait_for(lambda: client.of("reply.interrupted"), 10)
            await client.ws.close()
            return client, reply_id
        finally:
            await server.close()

    client, reply_id = asyncio.run(main())
    (error,) = client.of("error")
    assert error["code"] == "stale_reply" and reply_id + "-old" in error["message"]
    (interrupted,) = client.of("reply.interrupted")
    assert interrupted["reply_id"] == reply_id and interrupted["reason"] == "client"


# The 1 s underrun case passes on a quiet machine (12 of 12 on 2026-12-02), but with two busy processes
# beside it one run in six still failed (the reply never finished: paused on its own echo; the suspect
# is the known late speech start, docs/server.md "Echo"). Non-strict until that is fixed.
_UNDER_LOAD = pytest.mark.xfail(strict=False, reason="known under CPU load: the echo after a 1 s underrun "
                                "can still pause the reply (docs/server.md 'Echo')")


@pytest.mark.parametrize("voice", ["piper-joe", "hibari"])
@pytest.mark.parametrize("underrun_s", [0.0, pytest.param(1.0, marks=_UNDER_LOAD)])
def test_the_sessions_own_voice_coming_back_starts_no_turn_and_no_barge_in(components_of, voice, underrun_s):
    """A client that plays the reply in real time and whose microphone hears it back through the
    speaker (60 ms later, at half amplitude, with room noise) while the user stays silent. With
    `underrun_s`, the speaker falls silent that long 0.5 s into the reply (its audio came late, as on a
    loaded machine; a CI run met this): the echo resumes after a gap the reply audio does not have
    (and with no delay: the speaker's 60 ms ran dry in the gap). Until the echo detector's reference
    stopped following the position's jitter push by push (docs/server.md "Echo"), the echo after the
    gap paused the reply in about one run of two with Piper and in nearly every run with hibari."""
    components = components_of(voice)
    rec = data.default_recording()
    delay = int(0.06 * 16000)

    async def main():
        server = await serve(components)
        try:
            client = await open_recording_client(server)
            await client.send_audio(np.concatenate([rec.read(), silence(2.5)]))
            await client.wait_for(lambda: client.of("reply.audio.start"), 120)
            reply_id = client.current
            rate = client.of("reply.audio.start")[0]["sample_rate"]
            rng = np.random.default_rng(0)
            played = np.zeros(delay, dtype=np.float32)  # what the speaker played, at 16 kHz
            position = 0  # samples of the reply played (its own rate)
            loop = asyncio.get_running_loop()
            start = loop.time()
            sent = 0
            underrun_frames = round(underrun_s * 16000 / FRAME)
            while True:
                received = client.audio_pcm.get(reply_id, b"")
                total = len(received) // 2
                done = bool(client.of("reply.done"))
                if done and position >= total and sent > 0 and played.shape[0] < sent + FRAME:
                    break
                step = int(rate * FRAME / 16000)
                if position >= rate // 2 and underrun_frames > 0:
                    underrun_frames -= 1
                    step = 0
                chunk = np.frombuffer(received[2 * position : 2 * (position + step)], "<i2").astype(np.float32) / 32768
                position += chunk.shape[0]
                if chunk.size:
                    played = np.concatenate([played, resample(chunk, rate, 16000)])
                if played.shape[0] < sent + FRAME:
                    played = np.concatenate([played, np.zeros(sent + FRAME - played.shape[0], np.float32)])
                mic = 0.5 * played[sent : sent + FRAME] + rng.normal(0, 0.002, FRAME).astype(np.float32)
                await client.ws.send(pcm(mic))
                sent += FRAME
                await client.ws.send(json.dumps({"type": "playback.position", "reply_id": reply_id,
                                                 "position_ms": position / rate * 1000}))
                await asyncio.sleep(max(0.0, start + sent / 16000 - loop.time()))
                if loop.time() - start > 60:
                    raise AssertionError("the reply did not finish playing within 60 s")
            await client.send_audio(silence(1.0))
            await asyncio.sleep(0.5)
            await client.ws.close()
            return client, reply_id, sent / 16000
        finally:
            await server.close()

    client, reply_id, echoed_s = asyncio.run(main())
    assert echoed_s > 1.0  # the reply really came back for a while
    events = [(e["type"], e.get("text"), e.get("audio_ms"), e.get("reason")) for e in client.events
              if not e["type"].startswith(("metrics", "reply.text"))]
    print("events:", events)  # pytest shows it whole on a failure (an assertion message is cut short)
    assert len(client.of("turn.end")) == 1 and len(client.of("reply.started")) == 1, events
    heard = [(e["type"], e.get("text"), e.get("audio_ms")) for e in client.events
             if e["type"] in ("vad.speech_started", "vad.speech_stopped", "transcript.partial", "transcript.final")]
    assert client.of("reply.paused") == [] and client.of("reply.interrupted") == [], (
        client.of("reply.interrupted"), heard, client.of("reply.done"))
    assert len(client.of("vad.speech_started")) == 1  # the user's only; the echo started nothing
    assert client.of("reply.done")[0]["reply_id"] == reply_id
