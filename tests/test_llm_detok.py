"""Incremental detokenization with the real SmolLM2 tokenizer (byte-level BPE) and a small
SentencePiece-style one: deltas joined equal the full decode, no U+FFFD, no lost spaces, stop strings
(cases.md, LLM rows)."""

from __future__ import annotations

import random

import pytest

from headstart.llm.detok import IncrementalDetokenizer
from tests.prepared import model_path

pytestmark = pytest.mark.models  # loads a real prepared model (make test-unit leaves it out)

FFFD = "\ufffd"
REPLY = (
    "Sure! Here's a quick one: the robot, named Bolt, found a brush in the shed. "
    "It painted 3 sunsets, then 12 more — and signed each with a tiny heart."
)
CJK_EMOJI = "Hello 你好世界, café naïve 😊 done. 日本語のテキスト 🎉🎉 end"


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_path("smollm2-135m"), local_files_only=True)


@pytest.fixture(scope="module")
def metaspace_tokenizer():
    """A word-level tokenizer with a SentencePiece Metaspace decoder, which strips the space of the
    first token of whatever it decodes: decoding token by token loses every space."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"[UNK]": 0, "▁Hello": 1, "▁world": 2, "!": 3, "▁how": 4, "▁are": 5, "▁you": 6, "?": 7}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]")


def _ids(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def _run(detok: IncrementalDetokenizer, ids: list[int]) -> list[str]:
    deltas = []
    for token in ids:
        if detok.stopped:
            break
        deltas.append(detok.push(token))
    deltas.append(detok.flush())
    return deltas


@pytest.mark.parametrize("text", [REPLY, CJK_EMOJI, " leading space and  double  spaces ", "a\n\nb\tc"])
def test_deltas_join_to_the_full_decode_without_replacement_chars(tokenizer, text):
    ids = _ids(tokenizer, text)
    deltas = _run(IncrementalDetokenizer(tokenizer), ids)
    assert "".join(deltas) == tokenizer.decode(ids, skip_special_tokens=True) == text
    assert not any(FFFD in d for d in deltas)


def test_characters_whose_bytes_span_tokens_are_held_until_complete(tokenizer):
    ids = _ids(tokenizer, CJK_EMOJI)
    # The case is real: some tokens of this text are only part of a character.
    assert any(FFFD in tokenizer.decode([t]) for t in ids)
    detok = IncrementalDetokenizer(tokenizer)
    held = 0
    for token in ids:
        delta = detok.push(token)
        held += delta == ""
        assert FFFD not in delta
    assert held > 0
    assert "😊" in detok.text and "你好世界" in detok.text


def test_no_lost_spaces_with_a_sentencepiece_decoder(metaspace_tokenizer):
    tok = metaspace_tokenizer
    ids = [1, 2, 3, 4, 5, 6, 7]
    full = tok.decode(ids)
    assert full == "Hello world! how are you?"
    assert "".join(tok.decode([t]) for t in ids) != full  # the naive way loses spaces
    deltas = _run(IncrementalDetokenizer(tok), ids)
    assert "".join(deltas) == full


def test_special_tokens_are_skipped_like_the_full_decode(tokenizer):
    ids = _ids(tokenizer, "Hi there") + [tokenizer.convert_tokens_to_ids("<|im_end|>")] + _ids(tokenizer, " again")
    deltas = _run(IncrementalDetokenizer(tokenizer), ids)
    assert "".join(deltas) == tokenizer.decode(ids, skip_special_tokens=True) == "Hi there again"


def test_random_token_streams_join_to_the_full_decode(tokenizer):
    rng = random.Random(20240601)
    for _ in range(30):
        ids = [rng.randrange(tokenizer.vocab_size) for _ in range(rng.randrange(1, 40))]
        deltas = _run(IncrementalDetokenizer(tokenizer), ids)
        assert "".join(deltas) == tokenizer.decode(ids, skip_special_tokens=True)


def _stop_case(tokenizer, text: str, stop: list[str]) -> tuple[IncrementalDetokenizer, str, list[int]]:
    ids = _ids(tokenizer, text)
    detok = IncrementalDetokenizer(tokenizer, stop=stop)
    joined = "".join(_run(detok, ids))
    return detok, joined, ids


def test_one_character_stop_string(tokenizer):
    detok, joined, _ = _stop_case(tokenizer, "The cat sat on a mat.", ["a"])
    assert joined == "The c" and detok.stopped and detok.stop_string == "a"


def test_stop_string_spanning_two_tokens(tokenizer):
    text = "It painted three sunsets, then twelve more."
    stop = "sunsets, then"
    ids = _ids(tokenizer, text)
    assert not any(stop in tokenizer.decode([t]) for t in ids)  # no single token holds it
    detok, joined, _ = _stop_case(tokenizer, text, [stop])
    assert joined == "It painted three "
    assert detok.stop_string == stop


def test_stop_string_whose_bytes_span_tokens(tokenizer):
    ids = _ids(tokenizer, "Thanks 😊 see you")
    assert any(FFFD in tokenizer.decode([t]) for t in ids)  # the emoji is split over tokens
    detok, joined, _ = _stop_case(tokenizer, "Thanks 😊 see you", ["😊"])
    assert joined == "Thanks " and detok.stopped
    detok, joined, _ = _stop_case(tokenizer, "日本語のテキスト", ["のテ"])
    assert joined == "日本語"


def test_nothing_after_the_stop_string_is_emitted_and_pushing_more_is_an_error(tokenizer):
    detok, joined, ids = _stop_case(tokenizer, "User: hi\nAssistant: hello\nUser: bye", ["\nUser:"])
    assert joined == "User: hi\nAssistant: hello"
    assert detok.text == joined
    with pytest.raises(RuntimeError, match="stop string"):
        detok.push(ids[0])
    assert detok.flush() == ""


def test_earliest_of_several_stop_strings_wins(tokenizer):
    _, joined, _ = _stop_case(tokenizer, "one two three four", ["four", "two"])
    assert joined == "one "


def test_a_stop_string_prefix_that_never_completes_is_released(tokenizer):
    text = "The end is near, then the end came."
    detok, joined, _ = _stop_case(tokenizer, text, ["the end!"])
    assert joined == text and not detok.stopped
    # Held while it might still complete, released at flush.
    detok = IncrementalDetokenizer(tokenizer, stop=["world peace"])
    emitted = "".join(detok.push(t) for t in _ids(tokenizer, "hello world"))
    assert emitted == "hello "
    assert detok.flush() == "world"


@pytest.mark.parametrize("bad", [[""], [None], [3]])
def test_bad_stop_strings_are_rejected(tokenizer, bad):
    with pytest.raises(ValueError):
        IncrementalDetokenizer(tokenizer, stop=bad)
