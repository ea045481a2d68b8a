"""The candidate system prompts of `headstart bench answers` against the bench items (no prompt may copy
or closely paraphrase what it is scored on), and (slow) the per-turn TTFT that a run reports beside
the system prompt's one-off session prefill."""

from __future__ import annotations

import argparse
import json

import pytest

from headstart.bench.answers import PROMPTS, item_overlap, load_items
from headstart.cli.bench import answers as bench_cli
from headstart.config import LLMConfig
from tests.prepared import model_path


def test_no_candidate_prompt_holds_a_bench_item():
    items = load_items()
    assert {name: item_overlap(text, items) for name, text in PROMPTS.items()} == dict.fromkeys(PROMPTS)
    assert item_overlap(LLMConfig().system_prompt, items) is None


def test_a_prompt_that_copies_an_item_is_caught_but_a_shared_template_is_not():
    items = load_items()
    copied = PROMPTS["fewshot"] + '\nUser: "Which animal is called the king of the jungle?"\nheadstart: "The lion."'
    assert item_overlap(copied, items) == "fact-12: which animal is called the"
    # a reworded question two words away from an item is caught too
    assert item_overlap("User: How many sides does a square have?", items) == "fact-10: how many sides does a"
    # the same question shape about something else is not an item
    assert item_overlap('User: "What\'s the capital of Canada?" headstart: "Ottawa."', items) is None


NAMES = [
    "current", "previous", "rules", "examples", "short", "canned", "canned-ask", "short-ask", "canned-greet",
    "canned-ask-first", "canned-examples", "canned-tell", "canned-news", "tellmore-first", "canned-tell-guess",
    "fewshot", "examples-rules", "examples-canned", "if-then", "react-pairs", "turn-kinds", "canned-commands",
    "news-first", "canned-react", "verb-rule", "react-after", "react-first", "react-first-plain",
    "react-first-pairs", "react-sandwich", "talk-only-identity", "react-first-never", "identity-news",
    "identity-ask-first", "identity-plain", "identity-pairs", "identity-verb", "identity-twice",
    "identity-twice-ask", "identity-twice-never", "identity-twice-generic", "identity-not-request",
]


def test_every_candidate_prompt_loads_from_the_data_file():
    """The prompts live in bench/data/answer_prompts.toml: every name loads, in the --help order, as a
    non-empty text; "current" and "canned-examples" are LLMConfig's default system prompt, no other is."""
    from headstart.bench.answer_prompts import load_prompts

    prompts = load_prompts()
    assert list(prompts) == NAMES and list(PROMPTS) == NAMES and dict(PROMPTS) == prompts
    assert all(isinstance(text, str) and text == text.strip() and text for text in prompts.values())
    default = LLMConfig().system_prompt
    assert [name for name, text in prompts.items() if text == default] == ["current", "canned-examples"]
    # line-ending backslashes join the file's lines; the prompts' own line breaks stay
    assert "\\" not in "".join(prompts.values()) and prompts["examples"].count("\n") == 13
    assert prompts["previous"] == ("You are headstart, a friendly voice assistant. Your answers are spoken aloud, so "
                                   "reply in one or two short, plain sentences, without lists, markdown or emoji.")


@pytest.mark.parametrize("toml, message", [
    ("[a]\ntext = 'x'\ndefault = true\n", "either"),
    ("[a]\n", "either"),
    ("[a]\ntext = ' '\n", "non-empty"),
    ("[a]\ntext = 'x'\nnote = 'y'\n", "either"),
    ("a = 'x'\n", "not a"),
    ("[a\n", "not TOML"),
])
def test_a_malformed_prompt_file_is_named(toml, message):
    from headstart.bench.answer_prompts import load_prompts

    with pytest.raises(ValueError, match=message):
        load_prompts(toml)


@pytest.mark.slow
def test_a_run_reports_the_turn_ttft_with_the_system_prompt_cached(capsys):
    model_path("smollm2-135m")  # or a skip: not prepared
    parser = argparse.ArgumentParser()
    bench_cli.add_arguments(parser)
    args = parser.parse_args(["--model", "smollm2-135m", "--kinds", "fact", "--limit", "1", "--prompt", "previous",
                              "--prompt", "fewshot", "--max-new-tokens", "8", "--json"])
    assert bench_cli.run_from_args(args) == 0
    short, long = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["runs"]
    assert long["session_prefill_tokens"] > 3 * short["session_prefill_tokens"]
    # seconds to a turn's first token once the session's prefix is cached, for each prompt
    assert 0 < short["turn_ttft_s"] < 5 and 0 < long["turn_ttft_s"] < 5
