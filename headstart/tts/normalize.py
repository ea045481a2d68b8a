"""Text normalisation for speech: what an LLM writes -> what a synthesiser should say.

English only. Rule-based, in a fixed order (each step sees the output of the one before):

1. markdown and code an LLM may emit: code fences, `backticks`, # headings, list bullets and numbers,
   **bold**, _italics_, [links](url), > quotes, tables -> their plain text;
2. URLs and e-mail addresses -> the site's name ("https://www.example.com/a/b?c=1" -> "example dot
   com"; a one-word path is said: "example dot com slash docs"), "jane dot doe at example dot org";
   the Unicode minus and en-dash ranges ("−12.50" -> "minus twelve point five zero", "pages 10–20" ->
   "pages ten to twenty");
3. emoji and pictographs -> removed;
4. abbreviations -> words ("Dr. Lee" -> "Doctor Lee", "Baker St." -> "Baker Street", "e.g." -> "for
   example", "i.e." -> "that is", "etc." -> "et cetera", "a.m." -> "AM"); Roman numerals after a
   number word, a title or a name ("World War II" -> "World War Two", "Henry VIII" -> "Henry the
   Eighth"; never the pronoun "I");
5. currency ("$49.95" -> "forty-nine dollars and ninety-five cents"), times ("8:00 AM" -> "eight AM",
   "3:15 pm" -> "three fifteen PM"), percentages, degrees, ordinals ("2nd" -> "second"), years where
   the context makes them obvious ("in 1999" -> "in nineteen ninety-nine"), codes digit by digit
   after "zip", "code", "room", "flight"... ("zip code 90210" -> "nine zero two one zero"), phone numbers
   written in digit groups, group by group ("1300 555 019" -> "one three zero zero, five five five, zero
   one nine"), and all other numbers
   ("1,000", "3.14", "-5", "221B"), units of measure ("2.5 kg" -> "two point five kilograms") via num2words, in American style (no "and" inside numbers);
6. leftover symbols (&, +, =, @, /, *, #, ...) -> words or nothing; whitespace collapsed.

The output holds only letters, digits-free words and sentence punctuation that synthesisers read well.
Sources: the rules follow the usual TTS front-end practice (e.g. the NeMo text normaliser's classes:
cardinal, decimal, money, time, ordinal, date, measure, electronic); numbers are spelled by num2words.
"""

from __future__ import annotations

import re
import unicodedata

# --- 1. markdown / code ---------------------------------------------------------------------------

_FENCE_RE = re.compile(r"^[ \t]*(```|~~~)[^\n]*$", re.MULTILINE)
_HEADING_RE = re.compile(r"^[ \t]*#{1,6}[ \t]+", re.MULTILINE)
_BULLET_RE = re.compile(r"^[ \t]*[-*+•◦▪‣][ \t]+", re.MULTILINE)
_NUMBERED_RE = re.compile(r"^[ \t]*\d{1,3}[.)][ \t]+(?=\S)", re.MULTILINE)
_QUOTE_RE = re.compile(r"^[ \t]*>+[ \t]?", re.MULTILINE)
_HRULE_RE = re.compile(r"^[ \t]*([-*_=])(?:[ \t]*\1){2,}[ \t]*$", re.MULTILINE)
_TABLE_SEP_RE = re.compile(r"^[ \t]*\|?[ \t]*:?-{2,}:?[ \t]*(\|[ \t]*:?-{2,}:?[ \t]*)*\|?[ \t]*$", re.MULTILINE)
_IMAGE_RE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK_RE = re.compile(r"\[([^\]]+)\]\([^)]*\)")
_BOLD_RE = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1", re.DOTALL)
_ITALIC_STAR_RE = re.compile(r"(?<![\w*])\*(?=\S)(.+?)(?<=\S)\*(?![\w*])")
_ITALIC_UNDERSCORE_RE = re.compile(r"(?<![\w_])_(?=\S)(.+?)(?<=\S)_(?![\w_])")
_STRIKE_RE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_BACKTICK_RE = re.compile(r"`+([^`]*)`+")


def strip_markdown(text: str) -> str:
    """Markdown/code markup -> plain text (the words stay, the symbols go)."""
    text = _FENCE_RE.sub("", text)
    text = _HRULE_RE.sub("", text)
    text = _TABLE_SEP_RE.sub("", text)
    text = _HEADING_RE.sub("", text)
    text = _QUOTE_RE.sub("", text)
    text = _BULLET_RE.sub("", text)
    text = _NUMBERED_RE.sub("", text)
    text = _IMAGE_RE.sub(r"\1", text)
    text = _LINK_RE.sub(r"\1", text)
    text = _BACKTICK_RE.sub(r"\1", text)
    text = _BOLD_RE.sub(r"\2", text)
    text = _STRIKE_RE.sub(r"\1", text)
    text = _ITALIC_STAR_RE.sub(r"\1", text)
    text = _ITALIC_UNDERSCORE_RE.sub(r"\1", text)
    text = text.replace("|", ", ")  # table cells
    return text


# --- 2. URLs and e-mail addresses -----------------------------------------------------------------

_EMAIL_RE = re.compile(r"\b[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+\b")
_URL_RE = re.compile(
    r"\b(?:(?:https?|ftp)://|www\.)[^\s<>\"')\]]+"
    r"|\b[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.(?:com|org|net|io|dev|ai|edu|gov|co|uk|de|app)\b(?:/[^\s<>\"')\]]*)?"
)
_URL_TRAILING = ".,;:!?"


def _speak_address_part(part: str) -> str:
    part = part.replace(".", " dot ").replace("/", " slash ").replace("-", " dash ").replace("_", " underscore ")
    part = part.replace("@", " at ").replace("+", " plus ").replace("=", " equals ").replace("?", " ")
    part = part.replace("&", " and ").replace("#", " ").replace("%", " ").replace(":", " ").replace("~", " ")
    return re.sub(r"\s+", " ", part).strip()


# A path a listener can keep in mind: one short word ("/docs", "/pricing"). A deeper path, a query or
# a fragment is for reading, not hearing: the site's name is said alone.
_SPOKEN_PATH_RE = re.compile(r"/[A-Za-z]{1,12}/?")


def _speak_url(match: re.Match[str]) -> str:
    url = match.group(0)
    trailing = ""
    while url and url[-1] in _URL_TRAILING:
        trailing = url[-1] + trailing
        url = url[:-1]
    url = re.sub(r"^(?:https?|ftp)://", "", url)
    url = re.sub(r"^www\.", "", url)
    host, path = re.match(r"([^/?#]*)(.*)", url).groups()
    host = re.sub(r":\d+$", "", host)  # a port number
    spoken = host + path.rstrip("/") if _SPOKEN_PATH_RE.fullmatch(path) else host
    return _speak_address_part(spoken) + trailing


def _speak_email(match: re.Match[str]) -> str:
    return _speak_address_part(match.group(0))


# --- 2b. Unicode minus and en-dash ranges -----------------------------------------------------------

# U+2212 between operands is subtraction ("5 − 3"); before a number it is its sign ("−12.50"), made the
# ASCII "-" the number rules read as "minus".
_MINUS_OPERATOR_RE = re.compile(r"(?<=[\d)%])[ \t]*\u2212[ \t]*")
_MINUS_SIGN_RE = re.compile(r"\u2212(?=[$€£¥]?\.?\d)")
# An en dash between two numbers is a range ("pages 10–20", "$10–$20", "9–5"): "to".
_EN_DASH_RANGE_RE = re.compile(r"(?<=[\d%])[ \t]*\u2013[ \t]*(?=[$€£¥]?\d)")


def speak_signs_and_ranges(text: str) -> str:
    """The Unicode minus and en-dash ranges -> what the number rules read: "−12.50" -> "-12.50"
    ("minus twelve point five zero"), "5 − 3" -> "5 minus 3", "10–20" -> "10 to 20"."""
    text = _MINUS_OPERATOR_RE.sub(" minus ", text)
    text = _MINUS_SIGN_RE.sub("-", text)
    text = text.replace("\u2212", " minus ")
    return _EN_DASH_RANGE_RE.sub(" to ", text)


# --- 3. emoji ---------------------------------------------------------------------------------------

_EMOJI_EXTRA = {"\u200d", "\ufe0f", "\ufe0e", "\u20e3"}


def strip_emoji(text: str) -> str:
    """Remove emoji, pictographs and their joiners/modifiers (Unicode categories So, Sk in emoji
    ranges, Cs/Co), keeping ordinary letters and punctuation."""
    out = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in _EMOJI_EXTRA or cat in ("So", "Cs", "Co") or (cat == "Sk" and ord(ch) >= 0x1F000):
            continue
        out.append(ch)
    return "".join(out)


# --- 4. abbreviations --------------------------------------------------------------------------------

# Always the same expansion. Keys are matched case-sensitively unless noted.
_ABBREVIATIONS: dict[str, str] = {
    "Mr.": "Mister",
    "Mrs.": "Missus",
    "Ms.": "Miz",
    "Prof.": "Professor",
    "Jr.": "Junior",
    "Sr.": "Senior",
    "Mt.": "Mount",
    "Ave.": "Avenue",
    "Blvd.": "Boulevard",
    "Rd.": "Road",
    "Capt.": "Captain",
    "Gen.": "General",
    "Lt.": "Lieutenant",
    "Sgt.": "Sergeant",
    "Inc.": "Incorporated",
    "Ltd.": "Limited",
    "Corp.": "Corporation",
    "Dept.": "Department",
    "approx.": "approximately",
    "vs.": "versus",
    "e.g.": "for example",
    "E.g.": "For example",
    "i.e.": "that is",
    "I.e.": "That is",
    "etc.": "et cetera",
    "cf.": "compare",
    "a.m.": "AM",
    "p.m.": "PM",
    "A.M.": "AM",
    "P.M.": "PM",
}
_ABBREV_RE = re.compile(
    r"(?<![\w.])(" + "|".join(re.escape(k) for k in sorted(_ABBREVIATIONS, key=len, reverse=True)) + r")"
)
# "Dr." / "St.": a title before a name ("Doctor Lee", "Saint Louis"), a street type after one.
_DR_ST_RE = re.compile(r"(?<![\w.])(Dr|St)\.")
_NO_RE = re.compile(r"(?<![\w.])No\.(?=\s*\d)")
_DOTTED_INITIALISM_RE = re.compile(r"(?<![\w.])((?:[A-Z]\.){2,})")


_MAY_END_SENTENCE = frozenset({"etc.", "a.m.", "p.m.", "A.M.", "P.M.", "Jr.", "Sr.", "Inc.", "Ltd.", "Corp.", "Dept."})


def _end_period(text: str, end: int, may_end_sentence: bool = False) -> str:
    """Keep the period an abbreviation shares with its sentence's end: at the end of the text or
    line, or (for words that often end sentences: "etc.", "Baker St.") before a capital letter."""
    rest = text[end:]
    if not rest.strip() or rest.lstrip(" \t").startswith("\n"):
        return "."
    if may_end_sentence and rest[:1].isspace() and rest.lstrip()[:1].isupper():
        return "."  # "... Baker St. It is" -> "Baker Street. It is"
    return ""


def expand_abbreviations(text: str) -> str:
    """Common English abbreviations -> words (see the module docstring)."""

    def dr_st(m: re.Match[str]) -> str:
        title, street = ("Doctor", "Drive") if m.group(1) == "Dr" else ("Saint", "Street")
        words_before = text[: m.start()].split()
        if not words_before:
            return title
        prev = words_before[-1]
        sentence_start = len(words_before) == 1 or words_before[-2].endswith((".", "!", "?", ":"))
        # After a house number or a name inside a sentence ("221B Baker St.", "5th St."): a street.
        if prev[0].isdigit() or (prev[0].isupper() and prev[-1].isalnum() and not sentence_start):
            return street + _end_period(text, m.end(), may_end_sentence=True)
        return title

    text = _DR_ST_RE.sub(dr_st, text)
    text = _NO_RE.sub("number", text)
    text = _ABBREV_RE.sub(lambda m: _ABBREVIATIONS[m.group(1)]
        + _end_period(text, m.end(), m.group(1) in _MAY_END_SENTENCE), text)
    # "U.S." -> "U S": letters spoken one by one.
    text = _DOTTED_INITIALISM_RE.sub(lambda m: " ".join(m.group(1).replace(".", "")) + _end_period(text, m.end()), text)
    return text


# --- 4b. Roman numerals ------------------------------------------------------------------------------

# Words after which a Roman numeral is a number ("World War II", "Chapter IV", "Part III"): read as a
# cardinal ("World War Two"). After a regnal title or a monarch's or pope's name it is an ordinal
# ("King George VI" -> "King George the Sixth", "Elizabeth II" -> "Elizabeth the Second").
_ROMAN_NUMBER_WORDS = frozenset(
    """war chapter chapters part parts act acts volume vol book episode phase stage level type class grade
    section article appendix round season series title world mark mk tier category bowl""".split()
)
_REGNAL_TITLES = frozenset("king queen pope emperor empress tsar czar pharaoh prince princess duke sultan".split())
_REGNAL_NAMES = frozenset(
    """henry edward george william richard charles james john louis elizabeth mary anne victoria philip
    frederick peter catherine alexander nicholas ivan napoleon ramesses ptolemy pius leo gregory benedict
    innocent clement paul boniface urban alfonso ferdinand carlos juan felipe gustav gustavus christian
    olaf harald haakon ludwig otto wilhelm friedrich rudolf franz constantine justinian""".split()
)
# A numeral of I, V and X only (1-39), or with L (40-89) after a number word: "DC", "MD", "CD", "LX"
# after a name are read as letters. "I" alone is a numeral only after a number word or a regnal name
# ("World War I", "Charles I"), never the pronoun ("Then I left").
_ROMAN_RE = re.compile(r"(?<![\w'.-])(?P<prev>[A-Za-z]+)(?P<sep>[ \t]+)(?P<num>(?:XC|XL|L?X{0,3})(?:IX|IV|V?I{0,3}))(?![\w'-])")
_ROMAN_VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100}


def _roman_value(numeral: str) -> int:
    total = 0
    for i, ch in enumerate(numeral):
        value = _ROMAN_VALUES[ch]
        total += -value if i + 1 < len(numeral) and _ROMAN_VALUES[numeral[i + 1]] > value else value
    return total


def _speak_roman(text: str, m: re.Match[str]) -> str | None:
    prev, numeral = m.group("prev"), m.group("num")
    if not numeral:
        return None
    lower = prev.lower()
    before = text[: m.start("prev")].split()
    titled = bool(before) and before[-1].lower().rstrip(".") in _REGNAL_TITLES
    regnal = prev[0].isupper() and (lower in _REGNAL_NAMES or titled)
    if lower in _ROMAN_NUMBER_WORDS:
        if numeral == "I" and not prev[0].isupper():
            return None  # "the war I fought", "the book I read": the pronoun
        return _n2w(_roman_value(numeral)).title()
    if regnal:
        return "the " + _n2w(_roman_value(numeral), to="ordinal").title()
    if numeral == "I" or "L" in numeral or len(numeral) < 2 or not prev[0].isupper():
        return None  # "I" the pronoun; "Model X", "Malcolm X", "Honda LX" stay letters
    sentence_start = not before or before[-1].endswith((".", "!", "?", ":"))
    if sentence_start and len(numeral) < 3:
        return None  # capitalised as the first word, not as a name: "Give IV fluids"
    return _n2w(_roman_value(numeral)).title()  # a name and a numeral: "Apollo XI", "Final Fantasy VII"


def expand_roman_numerals(text: str) -> str:
    """Roman numerals after a number word, a title or a name -> words ("World War II" -> "World War
    Two", "Henry VIII" -> "Henry the Eighth"); the pronoun "I" and letter names stay."""

    def speak(m: re.Match[str]) -> str:
        words = _speak_roman(text, m)
        return m.group(0) if words is None else m.group("prev") + m.group("sep") + words

    return _ROMAN_RE.sub(speak, text)


# --- 5. numbers ----------------------------------------------------------------------------------------


def _n2w(number: int | float | str, to: str = "cardinal") -> str:
    from num2words import num2words

    words = num2words(number, lang="en", to=to)
    return words.replace(" and ", " ").replace(",", "")  # American style: "two hundred twenty-one"


def _int_words(digits: str) -> str:
    return _n2w(int(digits.replace(",", "")))


def _decimal_words(number: str) -> str:
    """'3.14' -> 'three point one four'; '1,000.5' -> 'one thousand point five'."""
    number = number.replace(",", "")
    negative = number.startswith("-")
    number = number.lstrip("-")
    whole, _, frac = number.partition(".")
    words = _n2w(int(whole or "0"))
    if frac:
        words += " point " + " ".join(_n2w(int(d)) for d in frac)
    return ("minus " + words) if negative else words


_CURRENCIES = {"$": ("dollar", "dollars", "cent", "cents"), "€": ("euro", "euros", "cent", "cents"),
               "£": ("pound", "pounds", "penny", "pence"), "¥": ("yen", "yen", "", "")}
_SCALE = r"(?:\s*(?P<scale>thousand|million|billion|trillion|[kKmMbB]n?)\b)?"
_MONEY_RE = re.compile(
    r"(?P<neg>-)?(?P<cur>[$€£¥])\s?(?P<amount>\d{1,3}(?:,\d{3})+|\d+)(?:\.(?P<frac>\d+))?" + _SCALE
)
_SCALE_WORDS = {"k": "thousand", "m": "million", "b": "billion", "bn": "billion"}


def _speak_money(m: re.Match[str]) -> str:
    one, many, sub_one, sub_many = _CURRENCIES[m.group("cur")]
    amount, frac, scale = m.group("amount"), m.group("frac"), m.group("scale")
    prefix = "minus " if m.group("neg") else ""
    if scale:
        scale_word = _SCALE_WORDS.get(scale.lower(), scale.lower())
        number = _decimal_words(amount + ("." + frac if frac else ""))
        return f"{prefix}{number} {scale_word} {many}"
    whole = int(amount.replace(",", ""))
    cents = 0
    if frac:
        if len(frac) == 2 and sub_many:
            cents = int(frac)
        else:  # "$1.5" or "$0.125": say the decimal
            return f"{prefix}{_decimal_words(amount + '.' + frac)} {many}"
    parts = []
    if whole or not cents:
        parts.append(f"{_n2w(whole)} {one if whole == 1 else many}")
    if cents:
        parts.append(f"{_n2w(cents)} {sub_one if cents == 1 else sub_many}")
    return prefix + " and ".join(parts)


_TIME_RE = re.compile(
    r"\b(?P<h>[01]?\d|2[0-3]):(?P<m>[0-5]\d)(?::[0-5]\d)?(?:\s*(?P<ampm>[AaPp])\.?\s?[Mm]\b)?"
)
_HOUR_AMPM_RE = re.compile(r"\b(?P<h>1[0-2]|0?[1-9])\s*(?P<ampm>[AaPp])\.?\s?[Mm]\b")


def _speak_time(m: re.Match[str]) -> str:
    hour, minute = int(m.group("h")), int(m.group("m"))
    ampm = m.group("ampm")
    words = _n2w(hour)
    if minute == 0:
        if not ampm:
            words = "midnight" if hour == 0 else words + " o'clock"
    elif minute < 10:
        words += " oh " + _n2w(minute)
    else:
        words += " " + _n2w(minute)
    if ampm:
        words += " AM" if ampm.lower() == "a" else " PM"
    return words


def _speak_hour_ampm(m: re.Match[str]) -> str:
    return _n2w(int(m.group("h"))) + (" AM" if m.group("ampm").lower() == "a" else " PM")


_NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_PERCENT_RE = re.compile(rf"(?P<neg>-)?(?P<n>{_NUM})\s?%")
_DEGREE_RE = re.compile(rf"(?P<neg>-)?(?P<n>{_NUM})\s?°\s?(?P<unit>[CF])?\b")
_ORDINAL_RE = re.compile(r"\b(?P<n>\d{1,3}(?:,\d{3})+|\d+)(?P<suf>st|nd|rd|th)\b", re.IGNORECASE)
_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_YEAR_RE = re.compile(
    r"\b(?P<pre>(?i:in|since|by|from|until|till|during|year|of|circa|before|after|around)\s+"
    rf"|(?:{_MONTHS})\s+(?:\d{{1,2}}(?:st|nd|rd|th)?,?\s+)?)"
    r"(?P<y>1[1-9]\d\d|20\d\d)\b(?![,.]\d)"
)
_MONTH_DAY_RE = re.compile(rf"\b(?P<month>{_MONTHS})\s+(?P<d>[1-9]|[12]\d|3[01])\b(?![:.,]\d)")
_DECADE_RE = re.compile(r"\b(?P<y>1[1-9]\d0|20\d0)'?s\b")
_DOTTED_NUMBER_RE = re.compile(r"(?<![\w.])\d+(?:\.\d+){2,}(?![\w])")
_DASHED_NUMBER_RE = re.compile(r"(?<![\w-])\d+(?:-\d+)+(?![\w-])")
_ALNUM_RE = re.compile(r"\b(?P<n>\d+)(?P<letters>[A-Za-z]{1,2})\b")
_NUMBER_RE = re.compile(rf"(?<![\w.])(?P<neg>-)?(?P<n>{_NUM})(?![\w])")
_LEFTOVER_DIGITS_RE = re.compile(r"\d+")
# Units of measure after a number (unambiguous symbols only: "in", "l", "s" are left alone).
_UNITS = {
    "mm": "millimeter", "cm": "centimeter", "m": "meter", "km": "kilometer", "mi": "mile", "ft": "foot",
    "mg": "milligram", "g": "gram", "kg": "kilogram", "lb": "pound", "lbs": "pound", "oz": "ounce",
    "ml": "milliliter", "mL": "milliliter", "L": "liter", "mph": "mile per hour", "km/h": "kilometer per hour",
    "ms": "millisecond", "Hz": "hertz", "kHz": "kilohertz", "MHz": "megahertz", "GHz": "gigahertz",
    "KB": "kilobyte", "kB": "kilobyte", "MB": "megabyte", "GB": "gigabyte", "TB": "terabyte",
}
_UNIT_PLURALS = {"foot": "feet", "hertz": "hertz", "kilohertz": "kilohertz", "megahertz": "megahertz",
                 "gigahertz": "gigahertz", "mile per hour": "miles per hour", "kilometer per hour": "kilometers per hour"}
_MEASURE_RE = re.compile(
    rf"(?<![\w.])(?P<neg>-)?(?P<n>{_NUM})\s?(?P<unit>{'|'.join(sorted(map(re.escape, _UNITS), key=len, reverse=True))})(?![\w/])"
)


def _speak_measure(m: re.Match[str]) -> str:
    number, unit = m.group("n"), _UNITS[m.group("unit")]
    words = _decimal_words(number) if "." in number else _int_words(number)
    if number.replace(",", "") != "1":
        unit = _UNIT_PLURALS.get(unit, unit + "s")
    return ("minus " if m.group("neg") else "") + words + " " + unit


def _speak_degrees(m: re.Match[str]) -> str:
    unit = {"C": " Celsius", "F": " Fahrenheit", None: ""}[m.group("unit")]
    return ("minus " if m.group("neg") else "") + _decimal_words(m.group("n")) + " degrees" + unit


def _speak_digits(digits: str) -> str:
    return " ".join(_n2w(int(d)) for d in digits)


def _speak_dashed(m: re.Match[str]) -> str:
    groups = m.group(0).split("-")
    if len(groups) >= 3 or sum(len(g) for g in groups) >= 7:  # a phone or serial number: digit by digit
        return ", ".join(_speak_digits(g) for g in groups)
    return f"{_int_words(groups[0])} to {_int_words(groups[1])}"  # a range: "10-20"


def _speak_year(year: str) -> str:
    return _n2w(int(year), to="year")


def _speak_decade(m: re.Match[str]) -> str:
    words = _speak_year(m.group("y"))  # "nineteen ninety" -> "nineteen nineties"
    if words.endswith("y"):
        return words[:-1] + "ies"
    return words + "s"


# A number after these words is a code read digit by digit ("zip code 90210" -> "nine zero two one
# zero", "flight 1234", "room 404"): three or more digits, with "number", "no.", "#" or ":" between
_CODE_RE = re.compile(
    r"\b(?P<lead>(?:zip|postal|post|area|country|pin|access|promo|confirmation|verification|security"
    r"|code|codes|room|rooms|flight|flights|extension|ext|gate|suite|apartment|apt|unit|account|order"
    r"|ticket|booking|tracking|reference|ref|serial|invoice|model|bus|train|route|pnr|zipcode|postcode)\.?"
    r"(?:\s+(?:code|number|no\.|num\.?|#))?(?:\s+(?:is|was|will\s+be))?[ \t]*(?:#|:)?[ \t]*)"
    r"(?P<digits>\d{3,})(?![\d,.]\d)\b",
    re.IGNORECASE,
)


def _speak_code(m: re.Match[str]) -> str:
    return m.group("lead") + _speak_digits(m.group("digits"))


# Digit groups written apart, as phone numbers are ("1300 555 019", "(02) 9876 5432", "+61 2 9876 5432",
# "call 13 11 14"): read digit by digit, group by group, like a dashed phone number ("555-1234").
_PHONE_RE = re.compile(
    r"(?<![\w.,:$€£¥+-])(?P<plus>\+[ \t]?)?(?:\((?P<area>\d{1,4})\)[ \t-]?)?"
    r"(?P<groups>\d{1,5}(?:[ \t-]\d{1,5})*)(?![\w-]|[.,:]\d|\s?%)"
)
_PHONE_CONTEXT_RE = re.compile(
    r"\b(?:call|calls|calling|called|phone|phones|dial|ring|text|fax|tel|telephone|mobile|cell|hotline"
    r"|number|contact)\b[^.!?\n\d]{0,20}$",
    re.IGNORECASE,
)
_THOUSANDS_SPACED_RE = re.compile(r"[1-9]\d{0,2}(?: \d{3})+")  # "1 300 555": one number in SI style


def _speak_phone(text: str, m: re.Match[str]) -> str:
    groups = re.split(r"[ \t-]", m.group("groups"))
    if m.group("area"):
        groups.insert(0, m.group("area"))
    digits = sum(len(g) for g in groups)
    context = bool(_PHONE_CONTEXT_RE.search(text[max(0, m.start() - 40): m.start()]))
    marked = bool(m.group("plus") or m.group("area"))
    if len(groups) < 2 or digits < 6:
        return m.group(0)
    if not (marked or context):
        if _THOUSANDS_SPACED_RE.fullmatch(m.group("groups")):
            return m.group("groups").replace(" ", "")  # the number rules read it (with its unit)
        if len(groups) < 3 or digits < 8 or "-" in m.group("groups"):
            return m.group(0)  # "21 14 7", "in 2020 2021"; dashed numbers have their own rule
    return ("plus " if m.group("plus") else "") + ", ".join(_speak_digits(g) for g in groups)


def expand_numbers(text: str) -> str:
    """Currency, times, percentages, degrees, ordinals, years, alphanumerics and plain numbers ->
    words. Runs after `expand_abbreviations` (so "a.m." is already "AM")."""
    text = _CODE_RE.sub(_speak_code, text)
    text = _PHONE_RE.sub(lambda m: _speak_phone(text, m), text)
    text = _MONEY_RE.sub(_speak_money, text)
    text = _TIME_RE.sub(_speak_time, text)
    text = _HOUR_AMPM_RE.sub(_speak_hour_ampm, text)
    text = _PERCENT_RE.sub(lambda m: ("minus " if m.group("neg") else "") + _decimal_words(m.group("n")) + " percent", text)
    text = _DECADE_RE.sub(_speak_decade, text)
    # Years before ordinals: "March 3rd, 2024" is a date only while "3rd" is still digits.
    text = _YEAR_RE.sub(lambda m: m.group("pre") + _speak_year(m.group("y")), text)
    text = _ORDINAL_RE.sub(lambda m: _n2w(int(m.group("n").replace(",", "")), to="ordinal"), text)
    text = _MEASURE_RE.sub(_speak_measure, text)
    text = _MONTH_DAY_RE.sub(lambda m: m.group("month") + " " + _n2w(int(m.group("d")), to="ordinal"), text)
    text = _DOTTED_NUMBER_RE.sub(lambda m: " point ".join(_int_words(g) for g in m.group(0).split(".")), text)
    text = _DASHED_NUMBER_RE.sub(_speak_dashed, text)
    text = _ALNUM_RE.sub(lambda m: _int_words(m.group("n")) + " " + m.group("letters"), text)
    text = _NUMBER_RE.sub(
        lambda m: ("minus " if m.group("neg") else "") + _decimal_words(m.group("n"))
        if "." in m.group("n")
        else ("minus " if m.group("neg") else "") + _int_words(m.group("n")),
        text,
    )
    # Anything left (digits glued to other symbols, e.g. "1.2.3"): say the digit groups.
    text = _LEFTOVER_DIGITS_RE.sub(lambda m: " " + _int_words(m.group(0)) + " ", text)
    return text


# --- 6. symbols and whitespace ---------------------------------------------------------------------------

_SYMBOL_WORDS = [
    (re.compile(r"\s*&\s*"), " and "),
    (re.compile(r"(?<=\s)\+(?=\s)"), " plus "),
    (re.compile(r"(?<=\s)=(?=\s)"), " equals "),
    (re.compile(r"\s@\s"), " at "),
    (re.compile(r"(?<=\w)/(?=\w)"), " "),
    (re.compile(r"\s+-{1,2}\s+"), ", "),  # a spaced dash is a pause
]
_DROP_RE = re.compile(r"[*#`_~|<>^\\{}\[\]()@+=/\"“”]")
_SPACE_BEFORE_PUNCT_RE = re.compile(r"\s+([,.;:!?])")
_REPEATED_COMMA_RE = re.compile(r"(?:,\s*){2,}")
_LEADING_PUNCT_RE = re.compile(r"^[\s,.;:]+")


def normalize_text(text: str) -> str:
    """Normalise English text for a speech synthesiser (see the module docstring for the steps).

    Args:
        text: any text, e.g. one chunk from the clause chunker.

    Returns:
        Text with numbers, currency, times, abbreviations, URLs spelled out and markup/emoji removed;
        "" when nothing speakable is left.

    Raises:
        TypeError: if `text` is not a str.
    """
    if not isinstance(text, str):
        raise TypeError(f"normalize_text() takes str, got {type(text).__name__}")
    text = unicodedata.normalize("NFKC", text.replace("\r\n", "\n"))
    text = strip_markdown(text)
    text = _EMAIL_RE.sub(_speak_email, text)
    text = _URL_RE.sub(_speak_url, text)
    text = text.replace("…", "...")
    text = speak_signs_and_ranges(text)
    text = _DEGREE_RE.sub(_speak_degrees, text)  # before emoji removal: "°" is a symbol too
    text = strip_emoji(text)
    text = expand_abbreviations(text)
    text = expand_roman_numerals(text)
    text = expand_numbers(text)
    for pattern, words in _SYMBOL_WORDS:
        text = pattern.sub(words, text)
    text = _DROP_RE.sub(" ", text)
    text = re.sub(r"[ \t]+", " ", text)
    text = re.sub(r"\s*\n\s*", "\n", text)
    text = _SPACE_BEFORE_PUNCT_RE.sub(r"\1", text)
    text = _REPEATED_COMMA_RE.sub(", ", text)
    text = _LEADING_PUNCT_RE.sub("", text)
    text = text.strip()
    if not re.search(r"\w", text):
        return ""
    return text
