"""VAD: re-framing of any frame size, hysteresis timing (exact, with fake probabilities), real speech,
noise at fixed scale, bad input."""

from __future__ import annotations


import numpy as np
import pytest

from headstart.audio import AudioError, pcm16_to_float32
from headstart.config import VADConfig
from headstart.events import SpeechEnded, SpeechStarted
from headstart.voice.vad import SileroVAD, SpeechHysteresis, WebRTCVAD, create_vad



@pytest.fixture(scope="module")
def silero() -> SileroVAD:
    return SileroVAD(VADConfig())


def _push_in_frames(vad, samples: np.ndarray, frame: int) -> list:
    events = []
    for start in range(0, samples.shape[0], frame):
        events += vad.push(samples[start : start + frame])
    return events + vad.flush()


# --- hysteresis policy, exact times ---------------------------------------------------------------
W = 512  # a Silero window: 32 ms


def _run(probabilities, config=VADConfig(), flush_at=None):
    policy = SpeechHysteresis(config, W)
    out = []
    for i, p in enumerate(probabilities):
        out += [(i, e) for e in policy.push_window(p, (i + 1) * W)]
    if flush_at is not None:
        out += [(len(probabilities), e) for e in policy.flush(flush_at)]
    return policy, out


def test_hysteresis_start_and_end_times_are_exact_and_padded():
    cfg = VADConfig(start_threshold=0.5, stop_threshold=0.35, min_speech_s=0.15, min_silence_s=0.25, speech_pad_s=0.1)
    probs = [0.0] * 10 + [0.9] * 20 + [0.0] * 20
    policy, out = _run(probs, cfg)
    # speech starts at window 10 (sample 5120) and is confirmed after 0.15 s = 2400 samples -> 5 windows
    (i_start, started), (i_end, ended) = out
    assert isinstance(started, SpeechStarted) and i_start == 14
    assert started.audio_s == pytest.approx((10 * W - 1600) / 16000)
    # last voiced window ends at sample 30*W; silence confirmed after 0.25 s = 4000 samples -> 8 windows
    assert isinstance(ended, SpeechEnded) and i_end == 37
    assert ended.audio_s == pytest.approx((30 * W + 1600) / 16000)
    assert not policy.speaking


def test_hysteresis_ignores_blips_and_short_dips():
    cfg = VADConfig(min_speech_s=0.15, min_silence_s=0.25)
    # a 3-window blip (96 ms < 150 ms) is not speech
    _, out = _run([0.0] * 5 + [0.9] * 3 + [0.0] * 20, cfg)
    assert out == []
    # a 5-window dip (160 ms < 250 ms) inside speech does not end it; values between the two
    # thresholds keep speech going
    _, out = _run([0.9] * 10 + [0.1] * 5 + [0.4] * 10 + [0.9] * 10, cfg)
    assert [type(e) for _, e in out] == [SpeechStarted]


def test_hysteresis_start_needs_start_threshold_and_run_above_stop_threshold():
    cfg = VADConfig(start_threshold=0.5, stop_threshold=0.35, min_speech_s=0.15)
    _, out = _run([0.45] * 30, cfg)  # between the thresholds: never starts
    assert out == []
    _, out = _run([0.6] + [0.4] * 10, cfg)  # one window above start, then kept up by stop_threshold
    assert len(out) == 1 and out[0][1].audio_s == 0.0  # padding clamped at the stream start


def test_hysteresis_flush_closes_open_speech_and_next_start_never_precedes_previous_end():
    cfg = VADConfig(min_speech_s=0.1, min_silence_s=0.1, speech_pad_s=0.2)
    policy, out = _run([0.9] * 10 + [0.0] * 4 + [0.9] * 10, cfg, flush_at=24 * W)
    kinds = [type(e) for _, e in out]
    assert kinds == [SpeechStarted, SpeechEnded, SpeechStarted, SpeechEnded]
    first_end, second_start, final_end = out[1][1].audio_s, out[2][1].audio_s, out[3][1].audio_s
    assert first_end <= 14 * W / 16000  # padded end clamped to the decision point
    assert second_start >= first_end
    assert final_end == pytest.approx(24 * W / 16000)  # clamped to the stream end
    assert not policy.speaking


def test_hysteresis_rejects_bad_config():
    with pytest.raises(ValueError, match="stop_threshold"):
        SpeechHysteresis(VADConfig(start_threshold=0.3, stop_threshold=0.5), W)
    with pytest.raises(ValueError, match="min_silence_s"):
        SpeechHysteresis(VADConfig(min_silence_s=-1), W)


# --- Silero on real audio --------------------------------------------------------------------------
def test_silero_finds_the_sentence(silero, sentence):
    silero.reset()
    events = silero.push(sentence) + silero.flush()
    assert [type(e) for e in events] == [SpeechStarted, SpeechEnded]
    assert 0.0 <= events[0].audio_s < 0.4  # the reader starts ~0.25 s in
    assert 2.6 < events[1].audio_s <= 2.99
    probs = silero.probabilities
    assert probs.shape == (sentence.shape[0] // 512,)
    assert probs.max() > 0.9 and probs[:5].max() < 0.35


@pytest.mark.parametrize("frame", [400, 720, 320, 512, 1000, 7])
def test_silero_any_frame_size_gives_the_same_windows_and_events(silero, sentence, frame):
    silero.reset()
    whole = silero.push(sentence) + silero.flush()
    whole_probs = silero.probabilities
    silero.reset()
    framed = _push_in_frames(silero, sentence[: sentence.shape[0] - 123], frame)  # short last frame
    n = len(silero.probabilities)
    assert n == (sentence.shape[0] - 123) // 512
    np.testing.assert_allclose(silero.probabilities, whole_probs[:n], atol=1e-6)
    assert framed[0] == whole[0]
    assert isinstance(framed[-1], SpeechEnded) and abs(framed[-1].audio_s - whole[-1].audio_s) < 0.05


def test_silero_speaking_property_follows_events(silero, sentence):
    silero.reset()
    states = []
    for start in range(0, sentence.shape[0], 320):
        for event in silero.push(sentence[start : start + 320]):
            states.append((type(event), silero.speaking))
    assert states[0] == (SpeechStarted, True)
    assert silero.speaking  # the recording ends ~0.1 s after the voice: not yet silence enough
    assert silero.flush() and not silero.speaking


def _noise(kind: str, seconds: float, peak: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = int(seconds * 16000)
    w = rng.standard_normal(n)
    if kind == "pink":  # 1/f power, like room rumble
        spectrum = np.fft.rfft(w) / np.sqrt(np.maximum(np.arange(n // 2 + 1), 1))
        w = np.fft.irfft(spectrum, n)
    return (np.round(w / np.abs(w).max() * peak * 32767)).astype(np.int16)


@pytest.mark.parametrize("engine", ["silero", "webrtc"])
@pytest.mark.parametrize("kind", ["white", "pink"])
def test_room_noise_in_100ms_blocks_at_fixed_scale_is_not_speech(engine, kind):
    pcm = _noise(kind, 5.0, peak=0.01)
    vad = create_vad(VADConfig(engine=engine))
    events = []
    for block in np.split(pcm, 50):  # 100 ms blocks, each converted with the fixed 1/32768 scale
        events += vad.push(pcm16_to_float32(block.tobytes()))
    assert events + vad.flush() == []
    if engine == "silero":
        assert vad.probabilities.max() < VADConfig().stop_threshold


def test_peak_normalised_noise_fools_webrtc_which_is_why_scaling_is_fixed():
    """The contrast that makes the previous test meaningful: dividing each block by its own peak lifts
    the same noise to full scale, and the WebRTC VAD calls it speech."""
    pcm = _noise("white", 5.0, peak=0.01).astype(np.float32)
    vad = WebRTCVAD(VADConfig())
    events = []
    for block in np.split(pcm, 50):
        events += vad.push((block / np.abs(block).max()).astype(np.float32))
    assert any(isinstance(e, SpeechStarted) for e in events)


@pytest.mark.parametrize("seconds", [0.0, 0.01, 5.0])
def test_digital_silence_is_not_speech(silero, seconds):
    silero.reset()
    assert silero.push(np.zeros(int(seconds * 16000), np.float32)) + silero.flush() == []


# --- WebRTC -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("frame_ms", [10, 20, 30])
def test_webrtc_refames_any_size_and_finds_the_sentence(sentence, frame_ms):
    vad = WebRTCVAD(VADConfig(engine="webrtc", webrtc_frame_ms=frame_ms))
    whole = vad.push(sentence) + vad.flush()
    assert [type(e) for e in whole] == [SpeechStarted, SpeechEnded]
    assert whole[0].audio_s < 0.5 and whole[1].audio_s > 2.5
    vad.reset()
    framed = _push_in_frames(vad, sentence, 720)
    assert framed == whole
    assert vad.window_samples == 16 * frame_ms


def test_webrtc_rejects_bad_frame_length_and_mode():
    with pytest.raises(ValueError, match="10, 20 or 30"):
        WebRTCVAD(VADConfig(webrtc_frame_ms=25))
    with pytest.raises(ValueError, match="0..3"):
        WebRTCVAD(VADConfig(webrtc_mode=7))


# --- bad input and construction ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "bad",
    [
        np.zeros(512, np.int16),
        np.zeros(512, np.float64),
        np.zeros(512, np.float16),
        np.zeros((512, 2), np.float32),
        [0.0] * 512,
    ],
)
def test_push_rejects_wrong_dtype_or_shape(silero, bad):
    with pytest.raises(AudioError, match="float32"):
        silero.push(bad)


def test_push_rejects_nan(silero):
    x = (np.random.default_rng(1).standard_normal(16000) * 0.05).astype(np.float32)
    x[777] = np.nan
    silero.reset()
    with pytest.raises(AudioError, match="NaN"):
        silero.push(x)


def test_create_vad_errors():
    with pytest.raises(ValueError, match="unknown VAD engine"):
        create_vad(VADConfig(engine="nope"))
    with pytest.raises(FileNotFoundError, match="Silero VAD model not found"):
        SileroVAD(VADConfig(), model_path="/nonexistent/silero.onnx")


def test_reset_restarts_the_stream(silero, sentence):
    silero.reset()
    first = silero.push(sentence) + silero.flush()
    silero.push(np.zeros(16000, np.float32))
    assert silero.position_s == pytest.approx(sentence.shape[0] / 16000 + 1.0)
    silero.reset()
    assert silero.position_s == 0.0 and silero.probabilities.size == 0 and not silero.speaking
    assert silero.push(sentence) + silero.flush() == first
