"""Text normalisation and word error rate."""

from __future__ import annotations

import pytest

from headstart.corpus.wer import (
    corpus_word_error_rate,
    normalize_text,
    word_error_counts,
    word_error_rate,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Go forward 10 meters.", "go forward ten meters"),
        ("Mr. John Dashwood", "mister john dashwood"),
        ("I'm sorry, there are no matches", "i am sorry there are no matches"),
        ("I\u2019m here", "i am here"),
        ("...to decrease your speaking volume.", "to decrease your speaking volume"),
        ("cold-hearted and ill-disposed", "cold hearted and ill disposed"),
        ("Press 0 to reach 21 people", "press zero to reach twenty one people"),
        ("1,000 and 2.5% on the 3rd", "one thousand and two point five percent on the third"),
        ("   ...   ", ""),
        # Whisper's normaliser rules: non-speech notes, contractions, fillers
        ("press the pound key. (simple tone sound plays)", "press the pound key"),
        ("[Music] hello <unk>", "hello"),
        ("you cannot send; I can't, don't, won't", "you can not send i can not do not will not"),
        ("I'm sure they're here, we'll see, I've been", "i am sure they are here we will see i have been"),
        ("that's the party's, I'd go", "that's the party's i'd go"),
        ("uh, hmm, okay um", "okay"),
        # digit strings (5+ digits without separators, or a leading zero) are read digit by digit
        ("29340.", "two nine three four zero"),
        ("Dial 0123", "dial zero one two three"),
        ("10,000 and 1234", "ten thousand and one thousand two hundred and thirty four"),
        ("", ""),
    ],
)
def test_normalize_text(text, expected):
    assert normalize_text(text) == expected


def test_identical_text_scores_zero():
    ref = "he was not an ill disposed young man"
    assert word_error_rate(ref, ref) == 0.0


def test_digits_and_number_words_match():
    assert word_error_rate("go forward ten meters", "Go forward 10 meters.") == 0.0
    assert word_error_rate("press 1 to send this message, or 2 to add another recipient.",
                           "Press one to send this message or two to add another recipient.") == 0.0
    assert word_error_rate("two nine three four zero", "2 9 3 4 0") == 0.0
    assert word_error_rate("and mister john dashwood", "And Mr. John Dashwood") == 0.0
    assert word_error_rate("two nine three four zero", "29340.") == 0.0


def test_both_sides_get_the_same_rules():
    # a note in the reference is not speech; the same note in a hypothesis is not an insertion either
    assert word_error_rate("press the pound key. (simple tone sound plays)", "Press the pound key.") == 0.0
    assert word_error_rate("press the pound key", "Press the pound key (beep)") == 0.0
    assert word_error_rate("you can not send audio", "You cannot send audio.") == 0.0
    assert word_error_rate("I am sorry", "I'm sorry.") == 0.0
    # a repetition loop still counts: each repeated digit is an insertion
    counts = word_error_counts("two nine three four zero", "29340. 29340.")
    assert (counts.substitutions, counts.deletions, counts.insertions) == (0, 0, 5)


def test_known_substitution_count():
    counts = word_error_counts("the cat sat on the mat", "the bat sat on a mat")
    assert (counts.substitutions, counts.deletions, counts.insertions) == (2, 0, 0)
    assert word_error_rate("the cat sat on the mat", "the bat sat on a mat") == pytest.approx(2 / 6)


def test_deletions_and_insertions():
    counts = word_error_counts("one two three four", "one three four five six")
    assert (counts.substitutions, counts.deletions, counts.insertions) == (0, 1, 2)
    assert word_error_rate("one two three four", "one three four five six") == pytest.approx(3 / 4)
    # insertions can push WER past 1
    assert word_error_rate("yes", "yes yes yes") == pytest.approx(2.0)


def test_empty_cases():
    assert word_error_rate("", "") == 0.0
    assert word_error_rate("...", "  ") == 0.0
    # hallucination on an empty reference is never perfect: each word counts as an insertion
    assert word_error_rate("", "Thanks for watching!") == 3.0
    # an empty hypothesis deletes every reference word
    assert word_error_rate("ten of clubs", "") == 1.0
    assert word_error_counts("ten of clubs", "").deletions == 3


def test_corpus_wer_weights_by_reference_words():
    pairs = [("a b c d e f g h i j", "a b c d e f g h i j"), ("yes", "no")]
    assert corpus_word_error_rate(pairs) == pytest.approx(1 / 11)
    assert corpus_word_error_rate([]) == 0.0
