"""One end-of-utterance (EOU) service per session: the probability that the user's turn is complete
after a text, estimated once per text and utterance, for everyone who asks.

    plan = resolve_eou(components, config)          # once per process and config (Components.eou_plan)
    eou = EOUService(plan, llm, llm_executor, priority, messages=..., can_compute=..., ...)
    eou.subscribe(head_start.eou)                    # every estimate of this utterance, as it lands
    p = await eou.score(text)                        # the listener's endpointer asks (its scorer)
    eou.speech_ended(latest_partial)                 # the VAD heard the user stop: estimate it now
    eou.final(text)                                  # queue the final's estimate before held work
    eou.new_utterance()                              # speech (re)started or the turn ended: stale

Who uses it: the listener's endpointer (through `score`, the listener's `eou_scorer`: the silence it
needs adapts to the probability) and the head start (subscribed: a held reply starts on a high one).
`score(text)`, `speech_ended` and `final` share one estimate per text (whitespace aside) within an
utterance: the final that repeats the last partial costs nothing.

The model (`EOUPlan.model`, from `Components.eou_model`: the chat LLM's end-of-turn token,
headstart/llm/eou.py, or a trained head, llm/eou_head.py) runs on the llm executor on the engine's KV
cache (the prefix the incremental prefill holds is reused), only while `can_compute()` (the user is
silent and no reply is in progress: the llm thread is the reply's), and gives way to confirmed replies
(`LLMPriority.confirmed_pending`): a job that finds one waiting when the llm thread gets to it, or whose
utterance moved on (`new_utterance`), computes nothing and returns None (unknown).

The thresholds the probabilities are read on are resolved once into the frozen `EOUPlan` (the trained
head's own calibration, or the token scale where this LLM has no head), never rewritten at run time.
The acoustic end-of-turn model (`EndpointConfig.acoustic_model`, voice/smart_turn.py) scores audio,
not text: `score_acoustic` runs it on its own thread, and the listener's endpointer fuses it with this
service's text probability (voice/turn_fusion.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol, cast

import numpy as np

from headstart.config import EndpointConfig, PipelineConfig
from headstart.seams import (
    AcousticEOUModel,
    EOUModel,
    EOUScorer,
    PromptRenderer,
    ReplyPrefillEOUModel,
)
from headstart.session.llm_lane import LLMPriority
from headstart.timeline import EOUCounters, TurnTimeline

if TYPE_CHECKING:
    from headstart.llm.engine import LLMEngine

__all__ = ["EOUModels", "EOUPlan", "EOUScorer", "EOUService", "EOUStats", "fuses_reply_prefill", "resolve_eou"]


class EOUModels(Protocol):
    """Where the EOU models come from (session/components.py `Components.eou_model`)."""

    def eou_model(self, kind: str) -> EOUModel | None: ...


@dataclass(frozen=True, slots=True)
class EOUPlan:
    """The EOU signal a session uses, resolved once.

    Attributes:
        model: the EOU model (`probability(messages, text) -> float` in [0, 1], called on the llm
            executor only), or None: no EOU signal.
        kind: "head" or "token" (the model's scale), None without a model.
        endpoint: the EndpointConfig whose `eou_scorer` and thresholds read this model's probabilities
            (the listener's endpointer and the head start's threshold use it).
    """

    model: EOUModel | None
    kind: str | None
    endpoint: EndpointConfig


def resolve_eou(components: EOUModels, config: PipelineConfig) -> EOUPlan:
    """The EOU plan `config.session.eou` asks for. "auto" takes `config.endpoint.eou_scorer` and falls
    back from "head" to "token" when this LLM has no trained head (the endpointer then uses the token
    thresholds, so a probability is never read on the wrong scale); "llm" is "token"; "none", or no
    model of that kind (`Components.eou_model`: e.g. a remote engine), gives none. A trained head that
    carries calibrated thresholds sets `eou_low`/`eou_high` unless `EndpointConfig.head_thresholds` is
    "config".

    Raises:
        ValueError: an unknown `SessionConfig.eou` (from `Components.eou_model`).
    """
    endpoint, kind = config.endpoint, config.session.eou
    if kind == "none":
        return EOUPlan(None, None, endpoint)
    kinds = {"auto": [endpoint.eou_scorer] + (["token"] if endpoint.eou_scorer == "head" else []),
             "llm": ["token"]}.get(kind, [kind])
    for candidate in kinds:
        model = components.eou_model(candidate)
        if model is None:
            continue
        endpoint = replace(endpoint, eou_scorer=candidate)
        trained = getattr(getattr(model, "weights", None), "thresholds", None)
        if candidate == "head" and endpoint.head_thresholds == "trained" and trained is not None:
            # the head's own calibration (docs/server.md "The EOU signal is wired")
            endpoint = replace(endpoint, eou_low=float(trained[0]), eou_high=float(trained[1]))
        return EOUPlan(model, candidate, endpoint)
    return EOUPlan(None, None, endpoint)


def fuses_reply_prefill(model: EOUModel | None, engine: LLMEngine | None) -> bool:
    """Whether `model` (an EOU model) can prefill the reply prompt in its own forward on `engine`'s
    cache (`Components.local_engine`, None for a remote backend): the trained head on that engine
    (llm/eou_head.py `EOUHead.features`)."""
    from headstart.llm.eou_head import EOUHead

    return engine is not None and isinstance(model, EOUHead) and model.engine is engine


@dataclass(slots=True)
class EOUStats:
    """Counters over a session: estimates `computed` (and their `compute_s`, seconds on the llm
    thread), and `skipped` (not run: the user speaking, a reply in progress, stale, or giving way to a
    confirmed reply)."""

    computed: int = 0
    skipped: int = 0
    compute_s: float = 0.0


@dataclass(eq=False)
class EOUService:
    """The session's EOU estimates (see the module docstring).

    Args:
        plan: the resolved `EOUPlan` (None: no model).
        llm: what renders the reply prompt (the local engine, `Components.local_engine`) where the
            estimate's forward prefills it too (`fuse_reply_prefill`); None otherwise.
        llm_executor: the single llm thread the model runs on.
        priority: `Components.llm_priority` (jobs give way to confirmed replies).
        messages: `() -> chat so far` (the context the text is the user's next message in).
        can_compute: `() -> bool`, whether an estimate may run now (the user is silent, no reply).
        scorer: an `async (text) -> probability or None` used instead of the plan's model (tests, other
            backends); None: the plan's model. `speech_ended` and `final` use only the plan's model.
        on_failure: called with the exception when an estimate fails, at most once per utterance (the
            estimate then counts as unknown; the listener goes on).
        applies: whether anyone reads the estimates outside the listener (the endpointer is semantic or
            the head start may preempt); False makes `speech_ended` and `final` do nothing.
        fuse_reply_prefill: the estimate's forward prefills the reply prompt too (`fuses_reply_prefill`
            and the head start on): the plan's model is then a `ReplyPrefillEOUModel` and `llm` is set.
        acoustic: the acoustic end-of-turn model (`Components.acoustic_eou`: `completion_probability(
            samples float32 16 kHz (n,)) -> float`), or None: the fusion is off.
        acoustic_executor: its own thread (it scores a pause while the ASR runs the final pass).
    """

    plan: EOUPlan | None
    llm: PromptRenderer | None
    llm_executor: Executor | None
    priority: LLMPriority
    messages: Callable[[], list[dict[str, str]]]
    can_compute: Callable[[], bool] = lambda: True
    scorer: EOUScorer | None = None
    on_failure: Callable[[Exception], None] = lambda exc: None
    applies: bool = True
    fuse_reply_prefill: bool = False
    acoustic: AcousticEOUModel | None = None
    acoustic_executor: Executor | None = None
    stats: EOUStats = field(default_factory=EOUStats)
    epoch: int = 0  # bumped per utterance (`new_utterance`): queued estimates go stale
    _cache: dict[str, asyncio.Future] = field(default_factory=dict)
    _subscribers: list[Callable[[str, float | None], None]] = field(default_factory=list)
    _failure_epoch: int = -1

    @property
    def model(self) -> EOUModel | None:
        return self.plan.model if self.plan is not None else None

    @property
    def enabled(self) -> bool:
        """Whether there is an EOU signal at all (a model or a scorer)."""
        return self.scorer is not None or self.model is not None

    @property
    def acoustic_enabled(self) -> bool:
        return self.acoustic is not None

    @property
    def listener_scorers(self) -> tuple:
        """`(eou_scorer, acoustic_scorer)` as a listener takes them: `score`, `score_acoustic`, or None
        for a signal this service does not give."""
        return (self.score if self.enabled else None, self.score_acoustic if self.acoustic_enabled else None)

    async def score_acoustic(self, samples: np.ndarray) -> float | None:
        """The acoustic model's P(complete) of the turn's audio, float32 16 kHz (num_samples,) (the
        listener's `acoustic_scorer`). RuntimeError without an acoustic model (`acoustic_enabled`)."""
        if self.acoustic is None:
            raise RuntimeError("this session has no acoustic end-of-turn model")
        return await asyncio.get_running_loop().run_in_executor(
            self.acoustic_executor, self.acoustic.completion_probability, samples)

    @property
    def estimates(self) -> dict[str, asyncio.Future]:
        """This utterance's estimates by text (whitespace-normalised), a copy."""
        return dict(self._cache)

    async def settle(self) -> None:
        """Wait for this utterance's estimates (and their subscribers' callbacks) to land."""
        for future in list(self._cache.values()):
            await future
        await asyncio.sleep(0)

    def subscribe(self, callback: Callable[[str, float | None], None]) -> None:
        """`callback(text, probability)` for every estimate of the current utterance, as it lands:
        those the listener asks for (`score`) and the speech end's (`speech_ended`)."""
        self._subscribers.append(callback)

    def new_utterance(self) -> None:
        """Speech (re)started, the turn ended or was cleared: estimates queued so far are stale (they
        compute nothing), and later ones are made afresh."""
        self.epoch += 1
        self._cache.clear()

    async def score(self, text: str) -> float | None:
        """The EOU probability of `text` (None: unknown) for the listener's endpointer; subscribers get
        it too. A failing estimate is reported once per utterance (`on_failure`) and counts as None."""
        try:
            probability = await (self.scorer(text) if self.scorer is not None else self._model_score(text))
        except Exception as exc:  # noqa: BLE001 - reported once per utterance; the endpointer waits its silence
            if self._failure_epoch != self.epoch:
                self._failure_epoch = self.epoch
                self.on_failure(exc)
            return None
        self._publish(text, probability)
        return probability

    def speech_ended(self, text: str) -> None:
        """The user went silent: estimate `text` (the latest partial) now, for the subscribers only (the
        endpointer waits for the final's own score, which is this one when the texts agree: estimates
        are shared by text; a partial heard before the speech end could end a turn mid-sentence)."""
        if not self._model_applies() or not text.strip():
            return
        future, epoch = self.estimate(text), self.epoch

        def done(f: asyncio.Future) -> None:
            if f.cancelled() or f.exception() is not None or epoch != self.epoch:
                return
            self._publish(text, f.result())

        future.add_done_callback(done)

    def final(self, text: str) -> None:
        """The final transcript: its estimate goes on the llm thread now, before any held reply on it
        (the listener asks for the same text and gets this estimate)."""
        if self._model_applies():
            self.estimate(text)

    def estimate(self, text: str) -> asyncio.Future:
        """The estimate of `text` in this utterance: submitted to the llm thread now (so it runs before
        speculative work submitted after it), shared by everyone who asks for the same text.
        RuntimeError without a model (the plan has none)."""
        key = "".join(text.split())  # as the head start compares texts (preemption.same_text)
        future = self._cache.get(key)
        if future is not None:
            return future
        model, llm, priority, stats = self.model, self.llm, self.priority, self.stats
        if model is None:
            raise RuntimeError("this session's EOU plan has no model to estimate with")
        messages, epoch, fuse = self.messages(), self.epoch, self.fuse_reply_prefill

        def job() -> float | None:
            if epoch != self.epoch or priority.confirmed_pending:
                stats.skipped += 1
                return None  # stale, or confirmed work waits behind this job: give way
            started = time.perf_counter()
            if fuse and llm is not None:  # a reply to this text may follow at once: the forward prefills its prompt too
                reply_ids = llm.render_prompt([*messages, {"role": "user", "content": text}])
                # `fuse_reply_prefill` is only set for such a model (`fuses_reply_prefill`)
                probability = float(cast(ReplyPrefillEOUModel, model).probability(messages, text, reply_ids))
            else:
                probability = float(model.probability(messages, text))
            stats.computed += 1
            stats.compute_s += time.perf_counter() - started
            return probability

        future = asyncio.get_running_loop().run_in_executor(self.llm_executor, job)
        self._cache[key] = future
        return future

    def record(self, turn: TurnTimeline) -> None:
        """The session's counters so far into `turn.eou`."""
        turn.eou = EOUCounters(computed=self.stats.computed, skipped=self.stats.skipped,
                               compute_s=round(self.stats.compute_s, 4))

    # -- internals ------------------------------------------------------------------------------------
    def _model_applies(self) -> bool:
        return self.model is not None and self.scorer is None and self.applies

    async def _model_score(self, text: str) -> float | None:
        """The plan's model, only while `can_compute()` and for a non-empty text (else None, skipped)."""
        if self.model is None:
            return None
        if not self.can_compute() or not text.strip():
            self.stats.skipped += 1
            return None
        return await asyncio.shield(self.estimate(text))

    def _publish(self, text: str, probability: float | None) -> None:
        for callback in list(self._subscribers):
            callback(text, probability)
