"""The tools headstart ships: time and date, timers and alarms, lists, a calculator, unit conversion.
Each is a typed function bound to one session's `ToolContext` (its timers, the list store, the user),
returning its spoken answer."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from headstart.tools.calculator import CalculatorError, evaluate, parse_expression
from headstart.tools.lists import ListStore, canonical_list
from headstart.tools.numbers import parse_number, spoken_number
from headstart.tools.registry import Tool, ToolArgumentError, make_tool
from headstart.tools.spoken import (
    spoken_clock_time,
    spoken_date,
    spoken_duration,
    timer_label,
)
from headstart.tools.timers import Timer, TimerBook
from headstart.tools.units import UnitError, convert, spoken_quantity, unit_name
from headstart.tools.zones import zone_for_city


def _local_now() -> dt.datetime:
    return dt.datetime.now().astimezone()


@dataclass
class ToolContext:
    """What the built-in tools act on: the session's timers, the lists, whose lists, the wall clock."""

    timers: TimerBook
    lists: ListStore
    user: str = "default"
    now: Callable[[], dt.datetime] = field(default=_local_now)


def parse_clock_time(text: str) -> dt.time:
    """A spoken clock time: "7 am", "7:30 pm", "seven thirty", "6 o'clock", "noon", "midnight", "19:45".

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
        if hour_f is None or minute_f is None:
            raise ToolArgumentError(f"not a clock time: {text!r}")
        hour, minute = int(hour_f), int(minute_f)
    if meridiem is not None:
        if not 1 <= hour <= 12:
            raise ToolArgumentError(f"not a clock time: {text!r}")
        hour = hour % 12 + (12 if meridiem == "pm" else 0)
    if not (0 <= hour <= 23 and 0 <= minute <= 59):
        raise ToolArgumentError(f"not a clock time: {text!r}")
    return dt.time(hour, minute)


def _timer_name(timer: Timer) -> str:
    return f"{timer.name} timer" if timer.name else f"{timer.label} timer"


def _pick(book: TimerBook, name: str, seconds: float) -> list[Timer]:
    return book.find(name=name or None, duration_s=seconds or None, kind="timer")


def builtin_tools(ctx: ToolContext) -> list[Tool]:
    """The built-in tools bound to `ctx`."""

    def get_time(city: str = "") -> str:
        """The time now, here or in a city."""
        now = ctx.now()
        if city:
            zone = zone_for_city(city)
            if zone is None:
                raise ToolArgumentError(f"unknown city {city!r}")
            return f"In {city.title()} it's {spoken_clock_time(now.astimezone(zone))}."
        return f"It's {spoken_clock_time(now)}."

    def get_date() -> str:
        """Today's date."""
        return f"Today is {spoken_date(ctx.now().date())}."

    def timer_start(seconds: float, name: str = "") -> str:
        """Start a timer of `seconds`, optionally named."""
        label = timer_label(seconds)
        ctx.timers.start(seconds, label=label, name=name or None)
        return _timer_set_text(seconds, name)

    def timer_cancel(name: str = "", seconds: float = 0.0) -> str:
        """Cancel a timer (by name or duration; the latest one when neither is given)."""
        timers = _pick(ctx.timers, name, seconds)
        if not timers:
            return "You have no timer like that running." if (name or seconds) else "You have no timer running."
        timer = timers[-1]
        ctx.timers.cancel(timer)
        return f"Cancelled your {_timer_name(timer)}."

    def timer_cancel_all() -> str:
        """Cancel every timer."""
        timers = ctx.timers.find(kind="timer")
        for timer in timers:
            ctx.timers.cancel(timer)
        if not timers:
            return "You have no timer running."
        return "Cancelled your timer." if len(timers) == 1 else f"Cancelled all {len(timers)} timers."

    def timer_status(name: str = "", seconds: float = 0.0) -> str:
        """How long is left on the timers (by name or duration, or all)."""
        timers = _pick(ctx.timers, name, seconds)
        if not timers:
            return "You have no timer running."
        parts = [f"your {_timer_name(t)} has {spoken_duration(ctx.timers.left_s(t))} left" for t in timers]
        text = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
        return text[0].upper() + text[1:] + "."

    def alarm_set(time: str) -> str:
        """Set an alarm for a clock time (the next time it comes)."""
        at = parse_clock_time(time)
        now = ctx.now()
        target = now.replace(hour=at.hour, minute=at.minute, second=0, microsecond=0)
        if target <= now:
            target += dt.timedelta(days=1)
        ctx.timers.start((target - now).total_seconds(), label=spoken_clock_time(at), kind="alarm")
        return _alarm_set_text(at)

    def alarm_cancel() -> str:
        """Cancel the alarms."""
        alarms = ctx.timers.find(kind="alarm")
        for alarm in alarms:
            ctx.timers.cancel(alarm)
        return "Your alarm is cancelled." if alarms else "You have no alarm set."

    def list_add(item: str, list_name: str = "shopping") -> str:
        """Add an item to one of the user's lists."""
        ctx.lists.add(ctx.user, list_name, item)
        return _list_added_text(item, list_name)

    def list_read(list_name: str = "shopping") -> str:
        """Read one of the user's lists."""
        items = ctx.lists.items(ctx.user, list_name)
        name = canonical_list(list_name)
        if not items:
            return f"Your {name} list is empty."
        listed = items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
        return f"Your {name} list has {listed}."

    def list_remove(item: str, list_name: str = "shopping") -> str:
        """Remove an item from one of the user's lists."""
        name = canonical_list(list_name)
        if ctx.lists.remove(ctx.user, list_name, item):
            return f"Removed {item} from your {name} list."
        return f"{item.capitalize()} is not on your {name} list."

    def calculate(expression: str) -> str:
        """Arithmetic: "17 times 23"."""
        try:
            parsed = parse_expression(expression)
            answer = f"{parsed.spoken} is {spoken_number(evaluate(parsed))}."
            return answer[0].upper() + answer[1:]  # "Half of 50 is 25."
        except CalculatorError as exc:
            raise ToolArgumentError(str(exc)) from exc

    def convert_units(value: float, from_unit: str, to_unit: str) -> str:
        """Convert a quantity between units."""
        try:
            result = convert(value, from_unit, to_unit)
        except UnitError as exc:
            raise ToolArgumentError(str(exc)) from exc
        return f"{spoken_quantity(value, from_unit)} is {spoken_quantity(result, to_unit)}."

    return [make_tool(f) for f in (get_time, get_date, timer_start, timer_cancel, timer_cancel_all, timer_status,
                                   alarm_set, alarm_cancel, list_add, list_read, list_remove, calculate,
                                   convert_units)]


def _timer_set_text(seconds: float, name: str) -> str:
    what = f"{name.capitalize()} timer" if name else "Timer"
    return f"{what} set for {spoken_duration(seconds)}."


def _alarm_set_text(at: dt.time) -> str:
    return f"Alarm set for {spoken_clock_time(at)}."


def _list_added_text(item: str, list_name: str) -> str:
    return f"Added {item} to your {canonical_list(list_name)} list."


# built-in tools that only read (the clock, arithmetic, units, the session's timers): their answer may be
# computed before the reply is released
READ_ONLY = frozenset({"get_time", "get_date", "calculate", "convert_units", "timer_status"})


def predicted_answer(name: str, arguments: dict) -> str | None:
    """What a built-in tool that acts says when it succeeds, known from its arguments without acting
    (timer_start, alarm_set, list_add); None for the others. A held tool reply voices it ahead; the
    tool's real answer replaces it when they differ."""
    try:
        if name == "timer_start":
            return _timer_set_text(float(arguments["seconds"]), str(arguments.get("name", "")))
        if name == "alarm_set":
            return _alarm_set_text(parse_clock_time(str(arguments["time"])))
        if name == "list_add":
            return _list_added_text(str(arguments["item"]), str(arguments.get("list_name", "shopping")))
    except (KeyError, ValueError):
        return None
    return None


def check_arguments(name: str, arguments: dict) -> None:
    """Checks of a built-in call that need no side effect, run when it is matched (so a request the tool
    cannot serve falls through to the LLM).

    Raises:
        ToolArgumentError: an expression that is no arithmetic, an unknown unit or city, no clock time.
    """
    try:
        if name == "calculate":
            parse_expression(arguments["expression"])
        elif name == "convert_units":
            unit_name(arguments["from_unit"])
            unit_name(arguments["to_unit"])
        elif name == "alarm_set":
            parse_clock_time(arguments["time"])
        elif name == "get_time" and arguments.get("city") and zone_for_city(arguments["city"]) is None:
            raise ToolArgumentError(f"unknown city {arguments['city']!r}")
        elif name == "timer_start" and not 0 < arguments["seconds"] <= 24 * 3600:
            raise ToolArgumentError("a timer runs for up to a day")
    except (CalculatorError, UnitError) as exc:
        raise ToolArgumentError(str(exc)) from exc
