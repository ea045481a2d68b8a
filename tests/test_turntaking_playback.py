"""Playback the client stops reporting: a suspended AudioContext or a stalled tab
freezes `playback.position`; the server must not assume wall-clock playback and send the whole reply,
mark it done and keep all of it in the history. A plain state machine on a FakeClock."""

from __future__ import annotations

import pytest

from headstart.clock import FakeClock
from headstart.session.reply import heard_text
from headstart.session.turntaking import AgentState, Interrupt, Pause, StartReply, TurnTaking

LEAD_S = 1.0  # the server's playback_lead_s
FRAME_S = 0.1


def replying(clock: FakeClock, reply_id: str = "r1", tt: TurnTaking | None = None) -> TurnTaking:
    tt = tt or TurnTaking(clock)
    assert tt.end_of_turn("tell me a story") == [StartReply("tell me a story")]
    tt.reply_started(reply_id)
    return tt


def pump(tt: TurnTaking, clock: FakeClock, audio_s: float, for_s: float, reports=None) -> float:
    """The session's audio pump (`Session._wait_for_playback`: at most LEAD_S ahead of `played_s`) over
    `for_s` of fake time in 10 ms steps; `reports(t)` -> a position to report at time t, or None."""
    t = 0.0
    while t < for_s - 1e-9:
        while tt.sent_s < audio_s - 1e-9 and tt.sent_s - tt.played_s() <= LEAD_S:
            tt.audio_sent(FRAME_S)
            if tt.sent_s >= audio_s - 1e-9:
                tt.audio_done()
        clock.advance(0.01)
        t += 0.01
        position = reports(t) if reports else None
        if position is not None and tt.reply_id is not None:
            tt.playback_position(tt.reply_id, position)
    return tt.sent_s


def test_frozen_reports_stop_the_audio_and_the_reply_is_not_done():
    """The filed case: a 9.8 s reply, the client reports 0.3 s and then nothing more."""
    clock = FakeClock()
    tt = replying(clock)
    sent = pump(tt, clock, 9.8, 20.0, reports=lambda t: 0.3 if abs(t - 0.3) < 0.005 else None)
    assert sent <= 0.3 + tt.unreported_max_s + LEAD_S + FRAME_S + 1e-6  # not the whole 9.8 s
    assert tt.played_s() == pytest.approx(0.3 + tt.unreported_max_s)
    assert tt.agent is AgentState.SPEAKING and not tt.audio_finished  # not done: later speech is a barge-in
    assert tt.speech_started() == [Pause("r1")]
    (action,) = tt.words("hello? are you there")
    assert isinstance(action, Interrupt) and action.played_s == pytest.approx(0.3 + tt.unreported_max_s)
    # the history keeps what was heard by the reports, not the reply
    spans = [("Once upon a time,", 0.8), ("there was a fox", 1.2), ("who lived in a wood.", 7.8)]
    assert heard_text(spans, action.played_s) == "Once upon a time,"


def test_reports_that_resume_let_the_rest_of_the_reply_go():
    clock = FakeClock()
    tt = replying(clock)
    frozen_until = 5.0
    sent = pump(tt, clock, 9.8, frozen_until, reports=lambda t: 0.3 if abs(t - 0.3) < 0.005 else None)
    assert sent < 2.0
    # the tab wakes up: it plays on from 0.3 s and reports every 100 ms
    start = clock.now()
    pump(tt, clock, 9.8, 12.0, reports=lambda t: 0.3 + t if round(t * 100) % 10 == 0 else None)
    assert tt.sent_s == pytest.approx(9.8) and tt.agent is AgentState.LISTENING
    assert clock.now() - start == pytest.approx(12.0)


def test_a_client_that_reports_on_time_plays_the_whole_reply_even_if_its_last_report_is_early():
    """Reports every 100 ms while playing, none once the buffer ran dry (the last one up to 0.1 s before
    the end): the reply is played out and done, as before."""
    clock = FakeClock()
    tt = replying(clock)
    pump(tt, clock, 3.0, 4.0, reports=lambda t: t if round(t * 100) % 10 == 0 and t < 2.95 else None)
    assert tt.agent is AgentState.LISTENING


def test_a_client_that_never_reports_is_assumed_to_play_in_real_time():
    clock = FakeClock()
    tt = replying(clock)
    pump(tt, clock, 3.0, 3.5)
    assert tt.sent_s == pytest.approx(3.0) and tt.agent is AgentState.LISTENING


def test_a_reporting_client_silent_from_the_start_of_the_next_reply_gets_little_audio():
    """A tab that froze between two replies: the session knows this client reports, so the new reply
    counts as unplayed until its first report."""
    clock = FakeClock()
    tt = replying(clock)
    pump(tt, clock, 1.0, 1.6, reports=lambda t: min(t, 1.0) if round(t * 100) % 10 == 0 else None)
    assert tt.agent is AgentState.LISTENING
    tt = replying(clock, "r2", tt)
    sent = pump(tt, clock, 9.8, 10.0)
    assert sent <= tt.unreported_max_s + LEAD_S + FRAME_S + 1e-6
    assert tt.agent is AgentState.SPEAKING


def test_unreported_max_s_is_checked():
    with pytest.raises(ValueError):
        TurnTaking(FakeClock(), unreported_max_s=-1.0)
