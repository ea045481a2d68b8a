"""The tools layer on its own: the real hassil matcher over the real template data, the calculator,
timers on a FakeClock, lists in a real SQLite file that survives a restart, unit conversion, and the
registry's typed API (schema from the signature, bad arguments, a raise, a hang)."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
import zoneinfo

import pytest

from headstart.clock import FakeClock
from headstart.tools import APOLOGY, ToolArgumentError, ToolRegistry, run_tool
from headstart.tools.calculator import CalculatorError, evaluate, parse_expression
from headstart.tools.lists import ListStore
from headstart.tools.numbers import parse_number
from headstart.tools.toolbox import Toolbox

NOON = dt.datetime(2026, 12, 3, 15, 42, tzinfo=zoneinfo.ZoneInfo("Europe/London"))


@pytest.fixture
def box(tmp_path):
    return Toolbox(FakeClock(), lists=ListStore(tmp_path / "lists.sqlite3"), user="ana", now=lambda: NOON)


def run(box: Toolbox, text: str) -> str:
    call = box.route(text)
    assert call is not None, text
    outcome = asyncio.run(box.run(call))
    assert outcome.ok, outcome.error
    return outcome.spoken


@pytest.mark.parametrize(("text", "tool", "arguments"), [
    ("Set a timer for ten minutes.", "timer_start", {"seconds": 600.0}),
    ("set a timer for 1 hour and 30 minutes", "timer_start", {"seconds": 5400.0}),
    ("set a 5 minute pasta timer", "timer_start", {"seconds": 300.0, "name": "pasta"}),
    ("set a timer for 5 minutes named pasta", "timer_start", {"seconds": 300.0, "name": "pasta"}),
    ("What time is it?", "get_time", {}),
    ("what time is it in tokyo", "get_time", {"city": "tokyo"}),
    ("What's the date today?", "get_date", {}),
    ("What day is it today?", "get_date", {}),
    ("What is 17 times 23?", "calculate", {"expression": "17 times 23"}),
    ("convert 5 miles to kilometers", "convert_units", {"value": 5.0, "from_unit": "miles", "to_unit": "kilometers"}),
    ("how many ounces in a pound", "convert_units", {"value": 1.0, "from_unit": "pound", "to_unit": "ounces"}),
    ("set an alarm for 7 am", "alarm_set", {"time": "7 am"}),
    ("Add milk to my shopping list.", "list_add", {"item": "milk", "list_name": "shopping"}),
    ("what's on my shopping list?", "list_read", {"list_name": "shopping"}),
    ("cancel my pasta timer", "timer_cancel", {"name": "pasta"}),
    ("Add 12 and 30.", "calculate", {"expression": "12 plus 30"}),
    ("add one hundred and five and six", "calculate", {"expression": "one hundred and five plus six"}),
    ("How far is 3 miles in kilometers?", "convert_units", {"value": 3.0, "from_unit": "miles", "to_unit": "kilometers"}),
])
def test_the_matcher_gives_the_tool_and_its_typed_arguments(box, text, tool, arguments):
    call = box.route(text)
    assert call is not None and call.tool.name == tool
    assert call.arguments == arguments


@pytest.mark.parametrize("text", [
    "what is the weather like", "play some music", "call mom", "what is the capital of france",
    "tell me a joke", "hello there", "cancel it", "how long is left", "what time is it in atlantis",
    "convert my house to a boat", "add salt and pepper to the soup", "how long is a marathon in miles",
    "what is half of the cake", "",
])
def test_requests_no_tool_serves_go_to_the_llm(box, text):
    assert box.route(text) is None


def test_matching_runs_nothing(box):
    for text in ("set a timer for ten minutes", "add milk to my shopping list", "set an alarm for 7 am"):
        assert box.route(text) is not None
    assert box.timers.find() == []
    assert not box.registry.get("list_read") or run(box, "what's on my shopping list") == "Your shopping list is empty."


def test_spoken_answers(box):
    assert run(box, "What time is it?") == "It's 3:42 PM."
    assert run(box, "what time is it in tokyo") == "In Tokyo it's 12:42 AM."
    assert run(box, "what is the date") == "Today is Thursday, December 3, 2026."
    assert run(box, "What is 17 times 23?") == "17 times 23 is 391."
    assert run(box, "what is seventeen times twenty three") == "17 times 23 is 391."
    assert run(box, "What's seventeen times twenty-three?") == "17 times 23 is 391."
    assert run(box, "How much is half of ninety?") == "Half of 90 is 45."
    assert run(box, "Add bread and butter to my shopping list.") == "Added bread and butter to your shopping list."
    assert run(box, "convert 5 miles to kilometers") == "5 miles is 8.05 kilometers."
    assert run(box, "set an alarm for 7:30 am") == "Alarm set for 7:30 AM."
    assert run(box, "Set a timer for ten minutes.") == "Timer set for ten minutes."


@pytest.mark.parametrize("text", [
    "What time is it?", "what time is it in tokyo", "what is the date", "What is 17 times 23?",
    "convert 5 miles to kilometers", "set an alarm for 7:30 am", "set a 5 minute pasta timer",
    "Add olive oil to my shopping list.",
])
def test_a_preview_is_the_answer_the_run_gives_and_acts_on_nothing(box, text):
    call = box.route(text)
    assert call is not None
    preview = box.preview(call)
    assert box.timers.find() == [] and box.registry.get("list_read").function() == "Your shopping list is empty."
    assert preview == run(box, text)


def test_no_preview_for_what_cannot_be_known_without_acting(box, tmp_path):
    registry = ToolRegistry()

    @registry.tool(sentences=["roll a die"])
    def roll_die() -> str:
        raise AssertionError("a preview never runs a registered tool")

    own = Toolbox(FakeClock(), lists=ListStore(tmp_path / "own.sqlite3"), tools=registry, now=lambda: NOON)
    assert own.preview(own.route("roll a die")) is None
    assert box.preview(box.route("cancel all timers")) is None  # depends on what runs: not guessed
    assert box.preview(box.route("what's on my shopping list")) is None  # reads the list file: at the run


def test_timers_several_named_status_and_cancel(box):
    clock = box.timers._clock
    assert run(box, "set a timer for ten minutes") == "Timer set for ten minutes."
    assert run(box, "set a 5 minute pasta timer") == "Pasta timer set for five minutes."
    clock.advance(65)
    assert run(box, "how long is left on my pasta timer") == "Your pasta timer has three minutes and fifty-five seconds left."
    assert run(box, "how long is left?") == ("Your ten minute timer has eight minutes and fifty-five seconds left and "
                                             "your pasta timer has three minutes and fifty-five seconds left.")
    assert run(box, "cancel my pasta timer") == "Cancelled your pasta timer."
    assert run(box, "cancel it") == "Cancelled your ten minute timer."
    assert box.route("cancel it") is None  # nothing left to mean


def test_timers_fire_once_and_a_closed_book_cancels_with_a_log_line(box, caplog):
    clock = box.timers._clock
    run(box, "set a timer for 10 seconds")
    run(box, "set a timer for one minute")
    clock.advance(10)
    (fired,) = box.due()
    assert fired.label == "ten second" and box.due() == []
    with caplog.at_level("INFO", logger="headstart.tools.timers"):
        (cancelled,) = box.close()
    assert cancelled.label == "one minute"
    assert "the session ended: its timer 'one minute'" in caplog.text and "is cancelled" in caplog.text
    clock.advance(100)
    assert box.due() == []


def test_lists_survive_a_restart_per_user(tmp_path):
    path = tmp_path / "lists.sqlite3"
    first = Toolbox(FakeClock(), lists=ListStore(path), user="ana")
    assert run(first, "add milk to my shopping list") == "Added milk to your shopping list."
    assert run(first, "put eggs on my shopping list") == "Added eggs to your shopping list."
    assert run(first, "add call the bank to my to do list") == "Added call the bank to your todo list."
    again = Toolbox(FakeClock(), lists=ListStore(path), user="ana")  # a new process, the same file
    assert run(again, "what's on my shopping list?") == "Your shopping list has milk and eggs."
    assert run(again, "remove milk from my shopping list") == "Removed milk from your shopping list."
    assert run(again, "what's on my shopping list?") == "Your shopping list has eggs."
    other = Toolbox(FakeClock(), lists=ListStore(path), user="ben")
    assert run(other, "what's on my shopping list?") == "Your shopping list is empty."


def test_the_data_folder_comes_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("HEADSTART_DATA_DIR", str(tmp_path / "data"))
    assert ListStore().path == tmp_path / "data" / "lists.sqlite3"


@pytest.mark.parametrize(("text", "value"), [
    ("17 times 23", 391), ("twenty divided by four", 5), ("2 plus 3 squared", 11), ("the square root of 81", 9),
    ("15 percent of 80", 12), ("one hundred and five plus two point five", 107.5), ("3 + 4 * 2", 11),
    ("(3 + 4) * 2", 14), ("minus 4 times 2", -8), ("2 to the power of 10", 1024), ("forty-two times two", 84),
    ("half of fifty", 25), ("a quarter of eighty", 20), ("half of 3 plus 1", 2.5),
])
def test_the_calculator(text, value):
    assert evaluate(parse_expression(text)) == pytest.approx(value)


@pytest.mark.parametrize("text", ["__import__('os')", "10 / 0", "the weather", "2 +", "9 ** 9 ** 9", "2 ^ 1000"])
def test_the_calculator_refuses(text):
    with pytest.raises(CalculatorError):
        evaluate(parse_expression(text))


def test_numbers_in_words():
    assert parse_number("twenty three") == 23
    assert parse_number("one thousand two hundred and five") == 1205
    assert parse_number("1,250") == 1250
    assert parse_number("a hundred") == 100
    assert parse_number("banana") is None


def test_a_registered_tool_its_schema_and_its_failures(tmp_path):
    registry = ToolRegistry()

    @registry.tool(sentences=["roll a {sides} sided die"])
    def roll_die(sides: int) -> str:
        """Roll a die."""
        return f"You rolled a {sides}."

    @registry.tool(sentences=["break everything"])
    def explode() -> str:
        raise RuntimeError("boom")

    @registry.tool(sentences=["wait forever"], timeout_s=0.2)
    def hang() -> str:
        time.sleep(2)
        return "never"

    assert registry.get("roll_die").schema() == {
        "name": "roll_die", "description": "Roll a die.",
        "parameters": {"type": "object", "properties": {"sides": {"type": "integer"}}, "required": ["sides"]}}
    with pytest.raises(ToolArgumentError):
        registry.call("roll_die", {"sides": "many"})
    with pytest.raises(ToolArgumentError):
        registry.call("roll_die", {})
    with pytest.raises(TypeError):
        registry.register(lambda x: x)  # no annotation: no schema

    box = Toolbox(FakeClock(), lists=ListStore(tmp_path / "l.sqlite3"), tools=registry)
    assert run(box, "roll a 6 sided die") == "You rolled a 6."
    for text, error in (("break everything", "failed: RuntimeError: boom"), ("wait forever", "timed out")):
        outcome = asyncio.run(box.run(box.route(text)))
        assert (outcome.ok, outcome.spoken) == (False, APOLOGY) and error in outcome.error
    outcome = asyncio.run(run_tool(registry.call("roll_die", {"sides": 3})))
    assert outcome.spoken == "You rolled a 3."


@pytest.mark.parametrize(("text", "arguments"), [
    ("Remind me to buy milk tomorrow morning.", {"task": "buy milk", "when": "tomorrow morning"}),
    ("Remind me in ten minutes to check the oven.", {"task": "check the oven", "when": "in ten minutes"}),
    ("remind me to check the oven in 10 minutes", {"task": "check the oven", "when": "in 10 minutes"}),
    ("Remind me at 7:30 pm to call my mom", {"task": "call my mom", "when": "at 7:30 pm"}),
    ("remind me to call the bank tomorrow at 8", {"task": "call the bank", "when": "tomorrow at 8"}),
    ("remind me to put the cake in the oven in an hour", {"task": "put the cake in the oven", "when": "in an hour"}),
    ("Set a reminder for 5 pm to water the plants", {"task": "water the plants", "when": "for 5 pm"}),
    ("remind me to buy milk", {"task": "buy milk"}),
    ("remind me in half an hour", {"when": "in half an hour"}),
    ("remind me to take the cake out in 25 minutes please", {"task": "take the cake out", "when": "in 25 minutes"}),
])
def test_the_matcher_splits_a_reminder_into_its_task_and_its_time(box, text, arguments):
    call = box.route(text)
    assert call is not None and call.tool.name == "reminder_set"
    assert call.arguments == arguments


@pytest.mark.parametrize("text", [
    "I need a reminder of how this works", "Do you remember my name?", "Can you remind me what the capital of Peru is?",
    "Remind me, what did I ask you first?", "What is a reminder?", "Remind me why we're here.",
    "remind me to put it in the oven at the back", "in ten minutes", "tomorrow morning",
    "Remind me in ten minutes to check the oven. Actually, never mind.",
    "Remind me in 10 minutes to check the oven Actually never mind",  # as a recogniser writes it
])
def test_reminder_near_misses_and_a_time_nobody_asked_for_go_to_the_llm(box, text):
    call = box.route(text)
    assert call is None or (call.tool.name == "reminder_set" and "when" not in call.arguments), text


@pytest.mark.parametrize("text", [
    "Set a timer for ten minutes, never mind", "Add milk to my shopping list. No wait.",
    "set an alarm for seven actually no", "What's 17 times 23? Forget it.",
])
def test_a_request_taken_back_in_the_same_turn_runs_no_tool(box, text):
    assert box.route(text) is None, text


def test_a_withdrawal_that_opens_the_turn_takes_back_something_earlier(box):
    call = box.route("Never mind, set a timer for ten minutes.")
    assert call is not None and call.tool.name == "timer_start" and call.arguments["seconds"] == 600


def test_reminders_are_set_said_back_read_and_cancelled(box):
    assert run(box, "Remind me to buy milk tomorrow morning.") == "I'll remind you to buy milk tomorrow at 9:00 AM."
    assert run(box, "Remind me in ten minutes to check the oven.") == "I'll remind you to check the oven in ten minutes."
    # 8 without AM or PM at 3:42 PM is this evening; 7 am has passed today: tomorrow
    assert run(box, "remind me to call my mom at 8") == "I'll remind you to call your mom at 8:00 PM."
    assert run(box, "remind me at 7 am to stretch") == "I'll remind you to stretch tomorrow at 7:00 AM."
    assert run(box, "what are my reminders?") == (
        "You have 4 reminders: to check the oven in ten minutes, to call your mom at 8:00 PM, "
        "to stretch tomorrow at 7:00 AM and to buy milk tomorrow at 9:00 AM.")
    assert run(box, "cancel the reminder to call my mom") == "Cancelled your reminder to call your mom."
    assert run(box, "cancel the reminder to feed the cat") == "You have no reminder like that."
    assert run(box, "cancel my reminder") == "Cancelled your reminder to stretch."  # the latest one
    assert run(box, "cancel all my reminders") == "Cancelled all 2 reminders."
    assert run(box, "what are my reminders") == "You have no reminders."
    assert box.timers.find() == []


def test_a_reminder_without_a_time_asks_back_and_the_next_answer_sets_it(box):
    clock = box.timers._clock
    assert box.route("tomorrow morning") is None  # nothing asked back yet
    assert run(box, "Remind me to buy milk.") == "When should I remind you to buy milk?"
    assert box.timers.find() == []
    assert box.route("what time is it").tool.name == "get_time"  # the question does not swallow other requests
    assert run(box, "Tomorrow morning.") == "I'll remind you to buy milk tomorrow at 9:00 AM."
    assert box.route("in ten minutes") is None  # answered: the next time means nothing
    assert run(box, "set a reminder to water the plants") == "When should I remind you to water the plants?"
    clock.advance(61)  # no answer within a minute: the question lapses
    assert box.route("in ten minutes") is None
    (reminder,) = box.timers.find(kind="reminder")
    assert reminder.label == "buy milk"


def test_a_reminder_fires_once_on_the_clock_and_a_closed_book_cancels_it_with_a_log_line(box, caplog):
    from headstart.session.timers import announcement

    clock = box.timers._clock
    run(box, "remind me in 10 minutes to check the oven")
    run(box, "remind me to call the bank tomorrow")
    run(box, "remind me in a minute and a half")
    clock.advance(90)
    (nudge,) = box.due()
    assert announcement(nudge) == "This is your reminder."
    clock.advance(510)
    (fired,) = box.due()
    assert (fired.kind, fired.label) == ("reminder", "check the oven")
    assert announcement(fired) == "Reminder: check the oven." and box.due() == []
    with caplog.at_level("INFO", logger="headstart.tools.timers"):
        (cancelled,) = box.close()
    assert cancelled.label == "call the bank"
    assert "the session ended: its reminder 'call the bank'" in caplog.text
    clock.advance(2 * 86400)
    assert box.due() == []


def test_alarms_take_tomorrow(box):
    assert run(box, "set an alarm for seven tomorrow") == "Alarm set for 7:00 AM tomorrow."
    assert run(box, "wake me up at 6:30 pm tomorrow") == "Alarm set for 6:30 PM tomorrow."
    assert run(box, "set an alarm for 16:00") == "Alarm set for 4:00 PM."  # later today
    left = sorted(round(box.timers.left_s(t)) for t in box.timers.find(kind="alarm"))
    # from 3:42 PM: 4:00 PM today, 7:00 AM and 6:30 PM tomorrow
    assert left == [18 * 60, (15 * 60 + 18) * 60, (26 * 60 + 48) * 60]
    assert box.route("set an alarm for tomorrow morning") is None  # an alarm needs its clock time


def test_when_a_spoken_time_comes():
    from headstart.tools.when import parse_duration_s, parse_when, resolve

    def at(text: str, now: dt.datetime = NOON, guess: bool = True) -> str:
        return resolve(parse_when(text), now, guess_meridiem=guess).strftime("%a %H:%M")

    assert at("in ten minutes") == "Thu 15:52" and at("in 1 hour and 30 minutes") == "Thu 17:12"
    assert at("at 8") == "Thu 20:00" and at("at 8", guess=False) == "Fri 08:00"
    assert at("at 8", NOON.replace(hour=7)) == "Thu 08:00"
    assert at("at 2") == "Fri 14:00"  # 1 to 6 without AM or PM: the afternoon
    assert at("at 3 pm") == "Fri 15:00"  # passed today: tomorrow
    assert at("tomorrow at 8") == "Fri 08:00" and at("tomorrow", NOON.replace(hour=6)) == "Fri 09:00"
    assert at("at 4 pm tomorrow") == "Fri 16:00"  # tomorrow, though 4 PM comes today
    assert at("tonight") == "Thu 20:00" and at("at 9 tonight") == "Thu 21:00" and at("this evening") == "Thu 18:00"
    assert at("in the morning") == "Fri 09:00" and at("at noon") == "Fri 12:00"
    assert parse_duration_s("half an hour") == 1800 and parse_duration_s("a minute and a half") == 90
    for text in ("at the station", "in the oven", "next week", "in 0 minutes", ""):
        with pytest.raises(ToolArgumentError):
            parse_when(text)
