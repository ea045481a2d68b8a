"""The session's ablation switches (SessionConfig.head_start / incremental_prefill / preemptive), driven
through its public API with a scripted listener and LLM (tests/fakes.py) on a FakeClock. FakeEngine,
RecordingLiveTurn and _Stream stay here for the tests that import them."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from fakes import AudioDriver, ScriptedLLM, ScriptedListener

from headstart.clock import FakeClock
from headstart.session.components import Components
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

    def reply_stream(self, messages, config, executor, clock=None):
        return _Stream()

    def live_turn(self, messages_before, config, executor, clock=None):
        return RecordingLiveTurn(self, messages_before, config, executor, clock)

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def warm_up(self) -> None:
        pass


def run_turn(session_config: SessionConfig) -> ScriptedLLM:
    """A user turn up to the VAD's speech end, through the session's public API (a scripted listener
    and LLM on a FakeClock); returns the LLM, which recorded the turns it opened and the replies it was
    asked for (none can be the confirmed reply: the turn has not ended)."""
    from headstart.session.session import Session

    clock = FakeClock()
    llm = ScriptedLLM(clock)
    components = Components(config=replace(PipelineConfig(), session=session_config), asr=None, llm=llm, tts=None)
    script = [(0.1, SpeechStarted(0.1)), (0.6, PartialTranscript("", "What is", 0.6)),
              (1.2, PartialTranscript("What is", "the capital of France?", 1.2)), (1.4, SpeechEnded(1.4))]

    async def main():
        session = Session(components, clock=clock, listener=lambda *scorers: ScriptedListener(script, *scorers))
        await AudioDriver(session, clock).until(1.5)
        await session.aclose()

    try:
        asyncio.run(main())
    finally:
        components.close()
    return llm


def held_texts(llm: ScriptedLLM) -> list[str]:
    return [chat[-1]["content"] for chat in llm.asked]


def test_default_prefills_partials_and_holds_a_reply():
    llm = run_turn(SessionConfig())
    assert llm.turns[0].updates == ["", "What is", "What is the capital of France?"]  # prewarmed, then each partial
    assert held_texts(llm) == ["What is the capital of France?"]


def test_incremental_prefill_off_holds_a_reply_without_prefilling_partials():
    llm = run_turn(SessionConfig(incremental_prefill=False))
    assert [t.updates for t in llm.turns] == [[]]  # opened only for the held reply
    assert held_texts(llm) == ["What is the capital of France?"]


def test_preemptive_off_prefills_but_holds_nothing():
    llm = run_turn(SessionConfig(preemptive=False))
    assert llm.turns[0].updates == ["", "What is", "What is the capital of France?"] and held_texts(llm) == []


@pytest.mark.parametrize("extra", [{}, {"incremental_prefill": True, "preemptive": True}])
def test_head_start_off_is_the_master_switch(extra):
    llm = run_turn(SessionConfig(head_start=False, **extra))
    assert llm.turns == [] and llm.asked == []


def test_demo_flags_map_to_the_switches():
    import argparse

    from headstart.cli.demo import add_head_start_argument, session_config_from_args

    parser = argparse.ArgumentParser()
    add_head_start_argument(parser)
    assert session_config_from_args(parser.parse_args([])) == SessionConfig()
    c = session_config_from_args(parser.parse_args(["--no-preemptive"]))
    assert c.head_start and c.incremental_prefill and not c.preemptive
    c = session_config_from_args(parser.parse_args(["--no-incremental-prefill"]))
    assert c.head_start and not c.incremental_prefill and c.preemptive
    assert not session_config_from_args(parser.parse_args(["--no-head-start"])).head_start
    # tools are on by default; --no-tools turns them off, and no flag keeps what the base config says
    assert SessionConfig().tools and session_config_from_args(parser.parse_args(["--tools"])).tools
    assert not session_config_from_args(parser.parse_args(["--no-tools"])).tools
    assert not session_config_from_args(parser.parse_args([]), SessionConfig(tools=False)).tools


def test_a_session_decodes_with_the_process_decoder_unless_its_config_says_none():
    """The backend's decoder (LLMConfig.speculative) serves every session whose config asks for speculative
    decoding; a configuration with speculative="none" (the harness's baseline) decodes plainly: the
    session passes its own LLMConfig and the backend decides (llm/local.py `LocalLLM.decoder_for`)."""
    from headstart.session.session import Session

    base = PipelineConfig()
    marker = object()
    clock = FakeClock()
    llm = ScriptedLLM(clock, decoder=marker)
    components = Components(config=base, asr=None, llm=llm, tts=None)
    plain = replace(components, config=replace(base, llm=replace(base.llm, speculative="none")))

    async def main():
        for comps in (components, plain):  # the first audio prewarms the turn's LiveTurn with the decoder
            session = Session(comps, clock, eou_scorer=None, listener=lambda *scorers: ScriptedListener([]))
            await AudioDriver(session, clock).until(0.1)
            await session.aclose()

    try:
        asyncio.run(main())
    finally:
        components.close()
    assert llm.decoders == [marker, None]
