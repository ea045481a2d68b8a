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


# -- backchannels: the listener keeping up is no barge-in ---------------------------------------------


def _barge(clock: FakeClock, start_s: float = 10.0) -> TurnTaking:
    """A reply playing for 1 s, then a speech start at audio position `start_s` that pauses it."""
    tt = replying(clock)
    tt.audio_sent(8.0)
    clock.advance(1.0)
    assert tt.speech_started(audio_s=start_s) == [Pause("r1")]
    return tt


@pytest.mark.parametrize("heard", ["Yeah.", "Mm-hmm.", "Uh-huh.", "Okay.", "Yeah, yeah.", "Right.", "I see."])
def test_a_short_backchannel_resumes_the_reply_and_is_no_turn(heard):
    clock = FakeClock()
    tt = _barge(clock)
    clock.advance(0.3)
    assert tt.words(heard.rstrip("."), confidence=0.9, audio_end_s=10.3) == []  # it may still be a backchannel
    tt.speech_ended(audio_s=10.45)
    assert tt.final(heard, confidence=0.95) == [Resume("r1")]
    assert tt.end_of_turn(heard) == [] and tt.agent is AgentState.SPEAKING
    assert tt.played_s() == pytest.approx(1.0)  # it plays on from where it paused


def test_stop_interrupts_at_once_and_words_beyond_a_backchannel_interrupt():
    clock = FakeClock()
    tt = _barge(clock)
    clock.advance(0.3)
    (interrupt,) = tt.words("Stop.", confidence=0.8, audio_end_s=10.3)
    assert interrupt == Interrupt("r1", pytest.approx(1.0), "barge_in")
    tt.speech_ended(audio_s=11.9)
    assert tt.final("Stop. What time is it?", confidence=0.9) == []
    assert tt.end_of_turn("Stop. What time is it?") == [StartReply("Stop. What time is it?")]

    tt = _barge(clock)
    assert tt.words("Yeah", confidence=0.9, audio_end_s=10.3) == []
    (interrupt,) = tt.words("Yeah, but wait", confidence=0.9, audio_end_s=10.7)
    assert isinstance(interrupt, Interrupt)


def test_a_long_yes_is_an_answer_and_interrupts():
    clock = FakeClock()
    tt = _barge(clock)
    assert tt.words("Yes", confidence=0.9, audio_end_s=10.5) == []
    (interrupt,) = tt.words("Yes, yes, okay", confidence=0.9, audio_end_s=11.0)  # 1 s of speech
    assert isinstance(interrupt, Interrupt)
    tt = _barge(clock)
    tt.speech_ended(audio_s=11.2)
    (interrupt,) = tt.final("Yeah.", confidence=0.9)
    assert isinstance(interrupt, Interrupt)


def test_a_short_low_confidence_word_is_noise_but_a_confident_one_interrupts():
    clock = FakeClock()
    tt = _barge(clock)
    assert tt.words("The", confidence=0.3, audio_end_s=10.2) == []
    tt.speech_ended(audio_s=10.3)
    assert tt.final("The.", confidence=0.35) == [Resume("r1")]
    tt = _barge(clock)
    tt.speech_ended(audio_s=10.3)
    (interrupt,) = tt.final("Wait.", confidence=0.9)
    assert isinstance(interrupt, Interrupt)


def test_without_audio_positions_every_utterance_counts_as_long():
    clock = FakeClock()
    tt = replying(clock)
    tt.audio_sent(8.0)
    clock.advance(1.0)
    assert tt.speech_started() == [Pause("r1")]
    (interrupt,) = tt.words("Yeah")
    assert isinstance(interrupt, Interrupt)
    with pytest.raises(ValueError, match="backchannel_max_s"):
        TurnTaking(clock, backchannel_max_s=-0.1)
    with pytest.raises(ValueError, match="backchannel_min_confidence"):
        TurnTaking(clock, backchannel_min_confidence=1.5)
