"""Bounded chat history for long sessions: keep the system prompt (the attention sink) and a recent
window of whole turns, by token budget, so the prompt (and the KV cache built from it) stays flat over
hundreds of turns.

Why whole turns, and only between turns: the engine prefills incrementally (the longest common token
prefix with what the cache holds is kept) and rolls back the current turn on a miss. Dropping old
turns changes the prompt's prefix, which costs one re-prefill of the kept window; doing it only when
the *completed* turns exceed the budget — never because the current user text grows — keeps every
prompt within a turn on the same prefix, so incremental prefill and rollback keep working. Eviction
drops down to a low-water mark (`low_water` x budget), so it happens once every few turns, not every
turn. The window is re-rendered rather than position-shifted in the cache: the "attention sinks +
recent window" of StreamingLLM (Xiao et al. 2024, "Efficient Streaming Language Models with Attention
Sinks") at turn granularity, exact for the kept text and with no cache surgery.

A plain synchronous policy (no I/O); the only state is the index of the first kept turn, remembered so
the cut moves only forward and only when the budget is exceeded.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

__all__ = ["TurnWindow", "approx_token_count", "history_budget", "parse_history_setting", "split_turns"]

# Chat-template framing per message (role header, end marker, newlines): ~4-6 tokens in ChatML.
MESSAGE_OVERHEAD_TOKENS = 5
# "auto": room kept besides the history for the turn in progress (30 s of speech, EndpointConfig.max_turn_s,
# is ~90 words, ~120 tokens) and the template's framing, with a margin for a tokenizer the estimate misjudges
TURN_HEADROOM_TOKENS = 256
# the context assumed for an engine that does not say (a remote engine): the smallest of the presets'
FALLBACK_CONTEXT_TOKENS = 8192


def parse_history_setting(value: str | int | None) -> int | str | None:
    """`--max-history-tokens` / `LLMConfig.max_history_tokens`: "auto", "none" (None) or a budget >= 1.
    ValueError for anything else."""
    if value is None or (isinstance(value, str) and value.strip().lower() == "none"):
        return None
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    try:
        budget = int(value) if not isinstance(value, bool) else None
    except (TypeError, ValueError):
        budget = None
    if budget is None or budget < 1 or (isinstance(value, float) and value != budget):
        raise ValueError(f"max history tokens must be 'auto', 'none' or an integer >= 1, got {value!r}")
    return budget


def history_budget(setting: int | str | None, context_tokens: int | None, max_new_tokens: int,
                   system_tokens: int) -> int | None:
    """The token budget of the completed turns a `TurnWindow` keeps, from `LLMConfig.max_history_tokens`:
    an int is used as is, None keeps everything, "auto" is what fits the model's context
    (`context_tokens`, else FALLBACK_CONTEXT_TOKENS) besides the reply (`max_new_tokens`), the system
    prompt (`system_tokens`) and TURN_HEADROOM_TOKENS for the turn in progress; at least 64.
    ValueError for any other setting."""
    setting = parse_history_setting(setting)
    if setting != "auto":
        return setting  # type: ignore[return-value]
    context = context_tokens or FALLBACK_CONTEXT_TOKENS
    return max(64, context - max_new_tokens - system_tokens - MESSAGE_OVERHEAD_TOKENS - TURN_HEADROOM_TOKENS)


def approx_token_count(text: str) -> int:
    """A tokenizer-free estimate (4 characters per token, English BPE), for engines without a tokenizer."""
    return (len(text) + 3) // 4


def split_turns(messages: Sequence[Mapping[str, str]]) -> tuple[list[dict], list[list[dict]]]:
    """Leading system messages, then turns: each turn starts at a user message and holds the messages up
    to the next user message (its reply, if any). Messages before the first user message form a turn of
    their own."""
    msgs = [dict(m) for m in messages]
    i = 0
    while i < len(msgs) and msgs[i].get("role") == "system":
        i += 1
    sinks, turns = msgs[:i], []
    for message in msgs[i:]:
        if message.get("role") == "user" or not turns:
            turns.append([message])
        else:
            turns[-1].append(message)
    return sinks, turns


class TurnWindow:
    """Select the messages to render: system messages + the recent completed turns that fit
    `max_tokens` + the turn in progress (the last turn when it has no reply yet), always kept whole.

    `count_tokens(text) -> int` counts a message's content; each message also costs
    MESSAGE_OVERHEAD_TOKENS. When the completed turns in the window exceed `max_tokens`, the oldest
    are dropped until they fit `low_water * max_tokens`; the cut then stays put until the budget is
    exceeded again. A history that no longer starts with the turns it dropped (cleared, or a new
    conversation) starts the window again from its first turn. ValueError for a budget < 1 or a
    low-water fraction outside (0, 1].
    """

    def __init__(self, max_tokens: int, count_tokens: Callable[[str], int] = approx_token_count,
                 low_water: float = 0.75) -> None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(f"max_tokens must be an int >= 1, got {max_tokens!r}")
        if not 0.0 < low_water <= 1.0:
            raise ValueError(f"low_water must be in (0, 1], got {low_water!r}")
        self.max_tokens = max_tokens
        self.low_water = low_water
        self._count = count_tokens
        self._memo: dict[tuple, int] = {}
        self._first = 0  # completed turns dropped so far
        self._dropped: list[tuple] = []  # their fingerprints, to notice a history that changed under us
        self.evictions = 0

    def turn_tokens(self, turn: Sequence[Mapping[str, str]]) -> int:
        """Estimated prompt tokens of one turn (memoised by content)."""
        key = tuple((m.get("role", ""), m.get("content", "")) for m in turn)
        if key not in self._memo:
            self._memo[key] = sum(self._count(c) + MESSAGE_OVERHEAD_TOKENS for _, c in key)
        return self._memo[key]

    def select(self, messages: Sequence[Mapping[str, str]]) -> list[dict[str, str]]:
        """The messages to render, in order (see the class docstring). Never drops a system message or
        the turn in progress."""
        sinks, turns = split_turns(messages)
        current: list[list[dict]] = []
        if turns and all(m.get("role") == "user" for m in turns[-1]):
            current = [turns.pop()]
        keys = [tuple((m.get("role", ""), m.get("content", "")) for m in t) for t in turns]
        if self._first > len(turns) or keys[: self._first] != self._dropped:
            self._first, self._dropped = 0, []
        sizes = [self.turn_tokens(t) for t in turns]
        kept = sum(sizes[self._first :])
        if kept > self.max_tokens:
            target = self.low_water * self.max_tokens
            while self._first < len(turns) and kept > target:
                kept -= sizes[self._first]
                self._first += 1
            self._dropped = keys[: self._first]
            self.evictions += 1
        if len(self._memo) > 4 * (len(turns) + 8):  # forget turns long gone
            live = set(keys)
            self._memo = {k: v for k, v in self._memo.items() if k in live}
        out = [*sinks]
        for turn in [*turns[self._first :], *current]:
            out.extend(turn)
        return out

    @property
    def dropped_turns(self) -> int:
        """Completed turns currently outside the window."""
        return self._first
