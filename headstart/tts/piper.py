"""Piper (piper-tts, VITS voices exported to ONNX) run by onnxruntime with an explicit thread count."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from headstart.tts.base import EngineNotAvailableError, TTSError, fade_edges, has_speech_content


# Longer than a typical reply chunk, so the first real chunk's tensors fit the warmed-up arena.
WARM_UP_TEXT = "Hello there, this is a longer warm up sentence that covers more sounds than a greeting does."


class PiperSynthesizer:
    """A Piper voice loaded explicitly from a `.onnx` file and its `.onnx.json` config.

    `piper.PiperVoice.load` builds its onnxruntime session with default `SessionOptions` (all cores),
    so this builds the `InferenceSession` itself with `intra_op_num_threads=threads`,
    `inter_op_num_threads=1`, sequential execution, and passes it to the `PiperVoice` dataclass.
    Graph optimisation stays at onnxruntime's default ORT_ENABLE_ALL (the others were no faster).
    Piper runs the whole VITS graph once per sentence (phonemisation is a small part, the ONNX run the
    rest), so the time to first audio of a chunk grows with its length; docs/speaking.md has the
    measurements.

    Args:
        model_path: the voice's `.onnx` file (e.g. `resolve_model("piper-joe")`).
        config_path: its JSON config; default: `model_path` + ".json".
        threads: onnxruntime intra-op threads (ThreadPlan.tts_threads).
        length_scale: phoneme duration scale (< 1 speaks faster); None: the voice's default.

    Raises:
        FileNotFoundError: the model or its config is missing (the message names both paths).
        TTSError: the files exist but are not a loadable Piper voice.
        EngineNotAvailableError: piper-tts is not installed.
        ValueError: threads < 1.
    """

    def __init__(
        self,
        model_path: str | Path,
        config_path: str | Path | None = None,
        threads: int = 1,
        length_scale: float | None = None,
    ) -> None:
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        model_path = Path(model_path).expanduser()
        config_path = Path(config_path) if config_path is not None else Path(f"{model_path}.json")
        if not model_path.is_file():
            raise FileNotFoundError(
                f"Piper voice not found: {model_path} (pass a .onnx voice file, or prepare the preset "
                "with `headstart models prepare piper-joe`)"
            )
        if not config_path.is_file():
            raise FileNotFoundError(f"Piper voice config not found: {config_path} (expected next to {model_path.name})")
        try:
            import onnxruntime
            from piper import PiperVoice, SynthesisConfig
            from piper.config import PiperConfig
        except ImportError as exc:
            raise EngineNotAvailableError(f"piper-tts is not installed: pip install piper-tts ({exc})") from exc

        try:
            config = PiperConfig.from_dict(json.loads(config_path.read_text(encoding="utf-8")))
        except (ValueError, KeyError, TypeError) as exc:
            raise TTSError(f"{config_path} is not a Piper voice config: {exc}") from exc
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        try:
            session = onnxruntime.InferenceSession(
                str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own Fail/InvalidProtobuf types
            raise TTSError(f"{model_path} is not a loadable ONNX voice: {exc}") from exc
        self._voice = PiperVoice(session=session, config=config)
        self._syn_config = SynthesisConfig(length_scale=length_scale)
        self.sample_rate = int(config.sample_rate)
        self.name = f"piper:{model_path.stem}"
        self.threads = threads

    def synthesize(self, text: str) -> Iterator[np.ndarray]:
        """Yield float32 mono audio at `sample_rate`, one array per sentence Piper finds in `text`.
        Empty or punctuation-only text yields nothing."""
        if not has_speech_content(text):
            return
        for chunk in self._voice.synthesize(text, syn_config=self._syn_config):
            audio = np.asarray(chunk.audio_float_array, dtype=np.float32).reshape(-1)
            if audio.size:
                yield fade_edges(audio, self.sample_rate)

    def warm_up(self) -> None:
        """Synthesise one sentence of ~4 s (first-run costs: espeak-ng phonemiser data, ONNX kernels,
        the memory arena's growth): a shorter warm-up left the first longer chunk slower than later
        ones (docs/speaking.md)."""
        for _ in self.synthesize(WARM_UP_TEXT):
            pass
