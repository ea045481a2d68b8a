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
