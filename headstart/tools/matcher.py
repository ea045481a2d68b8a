"""The deterministic intent matcher: a final transcript -> the tool to call and its arguments, or None.

Templates come from the home-assistant-intents English sentence data for the intents it has (timers,
the current time and date, adding to the shopping list), from headstart's own `data/sentences.yaml`
(calculator, unit conversion, alarms, reminders, lists, the time in a city, short follow-ups), and from each
registered tool's `sentences`. Matching is hassil's; no model runs. A match whose arguments do not
fit its tool (an "expression" that is no arithmetic, an unknown unit) is passed over, so a request
no tool serves keeps going to the LLM.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

from headstart.tools.numbers import parse_number
from headstart.tools.registry import Tool
from headstart.tools.when import split_reminder

# the home-assistant-intents intents we serve -> our tool
HA_INTENTS = {
    "HassStartTimer": "timer_start", "HassCancelTimer": "timer_cancel", "HassCancelAllTimers": "timer_cancel_all",
    "HassTimerStatus": "timer_status", "HassGetCurrentTime": "get_time", "HassGetCurrentDate": "get_date",
    "HassShoppingListAddItem": "list_add",
}
# their templates that need what a voice assistant without a smart home has not (areas, devices, commands)
_UNSERVED_SLOTS = ("{area}", "{name}", "timer_command", "{floor}")


@dataclass(frozen=True, slots=True)
class IntentMatch:
    """One way the text matched: the intent's name, the tool it calls and the raw arguments (strings
    or numbers as the template gave them, before validation)."""

    intent: str
    tool: str
    arguments: dict[str, Any]


def _ha_data() -> dict:
    import home_assistant_intents

    data = home_assistant_intents.get_intents("en")
    if data is None:
        raise RuntimeError("home-assistant-intents has no English data")
    intents: dict[str, Any] = {}
    for name in HA_INTENTS:
        kept = []
        for block in data["intents"].get(name, {}).get("data", []):
            sentences = [s for s in block["sentences"] if not any(slot in s for slot in _UNSERVED_SLOTS)]
            if sentences:
                kept.append({"sentences": sentences})
        if kept:
            intents[name] = {"data": kept}
    return {"language": "en", "intents": intents, "lists": data["lists"],
            "expansion_rules": data["expansion_rules"], "skip_words": data.get("skip_words", [])}


def _own_data() -> dict:
    import yaml

    text = resources.files("headstart.tools").joinpath("data/sentences.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


@functools.lru_cache(maxsize=1)
def _base_data() -> str:
    """The built-in templates, as JSON (cached: loading the intents data takes ~0.2 s)."""
    return json.dumps([_own_data(), _ha_data()])


def _tool_data(tools: tuple[Tool, ...]) -> dict:
    intents, lists = {}, {}
    for tool in tools:
        if not tool.sentences:
            continue
        intents[tool.name] = {"data": [{"sentences": list(tool.sentences)}]}
        for name, kind in tool.parameters.items():
            lists[name] = {"range": {"from": 0, "to": 10_000}} if kind is int else {"wildcard": True}
    return {"language": "en", "intents": intents, "lists": lists}


@functools.lru_cache(maxsize=8)
def _intents(tools: tuple[Tool, ...]):
    from hassil import Intents

    own, ha = json.loads(_base_data())
    merged: dict[str, Any] = {"language": "en", "intents": {}, "lists": {}, "expansion_rules": {}, "skip_words": []}
    for data in (_tool_data(tools), own, ha):  # registered tools first: they may override a template
        for key in ("intents", "lists", "expansion_rules"):
            for name, value in data.get(key, {}).items():
                merged[key].setdefault(name, value)
        merged["skip_words"] += data.get("skip_words", [])
    return Intents.from_dict(merged)


def _normalise(text: str) -> str:
    """The transcript as templates are written: lower case, no end punctuation, '%' spelled."""
    text = text.lower().strip().replace("%", " percent").replace("’", "'")
    return re.sub(r"[?.!,;]+$", "", text).strip()


class IntentMatcher:
    """Matches transcripts against the templates (see the module docstring).

    Args:
        tools: the registered tools whose `sentences` join the templates.
    """

    def __init__(self, tools: tuple[Tool, ...] = ()) -> None:
        self._tools = tuple(t for t in tools if t.sentences)

    def load(self) -> None:
        """Parse the templates now (~0.6 s on 2 cores the first time in a process, shared by every
        matcher with the same registered tools) rather than at the first `matches`."""
        self.matches("what is the capital of france")  # hassil compiles some of its matching on first use too

    def matches(self, text: str) -> list[IntentMatch]:
        """Every way `text` matches, best first (hassil's order: our own and registered intents before
        the home-assistant ones). Empty when nothing matches."""
        from hassil import recognize_all

        normalised = _normalise(text)
        if not normalised or _withdrawn(normalised):
            return []
        opening = _WITHDRAWAL.match(normalised)
        if opening is not None:  # "never mind, set a timer ...": the request after it stands
            normalised = normalised[opening.end():].strip(" ,")
        out: list[IntentMatch] = []
        seen: set[tuple] = set()
        several = _SENTENCE_END.search(normalised) is not None
        for result in recognize_all(normalised, _intents(self._tools)):
            entities = {k: (v.value if v.value is not None else v.text) for k, v in result.entities.items()}
            match = _to_match(result.intent.name, entities, several)
            if match is None:
                continue
            key = (match.tool, tuple(sorted((k, str(v)) for k, v in match.arguments.items())))
            if key not in seen:
                seen.add(key)
                out.append(match)
        return out


def _duration_s(entities: dict[str, Any], prefix: str = "") -> float:
    total = 0.0
    for unit, size in (("hours", 3600), ("minutes", 60), ("seconds", 1)):
        value = entities.get(prefix + unit)
        if value is not None:
            number = parse_number(str(value)) if not isinstance(value, int | float) else value
            total += float(number or 0) * size
    return total


# "... actually, never mind": the request is taken back in the same turn (a recogniser may drop the
# punctuation that would show a second sentence), so no tool acts on it
_WITHDRAWAL = re.compile(r"\b(never ?mind|forget (it|that|about it)|scratch that|actually no|no wait)\b")


def _withdrawn(normalised: str) -> bool:
    """Whether a request is taken back after its words ("set a timer for ten minutes never mind"); a
    withdrawal that opens the text ("never mind, what time is it") takes back something earlier."""
    found = _WITHDRAWAL.search(normalised)
    return found is not None and bool(normalised[: found.start()].strip(" ,"))


_LOOSE_AND = re.compile(r"(?<!hundred)(?<!thousand)(?<!million)(?<!billion) and\b")
_SENTENCE_END = re.compile(r"[.?!;]\s")
_NAMED_TIMER = re.compile(r"^(?P<amount>.+?)[ -](?P<unit>hour|minute|second)s? (?P<name>[a-z][a-z ]*?) timer$")


def _to_match(intent: str, e: dict[str, Any], several: bool = False) -> IntentMatch | None:
    """The tool and raw arguments of a hassil result (None: a shape we do not serve). `several`: the text
    has more than one sentence (hassil's wildcards drop the punctuation): a reminder's task or time takes
    none of it ("remind me ... the oven. actually, never mind")."""
    text = {k: str(v).strip() for k, v in e.items()}
    if intent in HA_INTENTS:
        tool = HA_INTENTS[intent]
        if tool == "timer_start":
            args: dict[str, Any] = {"seconds": _duration_s(e)}
            if e.get("name"):
                args["name"] = text["name"]
            return IntentMatch(intent, tool, args)
        if tool in ("timer_cancel", "timer_status"):
            args = {}
            seconds = _duration_s(e, "start_")
            if seconds:
                args["seconds"] = seconds
            if e.get("name"):
                args["name"] = text["name"]
            return IntentMatch(intent, tool, args)
        if tool == "list_add":
            return IntentMatch(intent, tool, {"item": text.get("item", ""), "list_name": "shopping"})
        return IntentMatch(intent, tool, {})
    if intent == "convert_units":
        split = _split_quantity(text.get("quantity", ""))
        if split is None:
            return None
        value, unit = split
        return IntentMatch(intent, intent, {"value": value, "from_unit": unit, "to_unit": text.get("to_unit", "")})
    if intent == "calculate_sum":  # "add ten and five": the calculator reads "ten plus five"
        addends = (text.get("addend", ""), text.get("other_addend", ""))
        # which "and" splits the addends: an "and" inside one must be a number's ("a hundred and five")
        if any(_LOOSE_AND.search(a) for a in addends):
            return None
        return IntentMatch(intent, "calculate", {"expression": f"{addends[0]} plus {addends[1]}"})
    if intent == "reminder_set":  # "remind me to buy milk tomorrow": the task and the time split here
        parts = None if several else split_reminder(text.get("reminder_text", ""))
        if parts is None:
            return None
        task, when = parts
        return IntentMatch(intent, intent, {k: v for k, v in (("task", task), ("when", when)) if v})
    if intent == "reminder_when":  # the time alone, the answer to "When should I remind you ...?"
        if several:
            return None
        return IntentMatch(intent, "reminder_set", {"when": text.get("when_text", "")})
    if intent == "timer_status_short":
        return IntentMatch(intent, "timer_status", {})
    if intent == "timer_cancel_short":
        return IntentMatch(intent, "timer_cancel", {})
    if intent == "timer_start_named":
        m = _NAMED_TIMER.match(text.get("timer_text", ""))
        amount = parse_number(m.group("amount")) if m else None
        if m is None or amount is None:
            return None
        size = {"hour": 3600, "minute": 60, "second": 1}[m.group("unit")]
        return IntentMatch(intent, "timer_start", {"seconds": amount * size, "name": m.group("name")})
    return IntentMatch(intent, intent, dict(text) if intent in ("calculate", "alarm_set", "list_add", "list_read",
                                                                 "list_remove", "get_time", "reminder_cancel")
                       else dict(e))


def _split_quantity(text: str) -> tuple[float, str] | None:
    """"5 miles" / "five and a half kilometers" / "a pound" -> (value, unit)."""
    words = text.split()
    if len(words) > 1 and words[0] in ("a", "an", "one"):
        return 1.0, " ".join(words[1:])
    for i in range(len(words) - 1, 0, -1):
        value = parse_number(" ".join(words[:i]))
        if value is not None:
            return value, " ".join(words[i:])
    return None
