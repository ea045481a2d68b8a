"""The tools headstart ships: time and date, timers, alarms and reminders, lists, a calculator, unit
conversion. Each is a typed function bound to one session's `ToolContext` (its timers, the list store,
the user), returning its spoken answer."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field

from headstart.tools.calculator import CalculatorError, evaluate, parse_expression
from headstart.tools.lists import ListStore, canonical_list
from headstart.tools.numbers import spoken_number
from headstart.tools.registry import Tool, ToolArgumentError, make_tool
from headstart.tools.spoken import (
    spoken_clock_time,
    spoken_date,
    spoken_duration,
    timer_label,
)
from headstart.tools.timers import Timer, TimerBook
from headstart.tools.units import UnitError, convert, spoken_quantity, unit_name
from headstart.tools.when import PART_DEFAULTS, When, parse_when, resolve, spoken_task
from headstart.tools.zones import zone_for_city


def _local_now() -> dt.datetime:
    return dt.datetime.now().astimezone()


# how long a reminder asked back about ("When should I remind you to ...?") waits for its time
ASK_BACK_S = 60.0
# the longest delay a timer or a reminder takes
_LONGEST_S = 24 * 3600


@dataclass
class ToolContext:
    """What the built-in tools act on: the session's timers, the lists, whose lists, the wall clock, and
    the task of a reminder whose time was asked back about (with when it was asked, on the session's
    clock)."""

    timers: TimerBook
    lists: ListStore
    user: str = "default"
    now: Callable[[], dt.datetime] = field(default=_local_now)
    asked_when: tuple[str, float] | None = None

    def awaiting_when(self) -> str | None:
        """The task of the reminder that waits for its time (asked back at most `ASK_BACK_S` ago), or None."""
        if self.asked_when is None or self.timers.now_s() - self.asked_when[1] > ASK_BACK_S:
            return None
        return self.asked_when[0]


def alarm_time(time: str) -> When:
    """An alarm's spoken time: a clock time, with a day if said ("7:30 am", "seven tomorrow",
    "tomorrow at 7").

    Raises:
        ToolArgumentError: no clock time in it.
    """
    try:
        when = parse_when(time)
    except ToolArgumentError:
        when = parse_when(f"at {time}")
    if when.at is None or when.delay_s is not None:
        raise ToolArgumentError(f"an alarm needs a clock time: {time!r}")
    return when


def _spoken_moment(moment: dt.datetime, now: dt.datetime) -> str:
    """When a reminder comes, as said after its task: "at 8:00 PM", "tomorrow at 9:00 AM"."""
    days = (moment.date() - now.date()).days
    day = "" if days == 0 else "tomorrow " if days == 1 else f"on {moment.strftime('%A')} "
    return f"{day}at {spoken_clock_time(moment)}"


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
        """Set an alarm for a clock time (the next time it comes, or tomorrow's when said)."""
        when = alarm_time(time)
        now = ctx.now()
        target = resolve(when, now, guess_meridiem=False)
        ctx.timers.start((target - now).total_seconds(), label=spoken_clock_time(target), kind="alarm")
        return _alarm_set_text(spoken_clock_time(target), tomorrow=when.day == 1)

    def alarm_cancel() -> str:
        """Cancel the alarms."""
        alarms = ctx.timers.find(kind="alarm")
        for alarm in alarms:
            ctx.timers.cancel(alarm)
        return "Your alarm is cancelled." if alarms else "You have no alarm set."

    def reminder_set(task: str = "", when: str = "") -> str:
        """Remind the user of `task` at a time ("in ten minutes", "tomorrow morning"); without a time,
        ask back for it (the next turn's time completes it)."""
        now = ctx.now()
        if not task and when:  # the time asked back about
            task = ctx.awaiting_when() or ""
        spoken = spoken_task(task)
        if not when:
            ctx.asked_when = (task, ctx.timers.now_s())
            return f"When should I remind you to {spoken}?"
        parsed = parse_when(when)
        target = resolve(parsed, now)
        ctx.timers.start((target - now).total_seconds(), label=spoken, kind="reminder")
        ctx.asked_when = None
        moment = f"in {spoken_duration(parsed.delay_s)}" if parsed.delay_s is not None else _spoken_moment(target, now)
        return f"I'll remind you to {spoken} {moment}." if spoken else f"I'll remind you {moment}."

    def reminder_list() -> str:
        """Read the reminders, soonest first."""
        reminders = sorted(ctx.timers.find(kind="reminder"), key=lambda t: t.due_at_s)
        if not reminders:
            return "You have no reminders."
        now = ctx.now()
        parts = []
        for reminder in reminders:
            left_s = ctx.timers.left_s(reminder)
            moment = f"in {spoken_duration(left_s)}" if left_s < 3600 else \
                _spoken_moment(now + dt.timedelta(seconds=left_s), now)
            parts.append(f"to {reminder.label} {moment}" if reminder.label else moment)
        listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
        return f"You have {'a reminder' if len(parts) == 1 else f'{len(parts)} reminders'}: {listed}."

    def reminder_cancel(task: str = "") -> str:
        """Cancel a reminder (by its task; the latest one when none is given)."""
        reminders = ctx.timers.find(kind="reminder")
        if task:
            wanted = spoken_task(task).lower()
            reminders = [r for r in reminders if wanted in r.label.lower() or (r.label and r.label.lower() in wanted)]
        ctx.asked_when = None
        if not reminders:
            return "You have no reminder like that." if task else "You have no reminders."
        reminder = reminders[-1]
        ctx.timers.cancel(reminder)
        return f"Cancelled your reminder to {reminder.label}." if reminder.label else "Cancelled your reminder."

    def reminder_cancel_all() -> str:
        """Cancel every reminder."""
        reminders = ctx.timers.find(kind="reminder")
        for reminder in reminders:
            ctx.timers.cancel(reminder)
        ctx.asked_when = None
        if not reminders:
            return "You have no reminders."
        return "Cancelled your reminder." if len(reminders) == 1 else f"Cancelled all {len(reminders)} reminders."

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
                                   alarm_set, alarm_cancel, reminder_set, reminder_list, reminder_cancel,
                                   reminder_cancel_all, list_add, list_read, list_remove, calculate,
                                   convert_units)]


def _timer_set_text(seconds: float, name: str) -> str:
    what = f"{name.capitalize()} timer" if name else "Timer"
    return f"{what} set for {spoken_duration(seconds)}."


def _alarm_set_text(label: str, tomorrow: bool) -> str:
    return f"Alarm set for {label}{' tomorrow' if tomorrow else ''}."


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
        if name == "alarm_set":  # the clock time as said (an alarm reads it on a 24-hour clock)
            when = alarm_time(str(arguments["time"]))
            at = when.at if when.at is not None else PART_DEFAULTS[when.part or "morning"]
            return _alarm_set_text(spoken_clock_time(at), tomorrow=when.day == 1)
        if name == "list_add":
            return _list_added_text(str(arguments["item"]), str(arguments.get("list_name", "shopping")))
    except (KeyError, ValueError):
        return None
    return None


def check_arguments(name: str, arguments: dict) -> None:
    """Checks of a built-in call that need no side effect, run when it is matched (so a request the tool
    cannot serve falls through to the LLM).

    Raises:
        ToolArgumentError: an expression that is no arithmetic, an unknown unit or city, no clock time,
            a timer or reminder of more than a day.
    """
    try:
        if name == "calculate":
            parse_expression(arguments["expression"])
        elif name == "convert_units":
            unit_name(arguments["from_unit"])
            unit_name(arguments["to_unit"])
        elif name == "alarm_set":
            alarm_time(arguments["time"])
        elif name == "reminder_set" and not arguments.get("when"):
            if not arguments.get("task"):
                raise ToolArgumentError("a reminder needs a task or a time")
        elif name == "reminder_set":
            when = parse_when(arguments["when"])
            if when.delay_s is not None and when.delay_s > _LONGEST_S:
                raise ToolArgumentError("a reminder comes within a day")
        elif name == "get_time" and arguments.get("city") and zone_for_city(arguments["city"]) is None:
            raise ToolArgumentError(f"unknown city {arguments['city']!r}")
        elif name == "timer_start" and not 0 < arguments["seconds"] <= _LONGEST_S:
            raise ToolArgumentError("a timer runs for up to a day")
    except (CalculatorError, UnitError) as exc:
        raise ToolArgumentError(str(exc)) from exc
