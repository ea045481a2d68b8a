"""When to take the floor in a silence: wait policies over an end-of-turn (EOU) probability that is
re-scored while the silence lasts.

Two policies, both plain synchronous objects on silence time (seconds since the user's speech ended):

* `WaitPolicy`, the policy of the field (LiveKit's turn detector, eot-bench's sweep): fire once the
  probability is at or above `threshold`, but not before `action_delay_s` of silence; fire anyway at
  `timeout_s`. An optional middle level (`middle_threshold`, `middle_delay_s`) fires a less certain
  score after a longer delay. A complete question the text doubts waits the timeout (~1 s), not 2 s.
* `ContinuousMap`, today's endpointer (voice/endpoint.py `required_silence_s`): the probability sets
  the silence required, `min_silence_s` when it reads complete up to `max_silence_s` when it reads cut
  off, log-linear in between, counted from the VAD's padded end (`speech_pad_s` after the speech).

Both decide on a grid of `GRID_S` (0.1 s, eot-bench's inference interval) from a trace: the scores at
the re-score points (`RESCORE_S`). `fire_s(times_s, probabilities)` returns the silence at which the
policy ends the turn: for `WaitPolicy` eot-bench's definition, max(action delay, first crossing of the
threshold) rounded up to the grid, at the latest the timeout; for `ContinuousMap` the first grid point
at which the silence reaches what the latest score requires (no decision before the first score).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from headstart.config import EndpointConfig
from headstart.voice.endpoint import required_silence_s

GRID_S = 0.1
# where the silence is re-scored (s): the first as soon as the final transcript's score is known
# (docs/listening.md: final and EOU ~0.2 s after the speech), then spaced out as the silence lasts
RESCORE_S = (0.2, 0.35, 0.5, 0.8, 1.2)
_EPS = 1e-9


def grid_points(until_s: float) -> list[float]:
    """The decision grid (s) up to and including the first point at or past `until_s`."""
    count = max(1, math.ceil(until_s / GRID_S - _EPS))
    return [round(GRID_S * k, 6) for k in range(1, count + 1)]


def _latest(times_s: Sequence[float], probabilities: Sequence[float], at_s: float) -> float | None:
    """The score of the last re-score point at or before `at_s` (None: not scored yet)."""
    latest = None
    for t, p in zip(times_s, probabilities, strict=True):
        if t <= at_s + _EPS:
            latest = p
        else:
            break
    return latest


def _check_trace(times_s: Sequence[float], probabilities: Sequence[float]) -> None:
    if len(times_s) != len(probabilities):
        raise ValueError(f"{len(times_s)} times but {len(probabilities)} probabilities")
    if any(b < a for a, b in zip(times_s, times_s[1:], strict=False)):
        raise ValueError(f"re-score times must not decrease, got {list(times_s)}")
    for p in probabilities:
        if not 0.0 <= p <= 1.0:  # also rejects NaN
            raise ValueError(f"probabilities must be in [0, 1], got {p}")


@dataclass(frozen=True, slots=True)
class WaitPolicy:
    """Threshold, action delay and timeout (and an optional middle level), as the field sweeps them.

    Attributes:
        threshold: the EOU probability in [0, 1] at or above which the turn ends.
        action_delay_s: the least silence (s) before the policy may act on a score.
        timeout_s: the silence (s) that ends the turn whatever the score (>= action_delay_s).
        middle_threshold: a lower level (< threshold) that ends the turn after `middle_delay_s`
            (None: no middle level).
        middle_delay_s: its delay (s, between action_delay_s and timeout_s).

    Raises:
        ValueError: a value out of range, or a middle level given by one of its two fields only.
    """

    threshold: float
    action_delay_s: float
    timeout_s: float
    middle_threshold: float | None = None
    middle_delay_s: float | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"threshold must be in [0, 1], got {self.threshold}")
        if not 0.0 <= self.action_delay_s <= self.timeout_s:
            raise ValueError(f"need 0 <= action_delay_s <= timeout_s, got {self.action_delay_s}, {self.timeout_s}")
        if (self.middle_threshold is None) != (self.middle_delay_s is None):
            raise ValueError("middle_threshold and middle_delay_s go together")
        if self.middle_threshold is not None and self.middle_delay_s is not None:
            if not 0.0 <= self.middle_threshold < self.threshold:
                raise ValueError(f"middle_threshold must be in [0, threshold), got {self.middle_threshold}")
            if not self.action_delay_s <= self.middle_delay_s <= self.timeout_s:
                raise ValueError(f"middle_delay_s must be in [action_delay_s, timeout_s], got {self.middle_delay_s}")

    def fire_s(self, times_s: Sequence[float], probabilities: Sequence[float]) -> float:
        """The silence (s, on the 0.1 s grid) at which the turn ends on this trace: max(action delay,
        the first re-score time whose score is >= threshold), the middle level likewise, the earliest
        of these and the timeout, rounded up to the grid. A crossing is kept once seen (the decision is
        taken on it, as the field's endpointers do), even if a later score falls back.

        Args:
            times_s: the re-score points (s of silence, not decreasing), shape (n,).
            probabilities: the score at each, in [0, 1], shape (n,).

        Raises:
            ValueError: lengths differ, times decrease, or a probability is outside [0, 1].
        """
        _check_trace(times_s, probabilities)
        fire = self.timeout_s
        crossed = first_crossing_s(times_s, probabilities, self.threshold)
        if crossed is not None:
            fire = min(fire, max(self.action_delay_s, crossed))
        if self.middle_threshold is not None and self.middle_delay_s is not None:
            crossed = first_crossing_s(times_s, probabilities, self.middle_threshold)
            if crossed is not None:
                fire = min(fire, max(self.middle_delay_s, crossed))
        return on_grid(fire)


def on_grid(silence_s: float) -> float:
    """`silence_s` rounded up to the decision grid (0.35 -> 0.4; 0.3 stays 0.3)."""
    return round(GRID_S * max(1, math.ceil(silence_s / GRID_S - _EPS)), 6)


def first_crossing_s(times_s: Sequence[float], probabilities: Sequence[float], threshold: float) -> float | None:
    """The first re-score time whose score is >= `threshold` (None: none)."""
    for t, p in zip(times_s, probabilities, strict=True):
        if p >= threshold:
            return t
    return None


@dataclass(frozen=True, slots=True)
class ContinuousMap:
    """Today's endpointer as a wait policy: the silence required after the VAD's padded end follows
    the latest probability (`voice/endpoint.py` `required_silence_s`: `min_silence_s` at or above
    `eou_high`, `max_silence_s` at or below `eou_low`, log-linear between), and the padded end lies
    `speech_pad_s` after the speech. No score yet: no decision (the endpointer awaits the final's).

    Attributes:
        eou_low, eou_high: the thresholds (0 < low < high <= 1; the shipped head's 0.8048 / 0.8247).
        min_silence_s, max_silence_s: EndpointConfig's (0 and 2 s).
        speech_pad_s: VADConfig.speech_pad_s (0.1 s).
    """

    eou_low: float
    eou_high: float
    min_silence_s: float = 0.0
    max_silence_s: float = 2.0
    speech_pad_s: float = 0.1

    def __post_init__(self) -> None:
        # EndpointConfig's own checks (Endpointer) are not run on a bare config: check the pair here
        if not 0.0 < self.eou_low < self.eou_high <= 1.0:
            raise ValueError(f"need 0 < eou_low < eou_high <= 1, got {self.eou_low}, {self.eou_high}")
        if not 0.0 <= self.min_silence_s <= self.max_silence_s:
            raise ValueError(f"need 0 <= min_silence_s <= max_silence_s, got {self.min_silence_s}, {self.max_silence_s}")
        if self.speech_pad_s < 0:
            raise ValueError(f"speech_pad_s must be >= 0, got {self.speech_pad_s}")

    @property
    def endpoint_config(self) -> EndpointConfig:
        return EndpointConfig(eou_low=self.eou_low, eou_high=self.eou_high, min_silence_s=self.min_silence_s,
                              max_silence_s=self.max_silence_s, head_thresholds="config")

    @property
    def ceiling_s(self) -> float:
        """The longest it can wait once a score is known (s of silence)."""
        return self.speech_pad_s + self.max_silence_s

    def should_fire(self, silence_s: float, probability: float | None) -> bool:
        """Whether the turn ends at `silence_s` of silence with `probability` the latest score."""
        if probability is None:
            return False
        return silence_s >= self.speech_pad_s + required_silence_s(self.endpoint_config, probability) - _EPS

    def fire_s(self, times_s: Sequence[float], probabilities: Sequence[float]) -> float:
        """The silence (s, on the 0.1 s grid) at which the turn ends on this trace (see `WaitPolicy.fire_s`).

        Raises:
            ValueError: as `WaitPolicy.fire_s`, or an empty trace (it would never decide).
        """
        _check_trace(times_s, probabilities)
        if not times_s:
            raise ValueError("an empty trace: the continuous map needs a score to decide")
        config = self.endpoint_config
        for g in grid_points(max(times_s[-1], self.ceiling_s)):
            p = _latest(times_s, probabilities, g)
            if p is not None and g >= self.speech_pad_s + required_silence_s(config, p) - _EPS:
                return g
        return grid_points(max(times_s[-1], self.ceiling_s))[-1]
