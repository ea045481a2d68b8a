"""`headstart bench memory` (headstart/bench/memory.py): the conversations and their scoring without a
model; with smollm2-135m, the summariser on the real engine (cancellable, the prompt a stable token
prefix between compactions) and a small real run of the bench."""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter

import pytest

from headstart.bench.answers import half
from headstart.bench.memory import KINDS, load_conversations, score
from headstart.cli.bench import memory as bench_cli
from tests.prepared import model_path


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    bench_cli.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_forty_conversations_of_8_to_40_user_turns_with_every_probe_kind_in_both_halves():
    conversations = load_conversations()
    assert len(conversations) >= 40
    assert all(8 <= len(c.turns) + 1 <= 40 for c in conversations)
    for name in ("A", "B"):
        kinds = Counter(c.kind for c in conversations if half(c.item()) == name)
        assert set(kinds) == set(KINDS) and kinds["recall"] >= 3
    assert len({c.id for c in conversations}) == len(conversations)


def test_facts_come_early_and_requests_come_between():
    for c in load_conversations():
        if c.kind in ("recall", "multi", "update"):
            users = [u for u, _ in c.turns]
            # a probed value stands in the first four turns (the update's too: its old value does)
            first = " ".join(users[:4]).lower()
            assert any(any(re.search(rf"\b{re.escape(p.lower())}\b", first) for p in group) for group in c.must) \
                or c.kind == "update", c.id
            assert len(c.turns) - 3 >= 2  # at least two other requests in between


def test_abstention_probes_ask_for_a_fact_never_given():
    for c in load_conversations():
        if c.kind == "abstain":
            text = " ".join(u for u, _ in c.turns).lower()
            assert not any(p.lower() in text for p in c.must_not), c.id


def test_scoring_uses_the_answers_must_and_must_not_phrases():
    by_kind = {c.kind: c for c in load_conversations()}
    update = by_kind["update"]
    new, old = update.must[0][0], update.must_not[0]
    assert score(update, f"It's {new} now.") == []
    assert score(update, f"It was {old}, now {new}.") == [f"says: {old}"]
    abstain = by_kind["abstain"]
    assert score(abstain, "I don't know, you haven't told me that.") == []
    assert score(abstain, f"It's {abstain.must_not[0]}.") != []


def test_bad_arguments_are_clear_errors(capsys):
    assert bench_cli.run_from_args(_args("--methods", "full,nope")) == 2
    assert bench_cli.run_from_args(_args("--budgets", "0")) == 2
    assert bench_cli.run_from_args(_args("--conversations", "no-such-id")) == 2
    assert bench_cli.run_from_args(_args("--instruction", "no placeholder")) == 2
    assert bench_cli.run_from_args(_args("--model", "no-such-model-xyz", "--limit", "1", "--json")) == 1
    assert "no-such-model-xyz" in capsys.readouterr().err


# -- with a real model ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def engine():
    from headstart.config import LLMConfig, ThreadPlan
    from headstart.llm.engine import LLMEngine

    path = model_path("smollm2-135m")
    return LLMEngine.load(path, LLMConfig(model="smollm2-135m"), ThreadPlan())


@pytest.mark.models
def test_the_token_prompt_is_a_stable_prefix_between_compactions(engine):
    from headstart.llm.memory import CompactedHistory, summarise

    conversation = max(load_conversations(), key=lambda c: len(c.turns))
    history = CompactedHistory(200, engine.count_tokens, block_tokens=16)
    system = {"role": "system", "content": "You are a helpful voice assistant."}
    chat, previous, compactions = [system], None, 0
    for user, assistant in conversation.turns[:14]:
        # a turn in progress: its prompt (the held reply's, the incremental prefill's) is this chat + the user's words
        ids = engine.render_prompt(history.select([*chat, {"role": "user", "content": user}]))
        if previous is not None:
            assert ids[: len(previous)] == previous  # exact: the previous turn's chat is a prefix
        chat += [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
        previous = engine.render_prompt(history.select(chat), add_generation_prompt=False)
        plan = history.due(chat)
        if plan is not None:
            messages = history.summary_messages(chat, plan)  # None: requests only, nothing to note
            notes = "" if messages is None else summarise(engine, messages, plan.max_tokens) or "Notes."
            if history.commit(chat, plan, notes):
                compactions += 1
                previous = engine.render_prompt(history.select(chat), add_generation_prompt=False)
    assert compactions >= 1


@pytest.mark.models
def test_a_cancelled_summary_leaves_an_engine_that_answers_exactly(engine):
    from headstart.llm.memory import summarise, summary_messages

    system = [{"role": "system", "content": "You are a helpful voice assistant."}]
    turns = [[{"role": "user", "content": "My name is Ada and my car is on level four."},
              {"role": "assistant", "content": "Nice to meet you, Ada."}]]
    asked = iter(range(100))
    messages = summary_messages(turns)
    assert messages is not None
    assert summarise(engine, messages, 16, cancelled=lambda: next(asked) >= 3) is None
    notes = summarise(engine, messages, 16)
    assert isinstance(notes, str) and notes.strip()
    prompt = engine.render_prompt([*system, *turns[0], {"role": "user", "content": "What is my name?"}])
    after = engine.prefill(prompt)  # the cache holds the summary's tokens: the common prefix only is kept
    engine.reset()
    assert after.argmax() == engine.prefill(prompt).argmax()
    assert float((after - engine.prefill(prompt)).abs().max()) == 0.0


@pytest.mark.models
@pytest.mark.slow
def test_a_small_real_run_reports_every_method(capsys):
    model_path("smollm2-135m")
    code = bench_cli.run_from_args(_args("--model", "smollm2-135m", "--conversations", "memory-28,memory-33",
                                         "--all", "--budgets", "50", "--max-new-tokens", "16", "--json"))
    assert code == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["bench"] == "memory" and result["conversations"] == 2
    methods = {(r["method"], r["budget_pct"]): r for r in result["results"]}
    assert set(methods) == {("full", None), ("window", 50), ("summary", 50)}
    for r in methods.values():
        assert r["total"] == 2 and r["right"] + len(r["failures"]) == 2 and r["probe_ttft_s_median"] > 0
    assert methods["full", None]["between_turn_prefill_tokens_mean"] == 0  # nothing dropped, nothing recomputed
    assert methods["summary", 50]["compactions"] >= 1 and methods["summary", 50]["compaction_cpu_s_median"] > 0
    assert methods["summary", 50]["probe_prompt_tokens_mean"] < methods["full", None]["probe_prompt_tokens_mean"]


@pytest.mark.models
def test_surprisal_pruning_keeps_the_most_informative_phrases_in_order_within_the_cap(engine):
    from headstart.llm.memory import surprisal_prune

    turns = [[{"role": "user", "content": "Hi there, um, I'm Xanthippe Oduya, by the way."},
              {"role": "assistant", "content": "Nice to meet you!"}],
             [{"role": "user", "content": "What's the weather like?"}, {"role": "assistant", "content": "Sunny."}],
             [{"role": "user", "content": "Okay, so, I parked on level 7, row Q."}, {"role": "assistant", "content": "Ok."}]]
    notes = surprisal_prune(engine, turns, 12)
    assert notes and engine.count_tokens(notes) <= 14 and "weather" not in notes  # questions are not notes
    assert "Xanthippe" in notes or "level 7" in notes
    everything = surprisal_prune(engine, turns, 1000)
    assert everything.index("Xanthippe") < everything.index("level 7")  # in their order
    assert surprisal_prune(engine, turns[1:2], 12) == ""
