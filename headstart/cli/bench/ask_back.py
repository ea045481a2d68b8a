"""`headstart bench ask-back`: its flags, read into AskBackBenchOptions (the bench: headstart/bench/ask_back.py)."""

from __future__ import annotations

import argparse

from headstart.bench.ask_back import VOICES
from headstart.cli.options import add_threads_argument, options_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the `bench ask-back` options to `parser`."""
    parser.add_argument("--asr", default=None, help="ASR model (preset, folder or hub id; default: ASRConfig.model, the session's)")
    parser.add_argument("--limit", type=int, default=None,
                        help="only the first N questions (in each voice) and the N shortest recordings (quick runs)")
    parser.add_argument("--voices", default=",".join(VOICES),
                        help=f"espeak-ng voices of the synthetic turns, comma-separated (default: {','.join(VOICES)}; '' for none)")
    add_threads_argument(parser, "the ASR's CPU threads (ThreadPlan.asr_threads)")
    parser.add_argument("--json", action="store_true", help="print only the JSON line")


def run_from_args(args: argparse.Namespace) -> int:
    from headstart.bench.ask_back import AskBackBenchOptions, main

    return main(options_from_args(AskBackBenchOptions, args))
