"""The models and executors one process loads once and shares between sessions."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from headstart.config import LLMConfig, PipelineConfig, ThreadPlan
from headstart.llm.local import LocalLLM
from headstart.session.llm_lane import LLMPriority
from headstart.seams import AcousticEOUModel, EOUModel, LLMBackend, Synthesizer, Transcriber

if TYPE_CHECKING:
    from headstart.llm.engine import LLMEngine
    from headstart.llm.exactness import ExactnessReport
    from headstart.llm.speculative import Decoder
    from headstart.session.eou import EOUPlan


@dataclass
class Components:
    """The models and executors one process loads once and shares between sessions.

    Each model runs on its own single-thread executor, so each is used by one thread at a time. The
    three stages are the typed seams of headstart/seams.py: `asr` a `Transcriber`, `llm` an
    `LLMBackend` (a `LocalLLM`: the in-process `LLMEngine` and its speculative decoder, or a
    `RemoteLLM`), `tts` a `Synthesizer`.
    """

    config: PipelineConfig
    asr: Transcriber
    llm: LLMBackend
    tts: Synthesizer
    asr_executor: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=1, thread_name_prefix="asr")
    )
    llm_executor: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=1, thread_name_prefix="llm")
    )
    tts_executor: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=1, thread_name_prefix="tts")
    )
    # the acoustic end-of-turn model (`EndpointConfig.acoustic_model`, headstart/voice/smart_turn.py) and
    # its own thread (it scores a pause while the ASR runs the final pass); None: the fusion is off
    acoustic_eou: AcousticEOUModel | None = None
    acoustic_executor: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=1, thread_name_prefix="turn")
    )
    # the local LLM's exactness self-test at load (llm/exactness.py), None for a remote engine;
    # speculative decoding is off where it failed (`speculative_off_reason` says why)
    llm_exactness: ExactnessReport | None = None
    speculative_off_reason: str | None = None
    # LLM priority across sessions (headstart/session/llm_lane.py): confirmed replies first on the llm thread;
    # EOU estimates queued before them give way, and held replies of other sessions subscribe to it
    llm_priority: LLMPriority = field(default_factory=LLMPriority)
    _eou_models: dict[str, EOUModel | None] = field(default_factory=dict, repr=False)
    _eou_plans: dict[tuple, EOUPlan] = field(default_factory=dict, repr=False)
    _eou_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def local_engine(self) -> LLMEngine | None:
        """The in-process engine under `llm` (a `LocalLLM`), or None for another backend (a remote one):
        what needs the engine's KV cache itself (the EOU models) asks here."""
        return self.llm.engine if isinstance(self.llm, LocalLLM) else None

    def eou_model(self, kind: str) -> EOUModel | None:
        """The end-of-utterance model `SessionConfig.eou` names, made once per process, or None where
        it does not apply (kind "none", an LLM backend without a local KV cache, no trained head).

        It has `probability(messages_before, text) -> float` in [0, 1] (the user's turn is complete
        after `text`), synchronous: call it on `llm_executor` only, since it uses the chat engine's
        KV cache (the prefix the session's incremental prefill holds is reused).
        "token" (alias "llm"): headstart/llm/eou.py (the chat model's end-of-turn token); "head": the
        trained head for this model (headstart/llm/eou_head.py, `EOUHead.load`), None when it has none.

        Raises:
            ValueError: an unknown kind.
        """
        kind = "token" if kind == "llm" else kind
        if kind not in ("token", "head", "none"):
            raise ValueError(f"unknown EOU model {kind!r}: expected 'head', 'token' ('llm') or 'none'")
        with self._eou_lock:
            if kind not in self._eou_models:
                self._eou_models[kind] = _make_eou_model(kind, self.local_engine, self.config.llm.model)
            return self._eou_models[kind]

    def eou_plan(self, config: PipelineConfig | None = None) -> EOUPlan:
        """The EOU signal sessions on `config` (default: this one) use, resolved once into a frozen
        `headstart.session.eou.EOUPlan` (model, and the thresholds its probabilities are read on);
        `load` resolves it for its config. Raises ValueError for an unknown `SessionConfig.eou`."""
        from headstart.session.eou import resolve_eou

        config = config or self.config
        key = (config.session.eou, config.endpoint)
        plan = self._eou_plans.get(key)
        if plan is None:
            plan = self._eou_plans[key] = resolve_eou(self, config)
        return plan

    @classmethod
    def load(cls, config: PipelineConfig, log: Callable[[str], None] = lambda _: None) -> Components:
        """Load and warm up the ASR, LLM and TTS models named in `config`. Never downloads.

        Raises:
            headstart.models.store.ModelNotPreparedError: models are not prepared (the message names every
                missing one and the one prepare command), before anything loads.
            headstart.models.store.ModelError: an unknown model name (the message lists that role's presets).
            ValueError, FileNotFoundError: a TTS engine that cannot load (`check_engine`), or an LLM
                dtype and quantisation that cannot run on this machine (`resolve_precision`), before
                anything loads.
        """
        from headstart.llm.engine import LLMEngine
        from headstart.models.store import resolve_models
        from headstart.tts.engines import check_engine, load_synthesizer, model_preset
        from headstart.voice.asr_engines import check_asr_folder, load_asr

        from headstart.llm.remote_config import is_remote_llm

        check_engine(config.tts)  # a bad --tts fails before minutes of model loading
        threads = config.threads
        remote = is_remote_llm(config.llm.model)  # `--llm openai://HOST:PORT/MODEL`: an existing serving engine
        if not remote:  # so does a dtype / quantisation that cannot run here (the message names the flag)
            from headstart.llm.precision import resolve_precision

            resolve_precision(config.llm.dtype, config.llm.quantize, config.llm.device)
        # every model the config names, checked before any loads: one error names all that are missing
        wanted = [("asr", config.asr.model), *([] if remote else [("llm", config.llm.model)])]
        if config.endpoint.acoustic_model:
            wanted.append(("eou", config.endpoint.acoustic_model))
        tts_preset = model_preset(config.tts)
        if tts_preset:
            wanted.append(("tts", tts_preset))
        if not remote and config.llm.speculative == "draft_model" and config.llm.draft_model:
            wanted.append(("llm", config.llm.draft_model))
        paths = dict(zip(wanted, resolve_models(wanted)))
        asr_path = paths[wanted[0]]
        check_asr_folder(asr_path)  # a wrong --asr folder is named before anything loads
        llm_path = None if remote else paths[wanted[1]]
        acoustic_model = config.endpoint.acoustic_model
        acoustic_path = paths.get(("eou", acoustic_model)) if acoustic_model else None  # in `wanted` only if set
        log(f"loading ASR {config.asr.model}")
        asr = load_asr(config.asr, threads.asr_threads, asr_path)  # Whisper or Moonshine, by the folder
        asr.warmup()
        exactness, speculative_off = None, None
        llm: LLMBackend
        if remote:
            llm = _connect_remote_llm(config.llm.model, log)
        else:
            log(f"loading LLM {config.llm.model}")
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()  # our own "loading ..." lines say what happens
            assert llm_path is not None  # resolved above whenever the LLM is local
            engine = LLMEngine.load(llm_path, config.llm, threads)
            if engine.precision_note:
                log(f"LLM precision: {engine.precision_note}")
            engine.warm_up()
            decoder, exactness, speculative_off = choose_decoder(engine, config.llm, threads, log)
            llm = LocalLLM(engine, decoder)
        log(f"loading TTS {config.tts.engine}")
        tts = load_synthesizer(config.tts, threads)
        acoustic = None
        if acoustic_path is not None:
            import numpy as np

            from headstart.voice.smart_turn import SmartTurn

            log(f"loading end-of-turn model {config.endpoint.acoustic_model}")
            acoustic = SmartTurn(acoustic_path, threads=1)
            acoustic.completion_probability(np.zeros(16000, np.float32))  # the first call pays set-up costs
        components = cls(config=config, asr=asr, llm=llm, tts=tts, llm_exactness=exactness,
                         speculative_off_reason=speculative_off, acoustic_eou=acoustic)
        components.eou_plan()  # the EOU model and its thresholds, once, before any session
        if config.session.tools:
            from headstart.tools.toolbox import warm_up

            log("loading the tools' templates")
            warm_up()  # else the first request would load them on the event loop, stalling every session
        return components

    def llm_info(self) -> dict:
        """What the session reports of its LLM (`session.started`'s "llm"): model, precision
        ("float32+int8", "bfloat16", ... or "remote"), whether the exactness self-test passed, and the
        speculative decoder in use ("none" when off, with "speculative_off" saying why)."""
        from headstart.llm.remote_config import is_remote_llm

        info: dict = {"model": self.config.llm.model}
        llm = self.llm
        if self.llm_exactness is None or not isinstance(llm, LocalLLM):  # remote, or not loaded by `load`
            info["precision"] = "remote" if is_remote_llm(self.config.llm.model) else "unchecked"
            return info
        info["precision"] = precision_label(llm.engine)
        info["exact"] = bool(self.llm_exactness.exact)
        info["speculative"] = self.config.llm.speculative if llm.decoder is not None else "none"
        if self.speculative_off_reason:
            info["speculative_off"] = self.speculative_off_reason
        return info

    def close(self) -> None:
        for executor in (self.asr_executor, self.llm_executor, self.tts_executor, self.acoustic_executor):
            executor.shutdown(wait=False, cancel_futures=True)


def choose_decoder(engine: LLMEngine, config: LLMConfig, threads: ThreadPlan,
                   log: Callable[[str], None] = lambda _: None) -> tuple[Decoder | None, ExactnessReport, str | None]:
    """Run the exactness self-test on a loaded local `engine` (llm/exactness.py) and build the
    speculative decoder `config.speculative` asks for only where it passed: drafts would otherwise
    steer the reply away from plain greedy's tokens (prompt lookup's drafts are the user's own words).
    Returns (decoder or None, ExactnessReport, why speculative decoding is off or None). Raises what
    `build_decoder` raises (ValueError, ModelNotPreparedError for a drafter)."""
    from headstart.llm.exactness import check_exactness

    exactness = check_exactness(engine, k=max(1, config.speculate_k))
    log(f"LLM {precision_label(engine)}: {exactness.summary()}")
    if config.speculative == "none":
        return None, exactness, None
    if not exactness.exact:
        reason = f"speculative decoding off: {exactness.summary()}"
        log(reason)
        return None, exactness, reason
    from headstart.llm.speculative import build_decoder

    return build_decoder(engine, config, threads), exactness, None


def precision_label(engine: LLMEngine) -> str:
    """ "float32+int8", "bfloat16", ...: what a local LLMEngine runs in."""
    name = str(engine.dtype).removeprefix("torch.")
    return f"{name}+{engine.quantize}" if engine.quantize else name


def _connect_remote_llm(url: str, log: Callable[[str], None]) -> LLMBackend:
    """The remote LLM backend (headstart/llm/remote.py) for an `openai://...` address; the API key
    comes from $HEADSTART_OPENAI_API_KEY or $OPENAI_API_KEY. An engine that does not answer yet is
    only reported: sessions get an `error` event per failed reply until it does.

    Raises:
        ValueError: a malformed address.
    """
    import os

    from headstart.llm.remote import RemoteLLM
    from headstart.llm.remote_config import api_key_from_environ

    llm = RemoteLLM.from_url(url, api_key=api_key_from_environ(os.environ))
    log(f"LLM: remote engine {llm.endpoint.base_url} model {llm.endpoint.model!r}")
    llm.warm_up()
    problem = llm.check()
    if problem is not None:
        log(f"warning: the LLM engine does not answer yet: {problem}")
    return llm


def _make_eou_model(kind: str, engine: LLMEngine | None, model: str) -> EOUModel | None:
    # only a local engine (a chat template and a KV cache, headstart/llm/engine.py) can be asked
    if kind == "none" or engine is None:
        return None
    if kind == "head":
        try:
            from headstart.llm.eou_head import EOUHead

            return EOUHead.load(engine, model)
        except (ImportError, FileNotFoundError, ValueError):
            return None  # no head for this model: no EOU signal (punctuation rule, fixed silence)
    from headstart.llm.eou import EOUEstimator

    try:
        return EOUEstimator(engine)
    except ValueError:  # the chat template has no end-of-turn token after a user message
        return None
