"""`headstart bench tools`: its flags, read into ToolsBenchOptions (the bench: headstart/bench/tools.py)."""

from __future__ import annotations

import argparse

from headstart.cli.options import options_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the `bench tools` options to `parser`."""
    parser.add_argument("--small", action="store_true", help="every fourth request (quick)")
    parser.add_argument("--json", action="store_true", help="print only the JSON line")


def run_from_args(args: argparse.Namespace) -> int:
    from headstart.bench.tools import ToolsBenchOptions, main

    return main(options_from_args(ToolsBenchOptions, args))
