"""The head start's decisions (PreemptionPolicy) on a FakeClock with scripted events: when a held reply
starts, what drops it, and when the end of turn releases it."""

from __future__ import annotations

import pytest

from headstart.clock import FakeClock
from headstart.config import SessionConfig
from headstart.session.preemption import CancelHeld, Preempt, PreemptionPolicy, Release, same_text


def user_says(policy: PreemptionPolicy, clock: FakeClock, *partials: str) -> None:
    assert policy.speech_started() == []
    for text in partials:
        clock.advance(0.4)
        assert policy.partial(text) == []


def test_hit_releases_with_the_lead_gained():
    clock = FakeClock()
    policy = PreemptionPolicy(clock)
    user_says(policy, clock, "What is", "What is the capital of", "What is the capital of France?")
    clock.advance(0.25)
    assert policy.speech_ended() == [Preempt("What is the capital of France?")]
    clock.advance(0.3)
    assert policy.final("What is the capital of France?") == []  # same text: keep holding
    clock.advance(0.45)
    (release,) = policy.end_of_turn("What is the capital of  France?")  # whitespace aside
    assert isinstance(release, Release) and release.text == "What is the capital of France?"
    assert release.lead_s == pytest.approx(0.75)
    assert policy.take_outcome() == "hit" and policy.take_outcome() == "none"
    assert (policy.stats.hits, policy.stats.misses) == (1, 0)


def test_resumed_speech_drops_the_held_reply():
    clock = FakeClock()
    policy = PreemptionPolicy(clock)
    user_says(policy, clock, "Tell me about the weather.")
    assert policy.speech_ended() == [Preempt("Tell me about the weather.")]
    clock.advance(1.0)
    assert policy.speech_started() == [CancelHeld("speech_resumed")]
    assert policy.held_text is None
    assert policy.partial("Tell me about the weather. In Paris tomorrow.") == []  # speaking: no preempt
    assert policy.speech_ended() == [Preempt("Tell me about the weather. In Paris tomorrow.")]
    assert policy.end_of_turn("Tell me about the weather. In Paris tomorrow.")[0].text.endswith("tomorrow.")
    assert policy.take_outcome() == "hit"  # the second held reply was released
    assert (policy.stats.hits, policy.stats.misses) == (1, 1)


def test_a_final_that_differs_drops_it_and_holds_the_final_instead():
    clock = FakeClock()
    policy = PreemptionPolicy(clock)
    user_says(policy, clock, "Set a timer for ten.")
    assert policy.speech_ended() == [Preempt("Set a timer for ten.")]
    clock.advance(0.3)
    assert policy.final("Set a timer for ten minutes.") == [
        CancelHeld("text_changed"), Preempt("Set a timer for ten minutes.")]
    (release,) = policy.end_of_turn("Set a timer for ten minutes.")
    assert isinstance(release, Release)
    assert (policy.stats.hits, policy.stats.misses) == (1, 1)


def test_end_of_turn_on_other_text_is_a_miss_and_nothing_is_released():
    clock = FakeClock()
    policy = PreemptionPolicy(clock)
    user_says(policy, clock, "Play some music.")
    assert policy.speech_ended() == [Preempt("Play some music.")]
    assert policy.end_of_turn("Play some jazz music.") == [CancelHeld("mismatch")]
    assert policy.take_outcome() == "miss"
    assert policy.held_text is None


def test_unfinished_text_is_not_preempted_by_the_punctuation_rule():
    clock = FakeClock()
    policy = PreemptionPolicy(clock)
    user_says(policy, clock, "What is the capital of")
    assert policy.speech_ended() == []  # no sentence end: the user is likely mid-sentence
    assert policy.final("Hi.") == []  # fewer than preempt_min_words
    assert policy.end_of_turn("Hi.") == []
    assert policy.take_outcome() == "none"


def test_the_eou_signal_overrides_punctuation_for_its_own_text():
    clock = FakeClock()
    policy = PreemptionPolicy(clock, SessionConfig(preempt_eou_threshold=0.1))
    user_says(policy, clock, "What is the capital of France")
    assert policy.eou("What is the capital of France", 0.4) == []  # still speaking
    assert policy.speech_ended() == [Preempt("What is the capital of France")]  # no period, but p >= 0.1
    assert policy.speech_started() == [CancelHeld("speech_resumed")]
    assert policy.partial("What is the capital of France and.") == []
    assert policy.eou("What is the capital of France and.", 0.01) == []  # speaking, and low
    assert policy.speech_ended() == []  # a period, but the signal says cut off
    assert policy.eou("What is the capital of France and Spain?", 0.5) == []  # not the latest text yet
    assert policy.final("What is the capital of France and Spain?") == [
        Preempt("What is the capital of France and Spain?")]  # the final is: its probability is known


def test_an_eou_arriving_in_the_silence_starts_the_held_reply():
    clock = FakeClock()
    policy = PreemptionPolicy(clock)
    user_says(policy, clock, "turn on the lights")
    assert policy.speech_ended() == []  # no punctuation, no signal yet
    clock.advance(0.2)
    assert policy.eou("turn on the lights", 0.3) == [Preempt("turn on the lights")]
    clock.advance(0.3)
    assert policy.end_of_turn("turn on the lights")[0].lead_s == pytest.approx(0.3)


def test_no_words_clear_and_switch_off():
    clock = FakeClock()
    policy = PreemptionPolicy(clock)
    user_says(policy, clock, "Is it raining?")
    assert policy.speech_ended() == [Preempt("Is it raining?")]
    assert policy.final("") == [CancelHeld("no_words")]
    user_says(policy, clock, "Is it raining?")
    assert policy.speech_ended() == [Preempt("Is it raining?")]
    assert policy.cancel("cleared") == [CancelHeld("cleared")]
    assert policy.cancel("cleared") == []  # idempotent
    assert policy.stats.misses == 2

    off = PreemptionPolicy(clock, SessionConfig(head_start=False))
    user_says(off, clock, "Is it raining?")
    assert off.speech_ended() == [] and off.final("Is it raining?") == []
    assert off.end_of_turn("Is it raining?") == [] and off.take_outcome() == "none"


def test_withdraw_counts_neither_hit_nor_miss():
    clock = FakeClock()
    policy = PreemptionPolicy(clock)
    user_says(policy, clock, "Good morning there.")
    assert policy.speech_ended() == [Preempt("Good morning there.")]
    policy.withdraw()  # the session could not start it (e.g. the agent was still speaking)
    assert policy.end_of_turn("Good morning there.") == []
    assert policy.take_outcome() == "none" and (policy.stats.hits, policy.stats.misses) == (0, 0)


def test_same_text_ignores_only_whitespace():
    assert same_text("ill -disposed man.", "ill-disposed man.")
    assert not same_text("France?", "France.")


def test_preemptive_switch_off_holds_nothing_but_head_start_stays_on():
    clock = FakeClock()
    policy = PreemptionPolicy(clock, SessionConfig(preemptive=False))
    assert policy.enabled and policy.incremental_prefill and not policy.preemptive
    user_says(policy, clock, "Is it raining?")
    assert policy.speech_ended() == []
    assert policy.eou("Is it raining?", 0.9) == []
    assert policy.final("Is it raining?") == []
    assert policy.end_of_turn("Is it raining?") == [] and policy.take_outcome() == "none"
    assert (policy.stats.hits, policy.stats.misses) == (0, 0)


def test_incremental_prefill_switch_leaves_preemption_alone():
    clock = FakeClock()
    policy = PreemptionPolicy(clock, SessionConfig(incremental_prefill=False))
    assert policy.preemptive and not policy.incremental_prefill
    user_says(policy, clock, "Is it raining?")
    assert policy.speech_ended() == [Preempt("Is it raining?")]
    # the master switch turns both off, whatever the others say
    off = PreemptionPolicy(clock, SessionConfig(head_start=False, incremental_prefill=True, preemptive=True))
    assert not off.incremental_prefill and not off.preemptive


def test_the_default_threshold_follows_the_endpointer_scale():
    from headstart.config import EndpointConfig
    from headstart.session.preemption import preempt_threshold

    token = preempt_threshold(SessionConfig(), EndpointConfig(eou_scorer="token", token_eou_low=1e-7,
                                                              token_eou_high=1e-4))
    assert token == pytest.approx(10 ** -6.25)
    # the trained head has its own default, well below its end-of-turn thresholds
    assert preempt_threshold(SessionConfig(), EndpointConfig(eou_low=0.805, eou_high=0.825)) == 0.1
    no_head_default = SessionConfig(preempt_head_threshold=None)
    head = preempt_threshold(no_head_default, EndpointConfig(eou_low=0.1, eou_high=0.9))
    assert 0.1 < head < 0.9
    assert preempt_threshold(SessionConfig(preempt_eou_threshold=0.2), EndpointConfig()) == 0.2
    clock = FakeClock()
    policy = PreemptionPolicy(clock, no_head_default, endpoint=EndpointConfig(eou_low=0.1, eou_high=0.9))
    user_says(policy, clock, "turn on the lights")
    assert policy.speech_ended() == []
    assert policy.eou("turn on the lights", 0.15) == []  # low on this scale
    assert policy.eou("turn on the lights", 0.6) == [Preempt("turn on the lights")]


def test_a_pause_before_the_speech_end_preempts_and_speech_going_on_drops_it():
    """SessionConfig.preempt_on_pause: an unconfirmed pause is "stopped speaking" for the held reply; the
    speech going on drops it, and later partials start nothing until the next pause or the speech end."""
    clock = FakeClock()
    policy = PreemptionPolicy(clock)
    user_says(policy, clock, "Turn on the lights.")
    assert policy.eou("Turn on the lights.", 0.6) == []  # still speaking: an estimate starts nothing
    clock.advance(0.07)
    assert policy.pause_started() == [Preempt("Turn on the lights.")]
    assert policy.pause_ended() == [CancelHeld("speech_resumed")]
    assert policy.pause_ended() == []  # once
    assert policy.partial("Turn on the lights in the hall.") == []
    assert policy.eou("Turn on the lights in the hall.", 0.9) == []  # speaking again
    assert policy.pause_started() == [Preempt("Turn on the lights in the hall.")]
    clock.advance(0.2)
    assert policy.speech_ended() == []  # the pause was the end: the same held reply goes on
    assert policy.final("Turn on the lights in the hall.") == []
    (release,) = policy.end_of_turn("Turn on the lights in the hall.")
    assert isinstance(release, Release) and release.lead_s == pytest.approx(0.2)
    assert (policy.stats.hits, policy.stats.misses) == (1, 1)


def test_a_pause_waits_for_an_estimate_that_reads_complete():
    clock = FakeClock()
    policy = PreemptionPolicy(clock)
    user_says(policy, clock, "Turn on the")
    assert policy.pause_started() == []  # no punctuation and no estimate: nothing
    assert policy.eou("Turn on the", 0.01) == []  # reads cut off
    assert policy.partial("Turn on the lights") == []  # the early final pass during the pause
    assert policy.eou("Turn on the lights", 0.5) == [Preempt("Turn on the lights")]


def test_without_preempt_on_pause_a_pause_is_speech():
    clock = FakeClock()
    policy = PreemptionPolicy(clock, SessionConfig(preempt_on_pause=False))
    user_says(policy, clock, "Turn on the lights.")
    assert policy.pause_started() == [] and policy.eou("Turn on the lights.", 0.9) == []
    assert policy.pause_ended() == []
    assert policy.speech_ended() == [Preempt("Turn on the lights.")]
