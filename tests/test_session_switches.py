"""The session's ablation switches (SessionConfig.head_start / incremental_prefill / preemptive) on
scripted listener events, with a recording stand-in for LiveTurn (no model, no event-loop timing)."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from headstart.clock import FakeClock
from headstart.components import Components
from headstart.config import PipelineConfig, SessionConfig
from headstart.events import PartialTranscript, SpeechEnded, SpeechStarted


class RecordingLiveTurn:
    made: list[RecordingLiveTurn] = []

    def __init__(self, engine, messages, config, executor, clock=None, **kwargs):
        self.updates: list[str] = []
        self.replies: list[str] = []
        self.closed = False
        RecordingLiveTurn.made.append(self)

    def update(self, text: str) -> None:
        self.updates.append(text)

    def reply(self, text: str):
        self.replies.append(text)
        return _Stream()

    def close(self) -> None:
        self.closed = True


class _Stream:
    """A reply stream (`LLMReplyStream`) that never ends within a test."""

    def __init__(self) -> None:
        from headstart.llm.stream import ReplyStats

        self.stats = ReplyStats(requested_at_s=0.0)
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True

    def __aiter__(self):
        return self

    async def __anext__(self):
        await asyncio.sleep(3600)  # a held reply that never finishes within the test
        raise StopAsyncIteration


class FakeEngine:
    """A whole LLM backend (headstart/seams.py `LLMBackend`) with no model: its turns record what they
    are told, its replies never end."""

    max_positions = None

    def render_prompt(self, messages, add_generation_prompt=True):
        return [1, 2, 3]

    def reply_stream(self, messages, config, executor, clock=None, *, decoder=None):
        return _Stream()

    def live_turn(self, messages_before, config, executor, clock=None, *, decoder=None):
        return RecordingLiveTurn(self, messages_before, config, executor, clock, decoder=decoder)

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def warm_up(self) -> None:
        pass


def run_turn(monkeypatch, session_config: SessionConfig) -> tuple[list[RecordingLiveTurn], object]:
    from headstart.reply import Reply
    from headstart.session import Session

    RecordingLiveTurn.made = []
    monkeypatch.setattr(Session, "_new_listener", lambda self: None)
    monkeypatch.setattr(Reply, "_run", lambda self: asyncio.sleep(3600))  # a reply that never ends
    config = replace(PipelineConfig(), session=session_config)
    components = Components(config=config, asr=None, llm=FakeEngine(), tts=None)

    async def main():
        session = Session(components, clock=FakeClock())
        for event in (SpeechStarted(0.1), PartialTranscript("", "What is", 0.6),
                      PartialTranscript("What is", "the time?", 1.2), SpeechEnded(1.4)):
            session._on_listener_event(event)
        held = session.head_start.held
        await session.aclose()
        return held

    try:
        held = asyncio.run(main())
    finally:
        components.close()
    return RecordingLiveTurn.made, held


def test_default_prefills_partials_and_holds_a_reply(monkeypatch):
    made, held = run_turn(monkeypatch, SessionConfig())
    assert made[0].updates == ["What is", "What is the time?"]
    assert made[0].replies == ["What is the time?"] and held is not None and held.hypothesis == "What is the time?"


def test_incremental_prefill_off_holds_a_reply_without_prefilling_partials(monkeypatch):
    made, held = run_turn(monkeypatch, SessionConfig(incremental_prefill=False))
    assert [t.updates for t in made] == [[]]  # opened only for the held reply
    assert made[0].replies == ["What is the time?"] and held is not None


def test_preemptive_off_prefills_but_holds_nothing(monkeypatch):
    made, held = run_turn(monkeypatch, SessionConfig(preemptive=False))
    assert made[0].updates == ["What is", "What is the time?"] and made[0].replies == []
    assert held is None


@pytest.mark.parametrize("extra", [{}, {"incremental_prefill": True, "preemptive": True}])
def test_head_start_off_is_the_master_switch(monkeypatch, extra):
    made, held = run_turn(monkeypatch, SessionConfig(head_start=False, **extra))
    assert made == [] and held is None


def test_demo_flags_map_to_the_switches():
    import argparse

    from headstart.demo import add_head_start_argument, session_config_from_args

    parser = argparse.ArgumentParser()
    add_head_start_argument(parser)
    assert session_config_from_args(parser.parse_args([])) == SessionConfig()
    c = session_config_from_args(parser.parse_args(["--no-preemptive"]))
    assert c.head_start and c.incremental_prefill and not c.preemptive
    c = session_config_from_args(parser.parse_args(["--no-incremental-prefill"]))
    assert c.head_start and not c.incremental_prefill and c.preemptive
    assert not session_config_from_args(parser.parse_args(["--no-head-start"])).head_start


def test_a_session_decodes_with_the_process_decoder_unless_its_config_says_none():
    """Components.decoder (LLMConfig.speculative) serves every session whose config asks for speculative
    decoding; a configuration with speculative="none" (the harness's baseline) decodes plainly."""
    from headstart.session import Session

    base = PipelineConfig()
    marker = object()
    components = Components(config=base, asr=None, llm=FakeEngine(), tts=None, decoder=marker)
    plain = replace(components, config=replace(base, llm=replace(base.llm, speculative="none")))

    async def main():
        on, off = Session(components, eou_scorer=None), Session(plain, eou_scorer=None)
        try:
            return on._decoder(), off._decoder()
        finally:
            await on.aclose()
            await off.aclose()

    try:
        assert asyncio.run(main()) == (marker, None)
    finally:
        components.close()


def test_the_echo_of_a_number_is_recognised_in_its_spoken_form():
    """The voice says "ten" for "10" and the ASR may write either: both count as the reply's words when
    the session tells its own echo from the user (a CI run saw "I'm going ten." taken for a barge-in)."""
    from types import SimpleNamespace

    from headstart.session import Session
    from headstart.turntaking import is_echo_text

    components = Components(config=PipelineConfig(), asr=None, llm=FakeEngine(), tts=None)

    async def main():
        session = Session(components, eou_scorer=None)
        try:
            assert session._reply_text() == ""
            session._reply = SimpleNamespace(text="I'm going 10 meters forward.")
            return session._reply_text()
        finally:
            session._reply = None
            await session.aclose()

    try:
        reply = asyncio.run(main())
    finally:
        components.close()
    assert is_echo_text("I'm going ten.", reply) and is_echo_text("I'm going 10 meters.", reply)
    assert not is_echo_text("I'm going ten.", "I'm going 10 meters forward.")  # the raw text alone
    assert not is_echo_text("stop please", reply)
