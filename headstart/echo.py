"""Echo: is the microphone hearing the reply the session is playing? (normalised cross-correlation)"""

from __future__ import annotations

import math

import numpy as np

from headstart.audio import SAMPLE_RATE_HZ

class EchoDetector:
    """Is the microphone hearing the reply the session is playing?

    Keeps the last `mic_window_s` of microphone audio and the current reply's audio (both 16 kHz float32
    mono) and compares them by normalised cross-correlation (the peak over all delays up to
    `max_delay_s` of the mic behind playback, around the playback position). Speaker-to-mic echo is a
    filtered, delayed copy of the reply and correlates strongly; a person's own voice does not.

    Args:
        mic_window_s: microphone audio compared (the part the VAD just called speech).
        max_delay_s: acoustic + buffering delay searched.
        threshold: correlation peak at or above which the audio is echo.
    """

    def __init__(self, mic_window_s: float = 0.5, max_delay_s: float = 0.6, threshold: float = 0.3) -> None:
        self.mic_window = int(mic_window_s * SAMPLE_RATE_HZ)
        self.max_delay = int(max_delay_s * SAMPLE_RATE_HZ)
        self.threshold = threshold
        self._mic = np.zeros(0, dtype=np.float32)
        self._played: list[np.ndarray] = []
        self._played_len = 0

    def push_mic(self, samples: np.ndarray) -> None:
        """float32 (n,) 16 kHz microphone audio."""
        self._mic = np.concatenate([self._mic, samples])[-self.mic_window :]

    def push_played(self, samples: np.ndarray) -> None:
        """float32 (n,) 16 kHz reply audio, in playback order."""
        if samples.size:
            self._played.append(samples.astype(np.float32, copy=False))
            self._played_len += samples.shape[0]

    def reset_played(self) -> None:
        self._played, self._played_len = [], 0

    def similarity(self, played_s: float | None = None) -> float:
        """Peak normalised cross-correlation in [0, 1] of the mic window against the reply audio that
        ends at playback position `played_s` (None: all reply audio so far)."""
        mic = self._mic
        if mic.shape[0] < self.mic_window // 2 or not self._played_len:
            return 0.0
        played = np.concatenate(self._played) if len(self._played) > 1 else self._played[0]
        self._played = [played]
        end = played.shape[0] if played_s is None else min(played.shape[0], int(played_s * SAMPLE_RATE_HZ) + SAMPLE_RATE_HZ // 4)
        start = end - mic.shape[0] - self.max_delay
        ref = played[max(0, start):end]
        if start < 0:
            # The mic window reaches back before the reply began (the speaker was silent then): pad
            # with that silence, but search only alignments where at least 40 % of the window is
            # reply audio (a short overlap with the onset of the user's own voice correlates by chance).
            pad = -start
            ref = np.concatenate([np.zeros(pad, dtype=np.float32), ref])
            ref = ref[max(0, pad - int(0.6 * mic.shape[0])):]
        return normalized_xcorr_peak(mic, ref)

    def is_echo(self, played_s: float | None = None) -> bool:
        return self.similarity(played_s) >= self.threshold


def normalized_xcorr_peak(x: np.ndarray, ref: np.ndarray) -> float:
    """max over lags k of |<x, ref[k:k+n]>| / (|x| |ref[k:k+n]|), for ref at least as long as x
    (a shorter ref is zero-padded). 0.0 for silent input. Computed with one real FFT."""
    n = x.shape[0]
    if n == 0 or ref.shape[0] == 0:
        return 0.0
    if ref.shape[0] < n:
        ref = np.concatenate([ref, np.zeros(n - ref.shape[0], dtype=np.float32)])
    x = x.astype(np.float64) - x.mean()
    r = ref.astype(np.float64)
    x_norm = np.sqrt(np.dot(x, x))
    if x_norm < 1e-6:
        return 0.0
    size = 1 << int(math.ceil(math.log2(n + r.shape[0])))
    corr = np.fft.irfft(np.fft.rfft(r, size) * np.conj(np.fft.rfft(x, size)), size)[: r.shape[0] - n + 1]
    csum = np.concatenate([[0.0], np.cumsum(r)])
    csum2 = np.concatenate([[0.0], np.cumsum(r * r)])
    window_sum = csum[n:] - csum[:-n]
    window_energy = np.maximum(csum2[n:] - csum2[:-n] - window_sum**2 / n, 0.0)
    denominator = x_norm * np.sqrt(window_energy)
    valid = denominator > 1e-6 * max(1.0, x_norm)
    if not valid.any():
        return 0.0
    return float(np.max(np.abs(corr[valid]) / denominator[valid]))
