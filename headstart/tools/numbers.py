"""Numbers as a transcript writes them: digits ("17", "2.5", "1,000") or words ("seventeen",
"twenty three", "one hundred and five", "two point five", "a half")."""

from __future__ import annotations

import re

_UNITS = {
    "zero": 0, "oh": 0, "one": 1, "a": 1, "an": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
    "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19,
}
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80,
         "ninety": 90}
_SCALES = {"hundred": 100, "thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000}
_DIGITS = re.compile(r"^-?\d[\d,]*(\.\d+)?$")


def number_words() -> frozenset[str]:
    """Every word `parse_number` reads (besides "and", "point", "minus", "negative")."""
    return frozenset({*_UNITS, *_TENS, *_SCALES, "half", "quarter"})


def parse_number(text: str) -> float | None:
    """The number `text` spells, or None when it is not one number.

    >>> parse_number("twenty three"), parse_number("1,250"), parse_number("two point five")
    (23.0, 1250.0, 2.5)
    """
    words = text.lower().replace("-", " ").split()
    if not words:
        return None
    if len(words) == 1 and _DIGITS.match(words[0]):
        return float(words[0].replace(",", ""))
    sign = 1.0
    if words[0] in ("minus", "negative"):
        sign, words = -1.0, words[1:]
        if len(words) == 1 and _DIGITS.match(words[0]):
            return -float(words[0].replace(",", ""))
    if words in (["a", "half"], ["half"]):
        return sign * 0.5
    if words in (["a", "quarter"], ["quarter"]):
        return sign * 0.25
    if "point" in words:
        i = words.index("point")
        whole = _integer(words[:i]) if i else 0
        decimals = [_UNITS.get(w) for w in words[i + 1:]]
        if whole is None or not decimals or any(d is None or d > 9 for d in decimals):
            return None
        return sign * float(f"{whole}." + "".join(str(d) for d in decimals))
    value = _integer(words)
    return None if value is None else sign * float(value)


def _integer(words: list[str]) -> int | None:
    total, current, seen = 0, 0, False
    for i, word in enumerate(words):
        if word == "and" and seen:
            continue
        if word in ("a", "an") and (i + 1 == len(words) or words[i + 1] not in _SCALES):
            return None  # "a" is a number only before a scale ("a hundred")
        if word in _UNITS:
            current += _UNITS[word]
        elif word in _TENS:
            current += _TENS[word]
        elif word == "hundred":
            current = max(current, 1) * 100
        elif word in _SCALES:
            total += max(current, 1) * _SCALES[word]
            current = 0
        elif _DIGITS.match(word) and "." not in word:
            current += int(word.replace(",", ""))
        else:
            return None
        seen = True
    return total + current if seen else None


def spoken_number(value: float) -> str:
    """A result as the answer writes it: whole numbers without ".0", others to at most 4 decimals."""
    if abs(value - round(value)) < 1e-9:
        return str(round(value))
    return f"{value:.4f}".rstrip("0").rstrip(".")
