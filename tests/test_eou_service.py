"""EOUService (headstart/session/eou.py) on a recording model and a real single-thread llm executor: one
estimate per text and utterance for every asker, stale and low-priority jobs give way, subscribers get
what lands, failures are reported once per utterance; EOUPlan is resolved once and frozen."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest

from headstart.session.components import Components
from headstart.config import EndpointConfig, PipelineConfig, SessionConfig
from headstart.session.eou import EOUPlan, EOUService, resolve_eou
from headstart.session.llm_lane import LLMPriority


class RecordingModel:
    def __init__(self, probability: float = 0.6) -> None:
        self.value = probability
        self.calls: list[tuple] = []
        self.threads: set[str] = set()

    def probability(self, messages, text: str, *reply_ids) -> float:
        self.calls.append((text, *reply_ids))
        self.threads.add(threading.current_thread().name)
        return self.value


class RenderingLLM:
    def render_prompt(self, messages):
        return [len(m["content"]) for m in messages]


def service(model=None, **kwargs) -> tuple[EOUService, ThreadPoolExecutor, list]:
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="llm")
    model = model if model is not None else RecordingModel()
    got: list = []
    eou = EOUService(EOUPlan(model, "head", EndpointConfig()), kwargs.pop("llm", None), executor,
                     kwargs.pop("priority", LLMPriority()), messages=lambda: [{"role": "system", "content": "s"}],
                     **kwargs)
    eou.subscribe(lambda text, p: got.append((text, p)))
    return eou, executor, got


def test_one_estimate_per_text_for_every_asker_and_subscribers_get_it():
    model = RecordingModel(0.6)
    eou, executor, got = service(model)

    async def main():
        eou.speech_ended("turn on the lights")  # the VAD heard the user stop: estimated now
        eou.final("turn on the  lights")  # the same text, whitespace aside: shared
        assert await eou.score("turn on the lights ") == 0.6
        # whisper's partial and final may join a word differently ("ill -disposed" / "ill-disposed"): as the
        # head start compares them, one estimate (a second would wait behind the held reply on the llm thread)
        eou.speech_ended("an ill -disposed man")
        assert await eou.score("an ill-disposed man") == 0.6
        await eou.settle()

    try:
        asyncio.run(main())
    finally:
        executor.shutdown()
    assert [c[0] for c in model.calls] == ["turn on the lights", "an ill -disposed man"]
    assert model.threads == {"llm_0"}  # on the llm thread only
    assert (eou.stats.computed, eou.stats.skipped) == (2, 0)
    # the speech end's estimate is published as it lands, then score()'s (the listener's ask)
    assert got[:2] == [("turn on the lights", 0.6), ("turn on the lights ", 0.6)]


def test_a_new_utterance_makes_queued_estimates_stale():
    model = RecordingModel()
    eou, executor, got = service(model)
    block = threading.Event()

    async def main():
        executor.submit(block.wait)  # the llm thread is busy
        eou.speech_ended("What time is it")
        (future,) = eou.estimates.values()
        eou.new_utterance()  # speech resumed before the llm thread got to the job
        assert eou.estimates == {}
        block.set()
        assert await future is None
        await asyncio.sleep(0)

    try:
        asyncio.run(main())
    finally:
        executor.shutdown()
    assert model.calls == [] and eou.stats.skipped == 1
    assert got == []  # a stale estimate reaches no subscriber


def test_a_confirmed_reply_waiting_makes_queued_estimates_give_way():
    model = RecordingModel()
    priority = LLMPriority()
    eou, executor, got = service(model, priority=priority)

    async def main():
        priority.confirm("another session", "r1")
        assert await eou.score("What time is it") is None
        priority.started("r1")
        eou.new_utterance()
        assert await eou.score("What time is it") == 0.6

    try:
        asyncio.run(main())
    finally:
        executor.shutdown()
    assert len(model.calls) == 1 and (eou.stats.computed, eou.stats.skipped) == (1, 1)


def test_nothing_runs_while_it_may_not_compute_or_without_text():
    model = RecordingModel()
    allowed = {"now": False}
    eou, executor, _ = service(model, can_compute=lambda: allowed["now"])

    async def main():
        assert await eou.score("turn on the") is None  # the user is speaking
        allowed["now"] = True
        assert await eou.score("   ") is None
        assert await eou.score("turn on the") == 0.6

    try:
        asyncio.run(main())
    finally:
        executor.shutdown()
    assert [c[0] for c in model.calls] == ["turn on the"] and eou.stats.skipped == 2


def test_a_failure_is_reported_once_per_utterance_and_counts_as_unknown():
    failures: list[str] = []

    async def failing(text):
        raise RuntimeError("context overflow")

    executor = ThreadPoolExecutor(max_workers=1)
    eou = EOUService(None, None, executor, LLMPriority(), messages=list, scorer=failing,
                     on_failure=lambda exc: failures.append(str(exc)))

    async def main():
        assert await eou.score("a") is None and await eou.score("a b") is None
        eou.new_utterance()
        assert await eou.score("a b c") is None

    try:
        asyncio.run(main())
    finally:
        executor.shutdown()
    assert failures == ["context overflow", "context overflow"]


def test_a_custom_scorer_serves_the_listener_only():
    model = RecordingModel()
    asked: list[str] = []

    async def scorer(text):
        asked.append(text)
        return 0.9

    eou, executor, got = service(model, scorer=scorer)

    async def main():
        eou.speech_ended("turn on the lights")
        eou.final("turn on the lights")
        assert eou.estimates == {}
        assert await eou.score("turn on the lights") == 0.9

    try:
        asyncio.run(main())
    finally:
        executor.shutdown()
    assert model.calls == [] and asked == ["turn on the lights"] and got == [("turn on the lights", 0.9)]
    assert eou.enabled
    off = EOUService(None, None, None, LLMPriority(), messages=list)
    assert not off.enabled and not off.acoustic_enabled


def test_nothing_is_estimated_where_nobody_reads_it():
    model = RecordingModel()
    eou, executor, _ = service(model, applies=False)  # fixed-silence endpointer, no preemption

    async def main():
        eou.speech_ended("turn on the lights")
        eou.final("turn on the lights")
        assert eou.estimates == {}

    try:
        asyncio.run(main())
    finally:
        executor.shutdown()
    assert model.calls == []


def test_the_fused_estimate_prefills_the_reply_prompt():
    model = RecordingModel()
    eou, executor, _ = service(model, llm=RenderingLLM(), fuse_reply_prefill=True)

    async def main():
        assert await eou.score("hello there") == 0.6

    try:
        asyncio.run(main())
    finally:
        executor.shutdown()
    # the reply prompt: the chat so far plus the user's text, rendered by the engine
    assert model.calls == [("hello there", [1, len("hello there")])]


def test_the_acoustic_model_runs_on_its_own_thread():
    import numpy as np

    class Acoustic:
        def completion_probability(self, samples):
            return 0.25 if threading.current_thread().name.startswith("turn") else -1.0

    acoustic_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="turn")
    eou = EOUService(None, None, None, LLMPriority(), messages=list, acoustic=Acoustic(),
                     acoustic_executor=acoustic_executor)
    try:
        assert eou.acoustic_enabled and not eou.enabled
        assert asyncio.run(eou.score_acoustic(np.zeros(16000, np.float32))) == 0.25
    finally:
        acoustic_executor.shutdown()


def test_the_plan_is_resolved_once_per_config_and_frozen(monkeypatch):
    made: list[str] = []
    head = RecordingModel()
    head.weights = type("W", (), {"thresholds": (0.805, 0.825)})()
    monkeypatch.setattr(Components, "eou_model",
                        lambda self, kind: made.append(kind) or (head if kind == "head" else None))
    components = Components(config=PipelineConfig(), asr=None, llm=None, tts=None)
    try:
        plan = components.eou_plan()
        assert plan is components.eou_plan() and made == ["head"]  # resolved once
        assert (plan.kind, plan.endpoint.eou_low, plan.endpoint.eou_high) == ("head", 0.805, 0.825)
        with pytest.raises(dataclasses.FrozenInstanceError):
            plan.endpoint = EndpointConfig()  # type: ignore[misc]
        token = replace(components.config, session=SessionConfig(eou="token"))
        assert components.eou_plan(token) == EOUPlan(None, None, token.endpoint)  # no token model here
        assert resolve_eou(components, token) == components.eou_plan(token)
    finally:
        components.close()
