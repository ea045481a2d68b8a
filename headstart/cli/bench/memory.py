"""`headstart bench memory`: its flags, read into MemoryBenchOptions (the bench: headstart/bench/memory.py)."""

from __future__ import annotations

import argparse

from headstart.bench.answers import HALVES
from headstart.bench.memory import DEFAULT_METHODS, METHODS
from headstart.cli.options import add_llm_precision_arguments, add_threads_argument, options_from_args
from headstart.config import LLMConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default=LLMConfig().model,
                        help=f"LLM preset, folder or prepared hub id (default {LLMConfig().model})")
    parser.add_argument("--methods", default=",".join(DEFAULT_METHODS),
                        help=f"comma-separated of {','.join(METHODS)}: full (the whole history), window (whole old turns "
                        "dropped), summary (old turns compacted into notes by the LLM), selective (the user's statements "
                        f"pruned to their most surprising phrases, no generation); default {','.join(DEFAULT_METHODS)}")
    parser.add_argument("--budgets", default="25,50,75",
                        help="history budgets in percent of each conversation's full history (default 25,50,75)")
    parser.add_argument("--half", choices=HALVES, default="B",
                        help="the conversations of one half (A: ids ending in an odd number, for tuning; B: even, the "
                        "report half; default B)")
    parser.add_argument("--all", dest="half", action="store_const", const=None, help="both halves")
    parser.add_argument("--limit", type=int, default=None, help="at most this many conversations")
    parser.add_argument("--conversations", default=None, help="comma-separated conversation ids")
    parser.add_argument("--items", default=None, help="memory data file (default: the packaged memory.json)")
    parser.add_argument("--instruction", default=None,
                        help="the summariser's instruction, with {lines} where the user's statements go (text or "
                        "file:PATH; default llm/memory.py SUMMARY_INSTRUCTION)")
    parser.add_argument("--max-new-tokens", type=int, default=LLMConfig().max_new_tokens, help="the probe reply's hard limit")
    add_threads_argument(parser, "torch threads")
    add_llm_precision_arguments(parser, bench=True)
    parser.add_argument("--speculative", choices=["none", "prompt_lookup"], default=LLMConfig().speculative,
                        help="the session's exact speculative decoder (the text is plain greedy's either way)")
    parser.add_argument("--all-answers", action="store_true", help="print every answer and note, not only failures")
    parser.add_argument("--json", action="store_true", help="print only the JSON line")


def run_from_args(args: argparse.Namespace) -> int:
    from headstart.bench.memory import MemoryBenchOptions, main

    return main(options_from_args(MemoryBenchOptions, args))
