"""The VAD's barge-in start (`VADConfig.bargein_min_speech_s`, `VAD.bargein_armed`): exact timing on
fake probabilities, then real Silero on the harness's barge-in recording, room noise and silence."""

from __future__ import annotations

import numpy as np
import pytest

from headstart.audio import pcm16_to_float32
from headstart.corpus import recordings as data
from headstart.config import VADConfig
from headstart.events import SpeechEnded, SpeechStarted
from headstart.voice.vad import SileroVAD, SpeechHysteresis, create_vad

W = 512  # a Silero window: 32 ms
SR = 16000
CFG = VADConfig(start_threshold=0.5, stop_threshold=0.35, min_speech_s=0.15, min_silence_s=0.25, speech_pad_s=0.1,
                bargein_min_speech_s=0.064, bargein_start_threshold=0.5)


def _run(probabilities, config=CFG, armed=True):
    policy = SpeechHysteresis(config, W)
    policy.bargein_armed = armed
    out = []
    for i, p in enumerate(probabilities):
        out += [(i, e) for e in policy.push_window(p, (i + 1) * W)]
    return policy, out


def test_armed_speech_starts_after_two_windows_with_the_same_padded_start():
    probs = [0.0] * 10 + [0.9] * 20 + [0.0] * 20
    _, slow = _run(probs, armed=False)
    _, fast = _run(probs, armed=True)
    (i_slow, s_slow), _ = slow
    (i_fast, s_fast), (_, ended) = fast
    assert i_slow == 14  # 0.15 s: five windows
    assert i_fast == 11  # 0.064 s: two windows (10 and 11)
    assert isinstance(s_fast, SpeechStarted) and s_fast.audio_s == s_slow.audio_s == pytest.approx((10 * W - 1600) / SR)
    assert isinstance(ended, SpeechEnded)  # the end is decided as always


def test_armed_start_ignores_a_one_window_blip_and_follows_the_usual_run():
    assert _run([0.0] * 5 + [0.9] + [0.0] * 20)[1] == []
    # the run goes on through windows between the thresholds, as the usual rule's does
    _, out = _run([0.0] * 5 + [0.6, 0.4, 0.45] + [0.0] * 20)
    assert out[0][0] == 6 and out[0][1].audio_s == pytest.approx((5 * W - 1600) / SR)
    # and ends at a window below stop_threshold
    assert _run([0.0] * 5 + [0.9, 0.2, 0.9, 0.2, 0.9, 0.2] + [0.0] * 20)[1] == []


def test_armed_is_never_later_than_the_usual_rule():
    rng = np.random.default_rng(0)
    for _ in range(200):
        probs = list(rng.choice([0.0, 0.3, 0.4, 0.45, 0.55, 0.7, 0.95], size=40))
        slow = [i for i, e in _run(probs, armed=False)[1] if isinstance(e, SpeechStarted)]
        fast = [i for i, e in _run(probs, armed=True)[1] if isinstance(e, SpeechStarted)]
        assert bool(fast) >= bool(slow) and (not slow or fast[0] <= slow[0])


def test_a_higher_barge_in_threshold_starts_only_on_confident_windows():
    cfg = VADConfig(bargein_min_speech_s=0.032, bargein_start_threshold=0.8)
    assert _run([0.0] * 5 + [0.6] * 3 + [0.0] * 10, cfg)[1] == []  # below 0.8 and shorter than 0.15 s
    _, out = _run([0.0] * 5 + [0.6, 0.85] + [0.0] * 10, cfg)
    (i, started), = [(i, e) for i, e in out if isinstance(e, SpeechStarted)]
    assert i == 6 and started.audio_s == pytest.approx((5 * W - 1600) / SR)  # from the run's first window


def test_disarmed_or_switched_off_the_start_needs_min_speech():
    probs = [0.0] * 5 + [0.9] * 3 + [0.0] * 10  # 96 ms of speech
    assert len(_run(probs, armed=True)[1]) == 2
    assert _run(probs, armed=False)[1] == []
    assert _run(probs, VADConfig(bargein_min_speech_s=None), armed=True)[1] == []
    # arming mid-run counts the windows already heard
    policy = SpeechHysteresis(CFG, W)
    assert policy.push_window(0.9, W) == []
    policy.bargein_armed = True
    assert [type(e) for e in policy.push_window(0.9, 2 * W)] == [SpeechStarted]


def test_armed_flag_survives_reset_and_is_exposed_by_the_vad():
    policy = SpeechHysteresis(CFG, W)
    policy.bargein_armed = True
    policy.reset()
    assert policy.bargein_armed
    vad = create_vad(VADConfig())
    assert vad.bargein_armed is False
    vad.bargein_armed = 1
    assert vad.bargein_armed is True
    vad.reset()
    assert vad.bargein_armed is True


def test_bad_barge_in_config_is_refused():
    with pytest.raises(ValueError, match="bargein_start_threshold"):
        SpeechHysteresis(VADConfig(start_threshold=0.5, bargein_start_threshold=0.4), W)
    with pytest.raises(ValueError, match="bargein_start_threshold"):
        SpeechHysteresis(VADConfig(bargein_start_threshold=1.5), W)
    with pytest.raises(ValueError, match="bargein_min_speech_s"):
        SpeechHysteresis(VADConfig(bargein_min_speech_s=-0.1), W)


# --- real Silero -------------------------------------------------------------------------------------
def _decision_s(vad, samples: np.ndarray, frame: int = 320) -> tuple[float, float]:
    """(stream position when the first SpeechStarted was returned, its audio_s), pushing 20 ms frames."""
    vad.reset()
    for lo in range(0, samples.shape[0], frame):
        for event in vad.push(samples[lo : lo + frame]):
            if isinstance(event, SpeechStarted):
                return vad.position_s, event.audio_s
    raise AssertionError("no speech start")


@pytest.mark.parametrize("name", ["tt-somethingwrong", "goforward", "librivox-0880"])
def test_armed_silero_hears_a_barge_in_sooner(name):
    """The harness's barge-in recording ("Something is terribly wrong": its weak "S" dips below the
    stop threshold, so the slow rule starts over at "-thing") and two others: armed, speech starts
    within 0.15 s of the true speech start (the slow rule took up to 0.33 s)."""
    rec = data.recording(name)
    audio = rec.read()
    vad = SileroVAD(VADConfig())
    slow_at, _ = _decision_s(vad, audio)
    vad.bargein_armed = True
    fast_at, fast_start = _decision_s(vad, audio)
    assert fast_at - rec.speech_start_s <= 0.15, (fast_at, rec.speech_start_s)
    assert fast_at <= slow_at - 0.05
    assert fast_start <= rec.speech_start_s + 0.1  # the utterance still begins at the speech


@pytest.mark.parametrize("seed", [0, 1])
def test_armed_silero_room_noise_and_silence_start_nothing(seed):
    rng = np.random.default_rng(seed)
    white = rng.standard_normal(5 * SR)
    pink = np.fft.irfft(np.fft.rfft(white) / np.sqrt(np.maximum(np.arange(white.size // 2 + 1), 1)), white.size)
    vad = SileroVAD(VADConfig())
    vad.bargein_armed = True
    for noise in (white, pink, np.zeros(5 * SR)):
        peak = np.abs(noise).max() or 1.0
        pcm = np.round(noise / peak * 0.01 * 32767).astype(np.int16)
        vad.reset()
        events = []
        for block in np.split(pcm, 50):
            events += vad.push(pcm16_to_float32(block.tobytes()))
        assert events + vad.flush() == []
