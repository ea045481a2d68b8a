"""`headstart bench stages`: its flags, read into StagesBenchOptions (the bench: headstart/bench/stages.py).

Also `python -m headstart.cli.bench.stages ...`, the same command without the rest of the command line:
it imports neither the server nor the audio stack (a GPU machine with only torch and transformers)."""

from __future__ import annotations

import argparse
import sys

from headstart.bench.stages import DEFAULT_PRESETS, DEVICES, FLOOR_DATA
from headstart.cli.options import add_threads_argument, options_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default="auto", choices=DEVICES,
                        help="auto: CUDA when torch sees a device, else CPU (default); cuda fails clearly without one")
    parser.add_argument("--presets", default=",".join(DEFAULT_PRESETS),
                        help="comma-separated LLM presets (their packaged configs; random weights)")
    parser.add_argument("--dtype", default="auto", choices=("auto", "float32", "bfloat16", "float16"),
                        help="auto: float32 + int8 layers on CPU, bfloat16 on CUDA (LLMConfig.dtype)")
    parser.add_argument("--quantize", default="auto", choices=("auto", "int8", "none"),
                        help="LLMConfig.quantize (auto: int8 where the model runs in float32 on a CPU)")
    parser.add_argument("--repeats", type=int, default=10, help="timed rounds per stage (min and median)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed rounds first")
    add_threads_argument(parser, "torch CPU threads")
    parser.add_argument("--prompt-tokens", type=int, default=300)
    parser.add_argument("--chunk-tokens", type=int, default=8)
    parser.add_argument("--ks", default="2,4,8", help="verify sizes, comma-separated")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--floor-data", default=None, help=f"the non-LLM stage figures (default {FLOOR_DATA})")
    parser.add_argument("--json", action="store_true", help="print only the JSON line")


def run_from_args(args: argparse.Namespace) -> int:
    from headstart.bench.stages import StagesBenchOptions, main

    return main(options_from_args(StagesBenchOptions, args))


def main(argv: list[str] | None = None) -> int:
    """`python -m headstart.cli.bench.stages ...`: the same as `headstart bench stages ...`."""
    from headstart.bench import stages

    parser = argparse.ArgumentParser(prog="python -m headstart.cli.bench.stages",
                                     description=(stages.__doc__ or "").split("\n")[0])
    add_arguments(parser)
    return run_from_args(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
