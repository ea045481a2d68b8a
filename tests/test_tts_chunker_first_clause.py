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
    # on (the default): the opening clause is cut early; while the reply's chunks hold fewer than
    # clause_chunks_until_words words, a later clause of 6+ words ends a chunk too
    early = chunk_all(TEXT, step, TTSConfig())
    assert early == ["Sure,", "I can help you with that today,", "my friend.", *whole[1:]]
    assert chunk_all(TEXT, step, TTSConfig(clause_chunks_until_words=0)) == [
        "Sure,", "I can help you with that today, my friend.", *whole[1:]]


LONG_AFTER_OPENER = ("Sure! A quick meal could be a salad with grilled chicken, a side of roasted vegetables, "
                     "and a glass of water. Enjoy it, and let me know how it goes, my friend.")


@pytest.mark.parametrize("step", [None, 1, 4])
def test_after_a_short_opener_the_next_chunk_is_a_clause_not_a_long_sentence(step):
    # bench conversation: "Sure!" (0.4 s of audio) then a 20-token sentence left a 2.5 s gap
    assert chunk_all(LONG_AFTER_OPENER, step, TTSConfig()) == [
        "Sure!",
        "A quick meal could be a salad with grilled chicken,",  # 9 words: cut at its comma
        "a side of roasted vegetables, and a glass of water.",  # 10 words out: a clause under 6 words stays
        "Enjoy it, and let me know how it goes, my friend.",  # 20 words out: whole sentences again
    ]


def test_later_clause_chunks_are_validated_and_off_in_the_naive_pipeline():
    with pytest.raises(ValueError, match="clause_chunks_until_words"):
        ClauseChunker(TTSConfig(clause_chunks_until_words=-1))
    naive = chunk_all(LONG_AFTER_OPENER, None, TTSConfig(first_clause=False))
    assert naive[0] == "Sure!" and naive[1].endswith("glass of water.")


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
