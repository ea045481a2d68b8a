"""How answers say durations and clock times: "ten minutes", "one hour and thirty seconds", "3:42 PM"."""

from __future__ import annotations

import datetime as dt

from num2words import num2words


def spoken_duration(seconds: float) -> str:
    """A duration in words, hours, minutes and seconds ("one hour and five minutes"); under a second
    is "less than a second"."""
    total = round(seconds)
    if total <= 0:
        return "less than a second"
    parts = []
    for size, unit in ((3600, "hour"), (60, "minute"), (1, "second")):
        count, total = divmod(total, size)
        if count:
            parts.append(f"{num2words(count)} {unit}{'s' if count != 1 else ''}")
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def timer_label(seconds: float) -> str:
    """A timer as it is called ("ten minute", "one hour and five minute"): the singular unit."""
    text = spoken_duration(seconds)
    for unit in ("hours", "minutes", "seconds"):
        text = text.replace(unit, unit[:-1])
    return text


def spoken_clock_time(moment: dt.datetime | dt.time) -> str:
    """A clock time as "3:42 PM" (12-hour, no leading zero)."""
    hour = moment.hour % 12 or 12
    return f"{hour}:{moment.minute:02d} {'AM' if moment.hour < 12 else 'PM'}"


def spoken_date(day: dt.date) -> str:
    """A date as "Thursday, December 3, 2026"."""
    return f"{day.strftime('%A')}, {day.strftime('%B')} {day.day}, {day.year}"
