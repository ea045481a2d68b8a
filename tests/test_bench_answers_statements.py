"""`headstart bench answers`, the "statement" kind: plain statements a user says (asking nothing) must get
a short reply of the assistant's own, not the refusal or an ask-back; and the stable A/B halves that
prompts are chosen and reported on."""

from __future__ import annotations

import argparse

import pytest

from headstart.bench.answers import Item, check, half, load_items
from headstart.cli.bench import answers as bench_cli

REFUSAL_LINE = "Sorry, I can't do that, I can only talk."  # the default prompt's quoted refusal


def _statements() -> list[Item]:
    return [i for i in load_items() if i.kind == "statement"]


def test_the_statement_kind_loads_with_at_least_eight_items_in_both_halves():
    items = _statements()
    assert len(items) >= 8
    assert {half(i) for i in items} == {"A", "B"}
    assert all(i.expect == ("answer",) and i.must_not and len(i.turns) == 1 for i in items)
    # statements, not questions or requests
    assert not any(i.question.rstrip().endswith("?") for i in items)


@pytest.mark.parametrize("reply", [REFUSAL_LINE, "Sorry, I can't help with that.", "I'm unable to do that.",
                                   "I'm sorry, but I can't assist with that.", "Sorry, could you say that again?",
                                   "Goodbye!"])  # a farewell, seen from canned-tell
def test_a_refusal_an_ask_back_or_a_farewell_to_a_statement_fails_the_item(reply):
    for item in _statements():
        verdict = check(item, reply)
        assert not verdict.ok and any(f.startswith("says: ") for f in verdict.content), (item.id, verdict)


def test_a_short_reply_of_its_own_passes_and_an_echo_fails():
    item = next(i for i in _statements() if i.question == "Something is terribly wrong.")
    assert check(item, "Oh no, what happened?").ok
    assert check(item, "I'm sorry to hear that, can I help you think it through?").ok
    echo = check(item, "Something is terribly wrong.")
    assert not echo.ok and echo.form == ("restates the question",)
    keys = next(i for i in _statements() if "can't find" in i.question)  # the user's own "can't"
    assert check(keys, "Have you checked your coat pockets?").ok


def test_the_misheard_question_wants_an_ask_back_or_the_likely_answer_not_the_refusal():
    item = next(i for i in load_items() if i.question == "I long should I boil an egg?")
    assert check(item, "Did you mean how long to boil an egg?").ok
    assert check(item, "About nine minutes for a hard-boiled egg.").ok
    assert not check(item, REFUSAL_LINE).ok


def test_halves_follow_the_ids_final_number_and_adding_items_moves_none():
    assert [half(Item(f"x-{n:02d}", "fact", ("q",))) for n in (1, 2, 9, 10)] == ["A", "B", "A", "B"]
    with pytest.raises(ValueError, match="final number"):
        half(Item("nope", "fact", ("q",)))
    # half A was chosen on the odd-numbered items: these stay in A whatever is added
    items = load_items()
    assert {i.id for i in items if half(i) == "A"} >= {"fact-01", "cannot-01", "garbled-09", "smalltalk-07"}
    assert sum(half(i) == "A" for i in items) in range(len(items) // 2 - 3, len(items) // 2 + 4)


def test_the_half_option_is_checked():
    parser = argparse.ArgumentParser()
    bench_cli.add_arguments(parser)
    assert parser.parse_args(["--half", "B"]).half == "B"
    with pytest.raises(SystemExit):
        parser.parse_args(["--half", "C"])
