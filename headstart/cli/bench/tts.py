"""`headstart bench tts`: its flags, read into TTSBenchOptions (the bench: headstart/bench/tts.py)."""

from __future__ import annotations

import argparse

from headstart.bench.tts import ENGINES
from headstart.cli.options import add_threads_argument, options_from_args
from headstart.config import TTSConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the `bench tts` options to `parser`."""
    defaults = TTSConfig()
    parser.add_argument("--json", action="store_true", help="print only the JSON line")
    parser.add_argument(
        "--engines", default=",".join(ENGINES), help=f"comma-separated subset of {','.join(ENGINES)} (default: all; --tts's piper-joe and espeak-ng also do)"
    )
    parser.add_argument("--runs", type=int, default=5, help="timed runs per engine (median reported)")
    add_threads_argument(parser, "compute threads per engine (ThreadPlan.tts_threads)")
    parser.add_argument("--text", default=None, help="one reply to speak (default: the built-in set of replies)")
    parser.add_argument("--tpot-s", type=float, default=0.1, help="seconds per LLM token in the stream replay")
    parser.add_argument("--first-chunk-min-words", type=int, default=defaults.first_chunk_min_words,
                        help="TTSConfig.first_chunk_min_words for the chunker")
    parser.add_argument("--first-chunk-max-words", type=int, default=defaults.first_chunk_max_words,
                        help="TTSConfig.first_chunk_max_words for the chunker")
    parser.add_argument("--compare-policies", default=None,
                        help="also time other first-chunk policies, interleaved: MIN/MAX words or off, "
                        "comma-separated (e.g. 4/8,off)")
    parser.add_argument("--coqui-model", default=None, help="a coqui checkpoint (default: tiny random-weight VITS)")
    parser.add_argument("--coqui-config", default=None, help="its config.json (default: next to the checkpoint)")
    parser.add_argument("--coqui-python", default=None, help="the coqui venv's python (default: .venv-coqui)")


def run_from_args(args: argparse.Namespace) -> int:
    from headstart.bench.tts import TTSBenchOptions, main

    return main(options_from_args(TTSBenchOptions, args))
