"""Timed words: what the ASR produces and the agreement policy compares."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_NON_WORD = re.compile(r"[^\w']+")


@dataclass(frozen=True, slots=True)
class Word:
    """One recognised word.

    Attributes:
        text: the word as the recogniser wrote it, with attached punctuation (`"man."`).
        start_s, end_s: its position in the audio stream (seconds).
        probability: the recogniser's confidence in [0, 1].
    """

    text: str
    start_s: float
    end_s: float
    probability: float = 1.0

    @property
    def key(self) -> str:
        """The word for comparison: lower case, without punctuation or spaces."""
        return normalize_word(self.text)


def normalize_word(text: str) -> str:
    """Lower case without punctuation or spaces: `" Man."` -> `"man"`."""
    return _NON_WORD.sub("", text.lower())


def join_words(words: Iterable[Word]) -> str:
    """The words as text, separated by single spaces (empty words are skipped)."""
    return " ".join(t for t in (w.text.strip() for w in words) if t)
