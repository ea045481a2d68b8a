"""A reply whose text is known without the LLM (a tool's spoken answer, a timer's announcement), as the
`LLMReplyStream` a `Reply` reads: one `TokenDelta` with the text, then `ReplyDone(reason="tool")`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from headstart.clock import Clock
from headstart.events import ReplyDone, TokenDelta
from headstart.seams import LLMStats


@dataclass
class SpokenStats:
    """`LLMStats` of a spoken stream: one "token" (the whole text), done once it was given."""

    token_times_s: list[float] = field(default_factory=list)
    done_at_s: float | None = None


class SpokenStream:
    """The LLMReplyStream of a fixed text (see the module docstring)."""

    def __init__(self, text: str, clock: Clock, reason: str = "tool") -> None:
        self.text = text
        self.stats: LLMStats = SpokenStats()
        self._clock = clock
        self._reason = reason
        self._cancelled = False

    def cancel(self) -> None:
        self._cancelled = True

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    async def __aiter__(self) -> AsyncIterator[TokenDelta | ReplyDone]:
        if not self._cancelled:
            self.stats.token_times_s.append(self._clock.now())
            yield TokenDelta(self.text)
        self.stats.done_at_s = self._clock.now()
        yield ReplyDone(self.text, 1 if not self._cancelled else 0, "cancelled" if self._cancelled else self._reason)
