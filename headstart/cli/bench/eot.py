"""`headstart bench eot`: its flags, read into EotBenchOptions (the bench: headstart/bench/eot.py)."""

from __future__ import annotations

import argparse

from headstart.cli.options import options_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the `bench eot` options to `parser`."""
    parser.add_argument("--traces", default=None,
                        help="the trace file to score (default: the committed headstart/bench/data/eot_traces.json)")
    parser.add_argument("--rebuild", default=None, metavar="FILE",
                        help="first score every span again with the default models (ASR, LLM head, Smart Turn) "
                             "and write the traces to FILE (~15-30 min on 2 cores), then score it")
    parser.add_argument("--limit", type=int, default=None, help="with --rebuild: only the first N recordings")
    parser.add_argument("--grid", choices=("full", "small"), default="full",
                        help="the policy sweep's grid (small: a few thresholds and delays, for quick checks)")
    parser.add_argument("--seed", type=int, default=0, help="the pause set's and the inserted pauses' seed (with --rebuild)")
    parser.add_argument("--json", action="store_true", help="print only the JSON line")


def run_from_args(args: argparse.Namespace) -> int:
    from headstart.bench.eot import EotBenchOptions, main

    return main(options_from_args(EotBenchOptions, args))
