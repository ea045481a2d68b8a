"""headstart.audio: conversions at the edge (cases.md, class "audio")."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from headstart.audio import (
    SAMPLE_RATE_HZ,
    AudioError,
    AudioFrame,
    StreamResampler,
    float32_to_pcm16,
    frames,
    pcm16_to_float32,
    read_wav,
    resample,
    to_mono_float32,
    write_wav,
)

SPEECH_DIR = Path(__file__).resolve().parents[1] / "headstart" / "corpus" / "speech"
if not (SPEECH_DIR / "transcripts.tsv").is_file():
    SPEECH_DIR = Path("/work/shared/speech")


def tone(seconds=1.0, hz=440.0, rate=SAMPLE_RATE_HZ, amp=0.5) -> np.ndarray:
    return (amp * np.sin(2 * np.pi * hz * np.arange(int(seconds * rate)) / rate)).astype(np.float32)


def test_pcm16_uses_the_fixed_scale_not_the_block_peak():
    quiet = np.array([0, 1, -1, 100, -100], dtype="<i2")
    x = pcm16_to_float32(quiet.tobytes())
    assert x.dtype == np.float32
    np.testing.assert_array_equal(x, quiet.astype(np.float32) / 32768)
    assert np.abs(x).max() < 0.01  # a quiet block stays quiet
    assert pcm16_to_float32(np.array([-32768, 32767], "<i2").tobytes()).tolist() == [-1.0, 32767 / 32768]


def test_pcm16_rejects_odd_byte_counts_and_round_trips():
    with pytest.raises(AudioError, match="2-byte"):
        pcm16_to_float32(b"\x00\x01\x02")
    x = tone(0.1)
    np.testing.assert_allclose(pcm16_to_float32(float32_to_pcm16(x)), x, atol=1 / 32767)
    assert pcm16_to_float32(float32_to_pcm16(np.array([2.0, -2.0], np.float32))).tolist() == pytest.approx([1.0, -1.0], abs=1e-4)


def test_float32_bytes_read_as_int16_are_garbage_of_another_size():
    """cases.md: float32 bytes where int16 is declared. The byte count doubles and the values are
    nonsense; the wire layer must check the declared format (here: the length tells)."""
    x = tone(0.02)  # 320 samples
    as_int16 = pcm16_to_float32(x.tobytes())
    assert as_int16.shape[0] == 2 * x.shape[0]


@pytest.mark.parametrize(
    "array, expected",
    [
        (np.array([0, 16384, -32768], np.int16), [0.0, 0.5, -1.0]),
        (np.array([0, 2**30], np.int32), [0.0, 0.5]),
        (np.array([128, 255, 0], np.uint8), [0.0, 127 / 128, -1.0]),
        (np.array([0.25, -0.5], np.float16), [0.25, -0.5]),
        (np.array([0.25, -0.5], np.float64), [0.25, -0.5]),
    ],
)
def test_to_mono_float32_dtypes(array, expected):
    out = to_mono_float32(array)
    assert out.dtype == np.float32 and out.ndim == 1
    np.testing.assert_allclose(out, expected, atol=1e-6)


def test_float16_and_two_channel_speech_become_float32_mono():
    """cases.md: 3 s of speech as float16, and as a 2-channel array (either axis order)."""
    x = read_wav(SPEECH_DIR / "pocketsphinx_librivox/librivox-0880.wav")[: 3 * SAMPLE_RATE_HZ]
    np.testing.assert_allclose(to_mono_float32(x.astype(np.float16)), x, atol=1e-3)
    stereo = np.stack([x, 0.5 * x], axis=1)
    np.testing.assert_allclose(to_mono_float32(stereo), 0.75 * x, atol=1e-6)
    np.testing.assert_allclose(to_mono_float32(stereo.T), 0.75 * x, atol=1e-6)


@pytest.mark.parametrize(
    "bad, match",
    [
        (np.array(["a", "b"]), "numeric"),
        (np.zeros((2, 2, 2), np.float32), "1-D or 2-D"),
        (np.zeros((100, 100), np.float32), "channel axis"),
        (np.array([0.1, np.nan], np.float32), "NaN"),
        (np.array([0.1, np.inf], np.float64), "NaN or infinite"),
    ],
)
def test_to_mono_float32_rejects(bad, match):
    with pytest.raises(AudioError, match=match):
        to_mono_float32(bad)


def test_gaussian_noise_with_one_nan_is_an_error():
    """cases.md: 1 s of Gaussian noise (std 0.05) with one NaN -> an error, never a transcript."""
    x = (np.random.default_rng(0).standard_normal(SAMPLE_RATE_HZ) * 0.05).astype(np.float32)
    x[1234] = np.nan
    with pytest.raises(AudioError, match="NaN"):
        to_mono_float32(x)


@pytest.mark.parametrize("rate", [44100, 48000, 8000])
def test_resample_keeps_the_tone_and_length(rate):
    x = tone(1.0, 440.0, rate)
    y = resample(x, rate, SAMPLE_RATE_HZ)
    assert y.dtype == np.float32 and y.shape[0] == SAMPLE_RATE_HZ
    spectrum = np.abs(np.fft.rfft(y))
    assert np.argmax(spectrum) == 440  # 1 Hz bins


def test_stream_resampler_matches_one_shot_without_frame_seams():
    rate = 48000
    x = tone(1.0, 440.0, rate)
    stream = StreamResampler(rate)
    pieces = [stream.push(x[i : i + 960]) for i in range(0, x.shape[0], 960)] + [stream.flush()]
    y = np.concatenate(pieces)
    assert y.dtype == np.float32 and abs(y.shape[0] - SAMPLE_RATE_HZ) <= 1
    whole = resample(x, rate, SAMPLE_RATE_HZ)
    n = min(y.shape[0], whole.shape[0])
    np.testing.assert_allclose(y[100 : n - 100], whole[100 : n - 100], atol=2e-3)
    # per-frame one-shot resampling, for contrast, leaves edges at every frame boundary
    naive = np.concatenate([resample(x[i : i + 960], rate, SAMPLE_RATE_HZ) for i in range(0, x.shape[0], 960)])
    assert np.abs(naive[: n] - whole[: n]).max() > 10 * np.abs(y[100 : n - 100] - whole[100 : n - 100]).max()


def test_resample_rejects_bad_rates():
    with pytest.raises(AudioError, match="positive"):
        resample(tone(0.1), 0, 16000)
    with pytest.raises(AudioError, match="positive"):
        StreamResampler(-1)


def test_wav_round_trip_and_errors(tmp_path):
    x = tone(0.5, rate=22050)
    path = tmp_path / "t.wav"
    write_wav(path, x, 22050)
    y = read_wav(path)  # resampled to 16 kHz
    assert y.shape[0] == 8000 and y.dtype == np.float32
    np.testing.assert_allclose(read_wav(path.read_bytes(), sample_rate=22050), x, atol=1 / 32767)
    with pytest.raises(FileNotFoundError):
        read_wav(tmp_path / "missing.wav")
    with pytest.raises(AudioError, match="not a readable audio file"):
        read_wav(b"this is not a wav file at all")


def test_frames_cover_everything_with_a_short_last_frame():
    x = np.arange(1000, dtype=np.float32)
    got = list(frames(x, SAMPLE_RATE_HZ, frame_s=0.025))  # 400-sample frames
    assert [f.num_samples for f in got] == [400, 400, 200]
    assert got[0].duration_s == pytest.approx(0.025)
    np.testing.assert_array_equal(np.concatenate([f.samples for f in got]), x)
    assert isinstance(got[0], AudioFrame) and got[0].sample_rate == SAMPLE_RATE_HZ
