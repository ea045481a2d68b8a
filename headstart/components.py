"""The models and executors one process loads once and shares between sessions."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from headstart.config import PipelineConfig

@dataclass
class Components:
    """The models and executors one process loads once and shares between sessions.

    Each model runs on its own single-thread executor, so each is used by one thread at a time.
    """

    config: PipelineConfig
    asr: object
    llm: object
    tts: object
    asr_executor: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=1, thread_name_prefix="asr")
    )
    llm_executor: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=1, thread_name_prefix="llm")
    )
    tts_executor: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=1, thread_name_prefix="tts")
    )

    @classmethod
    def load(cls, config: PipelineConfig, log: Callable[[str], None] = lambda _: None) -> Components:
        """Load and warm up the ASR, LLM and TTS models named in `config`. Never downloads.

        Raises:
            headstart.models.ModelNotPreparedError: a model is not prepared (the message names the
                prepare command).
        """
        from headstart.llm.engine import LLMEngine
        from headstart.models import resolve_model
        from headstart.tts.engines import load_synthesizer
        from headstart.voice.asr import WhisperASR

        threads = config.threads
        asr_path = resolve_model(config.asr.model)
        llm_path = resolve_model(config.llm.model)
        log(f"loading ASR {config.asr.model}")
        asr = WhisperASR(asr_path, config.asr, cpu_threads=threads.asr_threads)
        asr.warmup()
        log(f"loading LLM {config.llm.model}")
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # our own "loading ..." lines say what happens
        llm = LLMEngine.load(llm_path, config.llm, threads)
        llm.warm_up()
        log(f"loading TTS {config.tts.engine}")
        tts = load_synthesizer(config.tts, threads)
        return cls(config=config, asr=asr, llm=llm, tts=tts)

    def close(self) -> None:
        for executor in (self.asr_executor, self.llm_executor, self.tts_executor):
            executor.shutdown(wait=False, cancel_futures=True)
