"""Lone fillers and backchannels through the real listener (Silero VAD, the default ASR: Moonshine) and
the session, with speech from the default voice and a scripted LLM and synthesiser (tests/fakes.py):
"Uh?" alone gets no reply; a short "Yeah." while the reply plays pauses it and lets it go on; "Stop.
What time is it?" interrupts it."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import numpy as np
import pytest
from fakes import ScriptedLLM, ScriptedTTS

from headstart.audio import AudioFrame, resample
from headstart.clock import MonotonicClock
from headstart.config import ASRConfig, PipelineConfig, SessionConfig, ThreadPlan, TTSConfig
from headstart.events import FinalTranscript
from headstart.session.reply import ReplyAudio, ReplyInterrupted, ReplyPaused, ReplyResumed, ReplyStarted
from tests.prepared import prepared

pytestmark = pytest.mark.slow

SR = 16_000
FRAME = 320  # 20 ms, as a client sends
LONG_REPLY = " ".join(["The tide comes in and goes out twice a day."] * 6)  # 15 s of the scripted voice


@pytest.fixture(scope="module")
def asr():
    from headstart.voice.asr_engines import load_asr

    return prepared(lambda: load_asr(ASRConfig(), 1))


@pytest.fixture(scope="module")
def say():
    from headstart.tts.engines import load_synthesizer

    voice = prepared(lambda: load_synthesizer(TTSConfig(), ThreadPlan(tts_threads=1)))

    def speech(text: str) -> np.ndarray:
        audio = np.concatenate([np.asarray(a, np.float32) for a in voice.synthesize(text)])
        audio = resample(audio, voice.sample_rate, SR).astype(np.float32)
        return 0.6 * audio / max(1e-6, float(np.abs(audio).max()))

    return speech


def _silence(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * SR), np.float32)


def _conversation(asr, script):
    """Run a session with the real listener; `script(session, push, events)` drives it. Returns
    (events, the scripted LLM)."""
    from headstart.session.components import Components
    from headstart.session.session import Session

    clock = MonotonicClock()
    config = replace(PipelineConfig(), session=SessionConfig(eou="none"))
    llm = ScriptedLLM(clock, default=LONG_REPLY)
    llm.gate.set()
    components = Components(config=config, asr=asr, llm=llm, tts=ScriptedTTS(0.25))

    async def main():
        session = Session(components, clock, echo=None, eou_scorer=None, realtime_playback=True, playback_lead_s=0.5)
        events: list = []

        async def consume():
            async for event in session:
                events.append(event)

        consumer = asyncio.create_task(consume())

        async def push(audio: np.ndarray, realtime: bool = False) -> None:
            """Frame by frame; each ASR pass finishes before the next frame (as tests/listener_driver.py
            does), so the passes, and what they hear, do not depend on the machine's load."""
            listener = session._listening.listener
            for lo in range(0, audio.shape[0], FRAME):
                await session.push_audio(AudioFrame(audio[lo: lo + FRAME], SR))
                while listener._task is not None:
                    await listener._task
                await asyncio.sleep(FRAME / SR if realtime else 0)

        await script(push, events)
        await session.end_input()
        await asyncio.wait_for(consumer, 60)
        return events

    try:
        return asyncio.run(main()), llm
    finally:
        components.close()


async def _until(condition, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


def test_a_lone_uh_gets_no_reply(asr, say):
    async def script(push, events):
        await push(np.concatenate([_silence(0.5), say("Uh?"), _silence(1.5)]))

    events, llm = _conversation(asr, script)
    finals = [e.text for e in events if isinstance(e, FinalTranscript)]
    assert finals and finals[0].strip(), finals  # the ASR heard the filler (this is no empty final)
    assert not [e for e in events if isinstance(e, ReplyStarted)] and llm.asked == []


def test_a_short_yeah_does_not_interrupt_the_reply_but_stop_does(asr, say):
    async def script(push, events):
        await push(np.concatenate([_silence(0.5), say("Tell me about the tides."), _silence(1.5)]))
        await _until(lambda: any(isinstance(e, ReplyAudio) for e in events))
        await asyncio.sleep(1.0)  # the reply plays
        await push(np.concatenate([say("Yeah."), _silence(1.5)]), realtime=True)
        await _until(lambda: any(isinstance(e, (ReplyResumed, ReplyInterrupted)) for e in events))
        await asyncio.sleep(0.5)
        await push(np.concatenate([say("Stop. What time is it?"), _silence(1.5)]), realtime=True)
        await _until(lambda: any(isinstance(e, ReplyInterrupted) for e in events))

    events, llm = _conversation(asr, script)
    first = next(e for e in events if isinstance(e, ReplyStarted))
    paused = [e for e in events if isinstance(e, ReplyPaused)]
    resumed = [e for e in events if isinstance(e, ReplyResumed)]
    interrupted = [e for e in events if isinstance(e, ReplyInterrupted)]
    assert paused and paused[0].reply_id == first.reply_id
    assert resumed and resumed[0].reply_id == first.reply_id  # "Yeah." let the reply go on
    assert events.index(resumed[0]) < events.index(interrupted[0])
    assert interrupted[0].reply_id == first.reply_id and interrupted[0].reason == "barge_in"
    assert any("stop" in m[-1]["content"].lower() or "time" in m[-1]["content"].lower() for m in llm.asked[1:])
