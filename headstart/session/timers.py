"""Timers, alarms and reminders that speak without being asked: when one fires, the session sends
`TimerFired` (the wire's `timer.fired`) and starts an agent-initiated reply ("Your ten minute timer is
done.", "Reminder: check the oven.") that yields to the user like any reply. While the user speaks or
another reply has the floor the announcement waits its turn.

    announcer = TimerAnnouncer(clock, toolbox, put, can_speak=..., speak=...)
    announcer.schedule()     # after a tool ran: sleep until the next timer is due
    announcer.close()        # the session ended: its timers, alarms and reminders are cancelled (a log line each)
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from headstart.clock import Clock
from headstart.tools.timers import Timer
from headstart.tools.toolbox import Toolbox

_RETRY_S = 0.25  # how often a waiting announcement asks for the floor again
_POLL_S = 1.0  # the longest wall-clock sleep between looks at the session's clock


@dataclass(frozen=True, slots=True)
class TimerFired:
    """A timer, alarm or reminder went off: `kind` "timer", "alarm" or "reminder", `label` ("ten minute",
    "7:30 AM", a reminder's task as said back: "call your mom", or "" for a reminder without one), `name`
    ("pasta", or "" for an unnamed timer, an alarm or a reminder), `text` the announcement the agent
    speaks."""

    timer_id: int
    kind: str
    label: str
    name: str
    text: str


def announcement(timer: Timer) -> str:
    """What the agent says when `timer` fires."""
    if timer.kind == "alarm":
        return f"It's {timer.label}. This is your alarm."
    if timer.kind == "reminder":
        return f"Reminder: {timer.label}." if timer.label else "This is your reminder."
    return f"Your {timer.name or timer.label} timer is done."


class TimerAnnouncer:
    """Watches one session's timers (see the module docstring).

    Args:
        clock: the session's clock.
        toolbox: the session's tools (its `timers`).
        put: the session's event queue (`TimerFired`).
        can_speak: `() -> bool`: the agent may take the floor now (silent, the user not speaking).
        speak: `(text) -> None`: start the agent-initiated reply.
        poll_s: the longest wall-clock sleep between looks at the clock. The watch waits on wall time,
            not `clock.sleep` (a FakeClock's sleep moves the clock: a ten minute timer would fire at once).
    """

    def __init__(self, clock: Clock, toolbox: Toolbox, put: Callable[[TimerFired], None], *,
                 can_speak: Callable[[], bool], speak: Callable[[str], None], poll_s: float = _POLL_S) -> None:
        self.poll_s = poll_s
        self._clock = clock
        self._toolbox = toolbox
        self._put = put
        self._can_speak = can_speak
        self._speak = speak
        self._task: asyncio.Task[None] | None = None
        self._waiting: list[str] = []  # announcements waiting for the floor
        self._closed = False

    @property
    def task(self) -> asyncio.Task[None] | None:
        return self._task if self._task is not None and not self._task.done() else None

    def schedule(self) -> None:
        """(Re)arm the watch for the next due timer (inside the running event loop); nothing to watch
        and nothing waiting: no task."""
        if self._closed:
            return
        if self._task is not None and not self._task.done() and self._task is not asyncio.current_task():
            self._task.cancel()
        self._task = None
        due_at_s = self._toolbox.timers.next_due_at_s()
        if due_at_s is None and not self._waiting:
            return
        wake_at_s = self._clock.now() + _RETRY_S if due_at_s is None else due_at_s
        if self._waiting:
            wake_at_s = min(wake_at_s, self._clock.now() + _RETRY_S)
        self._task = asyncio.create_task(self._fire_at(wake_at_s), name="session-timers")

    async def _fire_at(self, wake_at_s: float) -> None:
        while (left_s := wake_at_s - self._clock.now()) > 1e-9:  # noqa: ASYNC110 - a deadline on the clock, no event to wait on
            await asyncio.sleep(min(left_s, self.poll_s))
        for timer in self._toolbox.due():
            text = announcement(timer)
            self._put(TimerFired(timer.timer_id, timer.kind, timer.label, timer.name or "", text))
            self._waiting.append(text)
        if self._waiting and self._can_speak():
            self._speak(" ".join(self._waiting))
            self._waiting = []
        self.schedule()

    def close(self) -> None:
        """The session ended: stop watching; its timers, alarms and reminders are cancelled, each with a log
        line."""
        self._closed = True
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._toolbox.close()
