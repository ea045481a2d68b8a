"""The default early first chunk (TTSConfig: first comma, or about 5 words moved past words that cannot
end a phrase, preferring a cut before a word that opens one): typical reply openings, the same cut whether pushed whole or token by token, never a
dangling function word, a split number or abbreviation at the cut."""

from __future__ import annotations

import random

import pytest

from headstart.config import TTSConfig
from headstart.tts.chunker import DANGLING_WORDS, ClauseChunker


def chunks_of(text: str, step: int | None, config: TTSConfig | None = None) -> list[str]:
    chunker = ClauseChunker(config)
    size = step or len(text)
    out: list[str] = []
    for i in range(0, len(text), size):
        out += chunker.push(text[i : i + size])
    return out + chunker.flush()


OPENINGS = [
    ("Sure, here is the plan for today.", "Sure,"),
    ("Of course, I can help you with that.", "Of course,"),
    ("Good question! Water boils at sea level.", "Good question!"),
    ("The capital of Australia is Canberra, not Sydney.", "The capital of Australia is Canberra,"),
    ("I think the best way to learn a language is to practise.", "I think the best way"),
    ("You can reset your password from the settings page.", "You can reset your password"),
    ("I will go to the store and buy some milk.", "I will go to the store"),
    ("We can meet at 9:30 am in the lobby tomorrow.", "We can meet at 9:30 am"),
    ("It costs about $12.50 per person tonight.", "It costs about $12.50 per person tonight."),
    ("It costs about $12.50 per person for the whole trip.", "It costs about $12.50 per person"),
    ("There are twenty five people in the room now.", "There are twenty five people"),
    ("Please ask Dr. Lee about the results of the test.", "Please ask Dr. Lee about the results"),
    ("A good aim for a black cat is to chase the nearest human.", "A good aim for a black cat"),
    ("Take the old green wooden garden gate key with you.", "Take the old green wooden"),
    ("My favourite author is J. R. R. Tolkien of course.", "My favourite author is J. R. R. Tolkien"),
    ("The value of pi is 3.14159 and it never ends.", "The value of pi is 3.14159 and it never ends."),
    ("I\u2019m going to the market later today.", "I\u2019m going to the market later today."),
    ("I\u2019m going to the market in town later.", "I\u2019m going to the market"),
    ("Short answer.", "Short answer."),
]


@pytest.mark.parametrize("text, first", OPENINGS)
@pytest.mark.parametrize("step", [None, 1, 4])
def test_typical_openings_give_an_early_first_chunk_that_reads_well(text, first, step):
    chunks = chunks_of(text, step)
    assert chunks[0] == first
    assert " ".join(chunks) == text  # nothing lost or reordered


def test_the_first_chunk_is_ready_as_soon_as_its_cut_is_certain():
    chunker = ClauseChunker()
    assert chunker.push("Sure") == [] and chunker.push(",") == []  # "Sure,5" could still come
    assert chunker.push(" here") == ["Sure,"]
    chunker = ClauseChunker()
    ready = [chunker.push(t) for t in ["I", " think", " the", " best", " way", " to", " learn"]]
    assert ready == [[], [], [], [], [], [], ["I think the best way"]]  # once "to" is whole
    chunker = ClauseChunker()
    ready = [chunker.push(t) for t in ["I", " will", " go", " to", " the", " store", " and", " buy"]]
    assert ready[-1] == ["I will go to the store"] and not any(ready[:-1])  # not at "the"


_VOCAB = (
    "the a to of and is can will my we I it you not very twenty five 9:30 $12.50 3.5 Dr. Mr. e.g. J. "
    "weather park river plan coffee garden tomorrow quickly green walk read simple answer"
).split()


@pytest.mark.parametrize("seed", range(40))
def test_a_word_cut_never_ends_on_a_dangling_word_a_number_or_an_abbreviation(seed):
    rng = random.Random(seed)
    text = " ".join(rng.choice(_VOCAB) for _ in range(30)) + "."
    for step in (None, 1, 5):
        chunks = chunks_of(text, step)
        assert " ".join(chunks) == text
        first = chunks[0]
        if first == text:
            continue
        last = first.split()[-1].lower()
        assert last.strip(".,") not in DANGLING_WORDS, first
        assert not any(ch.isdigit() for ch in last), first
        assert last not in {"dr.", "mr.", "e.g.", "j."}, first
    assert chunks_of(text, 1) == chunks_of(text, None)  # the same cut, however the text was streamed


def test_policy_settings_still_apply():
    text = "Sure, here is the plan for today. More later."
    assert chunks_of(text, 1, TTSConfig(first_clause=False))[0] == "Sure, here is the plan for today."
    # waiting for a longer clause: the word cut comes back to the only comma
    assert chunks_of(text, 1, TTSConfig(first_chunk_min_words=3))[0] == "Sure,"
    assert chunks_of(text, 1, TTSConfig(first_chunk_min_words=3, first_chunk_max_words=0))[0] == (
        "Sure, here is the plan for today."
    )
    with pytest.raises(ValueError, match="first_chunk_max_words"):
        ClauseChunker(TTSConfig(first_chunk_max_words=-1))
