"""Text normalisation for speech (cases.md TTS rows: currency, times, abbreviations, ordinals; plus
markdown, URLs, e-mail and emoji an LLM may emit)."""

from __future__ import annotations

import re

import pytest

from headstart.tts.normalize import normalize_text


@pytest.mark.parametrize(
    ("text", "spoken"),
    [
        # cases.md
        ("$49.95", "forty-nine dollars and ninety-five cents"),
        ("8:00 AM", "eight AM"),
        ("Dr. Lee lives at 221B Baker St.", "Doctor Lee lives at two hundred twenty-one B Baker Street."),
        ("e.g. this one", "for example this one"),
        ("1st, 2nd and 3rd", "first, second and third"),
        # times
        ("3:15 pm", "three fifteen PM"),
        ("Meet at 7pm.", "Meet at seven PM."),
        ("It opens at 9 a.m. sharp", "It opens at nine AM sharp"),
        ("at 10:05", "at ten oh five"),
        ("at 6:00", "at six o'clock"),
        # money
        ("$1", "one dollar"),
        ("$0.50", "fifty cents"),
        ("$1,250.01", "one thousand two hundred fifty dollars and one cent"),
        ("$2.5 million", "two point five million dollars"),
        ("€20", "twenty euros"),
        ("£3.50", "three pounds and fifty pence"),
        # numbers
        ("3.14", "three point one four"),
        ("1,000 people", "one thousand people"),
        ("-5 degrees", "minus five degrees"),
        ("20°C", "twenty degrees Celsius"),
        ("50% off", "fifty percent off"),
        ("2.5%", "two point five percent"),
        ("version 1.2.3", "version one point two point three"),
        ("call 555-1234", "call five five five, one two three four"),
        ("pages 10-20", "pages ten to twenty"),
        ("21st century", "twenty-first century"),
        # years where obvious
        ("in 1999", "in nineteen ninety-nine"),
        ("the 1980s", "the nineteen eighties"),
        ("on March 3, 2024", "on March third, twenty twenty-four"),
        ("since 2005", "since two thousand five"),
        # abbreviations
        ("i.e. the best", "that is the best"),
        ("apples, pears, etc.", "apples, pears, et cetera."),
        ("Mr. and Mrs. Smith", "Mister and Missus Smith"),
        ("St. Louis", "Saint Louis"),
        ("I saw Dr. Lee on 5th St. It was fun.", "I saw Doctor Lee on fifth Street. It was fun."),
        ("No. 5 vs. No. 6", "number five versus number six"),
        ("the U.S. Army", "the U S Army"),
        # URLs and e-mail
        ("See https://www.example.com/docs.", "See example dot com slash docs."),
        ("Mail jane.doe@example.org today", "Mail jane dot doe at example dot org today"),
        ("Go to github.com/org", "Go to github dot com slash org"),
        # emoji
        ("Great job 😊👍🏽!", "Great job!"),
        ("I ❤️ it", "I it"),
        # markdown / code
        ("**Bold** and _italic_ and `code`", "Bold and italic and code"),
        ("# Weather today", "Weather today"),
        ("- first point", "first point"),
        ("* second point", "second point"),
        ("2. second step", "second step"),
        ("> quoted words", "quoted words"),
        ("[the docs](https://example.com)", "the docs"),
        ("```python", ""),
        ("```", ""),
        ("A & B", "A and B"),
    ],
)
def test_spoken_forms(text, spoken):
    assert normalize_text(text) == spoken


@pytest.mark.parametrize("text", ["", "   ", "...", "😊", "**", "---", "```", "# ", "- ", "|", "\n\n"])
def test_nothing_speakable_gives_empty_text(text):
    assert normalize_text(text) == ""


@pytest.mark.parametrize(
    "text",
    [
        "Here is **the plan**: 1st, pay $49.95 at 8:00 AM (see https://x.io/a_b) 😊",
        "# Title\n- item `x = 2`\n1. step ~~one~~\n```bash\nls -la\n```\n> note | cell | 3.5% |",
        "Dr. Smith, Ph.D., e.g. 221B Baker St., U.S., 1,000,000 at 23:59 on Jan 1st 2024!",
    ],
)
def test_no_digits_or_markup_symbols_are_left_for_the_synthesiser(text):
    out = normalize_text(text)
    assert out
    assert not re.search(r"[0-9*#`_~|<>\[\]{}$%@€£°]", out), out
    assert not any(ord(c) > 0x2FFF for c in out), out


def test_plain_text_is_left_alone():
    text = "Hello there! How are you today? I'm fine, thanks."
    assert normalize_text(text) == text


def test_non_str_input_is_a_clear_error():
    with pytest.raises(TypeError, match="str"):
        normalize_text(None)  # type: ignore[arg-type]
