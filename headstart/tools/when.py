"""When something should happen, as a request says it: a clock time ("7:30 pm", "seven thirty",
"noon"), a delay ("in ten minutes"), a day ("tomorrow", "tonight", "tomorrow morning at 8"), and a
reminder's words split into its task and its time ("to buy milk tomorrow morning").

    when = parse_when("tomorrow morning")     # When(day=1, part="morning")
    resolve(when, now)                        # tomorrow at 9:00 AM, a datetime in now's zone
    split_reminder("in ten minutes to check the oven")   # ("check the oven", "in ten minutes")

Parsing needs no clock; `resolve` turns the parsed time into a moment after `now`.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from headstart.tools.numbers import parse_number
from headstart.tools.registry import ToolArgumentError

# a part of the day said without a clock time, and when it starts for a reminder
PART_DEFAULTS = {"morning": dt.time(9), "afternoon": dt.time(15), "evening": dt.time(18), "night": dt.time(20)}
_PM_PARTS = frozenset({"afternoon", "evening", "night"})
_UNIT_S = {"hour": 3600, "hr": 3600, "minute": 60, "min": 60, "second": 1, "sec": 1}
_DAY = r"today|tonight|tomorrow(?: (?:morning|afternoon|evening|night))?|this (?:morning|afternoon|evening)"
_CLOCK_FIRST = re.compile(rf"(?:at|for) (?P<clock>.+?)(?: (?P<day>{_DAY}))?")
_DAY_FIRST = re.compile(rf"(?P<day>{_DAY})(?: at (?P<clock>.+))?")
_NEXT_PART = re.compile(r"in the (?P<part>morning|afternoon|evening)")
_DELAY = re.compile(r"(?:in|after) (?P<delay>.+)")
# the words a time may start with after a reminder's task ("to buy milk | tomorrow morning")
_WHEN_STARTS = frozenset({"in", "after", "at", "today", "tonight", "tomorrow", "this"})


def clock_time(text: str) -> tuple[dt.time, bool]:
    """A spoken clock time and whether it said AM or PM ("7 pm", "in the evening", "tonight" do; "7",
    "19:45", "noon" do not). See `parse_clock_time` for the forms.

    Raises:
        ToolArgumentError: not a clock time.
    """
    t = " " + text.lower().replace(".", "").replace("o'clock", "").replace("oclock", "") + " "
    t = t.replace(" noon ", " 12:00 pm ").replace(" midnight ", " 12:00 am ")
    meridiem = None
    m = re.search(r"\b(a ?m|p ?m)\b|\bin the (morning|afternoon|evening)\b|\btonight\b", t)
    if m:
        meridiem = "am" if (m.group(1) or "").replace(" ", "") == "am" or m.group(2) == "morning" else "pm"
        t = t[:m.start()] + t[m.end():]
    t = t.strip()
    hm = re.fullmatch(r"(\d{1,2})(?::(\d{2}))?", t)
    if hm:
        hour, minute = int(hm.group(1)), int(hm.group(2) or 0)
    else:
        words = t.split()
        hour_f = parse_number(words[0]) if words else None
        minute_f = parse_number(" ".join(words[1:])) if len(words) > 1 else 0.0
        if hour_f is None or minute_f is None or hour_f != int(hour_f) or minute_f != int(minute_f):
            raise ToolArgumentError(f"not a clock time: {text!r}")
        hour, minute = int(hour_f), int(minute_f)
    if meridiem is not None:
        if not 1 <= hour <= 12:
            raise ToolArgumentError(f"not a clock time: {text!r}")
        hour = hour % 12 + (12 if meridiem == "pm" else 0)
    if not (0 <= hour <= 23 and 0 <= minute <= 59):
        raise ToolArgumentError(f"not a clock time: {text!r}")
    return dt.time(hour, minute), meridiem is not None


def parse_clock_time(text: str) -> dt.time:
    """A spoken clock time: "7 am", "7:30 pm", "seven thirty", "6 o'clock", "noon", "midnight", "19:45"
    ("7" without AM or PM is 7:00 in the morning).

    Raises:
        ToolArgumentError: not a clock time.
    """
    return clock_time(text)[0]


def parse_duration_s(text: str) -> float:
    """A spoken duration in seconds: "ten minutes", "an hour", "1 hour and 30 minutes", "half an hour",
    "a minute and a half", "90 seconds".

    Raises:
        ToolArgumentError: not a duration (or one of 0 seconds).
    """
    t = re.sub(r"\bhalf an? (hour|minute)\b", r"0.5 \1", text.lower().replace("-", " ").replace(",", " "))
    total, end = 0.0, 0
    for m in re.finditer(r"(?P<amount>[^\s].*?) (?P<unit>hour|hr|minute|min|second|sec)s?\b(?P<half> and a half)?", t):
        amount = re.sub(r"^and ", "", m.group("amount").strip())
        if t[end:m.start()].strip():
            break
        value = 1.0 if amount in ("a", "an", "one") else parse_number(amount)
        if value is None:
            raise ToolArgumentError(f"not a duration: {text!r}")
        total += (value + (0.5 if m.group("half") else 0.0)) * _UNIT_S[m.group("unit")]
        end = m.end()
    if end == 0 or t[end:].strip() or not total > 0:
        raise ToolArgumentError(f"not a duration: {text!r}")
    return total


@dataclass(frozen=True, slots=True)
class When:
    """A parsed time. `delay_s`: "in ten minutes" (the rest unset); else `day` 0 (today), 1 (tomorrow)
    or None (the next time the clock time comes), `at` the clock time said (None: `part`'s default),
    `meridiem_given` whether it said AM or PM, `part` "morning", "afternoon", "evening", "night" or ""."""

    delay_s: float | None = None
    day: int | None = None
    at: dt.time | None = None
    meridiem_given: bool = False
    part: str = ""


def parse_when(text: str) -> When:
    """A spoken time as a reminder or an alarm takes it: "in ten minutes", "at 8", "at 7:30 pm tomorrow",
    "tomorrow", "tomorrow morning", "tomorrow at 8", "tonight", "this evening", "in the morning"; "for
    5 pm" is "at 5 pm"; a "please" after it is no part of it.

    Raises:
        ToolArgumentError: none of those.
    """
    t = re.sub(r"(?:,? please)?[?.!,;]*$", "", text.lower().strip())
    if m := _NEXT_PART.fullmatch(t):
        return When(part=m.group("part"))
    if m := _DELAY.fullmatch(t):
        return When(delay_s=parse_duration_s(m.group("delay")))
    m = _CLOCK_FIRST.fullmatch(t) or _DAY_FIRST.fullmatch(t)
    if m is None:
        raise ToolArgumentError(f"not a time: {text!r}")
    day_text = m.group("day") or ""
    day = 1 if day_text.startswith("tomorrow") else 0 if day_text else None
    part = "night" if day_text == "tonight" else day_text.split()[-1] if " " in day_text else ""
    at, given = clock_time(m.group("clock")) if m.group("clock") else (None, False)
    return When(day=day, at=at, meridiem_given=given, part=part)


def resolve(when: When, now: dt.datetime, *, guess_meridiem: bool = True) -> dt.datetime:
    """The moment `when` means, after `now` (in its zone). A clock time that has passed today means
    tomorrow; "tomorrow" is always tomorrow. With `guess_meridiem` a clock time said without AM or PM
    is read as people mean it: 1 to 6 in the afternoon, 7 to 11 the next time it comes (8 at 3 PM is
    8 PM), 12 noon; after "this evening", "tonight" and the like always PM. Without it (an alarm), the
    hour as said, on a 24-hour clock."""
    if when.delay_s is not None:
        return now + dt.timedelta(seconds=when.delay_s)
    at = when.at if when.at is not None else PART_DEFAULTS[when.part or "morning"]
    hours = [at.hour]
    if when.at is not None and not when.meridiem_given and at.hour < 12:
        if when.part in _PM_PARTS:
            hours = [at.hour + 12]
        elif guess_meridiem and not when.part and at.hour >= 1:
            hours = [at.hour + 12] if at.hour <= 6 else [at.hour, at.hour + 12]
    days = [1] if when.day == 1 else [0, 1]
    today = now.replace(second=0, microsecond=0)
    for offset in days:
        for hour in hours:
            moment = today.replace(hour=hour, minute=at.minute) + dt.timedelta(days=offset)
            if moment > now:
                return moment
    raise AssertionError("a clock time comes again within two days")  # pragma: no cover


def split_reminder(text: str) -> tuple[str, str] | None:
    """A reminder's words after "remind me" as (task, time): "to buy milk tomorrow morning" -> ("buy
    milk", "tomorrow morning"); "in ten minutes to check the oven" -> ("check the oven", "in ten
    minutes"); "to buy milk" -> ("buy milk", ""); "in ten minutes" -> ("", "in ten minutes"). A time
    after the task is its first ending that parses ("to put the cake in the oven in ten minutes":
    "in ten minutes"). None: neither shape ("remind me what the capital of Peru is")."""
    words = text.lower().split()
    if words and words[-1] == "please":  # said to the assistant, no part of the task or the time
        words.pop()
    if not words:
        return None
    if words[0] == "to":
        body = words[1:]
        for i in range(1, len(body)):
            if body[i] in _WHEN_STARTS and _parses(" ".join(body[i:])):
                return " ".join(body[:i]), " ".join(body[i:])
        return (" ".join(body), "") if body else None
    for i, word in enumerate(words[1:-1], start=1):
        if word == "to" and _parses(" ".join(words[:i])):
            return " ".join(words[i + 1:]), " ".join(words[:i])
    return ("", " ".join(words)) if _parses(" ".join(words)) else None


def _parses(text: str) -> bool:
    try:
        parse_when(text)
    except ToolArgumentError:
        return False
    return True


_PERSON = {"my": "your", "me": "you", "myself": "yourself", "mine": "yours", "i": "you", "i'm": "you're",
           "i've": "you've", "i'll": "you'll", "i'd": "you'd", "am": "are"}


def spoken_task(task: str) -> str:
    """A reminder's task as the assistant says it back: "call my mom" -> "call your mom"."""
    words = task.split()
    out = []
    for i, word in enumerate(words):
        swapped = _PERSON.get(word.lower(), word)
        if word.lower() == "am" and (i == 0 or words[i - 1].lower() != "i"):
            swapped = word  # only "I am" becomes "you are"
        out.append(swapped)
    return " ".join(out)
