"""Continuations are one turn (the listening issue): a turn that ended inside a mid-sentence pause, whose
reply the user's resumed speech cut off with little or nothing of it heard, is continued by that speech:
one user message with the joined text, the reply regenerated on the whole. Driven through the session's
public API on a FakeClock with a scripted listener, LLM and voice (tests/fakes.py), no model."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from fakes import AudioDriver, InlineExecutor, ScriptedLLM, ScriptedListener, ScriptedTTS, settle

from headstart.clock import FakeClock
from headstart.session.components import Components
from headstart.config import PipelineConfig, SessionConfig
from headstart.events import EndOfTurn, FinalTranscript, PartialTranscript, SpeechEnded, SpeechStarted
from headstart.session.reply import ReplyStarted, TurnCompleted
from headstart.timeline import Continuation

FIRST = "After the tone say you're unavailable..."
SECOND = "will message and then press the pound key."
ANSWER = "Sure, I will tell them that you are not here and that you will call them back."  # 4.25 s


def utterance(start_s: float, text: str, seconds: float = 1.0) -> list:
    """One utterance of the user as the listener reports it (by audio time), ending its turn 0.3 s
    after the speech."""
    two = " ".join(text.split()[:2])
    return [(start_s, SpeechStarted(start_s)),
            (start_s + seconds / 2, PartialTranscript("", two, start_s + seconds / 2)),
            (start_s + seconds, SpeechEnded(start_s + seconds)),
            (start_s + seconds + 0.3, FinalTranscript(text, start_s + seconds)),
            (start_s + seconds + 0.3, EndOfTurn(start_s + seconds + 0.3, 0.9))]


def run(gap_s: float, audio_after_s: float | None = None, first: str = FIRST):
    """The two utterances `gap_s` apart (from the first's end of turn, at 1.4 s); the first reply's
    audio starts playing `audio_after_s` after that end of turn (None: no reply makes a sound before
    the second turn has ended). Through the session's public API only. Returns (history, ReplyStarted
    texts, [the first turn's timeline, the second's])."""
    from headstart.session.session import Session

    clock = FakeClock()
    config = replace(PipelineConfig(), session=SessionConfig(head_start=False, eou="none"))
    llm = ScriptedLLM(clock, default=ANSWER)
    components = Components(config=config, asr=None, llm=llm, tts=ScriptedTTS(seconds_per_word=0.25),
                            tts_executor=InlineExecutor())
    script = utterance(0.1, first) + utterance(1.4 + gap_s, SECOND)

    async def main():
        session = Session(components, clock=clock, realtime_playback=True, echo=False,
                          listener=lambda eou, acoustic: ScriptedListener(script, eou, acoustic))
        events: list = []

        async def consume():
            async for event in session:
                events.append(event)

        consumer = asyncio.create_task(consume())
        gate = {} if audio_after_s is None else {1.4 + audio_after_s: llm.gate.set}
        await AudioDriver(session, clock).until(1.4 + gap_s + 1.4, at=gate)
        llm.gate.set()
        await settle()
        await session.aclose()
        await asyncio.wait_for(consumer, 10)
        started = [e.transcript for e in events if isinstance(e, ReplyStarted)]
        turns = [e.timeline for e in events if isinstance(e, TurnCompleted)]
        return list(session.history), started, [turns[0], turns[-1]]

    try:
        return asyncio.run(main())
    finally:
        components.close()


def test_speech_that_cuts_off_an_unheard_reply_continues_the_users_message():
    history, started, turns = run(gap_s=0.5)
    joined = "After the tone say you're unavailable will message and then press the pound key."
    assert history == [{"role": "user", "content": joined}, {"role": "assistant", "content": ANSWER}]
    assert started == [FIRST, joined]  # the reply is regenerated on the whole
    assert turns[0].interruption is not None and turns[0].interruption.heard_text == ""
    assert turns[1].continuation == Continuation("After the tone say you're unavailable")


def test_a_little_heard_reply_leaves_the_history_with_the_joined_message():
    history, _, turns = run(gap_s=0.8, audio_after_s=0.2)
    assert [m["role"] for m in history] == ["user", "assistant"] and history[0]["content"].endswith(SECOND)
    assert 0.5 <= turns[0].interruption.played_s <= 1.0


def test_a_later_turn_is_a_turn_of_its_own():
    history, started, _ = run(gap_s=3.0)
    assert [m["content"] for m in history if m["role"] == "user"] == [FIRST, SECOND]
    assert started == [FIRST, SECOND]


def test_a_reply_heard_for_longer_is_interrupted_not_continued():
    history, started, turns = run(gap_s=1.8, audio_after_s=0.2)
    assert turns[0].interruption.played_s == 1.6  # paused at the speech start, 1.6 s into its audio
    assert history[1] == {"role": "assistant", "content": "Sure, I will tell them that"}  # what was heard
    assert [m["content"] for m in history if m["role"] == "user"] == [FIRST, SECOND]
    assert started[-1] == SECOND and turns[1].continuation is None


def test_after_a_finished_sentence_the_new_words_are_a_new_turn():
    """A barge-in right after a complete question is a new message, however soon it comes."""
    history, started, turns = run(gap_s=0.5, first="Go forward 10 meters.")
    assert [m["content"] for m in history if m["role"] == "user"] == ["Go forward 10 meters.", SECOND]
    assert started == ["Go forward 10 meters.", SECOND] and turns[1].continuation is None
