"""The session's EOU wiring on scripted listener events with a recording EOU model (no real model):
estimates only while the user is silent, on the llm executor, shared per text; the speech end asks for
the latest partial and feeds the head start (the endpointer waits for the final's score); stale and low-priority jobs give way."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace

from test_session_switches import FakeEngine, RecordingLiveTurn

from headstart.clock import FakeClock
from headstart.components import Components
from headstart.config import PipelineConfig, SessionConfig
from headstart.events import PartialTranscript, SpeechEnded, SpeechStarted


class RecordingEOU:
    def __init__(self, probability: float) -> None:
        self.probability_value = probability
        self.calls: list[str] = []

    def probability(self, messages, text: str) -> float:
        self.calls.append(text)
        return self.probability_value


class FakeListener:
    def __init__(self) -> None:
        self.pushed: list[float | None] = []

    def set_eou_probability(self, probability) -> None:
        self.pushed.append(probability)


def make(monkeypatch, model: RecordingEOU, kinds=("head", "token"), **session):
    import headstart.llm.live as live_module
    from headstart.reply import Reply
    from headstart.session import Session

    RecordingLiveTurn.made = []
    monkeypatch.setattr(live_module, "LiveTurn", RecordingLiveTurn)
    monkeypatch.setattr(Session, "_new_listener", lambda self: FakeListener())
    monkeypatch.setattr(Reply, "_run", lambda self: asyncio.sleep(3600))  # a reply that never ends
    config = replace(PipelineConfig(), session=SessionConfig(**session))
    components = Components(config=config, asr=None, llm=FakeEngine(), tts=None)
    monkeypatch.setattr(Components, "eou_model", lambda self, kind: model if kind in kinds else None)
    return Session, components


async def drain(session) -> None:
    await session.eou.settle()


def test_speech_end_scores_the_latest_partial_for_the_head_start_only(monkeypatch):
    model = RecordingEOU(0.6)  # the trained head's scale (EndpointConfig.eou_low/high): reads complete
    Session, components = make(monkeypatch, model)

    async def main():
        session = Session(components, clock=FakeClock())
        session._on_listener_event(SpeechStarted(0.1))
        session._on_listener_event(PartialTranscript("", "turn on the", 0.6))
        assert await session.eou.score("turn on the") is None  # the user is speaking: no LLM work
        session._on_listener_event(PartialTranscript("turn on the", "lights", 1.0))
        session._on_listener_event(SpeechEnded(1.2))  # no punctuation: nothing held yet
        assert session.head_start.held is None
        await drain(session)
        assert model.calls == ["turn on the lights"]
        # not for the endpointer: the partial was heard before the speech ended (a stale score could
        # end a turn mid-sentence); it waits for the final's own score, shared below when texts agree
        assert session._listener.pushed == []
        assert session.head_start.held is not None and session.head_start.held.hypothesis == "turn on the lights"
        # the listener asking for the same text (its final) gets the shared estimate, no second call
        assert await session.eou.score("turn on the  lights") == 0.6 and len(model.calls) == 1
        await session.aclose()

    try:
        asyncio.run(main())
    finally:
        components.close()


def test_a_partial_heard_while_the_vad_hears_silence_is_scored_and_preempts_at_the_speech_end(monkeypatch):
    model = RecordingEOU(0.6)
    Session, components = make(monkeypatch, model)

    async def main():
        session = Session(components, clock=FakeClock())
        session._on_listener_event(SpeechStarted(0.1))
        session._listener.silence_pending = True  # the VAD hears silence, not yet confirmed as the end
        session._on_listener_event(PartialTranscript("", "turn on the lights", 1.0))
        assert await session.eou.score("turn on the lights") == 0.6
        assert model.calls == ["turn on the lights"]
        assert session.head_start.held is None  # the user may go on: nothing held before the speech end
        session._listener.silence_pending = False
        session._on_listener_event(PartialTranscript("", "turn on the lights in", 1.2))
        assert await session.eou.score("turn on the lights in") is None  # speaking again
        session._listener.silence_pending = True
        session._on_listener_event(PartialTranscript("", "turn on the lights", 1.4))
        session._on_listener_event(SpeechEnded(1.5))
        # the estimate was known at the speech end: the held reply starts on it (the done future's
        # callback, one loop turn later), with no second call
        await asyncio.sleep(0)
        assert session.head_start.held is not None and session.head_start.held.hypothesis == "turn on the lights"
        assert model.calls == ["turn on the lights"]
        await session.aclose()

    try:
        asyncio.run(main())
    finally:
        components.close()


def test_a_low_probability_holds_nothing_and_eou_none_disables_it(monkeypatch):
    model = RecordingEOU(0.05)
    Session, components = make(monkeypatch, model)

    async def main():
        session = Session(components, clock=FakeClock())
        for event in (SpeechStarted(0.1), PartialTranscript("", "turn on the", 0.6), SpeechEnded(0.8)):
            session._on_listener_event(event)
        await drain(session)
        assert model.calls == ["turn on the"] and session.head_start.held is None
        await session.aclose()
        off = Session(components, clock=FakeClock(), eou_scorer=None)
        assert not off.eou.enabled
        await off.aclose()

    try:
        asyncio.run(main())
    finally:
        components.close()
    Session, components = make(monkeypatch, model, eou="none")
    try:
        async def none():
            session = Session(components, clock=FakeClock())
            assert not session.eou.enabled
            await session.aclose()
        asyncio.run(none())
    finally:
        components.close()


def test_stale_and_low_priority_jobs_give_way(monkeypatch):
    model = RecordingEOU(0.5)
    Session, components = make(monkeypatch, model)

    async def main():
        session = Session(components, clock=FakeClock())
        gate = asyncio.get_running_loop().run_in_executor(components.llm_executor, lambda: None)
        for event in (SpeechStarted(0.1), PartialTranscript("", "What time is it", 0.6)):
            session._on_listener_event(event)
        # speech resumes before the llm thread gets to the job: it is stale and computes nothing
        block = threading.Event()
        components.llm_executor.submit(block.wait)
        session._on_listener_event(SpeechEnded(0.8))
        session._on_listener_event(SpeechStarted(1.0))
        block.set()
        await gate
        assert session.eou.estimates == {}  # reset at the speech start
        await asyncio.sleep(0)
        # a confirmed reply waiting for the llm thread: an EOU job queued before it returns None
        components.llm_priority.confirm(object(), "waiting")
        session._on_listener_event(SpeechEnded(1.5))
        (future,) = session.eou.estimates.values()
        assert await future is None
        components.llm_priority.started("waiting")
        assert model.calls == []
        assert session.eou.stats.skipped >= 2
        await session.aclose()

    try:
        asyncio.run(main())
    finally:
        components.close()


def test_auto_falls_back_from_head_to_token_with_the_token_thresholds(monkeypatch):
    from headstart.eou_service import EOUPlan, resolve_eou

    model = RecordingEOU(1e-5)
    Session, components = make(monkeypatch, model, kinds=("token",))  # this LLM has no trained head
    try:
        plan = resolve_eou(components, components.config)
        assert plan.model is model and plan.kind == "token" and plan.endpoint.eou_scorer == "token"

        async def main():
            session = Session(components, clock=FakeClock())
            assert session.eou.plan.endpoint.eou_scorer == "token"
            assert 1e-7 < session.head_start.eou_threshold < 1e-5  # on the token scale
            for event in (SpeechStarted(0.1), PartialTranscript("", "turn on the lights", 0.6), SpeechEnded(0.8)):
                session._on_listener_event(event)
            await drain(session)
            assert session.head_start.held is not None  # 1e-5 reads complete on the token scale
            await session.aclose()

        asyncio.run(main())
        head_only = replace(components.config, session=SessionConfig(eou="head"))
        assert resolve_eou(components, head_only) == EOUPlan(None, None, head_only.endpoint)
        legacy = replace(components.config, session=SessionConfig(eou="llm"))
        assert resolve_eou(components, legacy).endpoint.eou_scorer == "token"
    finally:
        components.close()


def test_the_speech_end_estimate_is_queued_before_a_held_reply(monkeypatch):
    """The held reply generates in one llm job; the endpointer waits for the estimate, so the estimate
    must be on the llm thread first (measured: the end of turn came 1 s later the other way round)."""
    from headstart.eou_service import EOUService

    order: list[str] = []
    model = RecordingEOU(0.6)
    Session, components = make(monkeypatch, model)
    real_estimate = EOUService.estimate
    monkeypatch.setattr(EOUService, "estimate", lambda self, text: order.append("eou") or real_estimate(self, text))
    monkeypatch.setattr(RecordingLiveTurn, "reply", lambda self, text: order.append("held_reply") or _stream())

    async def main():
        session = Session(components, clock=FakeClock())
        for event in (SpeechStarted(0.1), PartialTranscript("", "What time is it?", 0.6), SpeechEnded(0.8)):
            session._on_listener_event(event)  # punctuation: the held reply starts at the speech end
        assert order[:2] == ["eou", "held_reply"]
        await drain(session)
        await session.aclose()

    try:
        asyncio.run(main())
    finally:
        components.close()


def _stream():
    from test_session_switches import _Stream

    return _Stream()


def test_the_final_is_estimated_before_a_held_reply_on_it(monkeypatch):
    from headstart.events import FinalTranscript
    from headstart.eou_service import EOUService

    order: list[str] = []
    model = RecordingEOU(0.6)
    Session, components = make(monkeypatch, model)
    real_estimate = EOUService.estimate
    monkeypatch.setattr(EOUService, "estimate", lambda self, text: order.append("eou") or real_estimate(self, text))
    monkeypatch.setattr(RecordingLiveTurn, "reply", lambda self, text: order.append("held_reply") or _stream())

    async def main():
        session = Session(components, clock=FakeClock())
        for event in (SpeechStarted(0.1), SpeechEnded(0.8), FinalTranscript("What time is it?", 0.8)):
            session._on_listener_event(event)  # no partial: the final starts the held reply
        assert order == ["eou", "held_reply"]
        await drain(session)
        assert model.calls == ["What time is it?"]
        assert await session.eou.score("What time is it?") == 0.6 and len(model.calls) == 1  # shared
        await session.aclose()

    try:
        asyncio.run(main())
    finally:
        components.close()


def test_the_trained_head_brings_its_calibrated_thresholds(monkeypatch):
    """resolve_eou: a head that carries thresholds calibrated at training (EOUHeadWeights.thresholds)
    sets the endpointer's eou_low/eou_high, unless EndpointConfig.head_thresholds is "config"; the
    token scorer and a head without them keep the configured ones."""
    from types import SimpleNamespace

    from headstart.eou_service import EOUPlan, resolve_eou

    head = RecordingEOU(0.5)
    head.weights = SimpleNamespace(thresholds=(0.805, 0.825))
    _, components = make(monkeypatch, head, kinds=("head",))
    plan = resolve_eou(components, components.config)
    model, endpoint = plan.model, plan.endpoint
    assert model is head and (endpoint.eou_scorer, endpoint.eou_low, endpoint.eou_high) == ("head", 0.805, 0.825)
    own = replace(components.config, endpoint=replace(components.config.endpoint, head_thresholds="config"))
    endpoint = resolve_eou(components, own).endpoint
    assert (endpoint.eou_low, endpoint.eou_high) == (0.15, 0.75)
    head.weights = SimpleNamespace(thresholds=None)
    endpoint = resolve_eou(components, components.config).endpoint
    assert (endpoint.eou_low, endpoint.eou_high) == (0.15, 0.75)
    components.close()
    import pytest

    from headstart.config import EndpointConfig
    from headstart.voice.endpoint import Endpointer

    with pytest.raises(ValueError, match="head_thresholds"):
        Endpointer(EndpointConfig(head_thresholds="calibrated"))
