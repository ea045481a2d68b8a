"""Speech after a long digital silence (exact zeros: a muted browser track, a push-to-talk
client's silence) starts on time, its first word heard. Real Silero, real recordings, real tiny.en."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from headstart.config import ASRConfig, EndpointConfig, VADConfig
from headstart.events import FinalTranscript, SpeechStarted
from headstart.voice.endpoint import Endpointer
from headstart.voice.listener import Listener, make_asr_executor
from headstart.voice.vad import SileroVAD
from listener_driver import run_listener
from tests.prepared import prepared, speech

SR = 16000


def prompt(name: str) -> np.ndarray:
    return speech(f"asterisk_allison_16k/{name}.wav")


def first_start_s(vad: SileroVAD, audio: np.ndarray, frame: int = 320) -> float:
    events = []
    for start in range(0, audio.shape[0], frame):
        events += vad.push(audio[start : start + frame])
    return next(e.audio_s for e in events if isinstance(e, SpeechStarted))


@pytest.mark.parametrize("name", ["if-correct-press", "conf-full", "vm-onefor-full"])
@pytest.mark.parametrize("zeros_s", [40.0, 40.01])  # whole windows of zeros, and a window half speech
def test_speech_after_40_s_of_exact_zeros_starts_as_on_a_fresh_stream(name, zeros_s):
    """Carried through 40 s of zeros, Silero's state scored these onsets 0.5-0.68 instead of 0.95 and
    confirmed the start up to 124 ms late (measured before the fix, AVX-512 CPU)."""
    audio = prompt(name)
    fresh = SileroVAD(VADConfig())
    expected = first_start_s(fresh, audio)
    onset = int(expected * SR) // 512 + 1
    after = SileroVAD(VADConfig())
    zeros = np.zeros(int(round(zeros_s * SR)), np.float32)
    started = first_start_s(after, np.concatenate([zeros, audio])) - zeros.shape[0] / SR
    # not late; earlier by up to the padding where a fresh stream clamps the padded start to 0
    assert -0.12 <= started - expected <= 0.04, (started, expected)
    skip = zeros.shape[0] // 512
    heard = after.probabilities[skip + onset : skip + onset + 5]
    assert heard.min() >= fresh.probabilities[onset : onset + 5].min() - 0.1, heard
    assert (after.probabilities[32 : zeros.shape[0] // 512] == 0.0).all()  # past 1 s: no speech, unseen


def test_a_zero_window_inside_speech_does_not_end_it():
    """One window of exact zeros (a dropped packet) inside an utterance: no speech end there."""
    audio = prompt("conf-full").copy()
    middle = int(0.8 * SR)
    audio[middle : middle + 1024] = 0.0
    vad = SileroVAD(VADConfig())
    events = vad.push(audio) + vad.flush()
    assert [type(e).__name__ for e in events] == ["SpeechStarted", "SpeechEnded"], events


@pytest.mark.slow
def test_the_first_words_after_40_s_of_exact_zeros_are_transcribed():
    """A turn, 40 s of exact zeros, a second turn "Press one to listen to ...": its final transcript
    starts with "Press" (the issue: "Press 1" missing from the second turn in 2 of 3 runs)."""
    from headstart.voice.asr import WhisperASR

    asr = prepared(lambda: WhisperASR.load(ASRConfig(model="whisper-tiny.en"), cpu_threads=1))
    audio = np.concatenate([prompt("conf-full"), np.zeros(40 * SR, np.float32), prompt("vm-onefor-full"),
                            np.zeros(SR, np.float32)])
    executor = make_asr_executor()
    listener = Listener(SileroVAD(VADConfig()), asr, Endpointer(EndpointConfig(silence_s=0.5)), ASRConfig(), executor)

    try:
        events = asyncio.run(run_listener(listener, audio, timeout_s=30))
    finally:
        executor.shutdown(wait=True)
    finals = [e.text for e in events if isinstance(e, FinalTranscript)]
    assert len(finals) == 2 and finals[1].lower().startswith("press"), finals
