"""Which ASR engine a model is: `load_asr` picks it from the prepared model folder.

A folder with a CTranslate2 `model.bin` is Whisper (faster-whisper, headstart/voice/asr.py); one with
`encoder_model.onnx`, `decoder_model_merged.onnx` and `tokenizer.bin` is Moonshine
(headstart/voice/moonshine.py). Both give `transcribe(samples, offset_s, prompt=None) -> Transcription`
and `warmup()`, which is all the Listener needs.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from headstart.config import ASRConfig
    from headstart.voice.asr import WhisperASR
    from headstart.voice.moonshine import MoonshineASR


def load_asr(config: ASRConfig, cpu_threads: int, model_path: str | Path | None = None) -> WhisperASR | MoonshineASR:
    """Load the ASR engine for `config.model` (a preset name, folder or prepared hub id). Never downloads.

    Args:
        config: the ASR settings; `config.model` names the model.
        cpu_threads: the engine's intra-op threads (ThreadPlan.asr_threads).
        model_path: the already resolved folder of `config.model` (None: resolve it here).

    Raises:
        headstart.models.store.ModelNotPreparedError: a preset that is not prepared (names the command).
        FileNotFoundError: a folder that holds neither engine's files.
    """
    from headstart.voice.moonshine import MoonshineASR, is_moonshine_folder

    if model_path is None:
        from headstart.models.store import resolve_model

        model_path = resolve_model(config.model)
    if is_moonshine_folder(model_path):
        return MoonshineASR(model_path, config, cpu_threads)
    from headstart.voice.asr import WhisperASR

    return WhisperASR(model_path, config, cpu_threads)


def check_asr_folder(path: str | Path) -> None:
    """Whether a resolved ASR path is a folder one of the engines opens (a CTranslate2 Whisper folder with
    model.bin, or a prepared Moonshine folder), checked before any model loads.

    Raises:
        headstart.models.store.ModelError: it is neither (the message says what each engine needs).
    """
    from headstart.models.store import ModelError
    from headstart.voice.moonshine import is_moonshine_folder

    folder = Path(path)
    if not (folder / "model.bin").is_file() and not is_moonshine_folder(folder):
        raise ModelError(f"ASR {str(folder)!r} is not a model folder: give a CTranslate2 Whisper folder "
                         "(model.bin), a prepared Moonshine folder, a preset or a hub id")


def has_word_timestamps(asr: object) -> bool:
    """Whether the engine's word times come from the model (Whisper) rather than an estimate (Moonshine)."""
    from headstart.voice.moonshine import MoonshineASR

    return not isinstance(asr, MoonshineASR)
