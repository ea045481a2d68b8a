"""The clause chunker policy: early first clause, whole sentences, no splits inside numbers or
abbreviations, a hard length limit that loses nothing (cases.md, TTS rows)."""

from __future__ import annotations

import pytest

from headstart.config import TTSConfig
from headstart.tts.chunker import ClauseChunker


def chunk_all(text: str, step: int | None = None, config: TTSConfig | None = None) -> list[str]:
    """Feed `text` in pieces of `step` characters (all at once if None), then flush."""
    chunker = ClauseChunker(config)
    out: list[str] = []
    if step is None:
        out += chunker.push(text)
    else:
        for i in range(0, len(text), step):
            out += chunker.push(text[i : i + step])
    return out + chunker.flush()


@pytest.mark.parametrize("text", ["", "   ", "...", "\n\n", " . , ! ", "😊", "**", "- "])
def test_empty_and_punctuation_only_pieces_give_no_chunk(text):
    assert chunk_all(text) == []
    assert chunk_all(text, step=1) == []


def test_paragraph_break_ends_a_chunk():
    assert chunk_all("Hello.\n\nWorld.") == ["Hello.", "World."]
    assert chunk_all("Hello\n\nWorld") == ["Hello", "World"]
    assert chunk_all("1\n\n2\n\n3\n\n") == ["1", "2", "3"]


@pytest.mark.parametrize("step", [None, 1, 2, 5])
def test_whole_sentences_after_the_first(step):
    text = "I can help. The weather today is sunny! Do you want more? Sure thing."
    assert chunk_all(text, step) == ["I can help.", "The weather today is sunny!", "Do you want more?", "Sure thing."]


def test_first_clause_is_emitted_at_a_comma_once_it_has_enough_words():
    chunker = ClauseChunker(TTSConfig(first_chunk_min_words=4, first_chunk_max_words=0))
    # Too few words at the first comma: keep waiting.
    assert chunker.push("Yes, of course") == []
    assert chunker.push(", I can tell you that") == []  # 3 words at the second comma
    chunker.reset()
    assert chunker.push("Yes, ") == []
    out = chunker.push("well, as far as I know, it is, ")
    assert out == ["Yes, well, as far as I know,"]
    # Later commas do not cut: only whole sentences now.
    assert chunker.push("in fact, quite warm. Next") == ["it is, in fact, quite warm."]
    assert chunker.flush() == ["Next"]


def test_first_clause_waits_for_min_words_exactly():
    chunker = ClauseChunker(TTSConfig(first_chunk_min_words=4, first_chunk_max_words=0))
    assert chunker.push("One two three, four") == []
    assert chunker.push(" five six, seven") == ["One two three, four five six,"]


def test_flush_and_reset_rearm_the_early_first_chunk():
    chunker = ClauseChunker(TTSConfig(first_chunk_min_words=2))
    assert chunker.push("Well then, I suppose, ") == ["Well then,"]
    assert chunker.push("not, ") == []
    assert chunker.flush() == ["I suppose, not,"]
    assert chunker.push("Hello there, friend ") == ["Hello there,"]
    chunker.reset()
    assert chunker.pending_text == ""
    assert chunker.push("Again here, yes ") == ["Again here,"]


@pytest.mark.parametrize(
    "text",
    [
        "It is 3.14 in total",
        "That costs $49.95 today",
        "We sold 1,000 units",
        "Meet at 8:00 sharp",
        "Dr. Lee is here",
        "Mr. Smith called",
        "Use one e.g. this one",
        "Ask i.e. a friend",
        "The U.S. Army marched",
        "St. Louis is nice",
        "He lives on Baker St. near the park",
        "J. R. R. Tolkien wrote it",
        "Buy 2.5 kg of rice",
        "Version 1.2.3 is out",
        "Ask **Dr. Lee** now",
        'He said "Mr. Smith" twice',
        "Fruit (e.g. apples) is good",
    ],
)
@pytest.mark.parametrize("step", [None, 1, 3])
def test_never_splits_numbers_or_abbreviations(text, step):
    assert chunk_all(text, step, TTSConfig(first_chunk_min_words=1, first_chunk_max_words=0)) == [text]


def test_numbered_list_items_are_one_chunk_each():
    text = "Here are two:\n1. First item\n2. Second item"
    assert chunk_all(text, step=1) == ["Here are two:", "1. First item", "2. Second item"]


def test_sentence_end_is_recognised_after_numbers_and_closing_quotes():
    text = 'I have 3. He said "stop." Then (he left.) OK?! Fine'
    assert chunk_all(text, step=1) == ["I have 3.", 'He said "stop."', "Then (he left.)", "OK?!", "Fine"]


def test_etc_ends_a_sentence_only_before_a_capital():
    whole = TTSConfig(first_clause=False)
    assert chunk_all("Apples, pears etc. are fruit. Done", 1, whole) == ["Apples, pears etc. are fruit.", "Done"]
    assert chunk_all("Apples, pears etc. Then more", 1, whole) == ["Apples, pears etc.", "Then more"]


def _long_sentence() -> str:
    words = "the quick brown fox jumps over the lazy dog while seven wizards quietly hex a vexed jolly giant".split()
    text = " ".join(words[i % len(words)] for i in range(60))
    return text[:300].rsplit(" ", 1)[0]


@pytest.mark.parametrize("step", [None, 1, 7])
@pytest.mark.parametrize("limit", [40, 100, 200])
def test_long_sentence_without_punctuation_is_split_under_the_limit_losing_nothing(step, limit):
    text = _long_sentence()
    assert 250 < len(text) <= 300 and not any(c in text for c in ",.;:!?")
    chunks = chunk_all(text, step, TTSConfig(max_chunk_chars=limit))
    assert len(chunks) >= 2
    assert all(0 < len(c) <= limit for c in chunks)
    assert " ".join(chunks).split() == text.split()


def test_long_sentence_is_split_at_commas_before_words():
    text = ("alpha beta gamma delta " * 6).strip() + ", " + ("epsilon zeta eta theta " * 6).strip() + "."
    chunks = chunk_all(
        text, config=TTSConfig(max_chunk_chars=200, first_chunk_min_words=1000, first_chunk_max_words=0)
    )
    assert chunks[0].endswith(",")
    assert " ".join(chunks) == text


def test_a_word_longer_than_the_limit_is_cut_not_dropped():
    word = "x" * 95
    chunks = chunk_all(f"see {word} now", step=4, config=TTSConfig(max_chunk_chars=40))
    assert all(len(c) <= 40 for c in chunks)
    assert "".join(chunks).replace(" ", "") == f"see{word}now"


def test_bad_input_and_config_raise_clear_errors():
    with pytest.raises(TypeError, match="str"):
        ClauseChunker().push(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_chunk_chars"):
        ClauseChunker(TTSConfig(max_chunk_chars=0))


def _stream_words(chunker: ClauseChunker, text: str) -> list[str]:
    out = []
    for word in text.split(" "):
        out += chunker.push(word + " ")
    return out + chunker.flush()


def test_a_long_opening_without_commas_is_cut_after_max_words():
    text = "I am going to walk to the left of the tenth meter marker and then stop."
    chunker = ClauseChunker(TTSConfig(first_chunk_max_words=8))
    pushed = []
    first_at = None
    for i, word in enumerate(text.split(" ")):
        ready = chunker.push(word + " ")
        if ready and first_at is None:
            first_at = i
        pushed += ready
    pushed += chunker.flush()
    assert pushed[0] == "I am going to walk to the left"
    assert first_at == 8  # ready once the word after the 8th ("of") is whole: a phrase starts there
    assert " ".join(pushed) == text
    assert len(pushed) == 2  # after the first chunk: whole sentences again


def test_the_word_cut_never_separates_an_abbreviation_from_its_word():
    text = "So the man you should see is called Dr. Lee and he is nice."
    chunks = _stream_words(ClauseChunker(TTSConfig(first_chunk_max_words=8)), text)
    assert chunks[0] == "So the man you should see is called"
    text = "Yes you should go and see the Dr. Lee right away today."
    chunks = _stream_words(ClauseChunker(TTSConfig(first_chunk_max_words=8)), text)
    assert chunks[0] == "Yes you should go and see the Dr. Lee"
    assert " ".join(chunks) == text


def test_a_comma_before_max_words_still_wins_and_zero_disables_the_word_cut():
    text = "Well, in short, the answer is that it depends on the weather tomorrow."
    chunks = _stream_words(ClauseChunker(TTSConfig(first_chunk_min_words=4, first_chunk_max_words=8)), text)
    assert chunks[0] == "Well, in short,"
    text = "I am going to walk to the left of the tenth meter marker and then stop."
    assert _stream_words(ClauseChunker(TTSConfig(first_chunk_max_words=0)), text) == [text]
