"""The session's compaction (`LLMConfig.memory` "summary", headstart/llm/memory.py) on a FakeClock with a
scripted listener, LLM and synthesiser: it runs only once the reply has all left and the assistant is
idle, its notes then enter the system message and the next turn's prefill is reopened on them; the
user's speech cancels it and its result is dropped, so the turn in progress stays on the chat it was
opened on."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import numpy as np
import pytest
from fakes import InlineExecutor, ScriptedLLM, ScriptedListener, ScriptedTTS

from headstart.audio import AudioFrame
from headstart.clock import FakeClock
from headstart.config import LLMConfig, PipelineConfig, SessionConfig
from headstart.events import EndOfTurn, FinalTranscript, PartialTranscript, SpeechEnded, SpeechStarted
from headstart.llm.memory import MEMORY_HEADER
from headstart.session.components import Components
from headstart.session.session import Session

FRAME_S = 0.1
OLD = [m for i in range(8) for m in ({"role": "user", "content": f"old question {i} with some words in it"},
                                     {"role": "assistant", "content": f"old answer {i} with some words too"})]


def turn(at: float, text: str) -> list:
    return [(at, SpeechStarted(at)), (at + 0.5, PartialTranscript("", text, at + 0.5)), (at + 1.2, SpeechEnded(at + 1.2)),
            (at + 1.3, FinalTranscript(text, at + 1.2)), (at + 1.5, EndOfTurn(at + 1.5, 0.9))]


class Summariser:
    """An injected summariser: records its chats, waits for `release`, and returns `notes` unless
    cancelled (then None, as llm/memory.py `summarise` does)."""

    def __init__(self, notes: str = "The user is called Ada.") -> None:
        self.notes = notes
        self.release = asyncio.Event()
        self.calls: list[list[dict]] = []
        self.cancelled: list[bool] = []

    async def __call__(self, messages, max_tokens, cancelled):
        self.calls.append(messages)
        await self.release.wait()
        self.cancelled.append(cancelled())
        return None if cancelled() else self.notes


def run(script: list, frames: int, release_at_frame: int | None, seed: list[dict] = OLD,
        elsewhere_at_frame: int | None = None, seconds_per_word: float = 0.05,
        replies: dict[str, str] | None = None):
    """Push `frames` frames of audio while the listener plays `script`; every reply's first token comes
    at once; the summariser is released after frame `release_at_frame` (None: at the end); another
    session's reply is confirmed after frame `elsewhere_at_frame`. Returns the session, the LLM and the
    summariser."""
    clock = FakeClock()
    config = replace(PipelineConfig(), session=SessionConfig(eou="none"),
                     llm=LLMConfig(max_history_tokens=120, memory="summary"))
    llm = ScriptedLLM(clock, replies or {"What is the time?": "It is noon.", "And the date?": "It is Monday."})
    llm.gate.set()
    components = Components(config=config, asr=None, llm=llm, tts=ScriptedTTS(seconds_per_word=seconds_per_word),
                            tts_executor=InlineExecutor())

    async def main():
        summariser = Summariser()
        session = Session(components, clock, echo=None, summariser=summariser,
                          listener=lambda eou, acoustic: ScriptedListener(script, eou, acoustic))
        session.history = [dict(m) for m in seed]
        consumer = asyncio.create_task(_drain(session))
        for frame in range(frames):
            clock.advance(FRAME_S)
            await session.push_audio(AudioFrame(np.zeros(int(16000 * FRAME_S), np.float32), 16000))
            for _ in range(20):
                await asyncio.sleep(0)
            if frame == elsewhere_at_frame:
                components.llm_priority.confirm(object(), "another session's reply", lambda: False)
            if frame == release_at_frame:
                summariser.release.set()
        summariser.release.set()
        await session.end_input()
        await asyncio.wait_for(consumer, 10)
        return session, summariser

    try:
        session, summariser = asyncio.run(main())
    finally:
        components.close()
    return session, llm, summariser


async def _drain(session) -> None:
    async for _ in session:
        pass


def test_an_idle_assistant_compacts_the_history_and_the_next_turn_starts_on_the_notes():
    session, llm, summariser = run(turn(0.3, "What is the time?"), frames=40, release_at_frame=25)
    assert len(summariser.calls) == 1 and summariser.cancelled == [False]
    messages = summariser.calls[0]
    assert [m["role"] for m in messages] == ["system", "user"]  # the summariser's own prompt
    assert "- " + OLD[0]["content"] in messages[1]["content"]  # the oldest turns are the ones summarised
    assert session.compactions == 1 and session.compactions_dropped == 0
    system = session.conversation.messages()[0]["content"]
    assert system.endswith(MEMORY_HEADER + "\nThe user is called Ada.")
    assert session.conversation.dropped_turns >= 1
    # the prewarm LiveTurn opened on the old chat was closed and a new one opened on the notes
    assert llm.turns[-1].messages[0]["content"] == system
    assert any(t.closed and MEMORY_HEADER not in t.messages[0]["content"] for t in llm.turns)


def test_a_long_reply_is_compacted_after_it_has_played():
    """A reply of 4.8 s of audio: the compaction still starts once it has played and the assistant is
    idle. (This harness plays the audio out as it leaves; the server's case, where the audio leaves up to
    the playback lead ahead of the client's playback, is checked through the server by
    scripts/soak_server.py: docs/history/2026-12-03-soak.md.)"""
    long_reply = "It is noon and the sun stands high over the green hills and the quiet town today."
    session, _, summariser = run(turn(0.3, "What is the time?"), frames=110, release_at_frame=100,
                                 seconds_per_word=0.3, replies={"What is the time?": long_reply})
    assert len(summariser.calls) == 1 and summariser.cancelled == [False]
    assert session.compactions == 1 and session.compactions_dropped == 0
    assert MEMORY_HEADER in session.conversation.messages()[0]["content"]


def test_the_users_speech_cancels_a_compaction_and_its_notes_are_dropped():
    # the second turn starts while the summariser still runs (released only after its reply)
    session, llm, summariser = run(turn(0.3, "What is the time?") + turn(2.5, "And the date?"), frames=60,
                                   release_at_frame=45)
    assert summariser.cancelled[0] is True
    assert session.compactions_dropped >= 1
    assert session.conversation.messages()[0]["content"] == PipelineConfig().llm.system_prompt \
        or len(summariser.calls) > 1  # a later compaction (after the second reply) may apply
    # the second turn was answered on the chat as it was, with no note
    second = [chat for chat in llm.asked if chat[-1]["content"] == "And the date?"]
    assert second and MEMORY_HEADER not in second[0][0]["content"]
    assert second[0][1:3] == OLD[:2]


def test_another_sessions_confirmed_reply_cancels_a_compaction():
    session, _, summariser = run(turn(0.3, "What is the time?"), frames=40, release_at_frame=30, elsewhere_at_frame=25)
    assert summariser.cancelled == [True]
    assert session.compactions == 0 and session.compactions_dropped == 1
    assert MEMORY_HEADER not in session.conversation.messages()[0]["content"]


def test_no_compaction_while_the_history_fits():
    session, _, summariser = run(turn(0.3, "What is the time?"), frames=30, release_at_frame=None, seed=OLD[:4])
    assert summariser.calls == [] and session.compactions == 0
    assert MEMORY_HEADER not in session.conversation.messages()[0]["content"]


@pytest.mark.models
def test_a_real_llm_compacts_on_its_own_thread_and_the_next_turn_prefills_the_notes():
    """smollm2-135m end to end through the session: a real reply, then the default summariser on the
    "llm" executor while idle, the notes in the system message, and the prewarm LiveTurn reopened on
    them."""
    from headstart.llm.engine import LLMEngine
    from headstart.llm.local import LocalLLM
    from headstart.config import ThreadPlan
    from tests.prepared import model_path

    path = model_path("smollm2-135m")
    llm_config = LLMConfig(model="smollm2-135m", max_new_tokens=12, max_history_tokens=150, memory="summary",
                           speculative="none")
    engine = LLMEngine.load(path, llm_config, ThreadPlan())
    clock = FakeClock()
    config = replace(PipelineConfig(), session=SessionConfig(eou="none"), llm=llm_config)
    components = Components(config=config, asr=None, llm=LocalLLM(engine), tts=ScriptedTTS(seconds_per_word=0.05),
                            tts_executor=InlineExecutor())
    seed = [m for i, fact in enumerate(["My name is Ada.", "My car is on level four.", "I am allergic to cats.",
                                        "My sister is called Lu.", "I grew up in Leeds.", "My dog is Rex."])
            for m in ({"role": "user", "content": fact}, {"role": "assistant", "content": f"Noted, fact {i}."})]

    async def main():
        session = Session(components, clock, echo=None,
                          listener=lambda eou, acoustic: ScriptedListener(turn(0.3, "What is the time?"), eou, acoustic))
        session.history = [dict(m) for m in seed]
        consumer = asyncio.create_task(_drain(session))
        for _ in range(25):
            clock.advance(FRAME_S)
            await session.push_audio(AudioFrame(np.zeros(int(16000 * FRAME_S), np.float32), 16000))
            for _ in range(20):
                await asyncio.sleep(0)
        for _ in range(600):  # the reply and the compaction run on the real llm thread
            if session.compactions or session.compactions_dropped:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
        messages = session.conversation.messages()
        live = session.head_start.live
        await session.end_input()
        await asyncio.wait_for(consumer, 60)
        return session, messages, live

    try:
        session, messages, live = asyncio.run(main())
    finally:
        components.close()
    assert session.compactions == 1 and session.compactions_dropped == 0
    assert MEMORY_HEADER in messages[0]["content"] and session.conversation.dropped_turns >= 1
    assert live is not None  # the prewarm reopened on the chat with the notes
