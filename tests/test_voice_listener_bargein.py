"""The Listener's barge-in flag (`Listener.bargein_armed` -> `VAD.bargein_armed`): real Silero on the
harness's "go forward ten meters", a fake ASR (no model), 20 ms frames as a client sends them."""

from __future__ import annotations

import asyncio

import numpy as np

from headstart.audio import AudioFrame
from headstart.corpus import recordings as data
from headstart.config import ASRConfig, EndpointConfig, VADConfig
from headstart.events import EndOfTurn, FinalTranscript, SpeechStarted
from headstart.voice.asr import ListeningDefaults, Transcription
from headstart.voice.endpoint import Endpointer
from headstart.voice.listener import Listener, make_asr_executor
from headstart.voice.vad import SileroVAD

SR = 16000


class NoWordsASR:
    """A recogniser that hears no words (the utterance's content does not matter here)."""

    listening = ListeningDefaults()

    def transcribe(self, samples: np.ndarray, offset_s: float = 0.0, prompt: str = "") -> Transcription:
        return Transcription((), "", 0.0, -0.1, samples.shape[0] / SR)


async def _speech_start(armed: bool) -> tuple[float, SpeechStarted, list]:
    """(stream position when the listener's SpeechStarted came out, the event, all events)."""
    rec = data.recording("goforward")
    audio = np.concatenate([np.zeros(SR // 2, np.float32), rec.read(), np.zeros(SR, np.float32)])
    executor = make_asr_executor()
    vad = SileroVAD(VADConfig())
    listener = Listener(vad, NoWordsASR(), Endpointer(EndpointConfig(silence_s=0.5)), ASRConfig(), executor)
    assert listener.bargein_armed is False
    listener.bargein_armed = armed
    assert vad.bargein_armed is armed and listener.bargein_armed is armed
    events, heard_at = [], []

    async def consume():
        async for event in listener:
            if isinstance(event, SpeechStarted) and not heard_at:
                heard_at.append(vad.position_s)
            events.append(event)

    consumer = asyncio.create_task(consume())
    try:
        for lo in range(0, audio.shape[0], 320):
            await listener.push(AudioFrame(audio[lo : lo + 320], SR))
            await asyncio.sleep(0)  # the consumer sees each event before the next frame
        await listener.end_input()
        await asyncio.wait_for(consumer, 10)
    finally:
        executor.shutdown(wait=True)
    start = next(e for e in events if isinstance(e, SpeechStarted))
    return heard_at[0] - 0.5 - rec.speech_start_s, start, events


def test_an_armed_listener_reports_the_speech_start_sooner_and_the_utterance_runs_as_usual():
    slow_s, slow, _ = asyncio.run(_speech_start(False))
    fast_s, fast, events = asyncio.run(_speech_start(True))
    assert fast_s <= 0.15 and slow_s - fast_s >= 0.05, (fast_s, slow_s)
    assert fast.audio_s <= slow.audio_s + 1e-9  # the utterance begins no later
    # no words: an empty final and no end of turn (the session resumes a paused reply on it)
    finals = [e for e in events if isinstance(e, FinalTranscript)]
    assert finals and finals[-1].text == "" and not any(isinstance(e, EndOfTurn) for e in events)
