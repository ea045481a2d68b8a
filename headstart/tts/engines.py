"""Choosing and loading a synthesiser from a TTSConfig (the one place that knows every engine)."""

from __future__ import annotations

from headstart.config import ThreadPlan, TTSConfig
from headstart.tts.base import Synthesizer

ENGINES = ("piper-joe", "espeak", "<path to a Piper .onnx voice>")


def load_synthesizer(config: TTSConfig, threads: ThreadPlan, *, warm_up: bool = True) -> Synthesizer:
    """Load the engine `config.engine` names, with `threads.tts_threads` compute threads.

    `config.engine` is "espeak" (system espeak-ng, no model), a Piper preset name ("piper-joe",
    resolved with `headstart.models.resolve_model`), or a path to a Piper `.onnx` voice. Loading is
    explicit and never downloads; with `warm_up`, one short sentence is synthesised before returning.

    Raises:
        headstart.models.ModelNotPreparedError: the preset is not prepared (the message names the
            prepare command).
        FileNotFoundError: a voice path that does not exist.
        EngineNotAvailableError: the engine is not installed.
        ValueError: an unknown engine name.
    """
    engine = config.engine
    synth: Synthesizer
    if engine in ("espeak", "espeak-ng"):
        from headstart.tts.espeak import EspeakSynthesizer

        synth = EspeakSynthesizer(voice=config.espeak_voice)
    elif engine.startswith("piper") or engine.endswith(".onnx"):
        from headstart.tts.piper import PiperSynthesizer

        if engine.endswith(".onnx"):
            model_path = engine
        else:
            from headstart.models import resolve_model

            model_path = resolve_model(engine)
        synth = PiperSynthesizer(model_path, threads=threads.tts_threads, length_scale=config.length_scale)
    else:
        raise ValueError(f"unknown TTS engine {engine!r}: use one of {', '.join(ENGINES)}")
    if warm_up:
        synth.warm_up()
    return synth
