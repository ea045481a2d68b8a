"""TTSConfig.first_clause=False (the naive pipeline's ablation): no early first clause, whole sentences."""

from __future__ import annotations

import pytest

from headstart.config import TTSConfig
from headstart.tts.chunker import ClauseChunker

TEXT = "Sure, I can help you with that today, my friend. The weather is sunny! Anything else?"


def chunk_all(text: str, step: int | None, config: TTSConfig) -> list[str]:
    chunker = ClauseChunker(config)
    out: list[str] = []
    for i in range(0, len(text), step or len(text)):
        out += chunker.push(text[i : i + (step or len(text))])
    return out + chunker.flush()


@pytest.mark.parametrize("step", [None, 1, 3])
def test_first_clause_off_gives_whole_sentences_only(step):
    whole = ["Sure, I can help you with that today, my friend.", "The weather is sunny!", "Anything else?"]
    assert chunk_all(TEXT, step, TTSConfig(first_clause=False)) == whole
    # on (the default): the opening clause is cut early, the rest is unchanged
    early = chunk_all(TEXT, step, TTSConfig())
    assert early[0] == "Sure,"
    assert early[1:] == ["I can help you with that today, my friend.", *whole[1:]]


def test_first_clause_off_never_cuts_a_long_opening_by_word_count():
    text = "red green blue cyan pink gold gray teal navy lime plum rose tan jade. Done."
    chunker = ClauseChunker(TTSConfig(first_clause=False, first_chunk_max_words=8))
    assert chunker.push(text[:-6]) == []  # no sentence end has arrived yet (no space after the period)
    assert chunker.push(" Done.") == ["red green blue cyan pink gold gray teal navy lime plum rose tan jade."]
    assert chunker.flush() == ["Done."]
    on = ClauseChunker(TTSConfig(first_chunk_max_words=8))
    assert on.push(text[:-6]) == ["red green blue cyan pink gold gray teal"]


def test_first_clause_off_stays_off_after_flush_and_reset():
    chunker = ClauseChunker(TTSConfig(first_clause=False))
    for _ in range(2):
        assert chunker.push("Well, this is a long opening clause, and it goes on") == []
        assert chunker.flush() == ["Well, this is a long opening clause, and it goes on"]
    chunker.push("Again, and again, and again, forever")
    chunker.reset()
    assert chunker.push("Hello there, my good friend, how") == []
