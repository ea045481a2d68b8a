"""When the turn-taking policy arms the VAD's quicker barge-in start (`TurnTaking.bargein_armed`), and
what follows a quick start: pause, then words interrupt or no words resume. FakeClock, no sleeps."""

from __future__ import annotations

import pytest

from headstart.clock import FakeClock
from headstart.session.turntaking import AgentState, Interrupt, Pause, Resume, StartReply, TurnTaking


def replying(clock: FakeClock, **kwargs) -> TurnTaking:
    tt = TurnTaking(clock, **kwargs)
    assert tt.end_of_turn("what time is it") == [StartReply("what time is it")]
    tt.reply_started("r1")
    return tt


def test_armed_only_once_enough_of_the_reply_has_played():
    clock = FakeClock()
    tt = TurnTaking(clock)
    assert tt.bargein_after_s == 0.4
    assert not tt.bargein_armed  # the agent listens: a speech start is a turn start, kept slow
    tt = replying(clock)
    assert tt.agent is AgentState.THINKING and not tt.bargein_armed  # nothing audible to pause yet
    tt.audio_sent(3.0)
    assert tt.agent is AgentState.SPEAKING and not tt.bargein_armed  # the echo check needs reply audio
    clock.advance(0.39)
    assert not tt.bargein_armed
    clock.advance(0.02)
    assert tt.bargein_armed
    tt.playback_position("r1", 0.2)  # the client reports less than estimated: it counts
    assert not tt.bargein_armed
    clock.advance(0.2)
    assert tt.bargein_armed


def test_disarmed_while_paused_and_once_the_reply_has_played_out():
    clock = FakeClock()
    tt = replying(clock)
    tt.audio_sent(1.0)
    tt.audio_done()
    clock.advance(0.5)
    assert tt.bargein_armed
    assert tt.speech_started() == [Pause("r1")]
    assert not tt.bargein_armed  # paused: a second start changes nothing
    tt.speech_ended()
    assert tt.final("") == [Resume("r1")]
    assert tt.bargein_armed
    clock.advance(0.6)  # all 1.0 s played
    assert tt.agent is AgentState.LISTENING and not tt.bargein_armed


def test_a_quick_start_that_is_a_cough_pauses_and_resumes_at_the_same_position():
    clock = FakeClock()
    tt = replying(clock)
    tt.audio_sent(5.0)
    clock.advance(1.0)
    assert tt.bargein_armed
    assert tt.speech_started() == [Pause("r1")]
    clock.advance(0.7)  # speech end + an ASR pass: the reply stays paused meanwhile
    assert tt.played_s() == pytest.approx(1.0)
    tt.speech_ended()
    assert tt.words("[cough]") == []
    assert tt.final("Mm-hmm.") == [Resume("r1")]
    assert tt.end_of_turn("") == []
    clock.advance(0.5)
    assert tt.played_s() == pytest.approx(1.5)
    assert tt.bargein_armed  # the next one is quick again


def test_a_quick_start_with_words_interrupts_at_the_heard_position():
    clock = FakeClock()
    tt = replying(clock)
    tt.audio_sent(5.0)
    clock.advance(0.8)
    assert tt.speech_started() == [Pause("r1")]
    clock.advance(0.4)
    (interrupt,) = tt.words("wait")
    assert isinstance(interrupt, Interrupt) and interrupt.played_s == pytest.approx(0.8)
    assert interrupt.reason == "barge_in" and tt.utterance == "user"
    assert not tt.bargein_armed  # no reply any more: the next start is a turn start


def test_echo_starts_nothing_even_when_armed():
    clock = FakeClock()
    tt = replying(clock)
    tt.audio_sent(5.0)
    clock.advance(1.0)
    assert tt.bargein_armed
    assert tt.speech_started(echo=True) == [] and tt.utterance == "echo"
    assert tt.final("it is ten o'clock", reply_text="It is ten o'clock.") == []
    assert not tt.paused


def test_file_playback_and_a_zero_guard():
    clock = FakeClock()
    tt = replying(clock, realtime_playback=False)
    tt.audio_sent(1.0)
    assert tt.bargein_armed  # audio counts as played once it has left
    tt = replying(clock, bargein_after_s=0.0)
    tt.audio_sent(1.0)
    assert tt.bargein_armed
    with pytest.raises(ValueError, match="bargein_after_s"):
        TurnTaking(clock, bargein_after_s=-1.0)
