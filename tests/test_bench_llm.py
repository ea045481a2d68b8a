"""`headstart bench llm`: argument errors, an unknown model, the key facts of the quality set, and
(slow) one small end-to-end run on SmolLM2 that prints the JSON line with the issue's keys."""

from __future__ import annotations

import argparse
import json
import re

import pytest

from headstart.bench import llm as bench
from headstart.cli.bench import llm as bench_cli
from tests.prepared import model_path

KEYS = {"ttft_cold_s", "ttft_incremental_s", "ttft_head_start_s", "ttft_reduction", "decode_tok_per_s",
        "acceptance_rate", "mean_accepted", "speedup", "exact", "model", "threads"}


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    bench_cli.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_bad_arguments_and_unknown_models_are_clear_errors(capsys):
    assert bench_cli.run_from_args(_args("--threads", "0")) == 2
    assert bench_cli.run_from_args(_args("--model", "no-such-model-xyz", "--json")) == 1
    assert "no-such-model-xyz" in capsys.readouterr().err


def test_key_facts_match_right_answers_and_not_wrong_ones():
    right = ["Paris.", "It is 12.", "Seven days.", "Earth", "Blue.", "Eight legs.", "William Shakespeare.",
             "The Pacific Ocean.", "At 0 degrees.", "Portuguese."]
    wrong = ["Lyon.", "It is 13.", "Six days.", "Mars", "Green.", "Six legs.", "Marlowe.",
             "The Atlantic.", "At 100 degrees.", "Spanish."]
    for (question, fact), good, bad in zip(bench.QUESTIONS, right, wrong):
        assert re.search(fact, good.lower()), question
        assert not re.search(fact, bad.lower()), question


@pytest.mark.slow
def test_a_small_run_prints_the_json_line(capsys):
    model_path("smollm2-135m")  # or a skip: not prepared
    code = bench_cli.run_from_args(_args("--model", "smollm2-135m", "--repeats", "1", "--decode-tokens", "6",
                                     "--no-quality", "--json"))
    assert code == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert KEYS <= set(result)
    assert result["ttft_incremental_s"] < result["ttft_cold_s"]
    # the session's path (LiveTurn on the llm executor) keeps the incremental prefill's gain
    assert result["ttft_head_start_s"] < result["ttft_cold_s"]
    assert set(result["ttft_reduction"]) == {"incremental", "head_start"}
    # prompt lookup always; a self_speculative row too where a proposal head is trained for the model
    # (`headstart llm train-proposal`: it depends on this machine's cache); every method exact
    assert result["exact"]["prompt_lookup"] is True
    assert set(result["exact"]) <= {"prompt_lookup", "self_speculative"} and all(result["exact"].values())
    assert result["quantize"] == "int8"  # the CPU default for a float32 model


def test_first_divergence_index():
    assert bench.first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert bench.first_divergence([1, 2, 3], [1, 5, 3]) == 1
    assert bench.first_divergence([1, 2, 3], [9]) == 0
    assert bench.first_divergence([1, 2, 3], [1, 2]) == 2  # one ended (EOS) earlier
    assert bench.first_divergence([], []) is None


def test_divergence_option_parses():
    args = _args("--divergence", "--divergence-tokens", "5", "--quantize", "none")
    assert args.divergence and args.divergence_tokens == 5 and args.quantize == "none"
    assert bench_cli.run_from_args(_args("--divergence-tokens", "0")) == 2
