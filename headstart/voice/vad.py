"""Voice activity detection: a frame classifier (Silero v6 or WebRTC) behind one hysteresis policy.

A VAD is a plain synchronous object. `push(samples)` takes float32 mono 16 kHz audio of any length,
re-buffers it into the classifier's fixed windows (Silero: exactly 512 samples; WebRTC: 10/20/30 ms)
and returns the `SpeechStarted` / `SpeechEnded` events those windows decided. Event times are positions
in the audio stream (samples pushed since `reset()` / 16 kHz), never wall-clock readings, so pushing
faster than real time gives the same events.

Hysteresis (as in Silero's `get_speech_timestamps`, made streaming): speech starts once windows stay at
or above `stop_threshold` for `min_speech_s`, beginning with one at or above `start_threshold`; it ends
once windows stay below `stop_threshold` for `min_silence_s`. Reported times are padded by
`speech_pad_s` (start earlier, end later), clamped to the stream and to the previous segment.

Barge-in start: while `bargein_armed` (the session sets it while its reply is playing) the same run
also starts speech once it has lasted `bargein_min_speech_s` from its first window at or above
`bargein_start_threshold` (default two Silero windows, 64 ms, from one at 0.5, instead of 150 ms): a
barge-in pauses the reply sooner, and a false start only pauses it until the ASR finds no words. It is
never later than the usual rule, and the reported start time is the same.
"""

from __future__ import annotations

from array import array
from pathlib import Path

import numpy as np

from headstart.audio import SAMPLE_RATE_HZ, AudioError, float32_to_pcm16
from headstart.config import VADConfig
from headstart.events import SpeechEnded, SpeechStarted

VADEvent = SpeechStarted | SpeechEnded


def default_silero_path() -> Path:
    """The Silero VAD v6 ONNX file bundled inside the installed faster-whisper package.

    Raises:
        headstart.models.store.ModelError: if faster-whisper is missing or does not ship it.
    """
    from headstart.models.store import silero_vad_path

    return silero_vad_path()


class SpeechHysteresis:
    """The speech/silence decision over a sequence of per-window speech probabilities (no audio, no I/O).

    `push_window(probability, end_sample)` is called once per classified window, in stream order;
    windows are `window_samples` long and end at `end_sample` (a sample count from the stream start).
    """

    def __init__(self, config: VADConfig, window_samples: int, sample_rate: int = SAMPLE_RATE_HZ) -> None:
        if not 0.0 <= config.stop_threshold <= config.start_threshold <= 1.0:
            raise ValueError(
                "VADConfig needs 0 <= stop_threshold <= start_threshold <= 1, got "
                f"stop={config.stop_threshold}, start={config.start_threshold}"
            )
        for name in ("min_speech_s", "min_silence_s", "speech_pad_s"):
            if getattr(config, name) < 0:
                raise ValueError(f"VADConfig.{name} must be >= 0, got {getattr(config, name)}")
        if config.bargein_min_speech_s is not None and not config.bargein_min_speech_s >= 0:
            raise ValueError(f"VADConfig.bargein_min_speech_s must be >= 0 or None, got {config.bargein_min_speech_s}")
        if not config.start_threshold <= config.bargein_start_threshold <= 1.0:
            raise ValueError(
                "VADConfig needs start_threshold <= bargein_start_threshold <= 1, got "
                f"start={config.start_threshold}, bargein_start={config.bargein_start_threshold}"
            )
        self._config = config
        self._window = window_samples
        self._rate = sample_rate
        self._min_speech = int(round(config.min_speech_s * sample_rate))
        self._min_silence = int(round(config.min_silence_s * sample_rate))
        self._pad = int(round(config.speech_pad_s * sample_rate))
        self._bargein_min_speech = (
            None if config.bargein_min_speech_s is None else int(round(config.bargein_min_speech_s * sample_rate))
        )
        # while True, the barge-in rule may start speech too (see the module docstring); kept across reset()
        self.bargein_armed = False
        self.reset()

    def reset(self) -> None:
        self.speaking = False
        self._candidate_start: int | None = None  # first window of a not-yet-confirmed speech run
        self._fast_start: int | None = None  # first window of that run at or above bargein_start_threshold
        self._silence_start: int | None = None  # first window of a silence run inside speech
        self._last_voiced_end = 0  # end sample of the last voiced window of the current segment
        self._previous_end = 0  # padded end of the previous segment (the next start may not precede it)

    def push_window(self, probability: float, end_sample: int) -> list[VADEvent]:
        start_sample = end_sample - self._window
        cfg = self._config
        if not self.speaking:
            if self._candidate_start is None:
                if probability >= cfg.start_threshold:
                    self._candidate_start = start_sample
            elif probability < cfg.stop_threshold:
                self._candidate_start = None
            if self._candidate_start is None:
                self._fast_start = None
            elif self._fast_start is None and probability >= cfg.bargein_start_threshold:
                self._fast_start = start_sample
            if self._candidate_start is not None and (
                end_sample - self._candidate_start >= self._min_speech or self._barge_in_confirmed(end_sample)
            ):
                started = max(self._candidate_start - self._pad, self._previous_end, 0)
                self.speaking = True
                self._candidate_start = None
                self._fast_start = None
                self._silence_start = None
                self._last_voiced_end = end_sample
                return [SpeechStarted(audio_s=started / self._rate)]
            return []
        if probability >= cfg.stop_threshold:
            self._silence_start = None
            self._last_voiced_end = end_sample
            return []
        if self._silence_start is None:
            self._silence_start = start_sample
        if end_sample - self._silence_start >= self._min_silence:
            return [self._end(end_sample)]
        return []

    def _barge_in_confirmed(self, end_sample: int) -> bool:
        return (
            self.bargein_armed
            and self._bargein_min_speech is not None
            and self._fast_start is not None
            and end_sample - self._fast_start >= self._bargein_min_speech
        )

    @property
    def silence_since_sample(self) -> int | None:
        """While speaking: the first sample of the silence run in progress (the speech may be ending
        there; `min_silence_s` of it confirms the end), else None."""
        return self._silence_start if self.speaking else None

    def flush(self, stream_end_sample: int) -> list[VADEvent]:
        """End of input: close an open segment at its last voiced window (padded, within the stream)."""
        self._candidate_start = None
        self._fast_start = None
        if self.speaking:
            return [self._end(stream_end_sample)]
        return []

    def _end(self, limit_sample: int) -> SpeechEnded:
        ended = min(self._last_voiced_end + self._pad, limit_sample)
        self.speaking = False
        self._silence_start = None
        self._previous_end = ended
        return SpeechEnded(audio_s=ended / self._rate)


class VAD:
    """Streaming VAD: re-buffers audio into fixed windows, classifies them, applies `SpeechHysteresis`.

    Subclasses set `window_samples` and implement `_classify(windows) -> probabilities`.
    """

    window_samples: int

    def __init__(self, config: VADConfig) -> None:
        self.config = config
        self._hysteresis = SpeechHysteresis(config, self.window_samples)
        self._buffer = np.zeros(0, dtype=np.float32)
        self._num_samples = 0  # samples pushed since reset
        self._probabilities = array("f")

    # -- subclass hooks -------------------------------------------------------------------------
    def _classify(self, windows: np.ndarray) -> np.ndarray:
        """float32 (k, window_samples), consecutive windows -> float32 (k,) speech probabilities."""
        raise NotImplementedError

    def _reset_model(self) -> None:
        """Forget the classifier's recurrent state."""

    # -- public API -----------------------------------------------------------------------------
    def push(self, samples: np.ndarray) -> list[VADEvent]:
        """Add audio and return the speech start/end events it decided, in order.

        Args:
            samples: float32 array (num_samples,) at 16 kHz, values in [-1, 1]; any length, including 0.

        Raises:
            AudioError: on another dtype or shape, or NaN/inf samples (convert at the edge with
                `headstart.audio.to_mono_float32`).
        """
        if not isinstance(samples, np.ndarray) or samples.dtype != np.float32 or samples.ndim != 1:
            raise AudioError(
                "VAD.push expects a float32 array of shape (num_samples,) at 16 kHz, got "
                f"{type(samples).__name__} {getattr(samples, 'dtype', '')} {getattr(samples, 'shape', '')}"
            )
        if samples.size == 0:
            return []
        if not np.isfinite(samples).all():
            raise AudioError("audio contains NaN or infinite samples")
        buffer = np.concatenate([self._buffer, samples]) if self._buffer.size else samples
        num_windows = buffer.shape[0] // self.window_samples
        used = num_windows * self.window_samples
        self._buffer = buffer[used:].copy()
        first_end = self._num_samples - (buffer.shape[0] - samples.shape[0]) + self.window_samples
        self._num_samples += samples.shape[0]
        if num_windows == 0:
            return []
        probabilities = self._classify(buffer[:used].reshape(num_windows, self.window_samples))
        events: list[VADEvent] = []
        for i, probability in enumerate(probabilities):
            self._probabilities.append(float(probability))
            events.extend(self._hysteresis.push_window(float(probability), first_end + i * self.window_samples))
        return events

    def flush(self) -> list[VADEvent]:
        """End of input: close an open speech segment (a `SpeechEnded`), drop a part-window remainder.

        The stream position is kept: later pushes continue the same timeline.
        """
        self._buffer = np.zeros(0, dtype=np.float32)
        return self._hysteresis.flush(self._num_samples)

    def reset(self) -> None:
        """Start a new stream at position 0 with fresh classifier state."""
        self._hysteresis.reset()
        self._buffer = np.zeros(0, dtype=np.float32)
        self._num_samples = 0
        self._probabilities = array("f")
        self._reset_model()

    @property
    def speaking(self) -> bool:
        """True between a `SpeechStarted` and its `SpeechEnded`."""
        return self._hysteresis.speaking

    @property
    def bargein_armed(self) -> bool:
        """Whether the barge-in start rule applies (`VADConfig.bargein_min_speech_s`): set it while
        the agent's reply is playing. Applies to the windows classified after it is set."""
        return self._hysteresis.bargein_armed

    @bargein_armed.setter
    def bargein_armed(self, armed: bool) -> None:
        self._hysteresis.bargein_armed = bool(armed)

    @property
    def silence_since_s(self) -> float | None:
        """While speaking, the start of a silence run not yet long enough to end the speech (seconds;
        the speech may be ending there), else None. Lets a listener start its final pass early."""
        sample = self._hysteresis.silence_since_sample
        return None if sample is None else sample / SAMPLE_RATE_HZ

    @property
    def position_s(self) -> float:
        """Audio pushed since reset, in seconds."""
        return self._num_samples / SAMPLE_RATE_HZ

    @property
    def window_s(self) -> float:
        return self.window_samples / SAMPLE_RATE_HZ

    @property
    def probabilities(self) -> np.ndarray:
        """float32 (num_windows,): the speech probability of every window classified since reset;
        window i covers samples [i * window_samples, (i + 1) * window_samples)."""
        return np.frombuffer(self._probabilities, dtype=np.float32).copy()


# Silero's state drifts little through a second of exact zeros and far through 40 s (docs/listening.md):
# past this many windows of zeros (0.99 s) the model starts over instead
_ZERO_RESET_WINDOWS = 31


class SileroVAD(VAD):
    """Silero VAD v6 (ONNX, via onnxruntime with one intra-/inter-op thread).

    The model takes 512-sample windows at 16 kHz preceded by the previous window's last 64 samples
    (context) and carries an LSTM state (h, c), each (1, 1, 128). Consecutive windows of one push are run
    as one sequence (the model's `seq_len` axis), which gives the same probabilities as one at a time.
    Source: github.com/snakers4/silero-vad; input layout as in faster_whisper/vad.py.
    """

    window_samples = 512
    context_samples = 64

    def __init__(self, config: VADConfig, model_path: str | Path | None = None) -> None:
        import onnxruntime

        path = Path(model_path) if model_path is not None else default_silero_path()
        if not path.is_file():
            raise FileNotFoundError(f"Silero VAD model not found: {path}")
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self._session = onnxruntime.InferenceSession(
            str(path), sess_options=options, providers=["CPUExecutionProvider"]
        )
        super().__init__(config)
        self._reset_model()

    def _reset_model(self, keep_zero_run: bool = False) -> None:
        self._h = np.zeros((1, 1, 128), dtype=np.float32)
        self._c = np.zeros((1, 1, 128), dtype=np.float32)
        self._context = np.zeros(self.context_samples, dtype=np.float32)
        if not keep_zero_run:
            self._zero_windows = 0  # consecutive windows of exact zeros just classified

    def _classify(self, windows: np.ndarray) -> np.ndarray:
        # Digital silence (exact zeros: a muted track, push-to-talk silence) longer than
        # `_ZERO_RESET_WINDOWS` is no speech, and the model does not see it: its state starts over,
        # as at the stream's start. Carried through a long digital silence, the state drifts so
        # that the next onset scores low and speech starts late (see docs/listening.md); a shorter
        # run of zeros (a dropout, a pause) goes through the model as any audio.
        skipped = np.zeros(windows.shape[0], dtype=bool)
        # numpy's stubs type any(axis=...) as bool | array; on 2-D windows it is an array
        for i, zero in enumerate(~windows.any(axis=1)):  # type: ignore[arg-type]
            self._zero_windows = self._zero_windows + 1 if zero else 0
            skipped[i] = self._zero_windows > _ZERO_RESET_WINDOWS
        if not skipped.any():
            return self._run(windows)
        probabilities = np.zeros(windows.shape[0], dtype=np.float32)
        start = 0
        for end in [*np.flatnonzero(skipped), windows.shape[0]]:
            if end > start:
                probabilities[start:end] = self._run(windows[start:end])
            if end < windows.shape[0]:
                self._reset_model(keep_zero_run=True)
            start = end + 1
        return probabilities

    def _run(self, windows: np.ndarray) -> np.ndarray:
        """Consecutive windows (k, 512) -> their speech probabilities (k,), carrying the state."""
        previous = np.concatenate([self._context[None, :], windows[:-1, -self.context_samples :]])
        batch = np.ascontiguousarray(np.concatenate([previous, windows], axis=1))
        probabilities, self._h, self._c = self._session.run(
            None, {"input": batch, "h": self._h, "c": self._c}
        )
        self._context = windows[-1, -self.context_samples :].copy()
        return np.asarray(probabilities, dtype=np.float32).reshape(-1)


class WebRTCVAD(VAD):
    """The WebRTC VAD (webrtcvad-wheels): 10/20/30 ms frames of PCM16, a yes/no per frame (prob 1/0).

    It calls broadband noise "speech"; prefer Silero, or gate this with it.
    """

    def __init__(self, config: VADConfig) -> None:
        import webrtcvad

        if config.webrtc_frame_ms not in (10, 20, 30):
            raise ValueError(f"WebRTC VAD frames must be 10, 20 or 30 ms, got {config.webrtc_frame_ms}")
        if config.webrtc_mode not in (0, 1, 2, 3):
            raise ValueError(f"WebRTC VAD mode must be 0..3, got {config.webrtc_mode}")
        self.window_samples = SAMPLE_RATE_HZ * config.webrtc_frame_ms // 1000
        self._make = lambda: webrtcvad.Vad(config.webrtc_mode)
        self._vad = self._make()
        super().__init__(config)

    def _reset_model(self) -> None:
        self._vad = self._make()

    def _classify(self, windows: np.ndarray) -> np.ndarray:
        return np.array(
            [1.0 if self._vad.is_speech(float32_to_pcm16(w), SAMPLE_RATE_HZ) else 0.0 for w in windows],
            dtype=np.float32,
        )


def create_vad(config: VADConfig, model_path: str | Path | None = None) -> VAD:
    """The VAD named by `config.engine` ("silero" or "webrtc").

    Raises:
        ValueError: on an unknown engine name.
    """
    if config.engine == "silero":
        return SileroVAD(config, model_path)
    if config.engine == "webrtc":
        return WebRTCVAD(config)
    raise ValueError(f"unknown VAD engine {config.engine!r}; use 'silero' or 'webrtc'")
