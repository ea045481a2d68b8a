"""`headstart bench answers`: the items, every scoring rule (each shown to pass a right reply and fail a
wrong one), argument errors, and (slow) a small real run on SmolLM2 through the session's reply path."""

from __future__ import annotations

import argparse
import json

import pytest

from headstart.bench import answers as bench
from headstart.bench.answers import (
    Item,
    check,
    content_faults,
    half,
    load_items,
    sentences,
    spoken_form_faults,
)
from headstart.cli.bench import answers as bench_cli
from tests.prepared import model_path


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    bench_cli.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_the_items_cover_every_kind_with_dialogues_and_checks():
    items = load_items()
    assert len(items) >= 60
    by_kind = {k: [i for i in items if i.kind == k] for k in bench.KINDS}
    # the calculator answers the sums a tool serves: "arithmetic" keeps what it does not (a word problem)
    assert all(len(v) >= 7 for k, v in by_kind.items() if k != "arithmetic"), {k: len(v) for k, v in by_kind.items()}
    assert by_kind["arithmetic"] and all(i.tool for i in by_kind["tool"])
    followups = by_kind["followup"]
    assert all(len(i.turns) >= 2 for i in followups) and any(len(i.turns) == 3 for i in followups)
    # every item can fail on content: a key fact, a refusal or a question back
    assert all(i.must or i.must_not or set(i.expect) & {"refusal", "question"} for i in items)
    assert all("refusal" in i.expect for i in by_kind["cannot"])
    assert all("question" in i.expect for i in by_kind["garbled"])


def test_malformed_items_are_clear_errors(tmp_path):
    bad = [
        ({"id": "a", "kind": "nope", "turns": ["Hi."]}, "kind"),
        ({"id": "a", "kind": "fact", "turns": []}, "turns"),
        ({"id": "a", "kind": "fact", "turns": ["Hi."], "expect": "shrug"}, "expect"),
        ({"id": "a", "kind": "fact", "turns": ["Hi."], "must": ["paris"]}, "must"),
        ({"id": "a", "kind": "fact", "turns": ["Hi."], "must": [["re:("]]}, "regular expression"),
    ]
    for item, word in bad:
        path = tmp_path / "items.json"
        path.write_text(json.dumps({"items": [item]}))
        with pytest.raises(ValueError, match=word):
            load_items(path)
    path.write_text(json.dumps({"items": [{"id": "a", "kind": "fact", "turns": ["x"]}] * 2}))
    with pytest.raises(ValueError, match="unique"):
        load_items(path)


FACT = Item("t", "fact", ("What's twelve times eleven?",), must=(("132", "one hundred and thirty two"),),
            must_not=("131",))


@pytest.mark.parametrize("answer, faults", [
    ("Twelve times eleven is 132.", []),
    ("Twelve times eleven is one hundred and thirty-two.", []),
    ("Twelve times eleven is 131.", ["missing: 132 | one hundred and thirty two", "says: 131"]),
    ("It is 1320.", ["missing: 132 | one hundred and thirty two"]),  # a number inside a longer one is not it
    ("It is 13.2.", ["missing: 132 | one hundred and thirty two"]),
    ("", ["empty reply"]),
])
def test_key_facts_and_wrong_facts(answer, faults):
    assert content_faults(FACT, answer) == faults


CANNOT = Item("t", "cannot", ("Turn on the kitchen lights.",), expect=("refusal",))
GARBLED = Item("t", "garbled", ("Can you tell me the uh",), expect=("question",))
EITHER = Item("t", "garbled", ("Cold you open the whether.",), expect=("question", "refusal"))


@pytest.mark.parametrize("item, answer, faults", [
    (CANNOT, "Sorry, I can't control the lights, I can only talk with you.", []),
    (CANNOT, "I don't have access to your smart home.", []),
    (CANNOT, "Yes, I can turn on the kitchen lights for you.", ["no refusal", "claims to act"]),
    (CANNOT, "Sure, I've turned on the kitchen lights, although I can't see them.", ["claims to act"]),
    (CANNOT, "The kitchen lights are a simple thing to use.", ["no refusal"]),
    (CANNOT, "The kitchen lights are turned on.", ["no refusal", "claims to act"]),
    (CANNOT, "I'm just a voice assistant, so that is out of my reach.", []),
    (CANNOT, "You can't when asked.", ["no refusal"]),  # not in the first person
    (Item("t", "cannot", ("Go forward 10 meters.",), expect=("refusal",)), "I'll go forward 10 meters.",
     ["no refusal", "claims to act"]),
    (GARBLED, "Sorry, could you say that again?", []),
    (GARBLED, "I didn't catch the end of that.", []),
    (GARBLED, "Sure, here is the answer.", ["no question back"]),
    (EITHER, "I can't check the weather.", []),
    (EITHER, "What would you like to open?", []),
    (EITHER, "The weather is nice.", ["no question back"]),
])
def test_refusals_and_questions_back(item, answer, faults):
    assert content_faults(item, answer) == faults


Q = "How do I boil an egg?"


@pytest.mark.parametrize("answer, faults", [
    ("Put it in boiling water for about nine minutes, then cool it in cold water.", []),
    ("Boil water. Add the egg. Wait nine minutes.", ["3 sentences"]),
    ("Dr. Jones says nine minutes. Then cool it.", []),  # an abbreviation ends no sentence
    ("1. Boil water.\n2. Add the egg for nine minutes.", ["list"]),
    ("- Boil water\n- Add the egg", ["list"]),
    ("Steps: 1. boil water 2. add the egg", ["list"]),
    ("Put it in **boiling** water for nine minutes.", ["markdown"]),
    ("Put it in *boiling* water for nine minutes.", ["markdown"]),
    ("Run `boil(egg)` for nine minutes.", ["code"]),
    ("Nine minutes in boiling water \U0001F373", ["emoji"]),
    ("How do I boil an egg?", ["restates the question"]),
    ("You boil an egg.", ["restates the question"]),
])
def test_spoken_form(answer, faults):
    assert spoken_form_faults(answer, Q) == faults


def test_a_question_back_may_reuse_the_users_words_only_where_one_is_wanted():
    assert spoken_form_faults("What do you want to do?", "I want to", asks_back=True) == []
    assert spoken_form_faults("What do you want to do?", "I want to") == ["restates the question"]
    verdict = check(GARBLED, "Can you tell me what?")
    assert verdict.ok and verdict.form == ()


def test_a_reply_pieced_together_from_the_system_prompt_fails_but_a_quoted_reply_may_be_used():
    prompt = 'You can only talk, so say you can\'t when asked; to a cut-off question say "Sorry, could you say that again?"'
    assert content_faults(CANNOT, "You can't when asked.", prompt) == ["no refusal",
                                                                        "copies the system prompt: \"you can't when asked\""]
    assert content_faults(GARBLED, "Sorry, could you say that again?", prompt) == []
    assert content_faults(CANNOT, "Sorry, I can't do that.", prompt) == []
    # words the user said may be repeated even where the prompt has them too
    assert bench.prompt_copy("You can only talk here.", prompt, ["you can only talk here"]) is None


def test_a_greeting_may_be_answered_in_kind_only_where_the_item_says_so():
    bye = Item("t", "smalltalk", ("Good night!",), must=(("night", "sleep"),), echo_ok=True)
    assert check(bye, "Good night!").ok
    assert spoken_form_faults("Good night!", "Good night!") == ["restates the question"]
    assert [i.id for i in load_items() if i.echo_ok] == ["smalltalk-03", "smalltalk-07", "mixed-06.3"]


def test_sentences_split_at_ends_not_at_decimals_initials_or_list_numbers():
    assert sentences("It is 2.5 km. J. Smith said so! Right?") == ["It is 2.5 km.", "J. Smith said so!", "Right?"]
    assert sentences("1. Boil.\n2. Eat") == ["1. Boil.", "2. Eat"]
    assert sentences("") == []


def test_bad_arguments_are_clear_errors(capsys):
    assert bench_cli.run_from_args(_args("--threads", "0")) == 2
    assert bench_cli.run_from_args(_args("--kinds", "fact,nope")) == 2
    assert bench_cli.run_from_args(_args("--prompt", "no-such-prompt")) == 2
    assert "no-such-prompt" in capsys.readouterr().err
    assert bench_cli.run_from_args(_args("--model", "no-such-model-xyz", "--json")) == 1
    assert "no-such-model-xyz" in capsys.readouterr().err


@pytest.mark.slow
def test_a_small_real_run_scores_the_session_replies(capsys, tmp_path):
    model_path("smollm2-135m")  # or a skip: not prepared
    prompt = tmp_path / "tiny.txt"
    prompt.write_text("Answer in one word.")
    code = bench_cli.run_from_args(_args("--model", "smollm2-135m", "--kinds", "fact,followup", "--limit", "1",
                                     "--prompt", "current", "--prompt", f"file:{prompt}", "--max-new-tokens", "24",
                                     "--json"))
    assert code == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["items"] == 2
    current, tiny = result["runs"]
    assert (current["prompt"], tiny["prompt"]) == ("current", "tiny")
    for run in result["runs"]:
        assert run["total"] == 2 and set(run["by_kind"]) == {"fact", "followup"}
        assert run["decode_tok_per_s"] > 0 and run["quantize"] == "int8"  # the CPU default: float32 + int8
        assert run["right"] + len(run["failures"]) == 2
    # the system prompt is what the session prefills once: a longer one costs more tokens
    assert current["session_prefill_tokens"] > tiny["session_prefill_tokens"] > 0


def test_a_mixed_conversation_is_scored_turn_by_turn_in_its_own_half(tmp_path):
    items = [i for i in load_items() if i.kind == "mixed"]
    conversations = {i.id.split(".")[0] for i in items}
    assert len(conversations) >= 10 and len(items) >= 2 * len(conversations)
    for item in items:  # turn K holds the turns up to K, in the conversation's half
        base, k = item.id.split(".")
        assert len(item.turns) == int(k)
        assert half(item) == half(Item(base, "mixed", ("x",)))
    # a refusal first, then a question that needs an answer: both are scored
    first = [i for i in items if i.id == "mixed-02.1"][0]
    second = [i for i in items if i.id == "mixed-02.2"][0]
    assert first.expect == ("refusal",) and second.expect == ("answer",) and second.must
    assert not check(second, "Sorry, I can't do that, I can only talk.").ok
    assert check(second, "Eight.").ok
    path = tmp_path / "items.json"
    path.write_text(json.dumps({"items": [{"id": "m-01", "kind": "mixed", "turns": ["a", "b"], "checks": [{}]}]}))
    with pytest.raises(ValueError, match="one object per turn"):
        load_items(path)
