"""Tool matching: 150+ requests as text, about half that need no tool or must be refused. Reports, per
tool, whether the right tool was picked with the right arguments, and the false actions (a tool run
for a request that needed none: the target is 0), as a table and then one JSON line.

    headstart bench tools            # all requests
    headstart bench tools --small    # every fourth request (what the test runs)
    headstart bench tools --spoken   # the requests voiced by hibari and piper-joe, heard by the ASR

No model runs: this measures the deterministic matcher (headstart/tools/matcher.py) and the tools'
argument checks over a fresh session's tools (no timer running, an empty list file in a temporary
folder). `--spoken` puts the voices and the recogniser in front (headstart/bench/tools_spoken.py)."""

from __future__ import annotations

import json
import math
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# -- the requests ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Request:
    """A request and what it should give: `tool` None for one no tool serves (the LLM answers)."""

    text: str
    tool: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)


def _tool_requests() -> list[Request]:
    out: list[Request] = []
    for phrase, seconds in (("ten minutes", 600.0), ("5 minutes", 300.0), ("one hour", 3600.0),
                            ("30 seconds", 30.0), ("two hours and 15 minutes", 8100.0), ("forty five seconds", 45.0)):
        out += [Request(f"Set a timer for {phrase}.", "timer_start", {"seconds": seconds}),
                Request(f"Start a timer for {phrase}", "timer_start", {"seconds": seconds})]
    out += [Request("Set a 5 minute pasta timer.", "timer_start", {"seconds": 300.0, "name": "pasta"}),
            Request("Set a timer for 20 minutes named laundry", "timer_start", {"seconds": 1200.0, "name": "laundry"}),
            Request("Cancel the timer.", "timer_cancel", {}), Request("Cancel my pasta timer", "timer_cancel", {"name": "pasta"}),
            Request("Cancel all timers", "timer_cancel_all", {}),
            Request("How much time is left on my timer?", "timer_status", {}),
            Request("How long is left on the pasta timer?", "timer_status", {"name": "pasta"})]
    out += [Request(t, "get_time", {}) for t in ("What time is it?", "What's the time?", "What is the current time",
                                                 "What time is it right now?")]
    for city in ("Tokyo", "London", "Paris", "New York", "Sydney", "Berlin"):
        out.append(Request(f"What time is it in {city}?", "get_time", {"city": city.lower()}))
    out += [Request(t, "get_date", {}) for t in ("What's the date?", "What is the date today?", "What's today's date")]
    value: float
    for a, op, b, value in (("17", "times", "23", 391), ("twenty", "divided by", "four", 5), ("12", "plus", "30", 42),
                            ("100", "minus", "7", 93), ("15 percent", "of", "80", 12), ("nine", "times", "nine", 81),
                            ("2", "to the power of", "10", 1024), ("seven", "plus", "eight", 15)):
        out += [Request(f"What is {a} {op} {b}?", "calculate", {"value": value}),
                Request(f"Calculate {a} {op} {b}", "calculate", {"value": value})]
    out.append(Request("What's the square root of 144?", "calculate", {"value": 12}))
    for value, unit, to, spoken in ((5.0, "miles", "kilometers", "5"), (3.0, "feet", "meters", "three"),
                                    (2.0, "pounds", "kilograms", "2"), (10.0, "liters", "gallons", "ten"),
                                    (100.0, "degF", "degC", "100"), (1.0, "pound", "ounces", "a")):
        from_text = {"degF": "degrees fahrenheit", "degC": "celsius"}.get(unit, unit)
        to_text = {"degC": "celsius"}.get(to, to)
        args = {"value": value, "from_unit": from_text, "to_unit": to_text}
        out += [Request(f"Convert {spoken} {from_text} to {to_text}", "convert_units", args),
                Request(f"How many {to_text} in {spoken} {from_text}?", "convert_units", args)]
    for item in ("milk", "eggs", "bread", "olive oil", "paper towels"):
        out += [Request(f"Add {item} to my shopping list.", "list_add", {"item": item, "list_name": "shopping"}),
                Request(f"Put {item} on my shopping list", "list_add", {"item": item, "list_name": "shopping"})]
    out += [Request("Add call the dentist to my to do list", "list_add", {"item": "call the dentist", "list_name": "to do"}),
            Request("What's on my shopping list?", "list_read", {"list_name": "shopping"}),
            Request("Read me my to do list", "list_read", {"list_name": "to do"}),
            Request("Remove milk from my shopping list", "list_remove", {"item": "milk", "list_name": "shopping"})]
    for spoken in ("7 am", "6:30 pm", "seven thirty am", "noon"):
        out += [Request(f"Set an alarm for {spoken}.", "alarm_set", {"time": spoken}),
                Request(f"Wake me up at {spoken}", "alarm_set", {"time": spoken})]
    for text, arguments in (
            ("Remind me to buy milk tomorrow morning.", {"task": "buy milk", "when": "tomorrow morning"}),
            ("Remind me in ten minutes to check the oven.", {"task": "check the oven", "when": "in ten minutes"}),
            ("Remind me to call the bank tomorrow.", {"task": "call the bank", "when": "tomorrow"}),
            ("Remind me at 6 pm to take my pills", {"task": "take my pills", "when": "at 6 pm"}),
            ("Remind me to move the car in an hour", {"task": "move the car", "when": "in an hour"}),
            ("Remind me to water the plants tonight", {"task": "water the plants", "when": "tonight"}),
            ("Set a reminder to water the plants.", {"task": "water the plants"}),
            ("Remind me to call my sister.", {"task": "call my sister"})):
        out.append(Request(text, "reminder_set", arguments))
    out += [Request("What are my reminders?", "reminder_list", {}),
            Request("Cancel the reminder to call the bank", "reminder_cancel", {"task": "call the bank"}),
            Request("Set an alarm for seven tomorrow.", "alarm_set", {"time": "seven tomorrow"})]
    # phrasings written without looking at the templates
    out += [Request("Timer for ten minutes", "timer_start", {"seconds": 600.0}),
            Request("Ten minute timer please", "timer_start", {"seconds": 600.0}),
            Request("What's 6 times 7?", "calculate", {"value": 42}),
            Request("What's the time in Los Angeles?", "get_time", {"city": "los angeles"}),
            Request("How many cups in a liter?", "convert_units", {"value": 1.0, "from_unit": "liter", "to_unit": "cups"}),
            Request("Add apples to the shopping list", "list_add", {"item": "apples", "list_name": "shopping"}),
            Request("What day is it today?", "get_date", {}),
            Request("Stop the timer", "timer_cancel", {}),
            Request("Add 12 and 30.", "calculate", {"value": 42}),
            Request("What's half of ninety?", "calculate", {"value": 45}),
            Request("What is forty-two times two?", "calculate", {"value": 84}),
            Request("How far is 3 miles in kilometers?", "convert_units",
                    {"value": 3.0, "from_unit": "miles", "to_unit": "kilometers"}),
            Request("Can you remind me tomorrow at 8 to book the dentist?", "reminder_set",
                    {"task": "book the dentist", "when": "tomorrow at 8"}),
            Request("Remind me to take the cake out in 25 minutes please", "reminder_set",
                    {"task": "take the cake out", "when": "in 25 minutes"})]
    return out


NO_TOOL = [
    # actions no tool serves: the LLM's spoken refusal
    "What's the weather like today?", "Will it rain tomorrow?", "Play some jazz.", "Play the next song.",
    "Call mom.", "Text John that I'm running late.", "Turn on the living room lights.", "Order a pizza.",
    "Book a table for two at eight.", "Send an email to my boss.", "Turn up the volume.", "Lock the front door.",
    "Navigate to the nearest gas station.", "Book me a flight to Paris.",
    "Take a picture.", "Open the garage.", "Start the vacuum.", "Buy more coffee on Amazon.", "Pay my phone bill.",
    # questions for the LLM
    "What is the capital of France?", "Who wrote Pride and Prejudice?", "What is love?",
    "What's the meaning of life?", "What is a timer?", "What is the speed of light?", "How do airplanes fly?",
    "Tell me a joke.", "Tell me a story about a dragon.", "How are you today?", "Hello there.", "Good morning!",
    "Thank you.", "What can you do?", "Who are you?", "What's your name?", "Explain quantum computing simply.",
    "What time does the bakery usually open?", "How long should I boil an egg?", "How long is a marathon?",
    "Why is the sky blue?", "What is the tallest mountain in the world?", "How many legs does a spider have?",
    "What's a good name for a cat?", "Can you help me write a poem?", "What's the best way to learn Spanish?",
    "How do I make pancakes?", "What's the difference between a list and a tuple?",
    "What's on TV tonight?", "What is the date of the next full moon?", "What time zone is Tokyo in?",
    "Is a tomato a fruit?", "What does a shopping list app do?", "Convert this sentence to French.",
    "How many people live in Tokyo?", "What's the square of a circle?", "What is the sum of all fears?",
    "Calculate the risk of my investment.", "What are the times tables for kids?", "Add some salt to the soup.",
    "Put the kettle on.", "Set the table for dinner.", "Start the meeting without me.",
    "Cancel my dentist appointment.", "Cancel my subscription.", "How long is left in the game?",
    "Cancel it.", "How long is left?", "What's left to do today?", "Read me the news.", "Wake up!",
    "Set the mood.", "What is two plus the moon?", "How many miles to the moon from here by car?",
    "What's the time difference between me and you?", "Timer?", "Alarm clocks are annoying.",
    "My shopping list is too long.", "Do you like lists?", "I love the number seventeen.",
    "What's the time complexity of quicksort?", "Play my workout playlist.",
    "Call the nearest pharmacy.", "What's the traffic like on the way to work?", "Turn off the alarm system.",
    "How much is a flight to London?", "What is the population of Canada?", "Who won the game last night?",
    "How do I convert a PDF to Word?", "Add me to the guest list at the club.",
    "Add salt and pepper to the soup.", "How long is a marathon in miles?",
    # near misses of a reminder: asking to be told something, remembering, talking about reminders
    "I need a reminder of how this works.", "Do you remember my name?", "Can you remind me what the capital of Peru is?",
    "Remind me, what did I ask you first?", "Remind me why we're doing this.", "What is a reminder?",
    "Reminders never work for me.", "Do you have a reminder app?", "Remember to be nice.",
    "Remind me in ten minutes to check the oven. Actually, never mind.",
]


def requests(small: bool = False) -> list[Request]:
    """Every request (tool and no-tool, interleaved in a fixed order); `small`: every fourth one."""
    everything = _tool_requests() + [Request(text) for text in NO_TOOL]
    return everything[::4] if small else everything


# -- the measure -------------------------------------------------------------------------------------


def arguments_match(tool: str, expected: dict[str, Any], arguments: dict[str, Any]) -> bool:
    """Whether a call of `tool` with `arguments` (validated, as `Toolbox.route` gives them) is the one
    `expected` describes: for "calculate" `expected` holds the result ({"value": 391}), for
    "convert_units" the value and the two units (any spelling pint reads as the same unit), for the
    an alarm by its clock time, a list by the name it is stored under ("to-do" is "to do"), the other
    tools' arguments as text (case aside)."""
    if tool == "calculate":
        from headstart.tools.calculator import evaluate, parse_expression

        try:
            return math.isclose(evaluate(parse_expression(arguments["expression"])), expected["value"])
        except (ValueError, KeyError):
            return False
    if tool == "convert_units":
        from headstart.tools.units import convert

        try:  # one of a unit is one of the other: the same unit, however it is spelt ("hours", "hr")
            return (math.isclose(arguments["value"], expected["value"])
                    and math.isclose(convert(1.0, arguments["from_unit"], expected["from_unit"]), 1.0)
                    and math.isclose(convert(1.0, arguments["to_unit"], expected["to_unit"]), 1.0))
        except (ValueError, KeyError):
            return False
    if tool == "alarm_set":
        from headstart.tools.builtin import alarm_time
        from headstart.tools.registry import ToolArgumentError

        try:
            return alarm_time(arguments["time"]) == alarm_time(expected["time"])
        except (ToolArgumentError, KeyError):
            return False
    from headstart.tools.lists import canonical_list

    def plain(key: str, value: Any) -> Any:
        if key == "list_name":
            return canonical_list(value)
        return value.lower() if isinstance(value, str) else value

    got = {k: plain(k, v) for k, v in arguments.items()}
    want = {k: plain(k, v) for k, v in expected.items()}
    return got == want


def run(small: bool = False) -> dict[str, Any]:
    """Route every request through a fresh session's tools. Returns the result dict (the JSON line)."""
    from headstart.clock import FakeClock
    from headstart.tools.lists import ListStore
    from headstart.tools.toolbox import Toolbox

    with tempfile.TemporaryDirectory() as folder:
        box = Toolbox(FakeClock(), lists=ListStore(Path(folder) / "lists.sqlite3"))
        rows: dict[str, dict[str, int]] = {}
        false_actions: list[str] = []
        misses: list[dict[str, Any]] = []
        for request in requests(small):
            call = box.route(request.text)
            key = request.tool or "(no tool)"
            row = rows.setdefault(key, {"n": 0, "right_tool": 0, "right_arguments": 0})
            row["n"] += 1
            got = None if call is None else call.tool.name
            if got == request.tool:
                row["right_tool"] += 1
                if call is None or arguments_match(call.tool.name, request.arguments, call.arguments):
                    row["right_arguments"] += 1
                else:
                    misses.append({"text": request.text, "arguments": call.arguments})
            else:
                misses.append({"text": request.text, "expected": request.tool, "got": got})
            if request.tool is None and call is not None:
                false_actions.append(request.text)
        box.close()
    n = sum(r["n"] for r in rows.values())
    with_tool = [r for k, r in rows.items() if k != "(no tool)"]
    n_tool = sum(r["n"] for r in with_tool)
    return {
        "bench": "tools", "small": small, "requests": n, "tool_requests": n_tool, "no_tool_requests": n - n_tool,
        "right_tool": round(sum(r["right_tool"] for r in rows.values()) / n, 4),
        "right_tool_and_arguments": round(sum(r["right_arguments"] for r in with_tool) / max(1, n_tool), 4),
        "false_actions": len(false_actions), "false_action_texts": false_actions,
        "per_tool": rows, "misses": misses,
    }


def format_table(result: dict[str, Any]) -> str:
    lines = [f"{'tool':<18} {'n':>4} {'right tool':>11} {'right args':>11}"]
    for name, row in sorted(result["per_tool"].items()):
        lines.append(f"{name:<18} {row['n']:>4} {row['right_tool']:>11} {row['right_arguments']:>11}")
    lines.append(f"{result['requests']} requests ({result['no_tool_requests']} need no tool): right tool "
                 f"{result['right_tool']:.1%}, right tool and arguments {result['right_tool_and_arguments']:.1%}, "
                 f"false actions {result['false_actions']} (target 0)")
    return "\n".join(lines)


@dataclass(frozen=True)
class ToolsBenchOptions:
    """The options of `headstart bench tools` (headstart/cli/bench/tools.py): `small`, every fourth
    request; `json`, only the JSON line; `spoken`, the requests as speech heard by the recogniser
    (headstart/bench/tools_spoken.py) in `voices` (comma-separated TTS engines, taking turns, or each
    request in each with `each_voice`), recognised by `asr` (None: the session's default) on `threads`
    CPU threads."""

    small: bool = False
    json: bool = False
    spoken: bool = False
    voices: str = "hibari,piper-joe"
    each_voice: bool = False
    asr: str | None = None
    threads: int = 1


def main(options: ToolsBenchOptions) -> int:
    """`headstart bench tools` (the requests as text; `spoken`: headstart/bench/tools_spoken.py `main`):
    the table (unless `json`), then the JSON line. Returns 0, or 1 when a tool ran for a request that
    needed none."""
    result = run(small=options.small)
    if not options.json:
        print(format_table(result))
    print(json.dumps(result))
    return 0 if result["false_actions"] == 0 else 1
