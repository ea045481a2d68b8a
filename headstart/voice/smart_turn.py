"""Acoustic end of turn: Smart Turn v3.2, P(the speaker has finished) from the sound of the turn's end.

The text EOU head (headstart/llm/eou_head.py) reads *what* was said; this model hears *how* it ended
(falling pitch, a drawn-out last syllable, a breath before going on), which text cannot show. It is a
Whisper-tiny encoder with a classifier (8 M parameters, ONNX), the preset `smart-turn-v3.2` (shipped in
the PyPI wheel `pipecat-ai==1.14.0`, BSD-2-Clause; `headstart models prepare smart-turn-v3.2` takes the
one file out of the wheel, the framework is never installed or imported).

Input, as the model was trained: the last 8 s of the turn's 16 kHz mono audio, left-padded with zeros
to 128,000 samples, normalised to zero mean and unit variance, as Whisper log-mel features of shape
(1, 80, 800) (n_fft 400, hop 160, 80 mel bins: transformers' `WhisperFeatureExtractor` with an 8 s
chunk). Output `logits` of shape (1, 1) is already P(complete) (a sigmoid inside the graph).

Score the audio at the first short pause (~0.2 s of silence after the speech): after longer silence the
model calls almost everything complete (the listening issue's measurements; docs/listening.md), so it
is a signal for that moment, not a veto later on.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from headstart.audio import SAMPLE_RATE_HZ, AudioError

WINDOW_S = 8.0
WINDOW_SAMPLES = int(WINDOW_S * SAMPLE_RATE_HZ)  # 128,000
NUM_MEL_BINS = 80
NUM_FRAMES = 800  # WINDOW_SAMPLES / hop 160
PRESET = "smart-turn-v3.2"


class SmartTurn:
    """Smart Turn v3.2 on onnxruntime (CPU, `threads` intra-op threads, one inter-op thread).

    Args:
        model_path: the ONNX file (`resolve_model("smart-turn-v3.2")`).
        threads: onnxruntime intra-op threads (>= 1); one keeps it off the ASR's and LLM's cores.

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: threads < 1, or the file is not a model with the expected input (n, 80, 800).
    """

    def __init__(self, model_path: str | Path, threads: int = 1) -> None:
        import onnxruntime as ort
        from transformers import WhisperFeatureExtractor

        path = Path(model_path).expanduser()
        if not path.is_file():
            raise FileNotFoundError(
                f"no Smart Turn model at {path}; run `headstart models prepare {PRESET}` or pass the .onnx file"
            )
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        self._session = ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
        inputs = self._session.get_inputs()
        if len(inputs) != 1 or list(inputs[0].shape[1:]) != [NUM_MEL_BINS, NUM_FRAMES]:
            raise ValueError(f"{path} is not a Smart Turn model: inputs {[(i.name, i.shape) for i in inputs]}")
        self._input = inputs[0].name
        self._features = WhisperFeatureExtractor(chunk_length=int(WINDOW_S), feature_size=NUM_MEL_BINS)
        self.model_path = path

    @classmethod
    def load(cls, model: str = PRESET, threads: int = 1) -> SmartTurn:
        """Load a preset name or a path via the model catalogue (never downloads).

        Raises:
            headstart.models.store.ModelNotPreparedError: the preset is not prepared (the message names the command).
        """
        from headstart.models.store import resolve_model

        return cls(resolve_model(model), threads=threads)

    def features(self, samples: np.ndarray) -> np.ndarray:
        """The model's input for a turn's audio: float32 (1, 80, 800) log-mel of its last 8 s.

        Args:
            samples: float32 (or float64) mono audio at 16 kHz, shape (num_samples,), at least one sample.

        Raises:
            AudioError: not a 1-D float array, empty, or holding NaN/inf.
        """
        x = _check_samples(samples)[-WINDOW_SAMPLES:]
        if x.shape[0] < WINDOW_SAMPLES:
            x = np.concatenate([np.zeros(WINDOW_SAMPLES - x.shape[0], np.float32), x])
        # zero mean, unit variance over the padded window (as the model was trained); the epsilon keeps
        # digital silence finite
        x = (x - x.mean()) / np.sqrt(x.var() + 1e-7)
        out = self._features(
            x, sampling_rate=SAMPLE_RATE_HZ, return_tensors="np", padding="do_not_pad", do_normalize=False
        )["input_features"]
        return np.asarray(out, dtype=np.float32)[:, :, :NUM_FRAMES]

    def completion_probability(self, samples: np.ndarray) -> float:
        """P(the turn is complete) in [0, 1] for the turn's audio up to now (include the pause so far).
        Blocking, ~50 ms on one thread: run it off the event loop.

        Raises:
            AudioError: see `features`.
        """
        logits = self._session.run(None, {self._input: self.features(samples)})[0]
        probability = float(np.asarray(logits).reshape(-1)[0])
        if not 0.0 <= probability <= 1.0:  # the graph ends in a sigmoid; anything else is a wrong file
            raise ValueError(f"{self.model_path} gave {probability}, not a probability")
        return probability


def _check_samples(samples: np.ndarray) -> np.ndarray:
    if not isinstance(samples, np.ndarray) or samples.dtype.kind != "f" or samples.ndim != 1:
        raise AudioError(
            "Smart Turn expects float mono audio of shape (num_samples,) at 16 kHz, got "
            f"{type(samples).__name__} {getattr(samples, 'dtype', '')} {getattr(samples, 'shape', '')}"
        )
    if samples.shape[0] == 0:
        raise AudioError("Smart Turn needs at least one sample of audio")
    x = samples.astype(np.float32, copy=False)
    if not np.isfinite(x).all():
        raise AudioError("audio contains NaN or infinite samples")
    return x
