"""The real models and recordings the tests use, or a skip that says how to get them.

`make test` prepares every model the tests load (`make models-test`), so there none of these skips; on
a machine without a model a test skips with `ModelNotPreparedError`'s message, which names the
`headstart models prepare NAME` command. One copy of that rule for every test file.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np
import pytest

from headstart.config import ASRConfig, LLMConfig, ThreadPlan

T = TypeVar("T")

SPEECH_DIR = Path(__file__).resolve().parents[1] / "headstart" / "corpus" / "speech"


def prepared(load: Callable[[], T]) -> T:
    """`load()`, or skip the test when a model it needs is not prepared (the message says how)."""
    from headstart.models.store import ModelNotPreparedError

    try:
        return load()
    except ModelNotPreparedError as exc:
        pytest.skip(str(exc))


def model_path(name: str) -> Path:
    """The local folder of model preset `name` (`headstart.models.store.resolve_model`)."""
    from headstart.models.store import resolve_model

    return prepared(lambda: resolve_model(name))


def llm_engine(config: LLMConfig, threads: ThreadPlan | None = None):
    """An `LLMEngine` loaded from `config` (`LLMEngine.from_config`)."""
    from headstart.llm.engine import LLMEngine

    return prepared(lambda: LLMEngine.from_config(config, threads or ThreadPlan()))


def whisper(config: ASRConfig | None = None, cpu_threads: int = 1):
    """A `WhisperASR` loaded from `config`'s settings with whisper-tiny.en in place of the default
    model (Moonshine's) when `config` names that; other models (a whisper preset or folder) as given."""
    import dataclasses

    from headstart.voice.asr import WhisperASR

    config = config or ASRConfig()
    if config.model == ASRConfig().model:
        config = dataclasses.replace(config, model="whisper-tiny.en")
    return prepared(lambda: WhisperASR.load(config, cpu_threads=cpu_threads))


def speech(name: str) -> np.ndarray:
    """A bench recording under headstart/corpus/speech/ (`name`: its relative path), float32 at
    16 kHz; skips when the file is missing."""
    from headstart.audio import read_wav

    path = SPEECH_DIR / name
    if not path.is_file():
        pytest.skip(f"speech recording not found: {path}")
    return read_wav(path)


def cpu_has_vnni() -> bool:
    """The CPU has VNNI (AVX512-VNNI or AVX-VNNI): onnxruntime's int8 MatMul then multiplies exactly. On
    AVX2 without it, the u8 x s8 kernel's pairwise sums saturate at int16 (pmaddubsw), so int8 models
    compute measurably different numbers (onnxruntime's quantization docs name this saturation)."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return True
    return "avx512_vnni" in flags or "avx_vnni" in flags
