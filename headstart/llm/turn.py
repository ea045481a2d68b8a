"""One user turn on the LLM side, synchronous (runs on the "llm" thread; live.py is its async form).

Incremental prefill while the user speaks: each partial transcript renders the whole chat prompt
(system, history, the user's text so far), keeps the longest common token prefix (LCP) with what the
KV cache holds, crops the rest and prefills only up to the last *stable word boundary*: a tokenizer
re-merges a growing last word ("Par" -> "Paris"), so tokens of the last word are not committed. At
end of turn only the tail and the assistant header remain to prefill.

Preemptive reply: on a hypothesised final transcript, a reply is started and its tokens are held,
not emitted. At end of turn it is adopted at once when the final prompt tokens equal those it was
conditioned on; otherwise it is rolled back (the cache is cropped to the LCP) and regenerated.

Stale-cache guard: every reuse goes through the LCP of the cache's own token record and the new
prompt (`LLMEngine.prefill` / `sync_to`), and a held reply checks the engine's revision before each
step, so a cache computed for other tokens is never silently extended.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from headstart.llm.engine import LLMEngine, LLMError, common_prefix_len
from headstart.llm.sampling import Sampling
from headstart.llm.speculative import Decoder

__all__ = ["PreemptionStats", "PreemptiveReply", "TurnPrefill", "TurnState", "stable_text"]


def stable_text(text: str) -> str:
    """The part of a growing transcript whose tokens cannot change as it grows: everything before
    the last word (up to the last whitespace, trailing whitespace dropped). "" for one word."""
    cut = max(text.rfind(" "), text.rfind("\n"), text.rfind("\t"))
    return text[:cut].rstrip() if cut > 0 else ""


class TurnPrefill:
    """Incremental prefill of one user turn's prompt into the engine's KV cache.

    `messages_before`: the chat so far (system message first if any, then history) as
    {"role", "content"} dicts; the user's text is appended as the last message.
    """

    def __init__(self, engine: LLMEngine, messages_before: Sequence[Mapping[str, str]]) -> None:
        self.engine = engine
        self.messages_before = [dict(m) for m in messages_before]
        self.num_prefilled = 0  # positions computed by update() in this turn

    def prompt_ids(self, user_text: str, add_generation_prompt: bool = True) -> list[int]:
        """Token ids of the whole prompt with `user_text` as the user's message (and the assistant
        header when `add_generation_prompt`)."""
        if not isinstance(user_text, str):
            raise ValueError(f"user text must be a str, got {user_text!r}")
        messages = [*self.messages_before, {"role": "user", "content": user_text}]
        return self.engine.render_prompt(messages, add_generation_prompt=add_generation_prompt)

    def stable_ids(self, user_text: str) -> list[int]:
        """The prefix of `prompt_ids(user_text)` that a longer transcript will keep: the tokens the
        prompt with only `stable_text(user_text)` shares with the prompt with all of it."""
        full = self.prompt_ids(user_text)
        stable = self.prompt_ids(stable_text(user_text), add_generation_prompt=False)
        return full[: common_prefix_len(stable, full)]

    def update(self, user_text: str) -> int:
        """Feed a partial transcript: drop cached positions that disagree with its prompt and
        prefill up to its stable word boundary. Returns the positions computed (0: nothing new)."""
        full = self.prompt_ids(user_text)
        stable = self.stable_ids(user_text)
        engine = self.engine
        keep = engine.rollback_to(common_prefix_len(engine.tokens, full))  # drop what other text computed
        if len(stable) <= keep:
            return 0
        computed = engine.sync_to(stable)
        self.num_prefilled += computed
        return computed


@dataclass(slots=True)
class PreemptionStats:
    """Preemptive-reply counters: `hits` (held replies adopted), `misses` (held replies dropped:
    the final prompt differed, or the user went on speaking), `wasted_tokens` (tokens generated
    for dropped replies)."""

    hits: int = 0
    misses: int = 0
    wasted_tokens: int = 0

    @property
    def hit_rate(self) -> float | None:
        total = self.hits + self.misses
        return self.hits / total if total else None


class PreemptiveReply:
    """A reply generated before end of turn and held. Not emitted until `adopt`."""

    def __init__(self, decoder: Decoder, prompt_ids: Sequence[int], max_new_tokens: int,
                 sampling: Sampling) -> None:
        self.prompt_ids = tuple(int(t) for t in prompt_ids)
        self.held: list[int] = []
        self.finished = False  # the model ended the reply (or reached max_new_tokens)
        self._decoder = decoder
        self._max_new_tokens = max_new_tokens
        self._sampling = sampling
        self._generated: list[int] = []  # every token the generation yielded (held or adopted)
        self._cache_mark: tuple[int, int] | None = None  # (revision, num_tokens) after the last step
        self._tokens = decoder.generate(self.prompt_ids, max_new_tokens, sampling)

    def step(self) -> bool:
        """Generate one more held token (the first call also prefills). Returns False when the
        reply is finished. LLMError when the engine's cache was changed under it."""
        if self.finished:
            return False
        try:
            token = next(self._tokens)
        except StopIteration:
            self.finished = True
            return False
        self.held.append(token)
        self._generated.append(token)
        engine = self._decoder.engine
        self._cache_mark = (engine.revision, engine.num_tokens)
        return True

    @property
    def cache_intact(self) -> bool:
        """Whether the engine's KV cache is still the one this reply's last step left (nobody else
        prefilled, cropped or reset it since)."""
        engine = self._decoder.engine
        return self._cache_mark is None or self._cache_mark == (engine.revision, engine.num_tokens)

    def matches(self, prompt_ids: Sequence[int]) -> bool:
        return tuple(prompt_ids) == self.prompt_ids

    def adopt(self) -> Iterator[int]:
        """The reply's tokens: the held ones at once, then the rest as the same generation goes on
        (same sampler, same cache): exactly what a fresh run on these prompt tokens would yield."""
        held, self.held = self.held, []
        yield from held
        if self.finished:
            return
        if self.cache_intact:
            yield from self._tokens
            return
        # Between the held steps and the adoption other work used the cache (an EOU estimate, another
        # session): the held tokens are still right, the suspended generation is not. Continue from
        # prompt + generated tokens; the prefill keeps the longest common prefix of the cache.
        self._tokens.close()
        remaining = self._max_new_tokens - len(self._generated)
        if remaining > 0:
            yield from self._decoder.generate([*self.prompt_ids, *self._generated], remaining, self._sampling)

    def discard(self) -> int:
        """Stop and drop the reply; returns how many held tokens are wasted."""
        wasted = len(self.held)
        self.held = []
        self.finished = True
        self._tokens.close()
        return wasted


class TurnState:
    """A user turn on the llm thread: incremental prefill from partials, an optional held reply on
    a hypothesis, and the confirmed reply at end of turn.

    `max_new_tokens` and `sampling` are those of the confirmed reply (a held reply must be generated
    exactly as the confirmed one would be, to be adoptable).
    """

    def __init__(self, decoder: Decoder, messages_before: Sequence[Mapping[str, str]], max_new_tokens: int,
                 sampling: Sampling, stats: PreemptionStats | None = None) -> None:
        self.decoder = decoder
        self.prefill = TurnPrefill(decoder.engine, messages_before)
        self.max_new_tokens = max_new_tokens
        self.sampling = sampling
        self.stats = stats if stats is not None else PreemptionStats()
        self.preemptive: PreemptiveReply | None = None

    def _drop_preemptive(self) -> None:
        if self.preemptive is not None:
            self.stats.misses += 1
            self.stats.wasted_tokens += self.preemptive.discard()
            self.preemptive = None

    def update(self, user_text: str) -> int:
        """A partial transcript (see `TurnPrefill.update`). A held reply conditioned on other text
        is dropped (a miss); one conditioned on this very text is kept."""
        if self.preemptive is not None:
            if self.preemptive.matches(self.prefill.prompt_ids(user_text)):
                return 0
            self._drop_preemptive()
        return self.prefill.update(user_text)

    def preempt(self, hypothesis_text: str) -> None:
        """Start holding a reply to `hypothesis_text` (kept if one to the same prompt is held)."""
        prompt = self.prefill.prompt_ids(hypothesis_text)
        if self.preemptive is not None and self.preemptive.matches(prompt):
            return
        self._drop_preemptive()
        self.preemptive = PreemptiveReply(self.decoder, prompt, self.max_new_tokens, self.sampling)

    def preempt_step(self, max_held_tokens: int) -> bool:
        """Generate one more held token while fewer than `max_held_tokens` are held. Returns True
        when there is more to do."""
        reply = self.preemptive
        if reply is None or reply.finished or len(reply.held) >= max_held_tokens:
            return False
        try:
            return reply.step() and len(reply.held) < max_held_tokens
        except LLMError:
            self._drop_preemptive()
            return False

    def finish(self, final_text: str) -> tuple[list[int], Iterator[int], int]:
        """End of turn: returns (prompt ids, reply tokens, number of tokens adopted from a held
        reply). A held reply on exactly these prompt tokens is adopted (a hit); otherwise it is
        dropped (a miss) and the reply is generated after prefilling what the cache lacks."""
        prompt = self.prefill.prompt_ids(final_text)
        reply = self.preemptive
        self.preemptive = None
        if reply is not None and reply.matches(prompt):
            # adopt() checks the cache revision: a cache changed since the last held step is re-synced
            # (never silently extended, never an LLMError mid-reply)
            self.stats.hits += 1
            return prompt, reply.adopt(), len(reply.held)
        if reply is not None:
            self.preemptive = reply
            self._drop_preemptive()
        return prompt, self.decoder.generate(prompt, self.max_new_tokens, self.sampling), 0

    def close(self) -> None:
        """The turn is abandoned: drop a held reply (counted as a miss)."""
        self._drop_preemptive()
