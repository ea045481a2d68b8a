"""`headstart bench llm`: its flags, read into LLMBenchOptions (the bench: headstart/bench/llm.py) or, with
`--llm openai://HOST:PORT/MODEL`, RemoteLLMBenchOptions (headstart/bench/llm_remote.py)."""

from __future__ import annotations

import argparse

from headstart.cli.options import (
    add_llm_precision_arguments,
    add_threads_argument,
    options_from_args,
)
from headstart.config import LLMConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # the remote-only options: --llm openai://HOST:PORT/MODEL measures a remote engine (bench/llm_remote.py)
    parser.add_argument("--llm", default=None, metavar="openai://HOST:PORT/MODEL",
                        help="measure a remote OpenAI-compatible engine instead of a local model "
                             "(API key: $HEADSTART_OPENAI_API_KEY or $OPENAI_API_KEY)")
    parser.add_argument("--lead-ms", type=float, default=300.0,
                        help="with --llm: how long before the end of turn the preemptive request starts")
    parser.add_argument("--model", default=LLMConfig().model, help="LLM preset, folder or prepared hub id")
    parser.add_argument("--draft", default=None,
                        help="draft model for speculative decoding (default: the known pair's draft, if any; "
                             "'none' to skip)")
    add_threads_argument(parser, "torch threads")
    add_llm_precision_arguments(parser, bench=True)
    parser.add_argument("--draft-quantize", choices=["auto", "int8", "none"], default="auto",
                        help="quantise only the draft model (LLMConfig.draft_quantize; auto: int8 for an fp32 "
                             "drafter on CPU); the output stays exact")
    parser.add_argument("--decode-tokens", type=int, default=48, help="tokens per decode measurement")
    parser.add_argument("--repeats", type=int, default=3, help="TTFT repeats (median)")
    parser.add_argument("--speculate-k", type=int, default=None, help="draft length k (default: 4 lookup, 3 model)")
    parser.add_argument("--no-quality", action="store_true", help="skip the answer-quality questions")
    parser.add_argument("--divergence", action="store_true",
                        help="also load the model in float32 (reference) and bfloat16 and report, per short "
                             "prompt, the first greedy token where bf16 (and the int8 engine) diverge from "
                             "float32 (bf16 is ~60x slower on an AVX2-only CPU: use a small model)")
    parser.add_argument("--divergence-tokens", type=int, default=12, help="greedy tokens per divergence prompt")
    parser.add_argument("--json", action="store_true", help="print only the JSON line")


def run_from_args(args: argparse.Namespace) -> int:
    if args.llm:
        from headstart.bench.llm_remote import RemoteLLMBenchOptions
        from headstart.bench.llm_remote import main as remote_main

        return remote_main(options_from_args(RemoteLLMBenchOptions, args))
    from headstart.bench.llm import LLMBenchOptions, main

    return main(options_from_args(LLMBenchOptions, args))
