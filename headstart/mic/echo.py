"""Keeping the assistant from hearing itself through the speakers (`headstart mic`).

Two ways, both fed the same two streams at 16 kHz float32 mono: `far_end(samples)` with what the
speakers just played, `near_end(samples) -> samples` with what the microphone captured.

- `EchoCanceller`: WebRTC's acoustic echo canceller (AEC3, the audio processing module of libwebrtc,
  through the `livekit` wheel's `rtc.AudioProcessingModule`). It subtracts the adaptively filtered
  playback from the microphone, so the user can talk over the assistant (barge-in) at full level.
- `PlaybackGate`: the fallback without `livekit`: half-duplex ducking. While the speakers play (and
  for `hold_s` after, the room's echo tail), microphone audio is replaced by silence unless it is
  clearly louder than the playback (`barge_in_ratio` times the playback's RMS, and above
  `floor_rms`): a user talking over the reply still gets through; its echo does not.
"""

from __future__ import annotations

import numpy as np

from headstart.audio import SAMPLE_RATE_HZ

_AEC_FRAME = SAMPLE_RATE_HZ // 100  # the APM works on 10 ms frames


def aec_available() -> bool:
    """True when livekit's WebRTC audio processing module imports (the `mic` extra installs it)."""
    try:
        from livekit import rtc  # noqa: F401
    except Exception:  # noqa: BLE001 - a missing or broken native wheel: fall back to the gate
        return False
    return True


class PlaybackGate:
    """Half-duplex echo control: silence the microphone while playback is audible, except barge-in.

    Args:
        barge_in_ratio: the microphone passes during playback when its RMS exceeds this times the
            playback's recent RMS (echo through a speaker is quieter than the played signal).
        floor_rms: ... and exceeds this absolute RMS (float32 full scale 1.0).
        hold_s: the gate stays closed this long after playback falls silent (echo tail).
        silence_rms: playback below this RMS counts as silent.
    """

    def __init__(self, barge_in_ratio: float = 2.0, floor_rms: float = 0.02, hold_s: float = 0.3,
                 silence_rms: float = 1e-3) -> None:
        self.barge_in_ratio = barge_in_ratio
        self.floor_rms = floor_rms
        self.hold_samples = int(hold_s * SAMPLE_RATE_HZ)
        self.silence_rms = silence_rms
        self._far_rms = 0.0
        self._since_far = self.hold_samples + 1  # near-end samples since the last audible playback
        self.gated_samples = 0

    @property
    def playing(self) -> bool:
        return self._since_far <= self.hold_samples

    def far_end(self, samples: np.ndarray) -> None:
        """Samples just played (float32 (n,), 16 kHz)."""
        if samples.size == 0:
            return
        rms = float(np.sqrt(np.mean(np.square(samples, dtype=np.float64))))
        if rms >= self.silence_rms:
            # Peak-hold with decay: the echo of a loud syllable outlasts it.
            self._far_rms = max(rms, 0.8 * self._far_rms)
            self._since_far = 0

    def near_end(self, samples: np.ndarray) -> np.ndarray:
        """Captured samples (float32 (n,), 16 kHz) -> the same or zeros while gated."""
        playing = self.playing
        self._since_far += samples.size
        if not playing or samples.size == 0:
            if not self.playing:
                self._far_rms = 0.0
            return samples
        rms = float(np.sqrt(np.mean(np.square(samples, dtype=np.float64))))
        if rms > self.floor_rms and rms > self.barge_in_ratio * self._far_rms:
            return samples  # barge-in: louder than any echo of the playback
        self.gated_samples += samples.size
        return np.zeros_like(samples)


class EchoCanceller:
    """WebRTC AEC3 via `livekit.rtc.AudioProcessingModule` (10 ms int16 frames at 16 kHz).

    Input of any length is buffered into 10 ms frames, so `near_end` returns what whole frames it
    completed (up to 10 ms of delay). `delay_ms` is the hint of playback -> capture latency (the
    streams' reported latencies); AEC3 estimates the true delay itself.

    Raises:
        ImportError: if livekit is not installed.
    """

    def __init__(self, delay_ms: float = 50.0, noise_suppression: bool = False) -> None:
        from livekit import rtc

        self._rtc = rtc
        self._apm = rtc.AudioProcessingModule(echo_cancellation=True, noise_suppression=noise_suppression,
                                              high_pass_filter=True)
        self._apm.set_stream_delay_ms(int(max(0.0, delay_ms)))
        self._far = np.zeros(0, dtype=np.int16)
        self._near = np.zeros(0, dtype=np.int16)

    def _frame(self, pcm: np.ndarray):
        return self._rtc.AudioFrame(pcm.tobytes(), SAMPLE_RATE_HZ, 1, _AEC_FRAME)

    def far_end(self, samples: np.ndarray) -> None:
        self._far = np.concatenate([self._far, _to_int16(samples)])
        while self._far.size >= _AEC_FRAME:
            self._apm.process_reverse_stream(self._frame(self._far[:_AEC_FRAME]))
            self._far = self._far[_AEC_FRAME:]

    def near_end(self, samples: np.ndarray) -> np.ndarray:
        self._near = np.concatenate([self._near, _to_int16(samples)])
        out = []
        while self._near.size >= _AEC_FRAME:
            frame = self._frame(self._near[:_AEC_FRAME])
            self._apm.process_stream(frame)
            out.append(np.frombuffer(bytes(frame.data), dtype=np.int16))
            self._near = self._near[_AEC_FRAME:]
        if not out:
            return np.zeros(0, dtype=np.float32)
        return np.concatenate(out).astype(np.float32) * np.float32(1.0 / 32768.0)


class NoEchoControl:
    """Headphones: nothing to do."""

    def far_end(self, samples: np.ndarray) -> None:
        return None

    def near_end(self, samples: np.ndarray) -> np.ndarray:
        return samples


def make_echo_control(mode: str, delay_ms: float = 50.0):
    """`mode`: "auto" (AEC if livekit imports, else the gate), "aec", "gate" or "off".

    Raises:
        ValueError: for an unknown mode, or "aec" without livekit installed.
    """
    if mode == "auto":
        mode = "aec" if aec_available() else "gate"
    if mode == "aec":
        if not aec_available():
            raise ValueError("--echo aec needs livekit (pip install 'headstart[mic]'); use --echo gate")
        return EchoCanceller(delay_ms)
    if mode == "gate":
        return PlaybackGate()
    if mode == "off":
        return NoEchoControl()
    raise ValueError(f"unknown echo mode {mode!r}; expected auto, aec, gate or off")


def _to_int16(samples: np.ndarray) -> np.ndarray:
    return np.round(np.clip(samples, -1.0, 1.0) * 32767.0).astype(np.int16)
