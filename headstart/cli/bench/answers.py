"""`headstart bench answers`: its flags, read into AnswersBenchOptions (the bench: headstart/bench/answers.py)."""

from __future__ import annotations

import argparse

from headstart.bench.answer_prompts import PROMPTS
from headstart.bench.answers import HALVES, HISTORY_MODES, KINDS
from headstart.cli.options import (
    add_llm_precision_arguments,
    add_threads_argument,
    add_tools_argument,
    options_from_args,
)
from headstart.config import LLMConfig


def soft_budget(value: str) -> int | None:
    """A `--soft-max-tokens` value: an int >= 1, or None for 'none'."""
    if value.lower() == "none":
        return None
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError("must be >= 1 or 'none'")
    return number


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", action="append", default=None,
                        help=f"LLM preset, folder or prepared hub id; repeat for several (default {LLMConfig().model})")
    parser.add_argument("--prompt", action="append", default=None,
                        help=f"system prompt: {', '.join(PROMPTS)} or file:PATH; repeat for several (default current, "
                             "LLMConfig.system_prompt)")
    parser.add_argument("--soft-max-tokens", type=soft_budget, action="append", default=None,
                        help=f"soft token budget (an int or 'none'); repeat for several (default "
                             f"{LLMConfig().soft_max_tokens}, LLMConfig.soft_max_tokens)")
    parser.add_argument("--max-new-tokens", type=int, default=LLMConfig().max_new_tokens, help="hard token limit")
    parser.add_argument("--kinds", default=",".join(KINDS),
                        help=f"comma-separated kinds (default all: {','.join(KINDS)})")
    parser.add_argument("--limit", type=int, default=None, help="at most this many items per kind")
    parser.add_argument("--half", choices=HALVES, default=None,
                        help="only the items of one half (A: ids ending in an odd number, B: even; default both)")
    parser.add_argument("--items", default=None, help="answers data file (default: the packaged answers.json)")
    add_threads_argument(parser, "torch threads")
    add_llm_precision_arguments(parser, bench=True)
    parser.add_argument("--speculative", choices=["none", "prompt_lookup"], default=LLMConfig().speculative,
                        help="the session's exact speculative decoder (the text is plain greedy's either way)")
    parser.add_argument("--history", choices=HISTORY_MODES, action="append", default=None,
                        help="earlier turns of a conversation as the session's prompt holds them (prompt: the "
                             "turns a fixed reply such as the refusal answered left out) or all of them (full); "
                             "repeat for both (default prompt)")
    add_tools_argument(parser)  # as `headstart serve` takes it: the matcher first, the LLM for the rest
    parser.add_argument("--all-answers", action="store_true", help="print every answer, not only the failures")
    parser.add_argument("--json", action="store_true", help="print only the JSON line")


def run_from_args(args: argparse.Namespace) -> int:
    from headstart.bench.answers import AnswersBenchOptions, main

    return main(options_from_args(AnswersBenchOptions, args))
