"""The recent 16 kHz audio stream, addressable by absolute sample index (the listener's audio time).

The listener appends every converted frame, slices an utterance's audio for each ASR pass and the
acoustic scorer, and forgets what no open utterance can need any more.
"""

from __future__ import annotations

import numpy as np


class StreamAudio:
    """float32 mono 16 kHz samples by absolute index: sample 0 is the first sample of the stream.

    Attributes:
        end: absolute index one past the last sample appended (samples received so far).
    """

    def __init__(self) -> None:
        self._chunks: list[np.ndarray] = []
        self._first = 0  # absolute index of _chunks[0][0]
        self.end = 0

    def append(self, samples: np.ndarray) -> None:
        """Add float32 samples (n,) at the end of the stream (an empty array is ignored)."""
        if samples.size:
            self._chunks.append(samples)
            self.end += samples.shape[0]

    def slice(self, start: int, stop: int) -> np.ndarray:
        """Samples [start, stop) as float32 (n,), clipped to what is still held (empty when none is)."""
        start = max(start, self._first)
        stop = min(stop, self.end)
        if stop <= start:
            return np.zeros(0, dtype=np.float32)
        data = np.concatenate(self._chunks) if len(self._chunks) > 1 else self._chunks[0]
        self._chunks = [data]  # keep the joined copy: the next slice is cheap
        return data[start - self._first : stop - self._first]

    def forget_before(self, sample: int) -> None:
        """Drop the chunks that end at or before absolute index `sample`."""
        while self._chunks and self._first + self._chunks[0].shape[0] <= sample:
            self._first += self._chunks.pop(0).shape[0]
