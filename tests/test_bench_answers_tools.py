"""`headstart bench answers` with the session's tools: a turn the matcher serves gets the tool's spoken
answer (the tool really runs, on a temporary store per conversation), the history records it as the
session's Conversation does, tool items are scored on the tool, its arguments and its answer, and a
tool that runs for an item expecting none is a false action. The LLM is a stand-in here, except in the
`models` test at the end."""

from __future__ import annotations

import argparse
import json
from types import SimpleNamespace

import pytest

from headstart.bench import answers as bench
from headstart.bench.answers import Item, Verdict, bench_toolbox, check, load_items, run_tool_turn
from headstart.cli.bench import answers as bench_cli
from headstart.config import LLMConfig
from headstart.events import ReplyDone
from headstart.timeline import ToolUse
from tests.prepared import model_path

LLM_REPLY = "Let me think about that."


@pytest.fixture
def llm_calls(monkeypatch):
    """Stand in for the LLM: every call's messages are recorded and answered with LLM_REPLY."""
    calls: list[list[dict[str, str]]] = []

    async def reply(engine, messages, config, executor, decoder):
        calls.append([dict(m) for m in messages])
        return ReplyDone(LLM_REPLY, 5, "eos"), SimpleNamespace(token_times_s=[0.0, 0.1], ttft_s=0.1)

    monkeypatch.setattr(bench, "_reply", reply)
    return calls


def answer(item: Item, tools: bool = True) -> Verdict:
    return bench._answer(None, None, LLMConfig(), None, item, bench._RunStats(), "prompt", tools)


def test_every_tool_item_is_right_with_the_real_matcher_and_a_temporary_store(llm_calls, tmp_path, monkeypatch):
    monkeypatch.setenv("HEADSTART_DATA_DIR", str(tmp_path / "user-data"))
    items = [i for i in load_items() if i.tool is not None]
    assert {i.tool for i in items} >= {"timer_start", "get_time", "calculate", "convert_units", "list_add",
                                       "list_read", "get_date", "reminder_set"}
    for item in items:
        verdict = answer(item)
        assert verdict.ok, (item.id, verdict.answer, verdict.content, verdict.form)
        assert verdict.tool is not None and verdict.tool.name == item.tool and verdict.tool.ok
    assert not (tmp_path / "user-data").exists()  # the lists went to a temporary folder, not the user's


def test_each_conversation_gets_a_fresh_store():
    item = next(i for i in load_items() if i.id == "tool-15")  # add bread, then read the list
    for _ in range(2):
        with bench_toolbox() as box:
            replies = [run_tool_turn(box, text) for text in item.turns]
        assert replies[-1] is not None and replies[-1][0] == "Your shopping list has bread."
    with bench_toolbox() as box:
        served = run_tool_turn(box, "What's on my shopping list?")
    assert served is not None and served[0] == "Your shopping list is empty."


def test_the_history_records_a_tool_turn_as_the_sessions_conversation_does(llm_calls):
    from headstart.session.conversation import Conversation

    item = next(i for i in load_items() if i.id == "followup-03")  # "What's five plus three?", "Now double that."
    verdict = answer(item)
    assert [t.name if t else None for t in verdict.tools] == ["calculate", None]
    assert verdict.context == ("5 plus 3 is 8.",) and verdict.tool_in_history and not verdict.false_action
    session = Conversation(LLMConfig().system_prompt)
    session.add_user(item.turns[0])
    session.add_assistant("5 plus 3 is 8.")
    session.add_user(item.turns[1])
    assert llm_calls == [session.messages()]  # one LLM call, on the prompt the session renders
    llm_calls.clear()
    off = answer(item, tools=False)
    assert len(llm_calls) == 2 and off.tools == () and off.context == (LLM_REPLY,)


def test_no_tool_runs_for_a_refusal_statement_or_any_item_that_expects_none(llm_calls):
    for item in load_items():
        if item.tool is None:
            verdict = answer(item)
            assert not verdict.false_action, (item.id, verdict.tool)
    # and were one to run, the item fails as a false action
    cannot = next(i for i in load_items() if i.id == "cannot-13")  # "Turn off the alarm system."
    ran = ToolUse("alarm_cancel", {}, True)
    verdict = check(cannot, "Your alarm is cancelled.", tools=[ran])
    assert verdict.false_action and not verdict.ok
    assert "ran a tool: alarm_cancel (none expected)" in verdict.content
    plain = next(i for i in load_items() if i.kind == "statement")
    assert check(plain, "That sounds lovely.", tools=[None]).ok
    assert not check(plain, "That sounds lovely.", tools=[ToolUse("list_add", {}, True)]).ok


TIMER = Item("t-01", "tool", ("Set a timer for ten minutes.",), must=(("ten minutes", "10 minutes"),),
             tool="timer_start", arguments={"seconds": 600})
SUM = Item("t-02", "tool", ("What's twelve times eleven?",), must=(("132",),), must_not=("131",),
           tool="calculate", arguments={"value": 132})
REMINDER = Item("t-04", "tool", ("Remind me in ten minutes to check the oven.",),
                must=(("check the oven",), ("ten minutes", "10 minutes")), tool="reminder_set",
                arguments={"task": "check the oven", "when": "in ten minutes"})
UNITS = Item("t-03", "tool", ("How many hours are there in two days?",), must=(("48",),),
             tool="convert_units", arguments={"value": 2, "from_unit": "days", "to_unit": "hours"})


@pytest.mark.parametrize("item, answer_, ran, faults", [
    (TIMER, "Timer set for ten minutes.", ToolUse("timer_start", {"seconds": 600.0}, True), []),
    (TIMER, "Timer set for five minutes.", ToolUse("timer_start", {"seconds": 300.0}, True),
     ["arguments {'seconds': 300.0} (expected {'seconds': 600})", "missing: ten minutes | 10 minutes"]),
    (TIMER, "Alarm set for 10:00 AM.", ToolUse("alarm_set", {"time": "ten"}, True),
     ["ran alarm_set (expected timer_start)", "missing: ten minutes | 10 minutes"]),
    (TIMER, "Sorry, I couldn't do that.", ToolUse("timer_start", {"seconds": 600.0}, False),
     ["the tool failed", "missing: ten minutes | 10 minutes"]),
    (TIMER, "Sure, ten minutes it is.", None, ["no tool ran (expected timer_start)"]),
    (SUM, "12 times 11 is 132.", ToolUse("calculate", {"expression": "twelve times eleven"}, True), []),
    (SUM, "12 times 11 is 131.", ToolUse("calculate", {"expression": "twelve times eleven"}, True),
     ["missing: 132", "says: 131"]),
    (SUM, "11 times 11 is 121.", ToolUse("calculate", {"expression": "eleven times eleven"}, True),
     ["arguments {'expression': 'eleven times eleven'} (expected {'value': 132})", "missing: 132"]),
    (UNITS, "2 days is 48 hours.", ToolUse("convert_units", {"value": 2.0, "from_unit": "day", "to_unit": "hr"},
                                           True), []),  # the units as pint reads them, any spelling
    (REMINDER, "I'll remind you to check the oven in ten minutes.",
     ToolUse("reminder_set", {"task": "check the oven", "when": "in ten minutes"}, True), []),
    (REMINDER, "Timer set for ten minutes.", ToolUse("timer_start", {"seconds": 600.0}, True),
     ["ran timer_start (expected reminder_set)", "missing: check the oven"]),
    (REMINDER, "I'll remind you to check the oven tomorrow at 9:00 AM.",
     ToolUse("reminder_set", {"task": "check the oven", "when": "tomorrow"}, True),
     ["arguments {'task': 'check the oven', 'when': 'tomorrow'} (expected {'task': 'check the oven', "
      "'when': 'in ten minutes'})", "missing: ten minutes | 10 minutes"]),
])
def test_tool_items_are_scored_on_the_tool_its_arguments_and_its_answer(item, answer_, ran, faults):
    verdict = check(item, answer_, system_prompt=LLMConfig().system_prompt, tools=[ran])
    assert list(verdict.content) == faults
    assert verdict.ok == (not faults)


def test_malformed_tool_items_are_clear_errors(tmp_path):
    path = tmp_path / "items.json"
    for raw, word in [({"id": "a", "kind": "tool", "turns": ["What time is it?"]}, "names its tool"),
                      ({"id": "a", "kind": "fact", "turns": ["Hi."], "tool": "get_time"}, "only a tool item"),
                      ({"id": "a", "kind": "tool", "turns": ["Hi."], "tool": "get_time", "arguments": [1]},
                       "arguments")]:
        path.write_text(json.dumps({"items": [raw]}))
        with pytest.raises(ValueError, match=word):
            load_items(path)


def test_the_tool_summary_counts_tool_items_false_actions_and_the_llm_only_score():
    timer = ToolUse("timer_start", {"seconds": 600.0}, True)
    cannot = Item("c-01", "cannot", ("Remind me in ten minutes.",), expect=("refusal",))
    fact = Item("f-01", "fact", ("What's five plus three?", "And double?"), must=(("16",),))
    verdicts = [check(TIMER, "Timer set for ten minutes.", tools=[timer]),
                check(cannot, "Timer set for ten minutes.", tools=[timer]),
                check(fact, "16.", ["5 plus 3 is 8."], tools=[ToolUse("calculate", {}, True), None])]
    without = {"c-01": check(cannot, "Sorry, I can't do that, I can only talk."),
               "f-01": check(fact, "It is 16.", ["Eight."])}
    summary = bench._tool_summary(verdicts, True, without)
    assert summary["tool_items"] == {"right": 1, "total": 1, "score": 1.0}
    assert summary["false_actions"] == 1 and summary["false_action_ids"] == ["c-01"]
    assert summary["llm_only"] == {"right": 1, "total": 2, "score": 0.5}
    off = summary["llm_only_without_tools"]
    assert (off["right"], off["total"], off["answered_again"], off["changed"]) == (2, 2, ["c-01", "f-01"], ["c-01"])
    assert "llm_only_without_tools" not in bench._tool_summary(verdicts, False, {})


def test_the_tools_flag_is_declared_as_serves():
    parser = argparse.ArgumentParser()
    bench_cli.add_arguments(parser)
    assert parser.parse_args([]).tools is None
    assert parser.parse_args(["--no-tools"]).tools is False
    assert parser.parse_args(["--tools"]).tools is True


@pytest.mark.models
def test_a_real_run_with_and_without_tools(capsys, tmp_path):
    model_path("smollm2-135m")  # or a skip: not prepared
    keep = {"tool-01", "followup-03", "cannot-13"}
    items = [r for r in json.loads(bench.resources.files("headstart.bench").joinpath("data", bench.DATA_FILE)
                                   .read_text(encoding="utf-8"))["items"] if r["id"] in keep]
    path = tmp_path / "items.json"
    path.write_text(json.dumps({"items": items}))
    results = {}
    for flag in ("--tools", "--no-tools"):
        parser = argparse.ArgumentParser()
        bench_cli.add_arguments(parser)
        args = parser.parse_args(["--model", "smollm2-135m", "--items", str(path), "--max-new-tokens", "16",
                                  "--json", flag])
        assert bench_cli.run_from_args(args) == 0
        results[flag] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    on, off = results["--tools"]["runs"][0], results["--no-tools"]["runs"][0]
    assert results["--tools"]["tools"] is True and results["--no-tools"]["tools"] is False
    assert on["tool_items"] == {"right": 1, "total": 1, "score": 1.0} and on["false_actions"] == 0
    assert off["tool_items"]["right"] == 0 and off["false_actions"] == 0
    assert on["llm_only"]["total"] == off["llm_only"]["total"] == 2
    # followup-03's first turn was the calculator's: it is answered again without tools for the comparison
    assert on["llm_only_without_tools"]["answered_again"] == ["followup-03"]
    assert "llm_only_without_tools" not in off
