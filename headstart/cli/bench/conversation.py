"""`headstart bench conversation`: its flags, read into ConversationBenchOptions and the PipelineConfig the
in-process server starts from (the bench: headstart/bench/conversation/run.py)."""

from __future__ import annotations

import argparse

from headstart.bench.conversation.configs import DEFAULT_CONFIGS
from headstart.bench.conversation.run import DEFAULT_SCENARIOS, REPLY_ASR, SCENARIOS
from headstart.cli.options import (
    add_pipeline_arguments,
    build_config,
    options_from_args,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the `bench conversation` options to `parser`."""
    parser.add_argument("--json", action="store_true", help="print only the JSON line")
    parser.add_argument("--configs", default=",".join(DEFAULT_CONFIGS),
                        help=f"comma-separated configurations (default: all: {','.join(DEFAULT_CONFIGS)})")
    parser.add_argument("--scenarios", default=",".join(DEFAULT_SCENARIOS),
                        help=f"comma-separated subset of {','.join(SCENARIOS)} (default: {','.join(DEFAULT_SCENARIOS)})")
    parser.add_argument("--turns", type=int, default=4, help="recordings per configuration for qa/history (default 4)")
    parser.add_argument("--limit", type=int, default=None, help="use only the first N recordings of the set")
    parser.add_argument("--pause-items", type=int, default=4, help="pause-set items per configuration (default 4)")
    parser.add_argument("--bargein-items", type=int, default=2, help="barge-ins per configuration (default 2)")
    parser.add_argument("--tool-items", type=int, default=4, help="tools scenario: tool requests (a timer, the "
                        "time, arithmetic, a list), each beside an everyday question for the LLM (default 4)")
    parser.add_argument("--sessions", default="1,2,4", help="concurrent session counts to try (default 1,2,4)")
    parser.add_argument("--concurrent-configs", default="headstart",
                        help="configurations run in the concurrent scenario (default headstart)")
    parser.add_argument("--input-dir", default=None, help="your recordings: WAVs + transcripts.tsv "
                        "(header, then file<TAB>text, paths relative to DIR); default: the packaged bench data")
    parser.add_argument("--synthetic", default="espeak", help="TTS engine that speaks everyday questions, "
                        "interleaved with the recordings and labelled synthetic ('none': recordings only; "
                        "default espeak, a voice unlike the reply's)")
    parser.add_argument("--server", default=None, help="drive a running server (ws://host:port/ws) instead of "
                        "starting one; its configuration is its own (reported as 'server')")
    add_pipeline_arguments(parser, head_start=False)
    parser.add_argument("--out", default="bench-conversation", help="folder for the PNG plots and records.json "
                        "(created; default ./bench-conversation)")
    parser.add_argument("--no-plots", action="store_true", help="write no plots")
    parser.add_argument("--max-wait", type=float, default=60.0, help="seconds to wait for a turn's reply")
    parser.add_argument("--seed", type=int, default=0, help="seed of the pause lengths and the noise")
    parser.add_argument("--reply-asr", default=REPLY_ASR, help="ASR preset or folder that transcribes each qa "
                        "reply's received audio after the run, scored against the reply text: the voice's "
                        f"intelligibility in the pipeline ('none': skip; default {REPLY_ASR})")
    parser.add_argument("--simulate", action="store_true",
                        help="quick run: the pipeline in-process on a virtual clock that skips idle waits while "
                        "compute runs at its real cost (every scenario; output marked simulated)")


def run_from_args(args: argparse.Namespace) -> int:
    from headstart.bench.conversation.run import ConversationBenchOptions, main

    return main(options_from_args(ConversationBenchOptions, args, pipeline=build_config(args)))
