"""The wait policies of voice/wait_policy.py on hand-made traces: the field's threshold / action delay /
timeout (fire = max(delay, first crossing) on the 0.1 s grid, at the latest the timeout; a middle
level) and today's continuous map, which must decide as the Endpointer does."""

from __future__ import annotations

import pytest

from headstart.config import EndpointConfig
from headstart.events import SpeechEnded, SpeechStarted
from headstart.voice.endpoint import Endpointer
from headstart.voice.wait_policy import ContinuousMap, WaitPolicy, grid_points, on_grid

TIMES = (0.2, 0.35, 0.5, 0.8, 1.2)


def test_the_grid_rounds_up_to_a_tenth():
    assert on_grid(0.35) == 0.4
    assert on_grid(0.3) == 0.3
    assert on_grid(0.30000000001) == 0.3
    assert on_grid(0.0) == 0.1
    assert grid_points(0.25) == [0.1, 0.2, 0.3]


def test_fires_at_the_action_delay_when_the_first_score_crosses():
    policy = WaitPolicy(threshold=0.5, action_delay_s=0.4, timeout_s=1.0)
    assert policy.fire_s(TIMES, (0.9, 0.9, 0.9, 0.9, 0.9)) == 0.4


def test_fires_at_the_first_crossing_after_the_delay_rounded_to_the_grid():
    policy = WaitPolicy(threshold=0.5, action_delay_s=0.2, timeout_s=2.0)
    assert policy.fire_s(TIMES, (0.1, 0.6, 0.6, 0.6, 0.6)) == 0.4  # crossed at 0.35
    assert policy.fire_s(TIMES, (0.1, 0.1, 0.1, 0.7, 0.7)) == 0.8


def test_no_crossing_waits_the_timeout():
    policy = WaitPolicy(threshold=0.5, action_delay_s=0.2, timeout_s=1.05)
    assert policy.fire_s(TIMES, (0.1,) * 5) == 1.1
    assert policy.fire_s((), ()) == 1.1  # a hold too short to be scored


def test_the_timeout_wins_over_a_late_crossing():
    policy = WaitPolicy(threshold=0.5, action_delay_s=0.2, timeout_s=0.6)
    assert policy.fire_s(TIMES, (0.1, 0.1, 0.1, 0.9, 0.9)) == 0.6


def test_a_crossing_is_kept_when_the_score_falls_back():
    policy = WaitPolicy(threshold=0.5, action_delay_s=0.6, timeout_s=2.0)
    assert policy.fire_s(TIMES, (0.9, 0.1, 0.1, 0.1, 0.1)) == 0.6


def test_the_middle_level_fires_a_doubtful_score_later():
    policy = WaitPolicy(threshold=0.8, action_delay_s=0.2, timeout_s=2.0, middle_threshold=0.4, middle_delay_s=0.8)
    assert policy.fire_s(TIMES, (0.9,) * 5) == 0.2
    assert policy.fire_s(TIMES, (0.5,) * 5) == 0.8
    assert policy.fire_s(TIMES, (0.1,) * 5) == 2.0
    assert policy.fire_s(TIMES, (0.1, 0.1, 0.1, 0.1, 0.5)) == 1.2


@pytest.mark.parametrize("kwargs", [
    {"threshold": 1.5, "action_delay_s": 0.2, "timeout_s": 1.0},
    {"threshold": 0.5, "action_delay_s": 1.2, "timeout_s": 1.0},
    {"threshold": 0.5, "action_delay_s": -0.1, "timeout_s": 1.0},
    {"threshold": 0.5, "action_delay_s": 0.2, "timeout_s": 1.0, "middle_threshold": 0.3},
    {"threshold": 0.5, "action_delay_s": 0.2, "timeout_s": 1.0, "middle_threshold": 0.6, "middle_delay_s": 0.5},
    {"threshold": 0.5, "action_delay_s": 0.4, "timeout_s": 1.0, "middle_threshold": 0.3, "middle_delay_s": 0.3},
])
def test_bad_settings_are_refused(kwargs):
    with pytest.raises(ValueError):
        WaitPolicy(**kwargs)


def test_a_bad_trace_is_refused():
    policy = WaitPolicy(threshold=0.5, action_delay_s=0.2, timeout_s=1.0)
    with pytest.raises(ValueError):
        policy.fire_s((0.2, 0.35), (0.5,))
    with pytest.raises(ValueError):
        policy.fire_s((0.35, 0.2), (0.5, 0.5))
    with pytest.raises(ValueError):
        policy.fire_s((0.2,), (float("nan"),))


def test_the_continuous_map_follows_the_required_silence():
    shipped = ContinuousMap(eou_low=0.15, eou_high=0.75)
    assert shipped.fire_s(TIMES, (0.9,) * 5) == 0.2  # min_silence 0 after the 0.1 s pad, at the first score
    assert shipped.fire_s(TIMES, (0.1,) * 5) == 2.1  # the 2 s ceiling after the pad
    middle = shipped.fire_s(TIMES, (0.34,) * 5)  # log-linear: just past halfway (0.335) between 0.15 and 0.75
    assert middle == pytest.approx(1.1)
    assert shipped.fire_s(TIMES, (0.1, 0.1, 0.9, 0.9, 0.9)) == 0.5  # the score that reads complete came at 0.5
    with pytest.raises(ValueError):
        shipped.fire_s((), ())
    with pytest.raises(ValueError):
        ContinuousMap(eou_low=0.8, eou_high=0.7)


@pytest.mark.parametrize("probability", [0.05, 0.2, 0.3, 0.5, 0.7, 0.8, 0.95])
def test_the_continuous_map_decides_as_the_endpointer(probability):
    """The Endpointer with the same thresholds, its SpeechEnded padded 0.1 s past the speech, the EOU
    pushed at the first re-score point: the turn ends at the same silence (on the 0.1 s grid)."""
    config = EndpointConfig(eou_low=0.15, eou_high=0.75, head_thresholds="config")
    endpointer = Endpointer(config)
    speech_end_s = 1.0
    endpointer.push(SpeechStarted(0.0))
    endpointer.push(SpeechEnded(speech_end_s + 0.1))
    ended = None
    for silence in grid_points(3.0):
        if silence >= 0.2 - 1e-9 and endpointer.eou_probability is None:
            endpointer.push_eou(probability)
        if endpointer.eou_probability is not None and endpointer.poll(speech_end_s + silence) is not None:
            ended = silence
            break
    assert ended == ContinuousMap(0.15, 0.75).fire_s((0.2,), (probability,))
