"""Timers, alarms and reminders of one session: several at once, named or known by their duration, on
the session's clock. Thread-safe (tools run on the tools executor; the session polls `due` on the loop)."""

from __future__ import annotations

import itertools
import logging
import threading
from dataclasses import dataclass

from headstart.clock import Clock

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Timer:
    """A running timer (`kind` "timer"), alarm ("alarm") or reminder ("reminder"). `due_at_s` is on the
    session's clock; `label` is how the answer calls it ("ten minute", "7:30 AM", a reminder's task as
    said back: "call your mom", "" for a reminder without one)."""

    timer_id: int
    kind: str
    label: str
    name: str | None
    duration_s: float
    started_at_s: float
    due_at_s: float


class TimerBook:
    """The session's timers, alarms and reminders.

    Args:
        clock: the session's clock: `due_at_s` and `left_s` are on it.
    """

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._timers: dict[int, Timer] = {}
        self._ids = itertools.count(1)
        self.closed = False

    def start(self, duration_s: float, *, label: str, name: str | None = None, kind: str = "timer") -> Timer:
        """Start a timer of `duration_s` seconds (> 0).

        Raises:
            ValueError: a duration not above 0, or the book was closed (its session ended).
        """
        if not duration_s > 0:
            raise ValueError("a timer needs a duration above 0 seconds")
        with self._lock:
            if self.closed:
                raise ValueError("the session's timers were closed")
            now = self._clock.now()
            timer = Timer(next(self._ids), kind, label, name, float(duration_s), now, now + duration_s)
            self._timers[timer.timer_id] = timer
            return timer

    def find(self, *, name: str | None = None, duration_s: float | None = None, kind: str | None = None) -> list[Timer]:
        """The running timers that fit: by name, by the duration they were set for, by kind; all when no
        filter is given. Oldest first."""
        with self._lock:
            timers = sorted(self._timers.values(), key=lambda t: t.timer_id)
        if kind is not None:
            timers = [t for t in timers if t.kind == kind]
        if name is not None:
            timers = [t for t in timers if t.name is not None and t.name.lower() == name.lower()]
        if duration_s is not None:
            timers = [t for t in timers if abs(t.duration_s - duration_s) < 0.5]
        return timers

    def cancel(self, timer: Timer) -> bool:
        """Stop `timer`; False when it already fired or was cancelled."""
        with self._lock:
            return self._timers.pop(timer.timer_id, None) is not None

    def now_s(self) -> float:
        """The session's clock now (seconds)."""
        return self._clock.now()

    def left_s(self, timer: Timer) -> float:
        """Seconds until `timer` fires (0 once due)."""
        return max(0.0, timer.due_at_s - self._clock.now())

    def next_due_at_s(self) -> float | None:
        """When the next timer fires (None: none running)."""
        with self._lock:
            return min((t.due_at_s for t in self._timers.values()), default=None)

    def due(self) -> list[Timer]:
        """The timers due now, removed from the book (each is returned once), oldest due first."""
        now = self._clock.now()
        with self._lock:
            fired = sorted((t for t in self._timers.values() if t.due_at_s <= now + 1e-9), key=lambda t: t.due_at_s)
            for timer in fired:
                del self._timers[timer.timer_id]
        return fired

    def close(self) -> list[Timer]:
        """The session ended: every running timer, alarm and reminder is cancelled, each with a log line; later
        `start` calls raise. Returns the cancelled ones."""
        with self._lock:
            self.closed = True
            cancelled = sorted(self._timers.values(), key=lambda t: t.timer_id)
            self._timers.clear()
        for timer in cancelled:
            log.info("the session ended: its %s %r (due in %.1f s) is cancelled", timer.kind, timer.label,
                     max(0.0, timer.due_at_s - self._clock.now()))
        return cancelled
