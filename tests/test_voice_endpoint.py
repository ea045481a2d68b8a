"""Endpointer with fake VAD events and exact audio times."""

from __future__ import annotations

import pytest

from headstart.config import EndpointConfig
from headstart.events import EndOfTurn, SpeechEnded, SpeechStarted
from headstart.voice.endpoint import Endpointer


def run(ep: Endpointer, script, until_s: float, step_s: float = 0.01):
    """Play `script` [(audio_s, event)] while polling every `step_s`; return the EndOfTurn events."""
    script = sorted(script, key=lambda x: x[0])
    ends = []
    t = 0.0
    i = 0
    while t <= until_s + 1e-9:
        while i < len(script) and script[i][0] <= t + 1e-9:
            ep.push(script[i][1])
            i += 1
        eot = ep.poll(round(t, 6))
        if eot is not None:
            ends.append(eot)
        t += step_s
    return ends


def test_turn_ends_silence_s_after_speech_end():
    ep = Endpointer(EndpointConfig(silence_s=0.5))
    ends = run(ep, [(1.0, SpeechStarted(0.9)), (3.25, SpeechEnded(3.0))], until_s=6.0)
    assert ends == [EndOfTurn(audio_s=3.5)]
    assert not ep.in_turn and not ep.forced


def test_silence_measured_from_the_reported_speech_end_not_the_decision_time():
    ep = Endpointer(EndpointConfig(silence_s=0.5))
    ep.push(SpeechStarted(0.0))
    assert ep.poll(2.3) is None
    ep.push(SpeechEnded(2.0))  # the VAD decides late; the speech ended at 2.0
    assert ep.poll(2.49) is None
    assert ep.poll(2.5) == EndOfTurn(2.5)
    assert ep.poll(10.0) is None  # only once


def test_resumed_speech_cancels_the_wait_and_the_turn_goes_on():
    """cases.md: 10 s of speech, a 1.5 s pause, 8 s more -> one turn covering all of it (with a
    silence_s longer than the pause); with a shorter silence_s the pause ends the turn."""
    script = [(0.2, SpeechStarted(0.0)), (10.25, SpeechEnded(10.0)), (11.6, SpeechStarted(11.5)), (19.75, SpeechEnded(19.5))]
    ends = run(Endpointer(EndpointConfig(silence_s=2.0)), script, until_s=25.0)
    assert ends == [EndOfTurn(21.5)]
    ends = run(Endpointer(EndpointConfig(silence_s=0.5)), script, until_s=25.0)
    assert ends == [EndOfTurn(10.5), EndOfTurn(20.0)]


def test_no_speech_no_turn():
    ep = Endpointer(EndpointConfig(silence_s=0.5))
    assert run(ep, [], until_s=40.0) == []
    assert ep.flush(40.0) is None
    # a SpeechEnded without a start (e.g. after reset mid-speech) opens nothing
    ep.push(SpeechEnded(41.0))
    assert ep.poll(45.0) is None


def test_max_turn_guard_ends_a_turn_during_speech_and_opens_the_next():
    ep = Endpointer(EndpointConfig(silence_s=0.5, max_turn_s=5.0))
    ends = run(ep, [(0.1, SpeechStarted(0.0)), (12.3, SpeechEnded(12.0))], until_s=14.0, step_s=0.1)
    assert [e.audio_s for e in ends] == pytest.approx([5.0, 10.0, 12.5])
    assert not ep.in_turn


def test_max_turn_guard_reports_forced():
    ep = Endpointer(EndpointConfig(silence_s=0.5, max_turn_s=1.0))
    ep.push(SpeechStarted(0.0))
    assert ep.poll(1.0) == EndOfTurn(1.0) and ep.forced and ep.in_turn
    ep.push(SpeechEnded(1.2))
    assert ep.poll(1.7) == EndOfTurn(1.7) and not ep.forced and not ep.in_turn


def test_flush_ends_an_open_turn_at_once():
    ep = Endpointer(EndpointConfig(silence_s=0.5))
    ep.push(SpeechStarted(0.0))
    ep.push(SpeechEnded(1.0))
    assert ep.poll(1.2) is None
    assert ep.flush(1.3) == EndOfTurn(1.3)
    assert ep.flush(1.4) is None


def test_zero_silence_ends_at_the_speech_end():
    ep = Endpointer(EndpointConfig(silence_s=0.0))
    ep.push(SpeechStarted(0.0))
    ep.push(SpeechEnded(1.0))
    assert ep.poll(1.0) == EndOfTurn(1.0)


def test_errors():
    with pytest.raises(ValueError, match="silence_s"):
        Endpointer(EndpointConfig(silence_s=-0.1))
    with pytest.raises(ValueError, match="max_turn_s"):
        Endpointer(EndpointConfig(max_turn_s=0))
    ep = Endpointer(EndpointConfig())
    ep.poll(2.0)
    with pytest.raises(ValueError, match="backwards"):
        ep.poll(1.0)
    with pytest.raises(TypeError):
        ep.push(EndOfTurn(1.0))  # type: ignore[arg-type]


def test_reset_forgets_the_turn():
    ep = Endpointer(EndpointConfig(silence_s=0.5))
    ep.push(SpeechStarted(0.0))
    ep.push(SpeechEnded(1.0))
    ep.reset()
    assert ep.poll(0.0) is None and ep.poll(5.0) is None and not ep.in_turn
