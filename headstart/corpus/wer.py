"""Word error rate (WER) with the text normalisation that ASR scoring needs.

Whisper writes numbers as digits and adds punctuation and capitals; references may spell numbers out
or carry "...", hyphens and non-speech notes ("(simple tone sound plays)"). Both sides are normalised
the same way (``normalize_text``) before the word-level Levenshtein alignment (the ``jiwer`` library)
is computed:

    WER = (substitutions + deletions + insertions) / number of reference words
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

_ABBREVIATIONS = {"mr": "mister", "mrs": "missus", "ms": "miss"}
# Rules taken from Whisper's EnglishTextNormalizer (Radford et al. 2022, appendix C; whisper/normalizers/
# english.py, also in transformers.models.whisper.english_normalizer). That class is not used whole: it
# turns number words into digits unevenly ("two nine three four zero" -> "29340" but "2 9 3 4 0" stays
# five words; "press 1" -> "press one" but "or 2" stays) and needs the British/American spelling map
# (normalizer.json) that ships with the hub tokenizer, not with the package.
_BRACKETED_RE = re.compile(r"\[[^\]]*\]|<[^>]*>|\([^)]*\)")  # non-speech notes: "(tone plays)", "[music]"
_FILLERS = frozenset({"hmm", "mm", "mhm", "mmm", "uh", "um"})
# unambiguous contractions only ("'s" is is/has/possessive and "'d" would/had: kept as written)
_CONTRACTIONS = (
    (re.compile(r"\bwon't\b"), "will not"),
    (re.compile(r"\bcan't\b"), "can not"),
    (re.compile(r"\bcannot\b"), "can not"),
    (re.compile(r"\blet's\b"), "let us"),
    (re.compile(r"n't\b"), " not"),
    (re.compile(r"'re\b"), " are"),
    (re.compile(r"'ll\b"), " will"),
    (re.compile(r"'ve\b"), " have"),
    (re.compile(r"\bi'm\b"), "i am"),
)
_SYMBOLS = {"&": " and ", "%": " percent ", "+": " plus ", "@": " at "}
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "`": "'"})

_ORDINAL_RE = re.compile(r"\b(\d+)(st|nd|rd|th)\b")
_DECIMAL_RE = re.compile(r"\b(\d+)\.(\d+)\b")
_GROUPED_RE = re.compile(r"\b\d{1,3}(?:,\d{3})+\b")
_INTEGER_RE = re.compile(r"\d+")
# a digit string: 5+ digits with no thousands separator (Whisper writes "10,000"), or a leading zero:
# a phone, account or PIN number, read digit by digit ("29340" -> "two nine three four zero")
_DIGIT_STRING_RE = re.compile(r"(?<![\d.,])(?:\d{5,}|0\d+)(?![\d]|[.,]\d)")
_SPLIT_RE = re.compile(r"[-\u2010-\u2015/_]+")
_DROP_RE = re.compile(r"[^\w\s']|_")


def _number_words(number: str, to: str = "cardinal") -> str:
    from num2words import num2words

    return f" {num2words(int(number), lang='en', to=to)} "


def _digit_words(digits: str) -> str:
    from num2words import num2words

    return " " + " ".join(num2words(int(d), lang="en") for d in digits) + " "


def normalize_text(text: str) -> str:
    """Normalise a transcript for WER scoring.

    Lowercase; curly apostrophes made straight; text in brackets or parentheses removed (non-speech
    notes: "(simple tone sound plays)", "[music]"); numbers as words via num2words ("10" -> "ten",
    "1,000" -> "one thousand", "2.5" -> "two point five", "3rd" -> "third", "21" -> "twenty one"),
    except digit strings (5+ digits without separators, or a leading zero), read digit by digit
    ("29340" -> "two nine three four zero"); unambiguous contractions expanded ("can't", "cannot" ->
    "can not", "don't" -> "do not", "i'm" -> "i am", "'re"/"'ll"/"'ve" -> are/will/have; "'s" and "'d"
    are kept); the fillers "hmm", "mm", "mhm", "mmm", "uh", "um" dropped;
    "mr"/"mrs"/"ms" -> "mister"/"missus"/"miss"; "&", "%", "+", "@" spelled out; hyphens, dashes and
    slashes split words; all other punctuation removed (apostrophes inside words kept: "i'm");
    whitespace collapsed.

    Args:
        text: any string.

    Returns:
        Space-separated lowercase words ("" when nothing is left).
    """
    s = unicodedata.normalize("NFKC", str(text)).lower().translate(_APOSTROPHES)
    s = _BRACKETED_RE.sub(" ", s)
    for pattern, expansion in _CONTRACTIONS:
        s = pattern.sub(expansion, s)
    for symbol, spelled in _SYMBOLS.items():
        s = s.replace(symbol, spelled)
    s = _ORDINAL_RE.sub(lambda m: _number_words(m.group(1), to="ordinal"), s)
    s = _DECIMAL_RE.sub(
        lambda m: _number_words(m.group(1)) + " point " + " ".join(_number_words(d) for d in m.group(2)),
        s,
    )
    s = _GROUPED_RE.sub(lambda m: _number_words(m.group(0).replace(",", "")), s)
    s = _DIGIT_STRING_RE.sub(lambda m: _digit_words(m.group(0)), s)
    s = _INTEGER_RE.sub(lambda m: _number_words(m.group(0)), s)
    s = _SPLIT_RE.sub(" ", s)
    s = _DROP_RE.sub(" ", s)
    words = []
    for word in s.split():
        word = word.strip("'")
        if word and word not in _FILLERS:
            words.append(_ABBREVIATIONS.get(word, word))
    return " ".join(words)


@dataclass(frozen=True, slots=True)
class WordErrorCounts:
    """Alignment counts of one hypothesis against one reference (after normalisation)."""

    substitutions: int
    deletions: int
    insertions: int
    reference_words: int

    @property
    def errors(self) -> int:
        return self.substitutions + self.deletions + self.insertions


def word_error_counts(reference: str, hypothesis: str) -> WordErrorCounts:
    """Substitutions, deletions and insertions of the minimum-edit word alignment (Levenshtein,
    via jiwer) of the normalised texts. An empty reference makes every hypothesis word an insertion."""
    ref = normalize_text(reference)
    hyp = normalize_text(hypothesis)
    if not ref:
        return WordErrorCounts(0, 0, len(hyp.split()), 0)
    if not hyp:
        n = len(ref.split())
        return WordErrorCounts(0, n, 0, n)
    import jiwer

    out = jiwer.process_words(ref, hyp)
    return WordErrorCounts(out.substitutions, out.deletions, out.insertions, len(ref.split()))


def word_error_rate(reference: str, hypothesis: str) -> float:
    """WER of `hypothesis` against `reference`: word edit distance / reference words, after
    ``normalize_text`` on both. 0.0 is perfect; it can exceed 1.0 (insertions).

    Edge case: an empty (after normalisation) reference has no denominator; it scores 0.0 against an
    empty hypothesis and otherwise the number of hypothesis words (all insertions, over a denominator
    of 1), so a transcript hallucinated on silence is never scored as perfect.
    """
    counts = word_error_counts(reference, hypothesis)
    return counts.errors / max(counts.reference_words, 1)


def corpus_word_error_rate(pairs: Iterable[tuple[str, str]]) -> float:
    """Corpus WER over (reference, hypothesis) pairs: total errors / total reference words (not the
    mean of per-utterance WERs, which over-weights short utterances). Empty input scores 0.0."""
    errors = words = 0
    for reference, hypothesis in pairs:
        counts = word_error_counts(reference, hypothesis)
        errors += counts.errors
        words += counts.reference_words
    return errors / max(words, 1)
