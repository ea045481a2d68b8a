"""Spoken-answer shaping: a soft token budget that ends the reply at the next sentence end once it
is spent (a plain synchronous policy, no I/O). The hard limit stays `max_new_tokens`."""

from __future__ import annotations

import re

__all__ = ["SentenceBudget", "ends_sentence"]

# A sentence end: terminal punctuation (ASCII, ellipsis, CJK full-width), optionally followed by
# closing quotes or brackets, at the end of the text; or a line break.
_SENTENCE_END = re.compile(r"(?:[.!?\u2026\u3002\uff01\uff1f][\"'\u201d\u2019)\]]*|\n)\s*$")
# "3." in "3.5" or a one-letter initial ("J." in "J. Smith") is not a sentence end.
_NOT_AN_END = re.compile(r"(?:\d|\b[A-Za-z])\.\s*$")


def ends_sentence(text: str) -> bool:
    """True when `text` (the reply so far) ends at a sentence end."""
    if not text.strip():
        return False
    return bool(_SENTENCE_END.search(text)) and not _NOT_AN_END.search(text)


class SentenceBudget:
    """Ends a reply at the first sentence end after `soft_max_tokens` tokens (None: never).

    `push(num_tokens, text)` after each token: `num_tokens` generated so far, `text` the reply text
    emitted so far; returns True when the reply should end here.
    """

    def __init__(self, soft_max_tokens: int | None) -> None:
        if soft_max_tokens is not None and (isinstance(soft_max_tokens, bool) or soft_max_tokens < 1):
            raise ValueError(f"soft_max_tokens must be an int >= 1 or None, got {soft_max_tokens!r}")
        self.soft_max_tokens = soft_max_tokens

    def push(self, num_tokens: int, text: str) -> bool:
        return self.soft_max_tokens is not None and num_tokens >= self.soft_max_tokens and ends_sentence(text)
