"""Listener with the acoustic end-of-turn fusion (EndpointConfig.acoustic_model): when the acoustic model
is asked (once per pause, at acoustic_after_s of silence, on the turn's last 8 s), and that a pause the
text head reads as complete is waited out when it does not sound finished. Real recording and Silero
VAD; fake ASR and fake scorers (fast)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from headstart.config import ASRConfig, EndpointConfig, VADConfig
from headstart.events import EndOfTurn, SpeechStarted
from headstart.voice.endpoint import Endpointer
from headstart.voice.listener import Listener
from headstart.voice.vad import SileroVAD
from tests.test_voice_listener import SR, EnergyASR, check_turn_shape, kinds, run_listener, silence
from tests.test_voice_listener_eou import split_at_middle

THRESHOLDS = {"eou_low": 0.805, "eou_high": 0.825}  # the trained qwen head's own pair
FUSION = EndpointConfig(acoustic_model="smart-turn-v3.2", **THRESHOLDS)
TODAY = EndpointConfig(acoustic_model=None, **THRESHOLDS)


class FakeAcoustic:
    """Hears the end of the whole sentence as finished and anything shorter as cut off; records the
    stream position of each call (from the listener's VAD) and the audio it got."""

    def __init__(self, sentence_s: float, vad: SileroVAD) -> None:
        self.sentence_s = sentence_s
        self.vad = vad
        self.calls: list[tuple[float, float]] = []  # (stream position, seconds of audio)

    async def __call__(self, samples: np.ndarray) -> float:
        assert samples.dtype == np.float32 and samples.ndim == 1
        self.calls.append((self.vad.position_s, samples.shape[0] / SR))
        await asyncio.sleep(0)
        return 0.97 if samples.shape[0] / SR > self.sentence_s - 0.2 else 0.02


async def always_complete(text: str) -> float:
    """The failure the listening issue describes: a text head that reads a cut sentence as complete."""
    await asyncio.sleep(0)
    return 0.95


def run(sentence, asr_executor, audio, endpoint):
    vad = SileroVAD(VADConfig())
    acoustic = FakeAcoustic(sentence.shape[0] / SR, vad)
    lis = Listener(vad, EnergyASR(), Endpointer(endpoint), ASRConfig(), asr_executor,
                   eou_scorer=always_complete, acoustic_scorer=acoustic)
    events = asyncio.run(run_listener(lis, audio))
    check_turn_shape(events)
    return events, acoustic


@pytest.mark.parametrize("kind", ["noise", "zero"])
def test_a_pause_that_does_not_sound_finished_is_waited_out(sentence, asr_executor, kind):
    audio, pause_end_s = split_at_middle(sentence, 1.2, kind)
    events, acoustic = run(sentence, asr_executor, audio, FUSION)
    turns = [e for e in events if isinstance(e, EndOfTurn)]
    assert len(turns) == 1 and turns[0].audio_s > pause_end_s, kinds(events)
    assert turns[0].eou_probability >= 0.7705  # the fused probability it ended on
    assert len(acoustic.calls) == 2  # once in the pause, once at the end
    # today's endpointer, on the same input and text scores, ends the turn inside the pause
    events, acoustic = run(sentence, asr_executor, audio, TODAY)
    assert [e for e in events if isinstance(e, EndOfTurn)][0].audio_s < pause_end_s
    assert acoustic.calls == []  # the fusion is off: the model is never asked


def test_the_model_is_asked_once_per_pause_at_acoustic_after_s_on_the_last_8_s(sentence, asr_executor):
    audio, _ = split_at_middle(sentence, 1.2, "zero")
    long = np.concatenate([sentence, sentence, sentence, sentence[: SR // 2] * 0, audio])  # > 8 s of speech
    events, acoustic = run(sentence, asr_executor, long, FUSION)
    starts = [e.audio_s for e in events if isinstance(e, SpeechStarted)]
    assert acoustic.calls and all(seconds <= 8.0 + 1e-9 for _, seconds in acoustic.calls)
    # each call comes acoustic_after_s (+ a VAD window and a frame) into a silence
    vad = SileroVAD(VADConfig())
    ends = [e.audio_s - VADConfig().speech_pad_s for e in vad.push(long) + vad.flush() if not isinstance(e, SpeechStarted)]
    for position, _ in acoustic.calls:
        since = max(t for t in ends if t <= position)
        assert FUSION.acoustic_after_s - 0.04 <= position - since <= FUSION.acoustic_after_s + 0.07, (position, since)
    assert len(acoustic.calls) <= len(ends)
    assert starts  # at least one turn


def test_complete_sentence_ends_as_soon_as_today(sentence, asr_executor):
    audio = np.concatenate([sentence, silence(3.0)])
    fused, calls = run(sentence, asr_executor, audio, FUSION)
    today, _ = run(sentence, asr_executor, audio, TODAY)
    t_fused = [e.audio_s for e in fused if isinstance(e, EndOfTurn)]
    t_today = [e.audio_s for e in today if isinstance(e, EndOfTurn)]
    assert len(t_fused) == len(t_today) == 1 and len(calls.calls) == 1
    assert t_fused[0] <= t_today[0] + 0.04


def test_acoustic_failure_reaches_the_consumer(sentence, asr_executor):
    async def bad(samples):
        raise RuntimeError("onnx exploded")

    lis = Listener(SileroVAD(VADConfig()), EnergyASR(), Endpointer(FUSION), ASRConfig(), asr_executor,
                   eou_scorer=always_complete, acoustic_scorer=bad)
    with pytest.raises(RuntimeError, match="failed"):
        asyncio.run(run_listener(lis, np.concatenate([sentence, silence(1.0)])))


def test_a_short_silence_the_vad_never_ends_does_not_leave_a_stale_score(sentence, asr_executor):
    """A silence long enough to be scored (acoustic_after_s 0.1 here) but shorter than the VAD's
    min_silence_s (0.25) brings no VAD event; the speech goes on. Its score (cut off) must not decide
    the real end: that silence is scored anew (it sounds finished) and the turn ends at once."""
    cut = int(0.45 * sentence.shape[0])
    gap = np.zeros(int(0.15 * SR), np.float32)
    audio = np.concatenate([sentence[:cut], gap, sentence[cut:], silence(3.0)])
    endpoint = EndpointConfig(acoustic_model="smart-turn-v3.2", acoustic_after_s=0.1, **THRESHOLDS)
    vad = SileroVAD(VADConfig())
    acoustic = FakeAcoustic(sentence.shape[0] / SR, vad)
    lis = Listener(vad, EnergyASR(), Endpointer(endpoint), ASRConfig(), asr_executor,
                   eou_scorer=always_complete, acoustic_scorer=acoustic)
    events = asyncio.run(run_listener(lis, audio))
    check_turn_shape(events)
    assert kinds(events).count("SpeechEnded") == 1  # the short silence is no VAD end
    # word gaps and the inserted silence are scored as they come, and the real end once more
    assert len(acoustic.calls) >= 2 and acoustic.calls[-1][1] > sentence.shape[0] / SR - 0.2
    end = [e.audio_s for e in events if type(e).__name__ == "SpeechEnded"][0]
    turn = [e for e in events if isinstance(e, EndOfTurn)][0]
    assert turn.audio_s < end + 0.5 and turn.eou_probability >= 0.7705  # a stale score waits 2 s
