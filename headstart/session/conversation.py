"""The chat one session holds: its history, the bounded window the LLM sees, what an interrupted reply
leaves in it, and continuations.

    chat = Conversation(system_prompt, window=lambda: TurnWindow(...) or None)
    chat.messages()                      # system prompt + the history the LLM sees
    chat.add_user(text); i = chat.add_assistant(text)
    chat.interrupted(i, heard)           # the reply was cut off: only its heard text stays
    chat.cut_off(ended_at_s, speech_at_s, played_s, reason)   # may the next turn continue the last?
    chat.continue_turn(turn)             # join it: one user message

The KV cache follows the history: the next prompt renders the heard text and the engine's prefill keeps
only the longest common prefix of its cache and that prompt. A plain synchronous object.

Continuations (the listening issue): speech that starts within `CONTINUATION_GAP_S` of a turn's end and
cuts that turn's reply off with at most `CONTINUATION_MAX_HEARD_S` of it played continues the same user
message when that message did not end a sentence (the recogniser wrote a trailing-off mark or no
sentence end: the turn had ended inside a pause): the texts are joined, the reply is generated on the
whole and the history holds one user turn. After a finished sentence it is a new turn (a barge-in).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from headstart.llm.canned import without_canned_turns
from headstart.timeline import Continuation, TurnTimeline
from headstart.voice.turn_fusion import ending

if TYPE_CHECKING:
    from headstart.config import LLMConfig
    from headstart.llm.history import TurnWindow
    from headstart.llm.memory import CompactedHistory, Compaction
    from headstart.seams import LLMBackend

    HistoryView = TurnWindow | CompactedHistory

CONTINUATION_GAP_S = 2.0
CONTINUATION_MAX_HEARD_S = 1.0

def history_window(llm: LLMBackend, config: LLMConfig, can_summarise: bool = True) -> Callable[[], HistoryView | None]:
    """A `Conversation`'s `window` for `llm` (an `LLMBackend`: `max_positions`, `count_tokens`) and
    `config` (`LLMConfig`): what bounds the history by `config.max_history_tokens` (default "auto":
    what fits the LLM's context besides the reply, `history_budget`), as `config.memory` says: the
    `TurnWindow` ("window", whole old turns dropped), a `CompactedHistory` ("summary", old turns
    summarised by the LLM, llm/memory.py; the `TurnWindow` when the session has no summariser,
    `can_summarise` False: a remote LLM), or None ("off", or a budget of "none": everything). Made on
    first use: it counts with the LLM's tokenizer. ValueError for an unknown `config.memory`."""
    from headstart.llm.memory import parse_memory_setting

    memory = parse_memory_setting(config.memory)
    if memory == "summary" and not can_summarise:
        memory = "window"

    def make():
        from headstart.llm.history import TurnWindow, history_budget
        from headstart.llm.memory import CompactedHistory

        budget = history_budget(config.max_history_tokens, llm.max_positions, config.max_new_tokens,
                                llm.count_tokens(config.system_prompt))
        if budget is None or memory == "off":
            return None
        if memory == "summary":
            return CompactedHistory(budget, llm.count_tokens, hard_max_tokens=_hard_max(budget, llm, config))
        return TurnWindow(budget, llm.count_tokens)

    return make


def _hard_max(budget: int, llm: LLMBackend, config: LLMConfig) -> int:
    """Where a `CompactedHistory` drops old turns unsummarised: twice its budget, within the context."""
    from headstart.llm.history import history_budget

    fits = history_budget("auto", llm.max_positions, config.max_new_tokens, llm.count_tokens(config.system_prompt))
    return max(budget, min(2 * budget, fits or 2 * budget))


class Conversation:
    """One session's chat (see the module docstring).

    Args:
        system_prompt: the first message of every prompt.
        window: `() -> TurnWindow, CompactedHistory or None`, made on first use (it may count with the
            LLM's tokenizer): bounds the history the LLM sees by dropping whole old turns
            (llm/history.py) or by summarising them (llm/memory.py: `compaction`, `compact`); None:
            all of it.

    Attributes:
        history: the user and assistant messages, oldest first ({"role", "content"} dicts).
    """

    def __init__(self, system_prompt: str, window: Callable[[], HistoryView | None] = lambda: None) -> None:
        self.system_prompt = system_prompt
        self.history: list[dict[str, str]] = []
        self._make_window = window
        self._window: HistoryView | None = None
        self._window_made = False
        self._continuation: int | None = None  # the user message the next turn continues

    def messages(self) -> list[dict[str, str]]:
        """The prompt's chat: the system prompt (with the memory, if any) and the history the window keeps,
        without the turns a fixed reply answered (a refusal or an ask-back: llm/canned.py)."""
        window = self._get_window()
        if window is not None:
            return window.select(self._chat())
        return self._chat()

    def _chat(self) -> list[dict[str, str]]:
        # without the turns a fixed reply answered (llm/canned.py): one refusal in the context made the
        # model refuse every later turn; the window and the memory see the same chat
        return without_canned_turns([{"role": "system", "content": self.system_prompt}, *self.history])

    def _get_window(self) -> HistoryView | None:
        if not self._window_made:
            self._window, self._window_made = self._make_window(), True
        return self._window

    @property
    def compacts(self) -> bool:
        """The history is bounded by compaction (`CompactedHistory`), so `compaction` may plan one."""
        from headstart.llm.memory import CompactedHistory

        return isinstance(self._get_window(), CompactedHistory)

    def compaction(self) -> tuple[Compaction, list[dict[str, str]] | None] | None:
        """The compaction due now and the summariser's chat for it (llm/memory.py
        `CompactedHistory.due`, `summary_messages`: None when its turns hold nothing to note; `compact`
        it with no notes), or None (no compaction, or none due). Only between turns: a history ending
        in a user message (a turn in progress) gets None."""
        from headstart.llm.memory import CompactedHistory

        window = self._get_window()
        if not isinstance(window, CompactedHistory) or not self.history or self.history[-1]["role"] == "user":
            return None
        chat = self._chat()
        plan = window.due(chat)
        return None if plan is None else (plan, window.summary_messages(chat, plan))

    def compact(self, compaction: Compaction, notes: str) -> bool:
        """Freeze the summariser's `notes` for `compaction` (`CompactedHistory.commit`; empty notes: its
        turns leave with no block): False, and nothing changes, when the history moved since it was
        planned."""
        from headstart.llm.memory import CompactedHistory

        window = self._get_window()
        return isinstance(window, CompactedHistory) and window.commit(self._chat(), compaction, notes)

    @property
    def dropped_turns(self) -> int:
        """Old turns the window dropped at its last `messages()` (0 without a window)."""
        return self._window.dropped_turns if self._window is not None else 0

    def add_user(self, text: str) -> None:
        self.history.append({"role": "user", "content": text})

    def add_assistant(self, text: str) -> int:
        """Append a finished reply; returns its index (for `interrupted`)."""
        self.history.append({"role": "assistant", "content": text})
        return len(self.history) - 1

    def interrupted(self, index: int | None, heard: str) -> None:
        """A reply was cut off: its message (at `index`, or none yet) keeps only the `heard` text, and
        goes when nothing of it was heard."""
        message = {"role": "assistant", "content": heard}
        if index is not None:
            if heard:
                self.history[index] = message
            else:
                del self.history[index]
        elif heard:
            self.history.append(message)

    def cut_off(self, ended_at_s: float | None, speech_at_s: float | None, played_s: float, reason: str) -> None:
        """A reply to the turn that ended at `ended_at_s` was cut off by speech that started at
        `speech_at_s` with `played_s` of it heard: remember whether the next turn continues that turn's
        user message (see the module docstring)."""
        self._continuation = self._continuable(ended_at_s, speech_at_s, played_s, reason)

    def no_continuation(self) -> None:
        """The utterance that cut the reply off is no turn (no words, ignored)."""
        self._continuation = None

    def continue_turn(self, turn: TurnTimeline) -> None:
        """A turn that continues the user message its speech cut the reply of: one user message, the
        joined text (a trailing-off mark at the seam dropped) in `turn.transcript`, the joined part in
        `turn.continuation`; the reply's heard words leave the history. Else nothing changes."""
        index, self._continuation = self._continuation, None
        history = self.history
        if index is None or index >= len(history) or history[index]["role"] != "user":
            return
        if any(m["role"] != "assistant" for m in history[index + 1 :]):
            return
        before = history[index]["content"].rstrip()
        before = (before[:-3] if before.endswith("...") else before).rstrip("…-–—, ")
        del history[index:]
        turn.continuation = Continuation(before)
        turn.transcript = f"{before} {turn.transcript.lstrip()}".strip()

    def clear(self) -> None:
        """Forget the conversation and its memory (the engine's next prefill keeps only the system
        prompt's prefix)."""
        self.history.clear()
        self._continuation = None  # the window and the memory notice the history changed and start again

    def _continuable(self, ended: float | None, started: float | None, played_s: float, reason: str) -> int | None:
        if reason not in ("barge_in", "new_turn") or played_s > CONTINUATION_MAX_HEARD_S:
            return None
        if ended is None or started is None or not -1e-9 <= started - ended <= CONTINUATION_GAP_S:
            return None
        for index in range(len(self.history) - 1, -1, -1):
            if self.history[index]["role"] == "user":
                return None if ending(self.history[index]["content"]) == "terminal" else index
            if self.history[index]["role"] != "assistant":
                return None
        return None
