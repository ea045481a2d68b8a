"""Choosing and loading a synthesiser from a TTSConfig (the one place that knows every engine)."""

from __future__ import annotations

from collections.abc import Callable

from headstart.config import ThreadPlan, TTSConfig
from headstart.tts.base import Synthesizer, has_speech_content, is_speakable


def piper_voices() -> tuple[str, ...]:
    """The Piper voice presets (headstart/models/, role "tts", prepared from files)."""
    from headstart.models.catalog import PRESETS

    return tuple(p.name for p in PRESETS.values() if p.role == "tts" and p.kind != "builtin")


def engines() -> tuple[str, ...]:
    """What `TTSConfig.engine` (`--tts`) may name, for messages."""
    return (*piper_voices(), "espeak", "hibari", "coqui", "<path to a Piper .onnx voice>")


def model_preset(config: TTSConfig) -> str | None:
    """The model preset `config.engine` needs prepared (a Piper voice), or None (no preset: espeak,
    hibari, coqui, a voice path). Call `check_engine` first."""
    return config.engine if config.engine in piper_voices() else None


def check_engine(config: TTSConfig) -> None:
    """Fail fast on a TTS choice that cannot load, before any model is loaded (a typo in `--tts` is
    reported at once, not after the ASR and LLM have loaded). Whether a Piper preset is prepared is
    `headstart.models.store.resolve_models`' question (`Components.load` asks it with the other models).

    Raises:
        ValueError: an unknown engine name (the message lists the TTS choices only); engine "coqui"
            without `coqui_model`.
        FileNotFoundError: a Piper `.onnx` voice path that does not exist.
    """
    engine = config.engine
    if engine in ("espeak", "espeak-ng", "hibari"):
        return
    if engine == "coqui":
        if not config.coqui_model:
            raise ValueError("engine 'coqui' needs a coqui-tts checkpoint: --coqui-model PATH "
                             "(TTSConfig.coqui_model)")
        return
    if engine.endswith(".onnx"):
        from pathlib import Path

        if not Path(engine).is_file():
            raise FileNotFoundError(f"no such Piper voice: {engine}")
        return
    if engine not in piper_voices():
        raise ValueError(f"unknown TTS engine {engine!r}: use one of {', '.join(engines())}")


def speakable_check(config: TTSConfig) -> Callable[[str], bool]:
    """What `config`'s voice can say, for `TTSStream(speakable=...)`: the English voices (hibari,
    the Piper presets, espeak with an "en" voice, coqui with language "en") say Latin letters and
    digits (`base.is_speakable`); another espeak voice or coqui language may say any script
    (`base.has_speech_content`). A Piper voice given as a path is taken for an English one."""
    if config.engine in ("espeak", "espeak-ng"):
        english = config.espeak_voice.lower().startswith("en")
    elif config.engine == "coqui":
        english = config.coqui_language.lower().startswith("en")
    else:
        english = True
    return is_speakable if english else has_speech_content


def load_synthesizer(config: TTSConfig, threads: ThreadPlan, *, warm_up: bool = True) -> Synthesizer:
    """Load the engine `config.engine` names, with `threads.tts_threads` compute threads.

    `config.engine` is "espeak" (system espeak-ng, no model), "hibari" (hibari-tts, voice
    `config.hibari_voice`), "coqui" (a coqui-tts checkpoint at `config.coqui_model`, run in the coqui
    venv built by `make coqui-env`), a Piper preset name ("piper-joe", resolved with
    `headstart.models.store.resolve_model`), or a path to a Piper `.onnx` voice. Loading is explicit and
    never downloads; with `warm_up`, one short sentence is synthesised before returning.

    Raises:
        headstart.models.store.ModelNotPreparedError: the preset is not prepared (the message names the
            prepare command).
        FileNotFoundError: a voice or checkpoint path that does not exist.
        EngineNotAvailableError: the engine is not installed (for coqui: the message names
            `make coqui-env`).
        TTSError: a model that does not load; a hibari voice that would need a download.
        ValueError: an unknown engine name; engine "coqui" without `coqui_model`.
    """
    check_engine(config)
    engine = config.engine
    synth: Synthesizer
    if engine in ("espeak", "espeak-ng"):
        from headstart.tts.espeak import EspeakSynthesizer

        synth = EspeakSynthesizer(voice=config.espeak_voice)
    elif engine == "hibari":
        from headstart.tts.hibari import HibariSynthesizer

        synth = HibariSynthesizer(voice=config.hibari_voice, threads=threads.tts_threads)
    elif engine == "coqui":
        from headstart.tts.coqui import CoquiSynthesizer

        synth = CoquiSynthesizer(
            config.coqui_model,
            config.coqui_config,
            python=config.coqui_python,
            threads=threads.tts_threads,
            speaker=config.coqui_speaker,
            speaker_wav=config.coqui_speaker_wav,
            language=config.coqui_language,
        )
    elif engine in piper_voices() or engine.endswith(".onnx"):
        from headstart.tts.piper import PiperSynthesizer

        if engine.endswith(".onnx"):
            model_path = engine
        else:
            from headstart.models.store import resolve_model

            model_path = resolve_model(engine)
        synth = PiperSynthesizer(model_path, threads=threads.tts_threads, length_scale=config.length_scale)
    else:
        raise ValueError(f"unknown TTS engine {engine!r}: use one of {', '.join(engines())}")
    if warm_up:
        synth.warm_up()
    return synth
