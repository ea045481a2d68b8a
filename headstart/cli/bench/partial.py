"""`headstart bench partial`: its flags, read into PartialBenchOptions (the bench: headstart/bench/partial.py)."""

from __future__ import annotations

import argparse

from headstart.cli.options import add_threads_argument, options_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--exit-layer", type=int, default=None, help="default: n/4 (the head must be trained)")
    parser.add_argument("--head", default=None, help="head file (default: where train-proposal saves it)")
    parser.add_argument("--drafter", choices=["head", "eagle"], default="head",
                        help="head: layers 1..L + a proposal head; eagle: the EAGLE-style network on exit layer L "
                             "(llm/eagle.py, trained by train-eagle; runs on the int8 default path)")
    parser.add_argument("--eagle", default=None, help="EAGLE network file (default: where train-eagle saves it)")
    parser.add_argument("--min-confidence", type=float, default=0.0, help="eagle: stop drafting below this top probability")
    parser.add_argument("--system-prompt", default=None,
                        help="eagle: the system prompt of the decode prompts (default: LLMConfig's; the network "
                             "drafts best after the one it was trained with, train-eagle --system-prompt)")
    parser.add_argument("--verify-costs", action="store_true",
                        help="instead: the cost of a verify of k = 1..9 positions, of layers 1..L and of one EAGLE "
                             "step against one decode step, and the speed-up bound (bench/verify_costs.py)")
    parser.add_argument("--k", type=int, default=3, help="draft tokens per verify step")
    parser.add_argument("--decode-tokens", type=int, default=32)
    parser.add_argument("--prompts", type=int, default=3, help="how many of the bench's decode prompts (1-3)")
    parser.add_argument("--thresholds", default="0.5,0.7,0.9", help="early-exit confidence thresholds")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    from headstart.llm.precision import DTYPE_CHOICES, QUANTIZE_CHOICES

    parser.add_argument("--llm-dtype", "--dtype", dest="dtype", choices=DTYPE_CHOICES, default="float32")
    parser.add_argument("--llm-quantize", dest="quantize", choices=QUANTIZE_CHOICES, default=None,
                        help="int8 Linear layers for the model (default none for --drafter head: the proposal head "
                             "was trained on float32 features; auto, the int8 default path, for --drafter eagle and "
                             "--verify-costs)")
    add_threads_argument(parser)
    parser.add_argument("--history-turns", type=int, default=0,
                        help="instead: the KV-cache memory curve of an N-turn chat, bounded vs unbounded "
                             "(tokenizer only, no forward; the engine's cache holds exactly the rendered prompt)")
    parser.add_argument("--max-history-tokens", type=int, default=512, help="budget for --history-turns")
    parser.add_argument("--json", action="store_true", help="print only the JSON line")


def run_from_args(args: argparse.Namespace) -> int:
    from headstart.bench.partial import PartialBenchOptions, main

    return main(options_from_args(PartialBenchOptions, args))
