"""Audio at the edges: frames, PCM16 <-> float32, channel down-mix, resampling, WAV I/O.

Inside headstart all audio is float32 mono in [-1, 1]. Conversion happens once, here, at the edge:
int16 is scaled by the fixed factor 1/32768 (never by a per-block peak, which would lift room noise to
speech level), other channel counts are averaged to mono, other rates are resampled with soxr.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SAMPLE_RATE_HZ = 16_000
"""The rate of everything the voice stage sees (VAD and ASR)."""

_INT16_SCALE = 1.0 / 32768.0
_MAX_CHANNELS = 8


class AudioError(ValueError):
    """Audio that cannot be used: wrong dtype or shape, NaN/inf samples, corrupt or non-audio file."""


@dataclass(frozen=True, slots=True)
class AudioFrame:
    """A block of mono audio.

    Attributes:
        samples: float32 array of shape (num_samples,), values in [-1, 1].
        sample_rate: samples per second (Hz).
    """

    samples: np.ndarray
    sample_rate: int

    @property
    def num_samples(self) -> int:
        return int(self.samples.shape[0])

    @property
    def duration_s(self) -> float:
        return self.num_samples / self.sample_rate


def pcm16_to_float32(data: bytes | bytearray | memoryview) -> np.ndarray:
    """Little-endian signed 16-bit PCM bytes -> float32 array (num_samples,), scaled by 1/32768.

    Raises:
        AudioError: if the byte length is odd (not whole 16-bit samples).
    """
    if len(data) % 2:
        raise AudioError(f"PCM16 data must hold whole 2-byte samples, got {len(data)} bytes")
    return np.frombuffer(data, dtype="<i2").astype(np.float32) * _INT16_SCALE


def float32_to_pcm16(samples: np.ndarray) -> bytes:
    """float32 array in [-1, 1] -> little-endian PCM16 bytes (values outside are clipped)."""
    x = np.clip(np.asarray(samples, dtype=np.float32), -1.0, 1.0)
    return (np.round(x * 32767.0)).astype("<i2").tobytes()


def to_mono_float32(samples: np.ndarray) -> np.ndarray:
    """Any numeric array -> float32 mono (num_samples,).

    Accepts shape (n,), (n, channels) or (channels, n) with at most 8 channels; channels are averaged.
    Integer dtypes are scaled to [-1, 1] by a fixed factor for their width (int16: 1/32768); floats
    (float16/32/64) are taken as already in [-1, 1].

    Raises:
        AudioError: on a non-numeric dtype, more than 2 dimensions or 8 channels, or NaN/inf samples.
    """
    x = np.asarray(samples)
    if x.dtype.kind == "i":
        x = x.astype(np.float32) / float(2 ** (8 * x.dtype.itemsize - 1))
    elif x.dtype.kind == "u":
        half = float(2 ** (8 * x.dtype.itemsize - 1))
        x = (x.astype(np.float32) - half) / half
    elif x.dtype.kind == "f":
        x = x.astype(np.float32, copy=False)
    else:
        raise AudioError(f"audio samples must be numeric, got dtype {x.dtype}")
    if x.ndim == 2:
        if x.shape[1] <= _MAX_CHANNELS:
            x = x.mean(axis=1, dtype=np.float32)
        elif x.shape[0] <= _MAX_CHANNELS:
            x = x.mean(axis=0, dtype=np.float32)
        else:
            raise AudioError(f"cannot tell the channel axis of audio with shape {x.shape}")
    elif x.ndim != 1:
        raise AudioError(f"audio must be 1-D or 2-D (samples, channels), got shape {x.shape}")
    if x.size and not np.isfinite(x).all():
        raise AudioError("audio contains NaN or infinite samples")
    return np.ascontiguousarray(x, dtype=np.float32)


def resample(samples: np.ndarray, from_hz: int, to_hz: int) -> np.ndarray:
    """Resample float32 mono audio with soxr (high quality). Returns float32 (num_samples',)."""
    if from_hz <= 0 or to_hz <= 0:
        raise AudioError(f"sample rates must be positive, got {from_hz} -> {to_hz}")
    if from_hz == to_hz or samples.size == 0:
        return samples.astype(np.float32, copy=False)
    import soxr

    return soxr.resample(samples, from_hz, to_hz, quality="HQ").astype(np.float32, copy=False)


class StreamResampler:
    """Resamples float32 mono audio that arrives in frames (soxr.ResampleStream, high quality).

    Unlike calling `resample` per frame, the filter state carries across frames, so frame boundaries
    leave no clicks. Output lags input by the filter delay (a few ms); `flush()` returns the rest.
    """

    def __init__(self, from_hz: int, to_hz: int = SAMPLE_RATE_HZ) -> None:
        if from_hz <= 0 or to_hz <= 0:
            raise AudioError(f"sample rates must be positive, got {from_hz} -> {to_hz}")
        import soxr

        self.from_hz = from_hz
        self.to_hz = to_hz
        self._stream = soxr.ResampleStream(from_hz, to_hz, 1, dtype="float32", quality="HQ")

    def push(self, samples: np.ndarray) -> np.ndarray:
        """float32 (n,) at `from_hz` -> float32 (m,) at `to_hz` (m may be 0 while the filter fills)."""
        return self._stream.resample_chunk(np.ascontiguousarray(samples, dtype=np.float32))

    def flush(self) -> np.ndarray:
        """End of input: the samples still inside the filter."""
        return self._stream.resample_chunk(np.zeros(0, dtype=np.float32), last=True)


def read_wav(source: str | Path | bytes, sample_rate: int = SAMPLE_RATE_HZ) -> np.ndarray:
    """Read an audio file (WAV, FLAC, OGG: what libsndfile reads) as float32 mono at `sample_rate`.

    Args:
        source: a path, or the file's bytes.
        sample_rate: the rate to resample to (Hz).

    Returns:
        float32 array (num_samples,).

    Raises:
        FileNotFoundError: if the path does not exist.
        AudioError: if the file is not readable audio or holds NaN/inf samples.
    """
    import soundfile as sf

    if isinstance(source, (str, Path)):
        path = Path(source)
        if not path.is_file():
            raise FileNotFoundError(f"no such audio file: {path}")
        handle: object = str(path)
        name = str(path)
    else:
        handle = io.BytesIO(source)
        name = "<bytes>"
    try:
        data, file_rate = sf.read(handle, dtype="float32", always_2d=True)
    except (sf.LibsndfileError, RuntimeError, TypeError) as exc:
        raise AudioError(f"{name} is not a readable audio file: {exc}") from exc
    mono = to_mono_float32(data)
    return resample(mono, int(file_rate), sample_rate)


def write_wav(path: str | Path, samples: np.ndarray, sample_rate: int) -> None:
    """Write float32 mono samples as a 16-bit PCM WAV file."""
    import soundfile as sf

    sf.write(str(path), np.asarray(samples, dtype=np.float32), sample_rate, subtype="PCM_16")


def frames(samples: np.ndarray, sample_rate: int, frame_s: float = 0.02):
    """Split mono audio into consecutive AudioFrames of `frame_s` seconds (the last may be shorter)."""
    step = max(1, int(round(frame_s * sample_rate)))
    for start in range(0, samples.shape[0], step):
        yield AudioFrame(samples[start : start + step], sample_rate)
