"""Continuations are one turn (the listening issue): a turn that ended inside a mid-sentence pause, whose
reply the user's resumed speech cut off with little or nothing of it heard, is continued by that speech:
one user message with the joined text, the reply regenerated on the whole. Scripted listener events on a
fake clock, no model."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from test_session_switches import FakeEngine

from headstart.clock import FakeClock
from headstart.components import Components
from headstart.config import PipelineConfig, SessionConfig
from headstart.events import EndOfTurn, FinalTranscript, PartialTranscript, SpeechEnded, SpeechStarted

FIRST = "After the tone say you're unavailable..."
SECOND = "will message and then press the pound key."


def utterance(session, clock, start_s: float, text: str, seconds: float = 1.0) -> None:
    """One utterance of the user, as the listener reports it, ending its turn."""
    session._on_listener_event(SpeechStarted(start_s))
    clock.advance(seconds / 2)
    session._on_listener_event(PartialTranscript("", text.split(" ", 2)[0] + " " + text.split(" ", 2)[1], start_s + seconds / 2))
    clock.advance(seconds / 2)
    session._on_listener_event(SpeechEnded(start_s + seconds))
    clock.advance(0.3)
    session._on_listener_event(FinalTranscript(text, start_s + seconds))
    session._on_listener_event(EndOfTurn(start_s + seconds + 0.3, 0.9))


def run(monkeypatch, gap_s: float, audio_after_s: float | None = None, first: str = FIRST):
    """The two utterances `gap_s` apart (from the first's end of turn); the first reply's audio starts
    playing `audio_after_s` after that end of turn (None: it never does). Returns (history,
    ReplyStarted texts, turn extras)."""
    from headstart.reply import Reply
    from headstart.session import Session

    monkeypatch.setattr(Session, "_new_listener", lambda self: None)
    monkeypatch.setattr(Reply, "_run", lambda self: asyncio.sleep(3600))  # a reply that never ends
    config = replace(PipelineConfig(), session=SessionConfig(head_start=False))
    components = Components(config=config, asr=None, llm=FakeEngine(), tts=None)

    async def main():
        clock = FakeClock()
        session = Session(components, clock=clock, eou_scorer=None, realtime_playback=True, echo=False)
        utterance(session, clock, 0.1, first)
        first_reply = session._reply
        if audio_after_s is not None:
            clock.advance(audio_after_s)
            session.turns.audio_sent(5.0)  # the reply's audio starts playing now
        clock.advance(gap_s - (audio_after_s or 0.0))
        utterance(session, clock, 2.0 + gap_s, SECOND)
        started = []
        while not session._out.empty():
            event = session._out.get_nowait()
            event = getattr(event, "event", event)
            if type(event).__name__ == "ReplyStarted":
                started.append(event.transcript)
        extras = [first_reply.turn.extra, session._reply.turn.extra]
        history = list(session.history)
        await session.aclose()
        return history, started, extras

    try:
        return asyncio.run(main())
    finally:
        components.close()


def test_speech_that_cuts_off_an_unheard_reply_continues_the_users_message(monkeypatch):
    history, started, extras = run(monkeypatch, gap_s=0.5)
    joined = "After the tone say you're unavailable will message and then press the pound key."
    assert history == [{"role": "user", "content": joined}]
    assert started == [FIRST, joined]  # the reply is regenerated on the whole
    assert extras[0]["interrupted"] and extras[0]["heard_text"] == ""
    assert extras[1]["continues"] == "After the tone say you're unavailable"


def test_a_little_heard_reply_leaves_the_history_with_the_joined_message(monkeypatch):
    history, _, extras = run(monkeypatch, gap_s=0.8, audio_after_s=0.2)
    assert [m["role"] for m in history] == ["user"] and history[0]["content"].endswith(SECOND)
    assert 0.5 <= extras[0]["played_s"] <= 1.0


def test_a_later_turn_is_a_turn_of_its_own(monkeypatch):
    history, started, _ = run(monkeypatch, gap_s=3.0)
    assert [m["content"] for m in history if m["role"] == "user"] == [FIRST, SECOND]
    assert started == [FIRST, SECOND]


def test_a_reply_heard_for_longer_is_interrupted_not_continued(monkeypatch):
    history, started, extras = run(monkeypatch, gap_s=1.8, audio_after_s=0.2)
    assert extras[0]["played_s"] > 1.0
    assert [m["content"] for m in history if m["role"] == "user"] == [FIRST, SECOND]
    assert started[-1] == SECOND and "continues" not in extras[1]


def test_after_a_finished_sentence_the_new_words_are_a_new_turn(monkeypatch):
    """A barge-in right after a complete question is a new message, however soon it comes."""
    history, started, extras = run(monkeypatch, gap_s=0.5, first="Go forward 10 meters.")
    assert [m["content"] for m in history if m["role"] == "user"] == ["Go forward 10 meters.", SECOND]
    assert started == ["Go forward 10 meters.", SECOND] and "continues" not in extras[1]
