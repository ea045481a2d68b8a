"""`headstart bench NAME`: one module here per benchmark, each with `add_arguments(parser)` and
`run_from_args(args)`; the benchmark itself is `headstart.bench.NAME` (or the module its `run_from_args`
names), run with the option record its flags are read into. A "-" in NAME is "_" in the modules' names
(`bench ask-back`: ask_back.py)."""

from __future__ import annotations

import argparse
import importlib

BENCHES = {
    "asr": "WER, partial latency, final and end-of-turn delay, false cut-offs, RTF of the listening stage",
    "llm": "TTFT cold vs incremental vs the head start (LiveTurn), decode tok/s per drafter, answer quality",
    "answers": "spoken-answer quality per kind, model and system prompt: content, spoken form, decode speed",
    "tts": "time to first audio of the first clause and RTF per TTS engine",
    "partial": "partial-layer streaming: self-speculative decoding and early exit with a trained proposal head",
    "conversation": "voice-to-voice latency over websockets, baseline vs headstart vs ablations, with plots",
    "stages": "the LLM core's stage costs on CPU or CUDA (random weights, each preset's shapes) and the v2v floor",
    "ask-back": "the ask-back threshold: clean turns asked back (target 0), garbled turns caught, per threshold",
    "memory": "a long conversation at a flat prompt size: full history, turn window, LLM summary compaction",
    "eot": "end of turn by eot-bench's measure: cut-offs at latency budgets, latency at cut-off budgets, per wait policy",
    "tools": "tool matching over 150+ requests, as text or spoken (--spoken): right tool and arguments, false actions (target 0)",
}


def add_benches(parser: argparse.ArgumentParser) -> None:
    """`bench NAME ...` under `parser`: one sub-command per entry of BENCHES."""
    benches = parser.add_subparsers(dest="bench", required=True)
    for name, help_text in BENCHES.items():
        module = importlib.import_module(f"headstart.cli.bench.{name.replace('-', '_')}")
        p = benches.add_parser(name, help=help_text)
        module.add_arguments(p)
        p.set_defaults(func=module.run_from_args)
