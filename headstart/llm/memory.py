"""Compacted chat history for long sessions: old turns become short memory blocks written by the
assistant's own LLM, frozen once written, so a long conversation is remembered at a flat prompt size.

    [system prompt + memory block 1 + memory block 2 ...] [recent turns verbatim] [the turn in progress]

The turn window (llm/history.py `TurnWindow`) drops whole old turns when the completed ones outgrow
their token budget: a fact the user gave twenty turns ago is gone. Here the same budget holds the
memory blocks *and* the recent turns: when they outgrow it, the oldest verbatim turns are summarised
into one new block (greedy, by the same LLM) and leave the prompt. A block is never rewritten, so the
prompt's prefix stays exact between compactions; each compaction costs one re-prefill of the prompt
after the system prompt (the memory and the kept turns), as an eviction of the turn window does, and
the session does it while the assistant is idle (session/session.py).

The memory goes into the system message, after the system prompt (the attention sink of StreamingLLM:
Xiao et al. 2024, "Efficient Streaming Language Models with Attention Sinks"): one system message,
whatever the chat template does with several. Evicted context summarised recursively by the model
itself is MemGPT's (Packer et al. 2023, "MemGPT: Towards LLMs as Operating Systems"); prompt
compression prunes tokens instead (LLMLingua: Jiang et al. 2023, "LLMLingua: Compressing Prompts for
Accelerated Inference of Large Language Models"; Selective-Context: Li et al. 2023, "Compressing Context
to Enhance Inference Efficiency of Large Language Models", by their surprisal: `surprisal_prune`, a
bench method, not a session setting). Here the unit is a whole turn and the compressor is the
assistant's own LLM, so nothing else is loaded.

The summariser (`summarise`) runs a prompt of its own (`summary_messages`): a note-taker's system
message and the user's words of the turns to compact, in order, with one instruction
(`SUMMARY_INSTRUCTION`). The first design continued the cached conversation instead (its prefix is in
the KV cache, so only the instruction and the notes are computed), but under the assistant's own
system prompt qwen2.5-coder-0.5b answered the request for notes with its canned refusal ("Sorry, I
can't do that, I can only talk.") on every conversation of the tuning half; a separate prompt costs
the prefill of the compacted turns' user text once per compaction. The assistant's replies are left
out: the facts to keep are the user's, and the 0.5b copies its input (its notes are mostly the user's
sentences, kept whole, up to the block's token cap).

`CompactionPolicy` decides when and which turns from token counts alone (a plain synchronous object);
`CompactedHistory` holds the blocks and renders the messages, as `TurnWindow` does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from headstart.llm.history import MESSAGE_OVERHEAD_TOKENS, approx_token_count, split_turns

if TYPE_CHECKING:
    from headstart.llm.engine import LLMEngine

__all__ = [
    "MEMORY_HEADER",
    "MEMORY_SETTINGS",
    "SUMMARY_INSTRUCTION",
    "SUMMARY_SYSTEM",
    "CompactedHistory",
    "Compaction",
    "CompactionPolicy",
    "MemoryBlock",
    "parse_memory_setting",
    "summarise",
    "summary_messages",
    "surprisal_prune",
    "user_statements",
]

# `--memory` / `LLMConfig.memory`: keep everything, drop whole old turns, or summarise old turns.
MEMORY_SETTINGS = ("off", "window", "summary")
# What introduces the memory blocks in the system message.
MEMORY_HEADER = "\n\nWhat the user told you earlier in this conversation (notes in their words):"
# The summariser's prompt (chosen on the memory bench's tuning half, bench/memory.py): its system message,
# and its instruction, where {lines} stands for the user's words of the compacted turns, one per line.
SUMMARY_SYSTEM = "You pick out the personal facts in what a user said."
SUMMARY_INSTRUCTION = (
    "What the user said, in order:\n{lines}\n\nRewrite the personal facts (names, family, pets, places, "
    "numbers, days, times, allergies) as short notes about the user, one per line, keeping the exact names "
    "and numbers. Skip questions."
)

# A user message that asks for something rather than tells (after a filler or two).
_REQUEST = re.compile(r"^(?:(?:um|uh|so|okay|ok|hmm|well|and|oh),?\s+)*(?:please\s+)?(?:tell|give|help|suggest|recommend|"
                      r"show|name|list|explain|find|what|how|why|who|where|when|which|can|could|would|is|are|do|does)\b",
                      re.IGNORECASE)


def parse_memory_setting(value: str | None) -> str:
    """`--memory` / `LLMConfig.memory`: one of MEMORY_SETTINGS (case-insensitive). ValueError otherwise."""
    text = (value or "").strip().lower()
    if text not in MEMORY_SETTINGS:
        raise ValueError(f"memory must be one of {', '.join(MEMORY_SETTINGS)}, got {value!r}")
    return text


@dataclass(frozen=True, slots=True)
class MemoryBlock:
    """One frozen summary: its `text`, the completed `turns` it replaced, its `tokens` in the prompt."""

    text: str
    turns: int
    tokens: int


@dataclass(frozen=True, slots=True)
class Compaction:
    """A compaction to run: completed turns [`start`, `stop`) of the history (indices among the turns
    after the system messages) become one block of at most `max_tokens` tokens; the `forget` oldest
    blocks leave the memory first (their room is needed). `blocks` is the number of blocks when it was
    planned: a result for another state is refused (`CompactedHistory.commit`)."""

    start: int
    stop: int
    max_tokens: int
    forget: int = 0
    blocks: int = 0


class CompactionPolicy:
    """When to compact and which turns, from token counts (no I/O, no model).

    The memory blocks and the completed verbatim turns share `max_tokens`. Nothing happens while they
    fit. Past it, the oldest verbatim turns are planned for one new block of at most `block_tokens`
    tokens (a quarter of the budget when that is smaller, at least 16), until memory + the new block
    + the kept turns fit `low_water * max_tokens` (so compactions come once every few turns, as the
    turn window's evictions do); the newest `keep_recent` turns always stay verbatim. When the memory
    would pass `memory_share` of the budget, its oldest blocks are forgotten first (the blocks
    themselves are never rewritten). ValueError for a budget < 1, a fraction outside (0, 1] or
    `keep_recent` < 0.
    """

    def __init__(self, max_tokens: int, low_water: float = 0.75, block_tokens: int = 64,
                 memory_share: float = 0.5, keep_recent: int = 1) -> None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(f"max_tokens must be an int >= 1, got {max_tokens!r}")
        for name, value in (("low_water", low_water), ("memory_share", memory_share)):
            if not 0.0 < value <= 1.0:
                raise ValueError(f"{name} must be in (0, 1], got {value!r}")
        if block_tokens < 1 or keep_recent < 0:
            raise ValueError("block_tokens must be >= 1 and keep_recent >= 0")
        self.max_tokens = max_tokens
        self.low_water = low_water
        self.block_tokens = block_tokens
        self.memory_share = memory_share
        self.keep_recent = keep_recent

    @property
    def block_cap(self) -> int:
        """The most tokens one new block may take."""
        return max(16, min(self.block_tokens, self.max_tokens // 4))

    def plan(self, memory_tokens: Sequence[int], turn_tokens: Sequence[int]) -> Compaction | None:
        """The compaction due for blocks of `memory_tokens` and verbatim completed turns of
        `turn_tokens` (oldest first), with `start`/`stop` relative to those turns; None when they fit
        the budget or no turn may be compacted."""
        memory = sum(memory_tokens)
        kept = sum(turn_tokens)
        if memory + kept <= self.max_tokens:
            return None
        cap = self.block_cap
        forget = 0
        while forget < len(memory_tokens) and memory + cap > self.memory_share * self.max_tokens:
            memory -= memory_tokens[forget]
            forget += 1
        stop, target = 0, self.low_water * self.max_tokens
        while stop < len(turn_tokens) - self.keep_recent and memory + cap + kept > target:
            kept -= turn_tokens[stop]
            stop += 1
        if stop == 0:
            return None
        return Compaction(0, stop, cap, forget, len(memory_tokens))


def _fingerprint(turn: Sequence[Mapping[str, str]]) -> tuple:
    return tuple((m.get("role", ""), m.get("content", "")) for m in turn)


class CompactedHistory:
    """The messages to render with compaction: the system message with the memory blocks appended
    (`MEMORY_HEADER`, then one block per line group), the completed turns no block covers, and the
    turn in progress (see the module docstring). `select` never compacts by itself: the owner asks
    `due`, runs the summariser on `summary_messages` (the LLM's thread) and hands the notes to `commit`.

    `count_tokens(text) -> int` counts a message's content (each message also costs
    MESSAGE_OVERHEAD_TOKENS). `low_water` is lower than the turn window's (0.5 of the budget, not
    0.75): each compaction costs a summary and a re-prefill, so it covers more turns and comes less
    often. `hard_max_tokens`: when compactions do not keep up (the user always
    speaks first, the summariser failed), the oldest verbatim turns are dropped whole past this many
    tokens, as the turn window does (default: twice `max_tokens`); None: never. The policy's other
    arguments are `CompactionPolicy`'s (ValueError as there). A history that no longer starts with
    the turns the memory covers (cleared, or another conversation) starts with an empty memory.
    """

    def __init__(self, max_tokens: int, count_tokens: Callable[[str], int] = approx_token_count, *,
                 low_water: float = 0.5, block_tokens: int = 48, memory_share: float = 0.5,
                 hard_max_tokens: int | None | str = "double") -> None:
        self.policy = CompactionPolicy(max_tokens, low_water, block_tokens, memory_share)
        self.max_tokens = max_tokens
        self.hard_max_tokens = 2 * max_tokens if hard_max_tokens == "double" else hard_max_tokens
        self._count = count_tokens
        self._memo: dict[tuple, int] = {}
        self.blocks: list[MemoryBlock] = []
        self._first = 0  # completed turns the memory covers or that were dropped
        self._covered: list[tuple] = []  # their fingerprints, to notice a history that changed under us
        self.compactions = 0
        self.forced_drops = 0  # turns dropped unsummarised past hard_max_tokens

    # -- what the LLM sees --------------------------------------------------------------------------

    def select(self, messages: Sequence[Mapping[str, str]]) -> list[dict[str, str]]:
        """The messages to render, in order: the system message(s), the last one carrying the memory,
        the verbatim completed turns, the turn in progress (the last turn when it has no reply)."""
        sinks, turns, current = self._split(messages)
        if self.hard_max_tokens is not None:
            sizes = [self.turn_tokens(t) for t in turns]
            over = self.memory_tokens + sum(sizes[self._first:]) - self.hard_max_tokens
            while over > 0 and self._first < len(turns) - 1:
                over -= sizes[self._first]
                self._first += 1
                self.forced_drops += 1
            self._covered = [_fingerprint(t) for t in turns[: self._first]]
        return [*self._with_memory(sinks), *(m for t in [*turns[self._first:], *current] for m in t)]

    @property
    def memory_text(self) -> str:
        """What the memory adds to the system message ("" without blocks)."""
        if not self.blocks:
            return ""
        return MEMORY_HEADER + "".join(f"\n{b.text}" for b in self.blocks)

    @property
    def memory_tokens(self) -> int:
        return sum(b.tokens for b in self.blocks)

    @property
    def dropped_turns(self) -> int:
        """Completed turns no longer in the prompt verbatim (summarised, or dropped)."""
        return self._first

    def turn_tokens(self, turn: Sequence[Mapping[str, str]]) -> int:
        """Estimated prompt tokens of one turn (memoised by content)."""
        key = _fingerprint(turn)
        if key not in self._memo:
            self._memo[key] = sum(self._count(c) + MESSAGE_OVERHEAD_TOKENS for _, c in key)
        return self._memo[key]

    # -- compaction ---------------------------------------------------------------------------------

    def due(self, messages: Sequence[Mapping[str, str]]) -> Compaction | None:
        """The compaction the completed turns of `messages` call for now (indices among all the turns
        of `messages`), or None (`CompactionPolicy.plan`)."""
        _, turns, _ = self._split(messages)
        plan = self.policy.plan([b.tokens for b in self.blocks], [self.turn_tokens(t) for t in turns[self._first:]])
        if plan is None:
            return None
        return Compaction(self._first + plan.start, self._first + plan.stop, plan.max_tokens, plan.forget,
                          len(self.blocks))

    def summary_messages(self, messages: Sequence[Mapping[str, str]], compaction: Compaction,
                         instruction: str = SUMMARY_INSTRUCTION) -> list[dict[str, str]] | None:
        """The summariser's chat for `compaction` on the history `messages` (`summary_messages`); None
        when its turns hold no statement of the user's: `commit` it with no notes."""
        _, turns, _ = self._split(messages)
        return summary_messages(turns[compaction.start:compaction.stop], instruction)

    def commit(self, messages: Sequence[Mapping[str, str]], compaction: Compaction, text: str) -> bool:
        """Freeze the summariser's notes `text` for `compaction` on the history `messages`: the oldest
        `compaction.forget` blocks go, one block is added (none for empty notes: turns with nothing to
        note), its turns leave the prompt. Returns False (nothing changes) when the memory or the
        history moved since it was planned."""
        _, turns, _ = self._split(messages)
        text = clean_notes(text)
        if compaction.blocks != len(self.blocks) or compaction.start != self._first or compaction.stop > len(turns):
            return False
        del self.blocks[: compaction.forget]
        if text:
            tokens = self._count(text) + 1 + (0 if self.blocks else self._count(MEMORY_HEADER))
            self.blocks.append(MemoryBlock(text, compaction.stop - compaction.start, tokens))
        self._first = compaction.stop
        self._covered = [_fingerprint(t) for t in turns[: self._first]]
        self.compactions += 1
        return True

    def reset(self) -> None:
        """Forget the memory (a new conversation)."""
        self.blocks.clear()
        self._first, self._covered = 0, []

    # -- helpers ------------------------------------------------------------------------------------

    def _split(self, messages: Sequence[Mapping[str, str]]) -> tuple[list[dict], list[list[dict]], list[list[dict]]]:
        sinks, turns = split_turns(messages)
        current: list[list[dict]] = []
        if turns and all(m.get("role") == "user" for m in turns[-1]):
            current = [turns.pop()]
        if self._first > len(turns) or [_fingerprint(t) for t in turns[: self._first]] != self._covered:
            self.reset()
        if len(self._memo) > 4 * (len(turns) + 8):  # forget turns long gone
            live = {_fingerprint(t) for t in turns}
            self._memo = {k: v for k, v in self._memo.items() if k in live}
        return sinks, turns, current

    def _with_memory(self, sinks: list[dict]) -> list[dict]:
        memory = self.memory_text
        if not memory:
            return [dict(m) for m in sinks]
        if not sinks:
            return [{"role": "system", "content": memory.lstrip()}]
        last = sinks[-1]
        return [*(dict(m) for m in sinks[:-1]), {"role": last["role"], "content": last["content"] + memory}]


def summary_messages(turns: Sequence[Sequence[Mapping[str, str]]], instruction: str = SUMMARY_INSTRUCTION,
                     system: str = SUMMARY_SYSTEM) -> list[dict[str, str]] | None:
    """The summariser's chat: `system`, then `instruction` with "{lines}" replaced by the user's
    statements in `turns` (lists of messages), one "- text" line each, in order; None when the turns
    hold none. A user message that ends in a question mark or opens with a request ("Tell me ...",
    "Give me ...") is a request, not a fact the user told: on
    the tuning half the 0.5b answered such lines in its notes, often wrongly ("Australia's capital is
    Sydney"), and the answers then misled the reply. ValueError when `instruction` has no "{lines}"."""
    if "{lines}" not in instruction:
        raise ValueError("the summary instruction needs a {lines} placeholder for the user's words")
    lines = [f"- {text}" for text in user_statements(turns)]
    if not lines:
        return None
    return [{"role": "system", "content": system},
            {"role": "user", "content": instruction.replace("{lines}", "\n".join(lines))}]


def user_statements(turns: Sequence[Sequence[Mapping[str, str]]]) -> list[str]:
    """The user's messages of `turns` that tell rather than ask (see `summary_messages`), whitespace
    collapsed, in order."""
    said = [" ".join(m["content"].split()) for t in turns for m in t if m.get("role") == "user"]
    return [text for text in said if text and not text.endswith("?") and not _REQUEST.match(text)]


def surprisal_prune(engine: LLMEngine, turns: Sequence[Sequence[Mapping[str, str]]], max_tokens: int) -> str:
    """Notes for `turns` without generating: the user's statements (`user_statements`) cut into phrases
    (at punctuation and line ends), each phrase scored by its self-information under `engine`'s model
    (the sum of -log p of its tokens, the text read once from the start), and the most informative
    phrases kept, in their order, up to `max_tokens` tokens; "" when the turns hold no statement.
    After Selective-Context (Li et al. 2023, "Compressing Context to Enhance Inference Efficiency of
    Large Language Models"), which keeps the lexical units above a percentile of self-information;
    here the cut is the block's token cap. Call it on the engine's thread (one prefill and one
    verify forward on its KV cache, which the next prefill crops)."""
    import torch

    said = user_statements(turns)
    if not said:
        return ""
    text = "\n".join(said)
    tokenizer = engine.tokenizer
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = list(encoded["input_ids"]), list(encoded["offset_mapping"])
    bos = getattr(tokenizer, "bos_token_id", None)
    start = [bos] if isinstance(bos, int) else tokenizer("\n", add_special_tokens=False)["input_ids"]
    first = engine.prefill(start)
    rows = engine.verify(ids) if len(ids) > 1 else first[None, :]
    logits = torch.cat([first[None, :], rows[:-1]]) if len(ids) > 1 else first[None, :]
    info = (-torch.log_softmax(logits.float(), dim=-1)[torch.arange(len(ids)), torch.tensor(ids)]).tolist()
    units: list[tuple[int, int, float, int]] = []  # (start char, end char, information, tokens)
    for match in re.finditer(r"[^,.;:!?\n]+[,.;:!?]*", text):
        inside = [i for i, (a, _) in enumerate(offsets) if match.start() <= a < match.end()]
        if inside and match.group().strip():
            units.append((match.start(), match.end(), sum(info[i] for i in inside), len(inside)))
    kept, used = set(), 0
    for unit in sorted(units, key=lambda u: -u[2]):
        if used + unit[3] <= max_tokens:
            kept.add(unit)
            used += unit[3]
    return " ".join(text[a:b].strip() for a, b, _, _ in sorted(kept))


def clean_notes(text: str) -> str:
    """The summariser's output as a block: stripped; blank and repeated lines, and a trailing partial
    line (cut by the token cap, no sentence end) when other lines remain, dropped."""
    lines: list[str] = []
    for line in (line.strip() for line in text.strip().splitlines()):
        if line and line not in lines:  # a small model repeats a line until the cap
            lines.append(line)
    if len(lines) > 1 and not lines[-1].endswith((".", "!", "?")):
        lines.pop()
    return "\n".join(lines)


def summarise(engine: LLMEngine, messages: Sequence[Mapping[str, str]], max_new_tokens: int,
              cancelled: Callable[[], bool] = lambda: False) -> str | None:
    """Greedy notes for `messages` (`summary_messages`), at most `max_new_tokens` tokens, on `engine`
    (call it on the engine's thread: it uses the KV cache; the conversation's next prefill keeps what
    it still shares with the cache, at least nothing past the first tokens of the system message). `cancelled() -> bool` is asked before each token: True stops it, and the result
    is None (the user spoke; the cache then holds the prompt and some notes, and the next prefill
    crops them). Returns the decoded notes (special tokens skipped). ValueError as
    `LLMEngine.render_prompt` and `generate`."""
    from headstart.llm.sampling import Sampling

    ids = engine.render_prompt(messages)
    out: list[int] = []
    tokens: Any = engine.generate(ids, max_new_tokens, Sampling())
    if cancelled():
        return None
    for token in tokens:
        out.append(token)
        if cancelled():
            return None
    return engine.tokenizer.decode(out, skip_special_tokens=True)
