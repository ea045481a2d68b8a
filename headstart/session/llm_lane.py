"""Priority on the one llm thread every session shares: a confirmed reply goes first.

One `LLMPriority` per process (`Components.llm_priority`). A confirmed reply announces itself when it
is requested (`confirm`) and withdraws once its LLM work has started (`started`); meanwhile
`confirmed_pending` is true, and background jobs already queued on the llm thread (EOU estimates) read
it and give way. Held (speculative) work subscribes while it generates: a reply confirmed by another
owner calls its callback, and the subscriber drops its held work (regenerated at its own end of turn if
needed: a miss, never a stale reply). No session reaches into another; they meet here.

    priority = LLMPriority()
    cancel = priority.subscribe(owner, on_confirmed)   # held work; cancel() when it is dropped
    priority.confirm(owner, key, alive)                 # a confirmed reply waits for the llm thread
    priority.started(key)                               # its LLM work began (idempotent)

A plain synchronous object: no I/O, no event loop. `confirmed_pending` is safe to read from any thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable


class LLMPriority:
    """Confirmed replies first on the shared llm thread (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[Hashable, Callable[[], bool]] = {}  # key -> alive(): still wants the thread
        self._subscribers: dict[int, tuple[object, Callable[[], None]]] = {}
        self._next_id = 0

    @property
    def confirmed_pending(self) -> bool:
        """Whether a confirmed reply waits for the llm thread (safe to read from any thread)."""
        with self._lock:
            alive = list(self._waiting.values())
        return any(a() for a in alive)

    @property
    def num_waiting(self) -> int:
        """Confirmed replies announced and not started yet (alive or not)."""
        return len(self._waiting)

    def confirm(self, owner: object, key: Hashable, alive: Callable[[], bool] = lambda: True) -> None:
        """A reply of `owner` is confirmed and waits for the llm thread until `started(key)`. `alive()`:
        whether it still wants it (False for a reply cancelled before it ever ran: it no longer counts
        and is forgotten). Every subscriber of another owner is told, in subscription order."""
        with self._lock:
            for old in [k for k, a in self._waiting.items() if not a()]:
                del self._waiting[old]
            self._waiting[key] = alive
            others = [cb for o, cb in self._subscribers.values() if o is not owner]
        for callback in others:
            callback()

    def started(self, key: Hashable) -> None:
        """The confirmed reply `key`'s LLM work has started (or it ended): it no longer waits.
        Idempotent; unknown keys are ignored."""
        with self._lock:
            self._waiting.pop(key, None)

    def subscribe(self, owner: object, on_confirmed: Callable[[], None]) -> Callable[[], None]:
        """Call `on_confirmed()` whenever a reply of another owner is confirmed. Returns the function
        that ends the subscription (idempotent)."""
        with self._lock:
            sid = self._next_id
            self._next_id += 1
            self._subscribers[sid] = (owner, on_confirmed)

        def cancel() -> None:
            with self._lock:
                self._subscribers.pop(sid, None)

        return cancel
