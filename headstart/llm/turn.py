"""Incremental prefill of one user turn, synchronous (runs on the "llm" thread; live.py is its async form).

Incremental prefill while the user speaks: each partial transcript renders the whole chat prompt
(system, history, the user's text so far), keeps the longest common token prefix (LCP) with what the
KV cache holds, crops the rest and prefills only up to the last *stable word boundary*: a tokenizer
re-merges a growing last word ("Par" -> "Paris"), so tokens of the last word are not committed. At
end of turn only the tail and the assistant header remain to prefill.

The held reply of the head start (a reply started before the end of turn and released on a hit) is
the session's (headstart/session/session.py): it is an ordinary reply of this turn, started earlier.

Stale-cache guard: every reuse goes through the LCP of the cache's own token record and the new
prompt (`LLMEngine.prefill` / `sync_to`), so a cache computed for other tokens is never silently extended.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from headstart.llm.engine import LLMEngine, common_prefix_len

__all__ = ["TurnPrefill", "stable_text"]


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
