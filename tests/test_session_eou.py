"""The session's EOU wiring, driven through its public API (push_audio with a scripted listener and LLM on
a FakeClock, tests/fakes.py) with a recording EOU model (no real model): estimates only while the user is
silent, on the llm executor, shared per text for the listener (the scorer it is given) and the head start;
the speech end asks for the latest partial and feeds the head start (the endpointer waits for the final's
score); stale and low-priority jobs give way."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace

from fakes import AudioDriver, InlineExecutor, ScriptedLLM, ScriptedListener, ScriptedTTS

from headstart.clock import FakeClock
from headstart.session.components import Components
from headstart.config import PipelineConfig, SessionConfig
from headstart.session.eou import EOUService
from headstart.events import FinalTranscript, PartialTranscript, SpeechEnded, SpeechStarted


class RecordingEOU:
    def __init__(self, probability: float) -> None:
        self.probability_value = probability
        self.calls: list[str] = []

    def probability(self, messages, text: str) -> float:
        self.calls.append(text)
        return self.probability_value


class Rig:
    """A Session on a scripted listener and LLM, `model` as its EOU model (of the `kinds` this LLM has)."""

    def __init__(self, monkeypatch, model: RecordingEOU, script: list, kinds=("head", "token"), tts=None,
                 **session) -> None:
        self.clock = FakeClock()
        self.llm = ScriptedLLM(self.clock)
        config = replace(PipelineConfig(), session=SessionConfig(**session))
        executors = {} if tts is None else {"tts_executor": InlineExecutor()}
        self.components = Components(config=config, asr=None, llm=self.llm, tts=tts, **executors)
        monkeypatch.setattr(Components, "eou_model", lambda self, kind: model if kind in kinds else None)
        self.script = script
        self.listener: ScriptedListener | None = None

    def session(self, **kwargs):
        from headstart.session.session import Session

        def listener(*scorers):
            self.listener = ScriptedListener(self.script, *scorers)
            return self.listener

        session = Session(self.components, clock=self.clock, listener=listener, **kwargs)
        self.driver = AudioDriver(session, self.clock)
        return session

    def held(self) -> list[str]:
        """The user texts the LLM was asked to answer (held replies: no turn ends in these tests)."""
        return [chat[-1]["content"] for chat in self.llm.asked]

    def run(self, main) -> None:
        try:
            asyncio.run(main())
        finally:
            self.components.close()


def test_speech_end_scores_the_latest_partial_for_the_head_start_only(monkeypatch):
    model = RecordingEOU(0.6)  # the trained head's scale (EndpointConfig.eou_low/high): reads complete
    rig = Rig(monkeypatch, model, [(0.1, SpeechStarted(0.1)), (0.6, PartialTranscript("", "turn on the", 0.6)),
                                   (1.0, PartialTranscript("turn on the", "lights", 1.0)), (1.2, SpeechEnded(1.2))])

    async def main():
        session = rig.session()
        await rig.driver.until(0.6)
        score = rig.listener.eou_scorer  # what the listener's endpointer asks
        assert await score("turn on the") is None  # the user is speaking: no LLM work
        await rig.driver.until(1.1)
        assert rig.held() == []  # no punctuation, no estimate: nothing held while speaking
        await rig.driver.until(1.2)  # the speech end: the latest partial is estimated now
        await session.eou.settle()
        assert model.calls == ["turn on the lights"]
        # it went to the head start only (the endpointer waits for the final's own score, shared below
        # when the texts agree: a stale score could end a turn mid-sentence); a held reply started on it
        assert rig.held() == ["turn on the lights"]
        # the listener asking for the same text (its final) gets the shared estimate, no second call
        assert await score("turn on the  lights") == 0.6 and len(model.calls) == 1
        await session.aclose()

    rig.run(main)


def test_a_partial_heard_while_the_vad_hears_silence_is_scored_and_preempts_at_the_speech_end(monkeypatch):
    model = RecordingEOU(0.6)
    rig = Rig(monkeypatch, model, [(0.1, SpeechStarted(0.1)), (1.0, PartialTranscript("", "turn on the lights", 1.0)),
                                   (1.2, PartialTranscript("", "turn on the lights in", 1.2)),
                                   (1.4, PartialTranscript("", "turn on the lights", 1.4)), (1.5, SpeechEnded(1.5))],
              preempt_on_pause=False)

    async def main():
        session = rig.session()
        await rig.driver.until(0.9)
        rig.listener.silence_pending = True  # the VAD hears silence, not yet confirmed as the end
        await rig.driver.until(1.0)
        score = rig.listener.eou_scorer
        assert await score("turn on the lights") == 0.6
        assert model.calls == ["turn on the lights"]
        assert rig.held() == []  # the user may go on: nothing held before the speech end
        rig.listener.silence_pending = False
        await rig.driver.until(1.2)
        assert await score("turn on the lights in") is None  # speaking again
        rig.listener.silence_pending = True
        await rig.driver.until(1.5)
        # the estimate was known at the speech end: the held reply starts on it, with no second call
        assert rig.held() == ["turn on the lights"]
        assert model.calls == ["turn on the lights"]
        await session.aclose()

    rig.run(main)


def test_a_low_probability_holds_nothing_and_eou_none_disables_it(monkeypatch):
    model = RecordingEOU(0.05)
    script = [(0.1, SpeechStarted(0.1)), (0.6, PartialTranscript("", "turn on the", 0.6)), (0.8, SpeechEnded(0.8))]
    rig = Rig(monkeypatch, model, script)

    async def main():
        session = rig.session()
        await rig.driver.until(0.8)
        await session.eou.settle()
        assert model.calls == ["turn on the"] and rig.held() == []
        await session.aclose()
        off = rig.session(eou_scorer=None)
        assert rig.listener.eou_scorer is None and not off.eou.enabled
        await off.aclose()

    rig.run(main)
    rig = Rig(monkeypatch, model, script, eou="none")

    async def none():
        session = rig.session()
        assert rig.listener.eou_scorer is None and not session.eou.enabled
        await session.aclose()

    rig.run(none)


def test_stale_and_low_priority_jobs_give_way(monkeypatch):
    model = RecordingEOU(0.5)
    rig = Rig(monkeypatch, model, [(0.1, SpeechStarted(0.1)), (0.6, PartialTranscript("", "How are you", 0.6)),
                                   (0.8, SpeechEnded(0.8)), (1.0, SpeechStarted(1.0)), (1.5, SpeechEnded(1.5))])

    async def main():
        session = rig.session()
        components = rig.components
        await rig.driver.until(0.7)
        # speech resumes before the llm thread gets to the speech end's job: it is stale, computes nothing
        block = threading.Event()
        components.llm_executor.submit(block.wait)
        await rig.driver.until(0.8)
        (stale,) = session.eou.estimates.values()
        await rig.driver.until(1.0)
        assert session.eou.estimates == {}  # reset at the speech start
        block.set()
        assert await stale is None
        # a confirmed reply (of another session) waiting for the llm thread: an EOU job queued before it
        # returns None
        components.llm_priority.confirm(object(), "waiting")
        await rig.driver.until(1.5)
        (future,) = session.eou.estimates.values()
        assert await future is None
        components.llm_priority.started("waiting")
        assert model.calls == []
        assert session.eou.stats.skipped == 2
        await session.aclose()

    rig.run(main)


def test_auto_falls_back_from_head_to_token_with_the_token_thresholds(monkeypatch):
    from headstart.session.eou import EOUPlan, resolve_eou

    model = RecordingEOU(1e-5)
    rig = Rig(monkeypatch, model, [(0.1, SpeechStarted(0.1)), (0.6, PartialTranscript("", "turn on the lights", 0.6)),
                                   (0.8, SpeechEnded(0.8))], kinds=("token",))  # this LLM has no trained head
    components = rig.components
    plan = resolve_eou(components, components.config)
    assert plan.model is model and plan.kind == "token" and plan.endpoint.eou_scorer == "token"

    async def main():
        session = rig.session()
        assert session.eou.plan.endpoint.eou_scorer == "token"
        assert 1e-7 < session.head_start.eou_threshold < 1e-5  # on the token scale
        await rig.driver.until(0.8)
        await session.eou.settle()
        assert rig.held() == ["turn on the lights"]  # 1e-5 reads complete on the token scale
        await session.aclose()

    head_only = replace(components.config, session=SessionConfig(eou="head"))
    assert resolve_eou(components, head_only) == EOUPlan(None, None, head_only.endpoint)
    legacy = replace(components.config, session=SessionConfig(eou="llm"))
    assert resolve_eou(components, legacy).endpoint.eou_scorer == "token"
    rig.run(main)


def recording_order(monkeypatch, rig: Rig) -> list[str]:
    """'eou' when an estimate is submitted to the llm thread, 'held_reply' when a reply is asked for."""
    order: list[str] = []
    real_estimate, real_answer = EOUService.estimate, rig.llm.answer
    monkeypatch.setattr(EOUService, "estimate", lambda self, text: order.append("eou") or real_estimate(self, text))
    rig.llm.answer = lambda messages: order.append("held_reply") or real_answer(messages)
    return order


def test_the_speech_end_estimate_is_queued_before_a_held_reply(monkeypatch):
    """The held reply generates in one llm job; the endpointer waits for the estimate, so the estimate
    must be on the llm thread first (measured: the end of turn came 1 s later the other way round)."""
    model = RecordingEOU(0.6)
    rig = Rig(monkeypatch, model, [(0.1, SpeechStarted(0.1)), (0.6, PartialTranscript("", "How are you?", 0.6)),
                                   (0.8, SpeechEnded(0.8))])
    order = recording_order(monkeypatch, rig)

    async def main():
        session = rig.session()
        await rig.driver.until(0.8)  # punctuation: the held reply starts at the speech end
        assert order[:2] == ["eou", "held_reply"]
        await session.eou.settle()
        await session.aclose()

    rig.run(main)


def test_the_final_is_estimated_before_a_held_reply_on_it(monkeypatch):
    model = RecordingEOU(0.6)
    rig = Rig(monkeypatch, model, [(0.1, SpeechStarted(0.1)), (0.8, SpeechEnded(0.8)),
                                   (0.9, FinalTranscript("How are you?", 0.8))])
    order = recording_order(monkeypatch, rig)

    async def main():
        session = rig.session()
        await rig.driver.until(0.9)  # no partial: the final starts the held reply
        assert order == ["eou", "held_reply"]
        await session.eou.settle()
        assert model.calls == ["How are you?"]
        assert await rig.listener.eou_scorer("How are you?") == 0.6 and len(model.calls) == 1  # shared
        await session.aclose()

    rig.run(main)


def test_the_trained_head_brings_its_calibrated_thresholds(monkeypatch):
    """resolve_eou: a head that carries thresholds calibrated at training (EOUHeadWeights.thresholds)
    sets the endpointer's eou_low/eou_high, unless EndpointConfig.head_thresholds is "config"; the
    token scorer and a head without them keep the configured ones."""
    from types import SimpleNamespace

    import pytest

    from headstart.config import EndpointConfig
    from headstart.session.eou import resolve_eou
    from headstart.voice.endpoint import Endpointer

    head = RecordingEOU(0.5)
    head.weights = SimpleNamespace(thresholds=(0.805, 0.825))
    components = Rig(monkeypatch, head, [], kinds=("head",)).components
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
    with pytest.raises(ValueError, match="head_thresholds"):
        Endpointer(EndpointConfig(head_thresholds="calibrated"))


def test_a_pause_starts_the_held_reply_before_the_speech_end_and_speech_going_on_drops_it(monkeypatch):
    """SessionConfig.preempt_on_pause: a pause of preempt_pause_s (not yet the VAD's speech end) has the
    latest text estimated and, when it reads complete, a held reply started on it; the speech going on
    (the pause ends inside the speech segment) drops it; a shorter pause does nothing."""
    model = RecordingEOU(0.6)
    rig = Rig(monkeypatch, model, [(0.1, SpeechStarted(0.1)), (0.8, PartialTranscript("", "turn on the lights", 0.8)),
                                   (1.6, PartialTranscript("", "turn on the lights in the hall", 1.6)),
                                   (2.0, SpeechEnded(2.0))], tts=ScriptedTTS())

    async def main():
        session = rig.session()
        rig.listener.in_speech = True
        await rig.driver.until(0.9)
        rig.listener.pause_s = 0.032  # shorter than preempt_pause_s: a gap between words
        await rig.driver.until(1.0)
        await session.eou.settle()
        assert model.calls == [] and rig.held() == []
        rig.listener.pause_s, rig.listener.pause_heard = 0.1, False  # the partial stops short of the pause
        await rig.driver.until(1.1)
        await session.eou.settle()
        assert model.calls == [] and rig.held() == []  # the final will need a pass of its own: wait
        rig.listener.pause_heard = True
        await rig.driver.until(1.2)
        await session.eou.settle()
        assert model.calls == ["turn on the lights"]
        assert rig.held() == ["turn on the lights"]  # before any SpeechEnded
        held = session.head_start.held
        assert held is not None
        rig.listener.pause_s = None  # the speech goes on
        await rig.driver.until(1.3)
        assert session.head_start.held is None and held.cancelled
        assert session.head_start.stats.misses == 1
        await session.aclose()

    rig.run(main)


def test_a_pause_that_becomes_the_speech_end_keeps_the_reply_it_started(monkeypatch):
    model = RecordingEOU(0.6)
    rig = Rig(monkeypatch, model, [(0.1, SpeechStarted(0.1)), (0.8, PartialTranscript("", "turn on the lights", 0.8)),
                                   (1.2, SpeechEnded(0.9))], tts=ScriptedTTS())

    async def main():
        session = rig.session()
        rig.listener.in_speech = True
        await rig.driver.until(1.0)
        rig.listener.pause_s = 0.1
        await rig.driver.until(1.1)
        await session.eou.settle()
        held = session.head_start.held
        assert rig.held() == ["turn on the lights"] and held is not None
        rig.listener.pause_s, rig.listener.in_speech = None, False  # the VAD confirms the end
        await rig.driver.until(1.3)
        await session.eou.settle()
        assert session.head_start.held is held and not held.cancelled  # the same reply, not a second one
        assert rig.held() == ["turn on the lights"] and model.calls == ["turn on the lights"]
        await session.aclose()

    rig.run(main)


def test_without_preempt_on_pause_a_pause_starts_nothing(monkeypatch):
    model = RecordingEOU(0.6)
    rig = Rig(monkeypatch, model, [(0.1, SpeechStarted(0.1)), (0.8, PartialTranscript("", "turn on the lights", 0.8))],
              preempt_on_pause=False)

    async def main():
        session = rig.session()
        rig.listener.in_speech = True
        await rig.driver.until(0.9)
        rig.listener.pause_s = 0.2
        await rig.driver.until(1.0)
        await session.eou.settle()
        assert rig.held() == [] and model.calls == []
        await session.aclose()

    rig.run(main)


def test_a_held_reply_starts_on_the_text_the_final_will_carry(monkeypatch):
    """A re-decoding ASR (Moonshine) writes its final from the newest pass' own hypothesis, which can
    differ from the latest partial ("how do i say ..." / "How do I say ..."): the pause's estimate and
    held reply are of the text the listener expects the final to carry, so the final is a hit instead
    of a second estimate and a second reply."""
    model = RecordingEOU(0.6)
    rig = Rig(monkeypatch, model, [(0.1, SpeechStarted(0.1)),
                                   (0.8, PartialTranscript("how do", "i say thanks", 0.8)),
                                   (1.3, SpeechEnded(1.0)), (1.3, FinalTranscript("How do I say thanks?", 1.0))],
              tts=ScriptedTTS())

    async def main():
        session = rig.session()
        rig.listener.in_speech = True
        await rig.driver.until(0.9)
        rig.listener.expected_final_text = "How do I say thanks?"
        rig.listener.pause_s = 0.1
        await rig.driver.until(1.0)
        await session.eou.settle()
        assert model.calls == ["How do I say thanks?"] and rig.held() == ["How do I say thanks?"]
        held = session.head_start.held
        rig.listener.pause_s, rig.listener.in_speech = None, False  # the VAD confirms the end
        await rig.driver.until(1.4)
        await session.eou.settle()
        assert session.head_start.held is held and not held.cancelled  # the final matched: no second reply
        assert rig.held() == ["How do I say thanks?"] and model.calls == ["How do I say thanks?"]
        await session.aclose()

    rig.run(main)
