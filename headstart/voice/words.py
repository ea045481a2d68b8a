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
        text: the word as the recogniser wrote it, with attached punctuation and Whisper's spacing:
            a leading space starts a new word, none continues the previous one (Whisper splits
            "ill-disposed" into `" ill"`, `"-disposed"`).
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
    """The words as text with the recogniser's spacing, without outer spaces. Appending words only
    ever appends to this text (the committed text of a stream stays a prefix of its later versions)."""
    return "".join(w.text for w in words).strip()


def mean_probability(words: Iterable[Word]) -> float | None:
    """The recogniser's mean confidence over `words` (in [0, 1]), or None when there are none."""
    probabilities = [w.probability for w in words]
    return sum(probabilities) / len(probabilities) if probabilities else None
