"""`headstart bench tools`: its flags, read into ToolsBenchOptions (the bench: headstart/bench/tools.py)."""

from __future__ import annotations

import argparse

from headstart.cli.options import options_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the `bench tools` options to `parser`."""
    parser.add_argument("--small", action="store_true", help="every fourth request (quick)")
    parser.add_argument("--json", action="store_true", help="print only the JSON line")
    parser.add_argument("--spoken", action="store_true", help="speak each request (--voices) and route what the "
                        "default recogniser hears, as a session's final pass does: adds the transcript's WER, "
                        "the spoken result and ask-backs")
    parser.add_argument("--voices", default="hibari,piper-joe",
                        help="--spoken: comma-separated TTS engines that take turns speaking the requests "
                        "(default hibari,piper-joe)")
    parser.add_argument("--each-voice", action="store_true", help="--spoken: every request in every voice")
    parser.add_argument("--asr", default=None, help="--spoken: ASR preset or folder (default: the session's)")
    parser.add_argument("--threads", type=int, default=1, help="--spoken: CPU threads of the ASR and TTS (default 1)")


def run_from_args(args: argparse.Namespace) -> int:
    from headstart.bench.tools import ToolsBenchOptions, main

    options = options_from_args(ToolsBenchOptions, args)
    if options.spoken:
        from headstart.bench.tools_spoken import main as spoken_main

        return spoken_main(options)
    return main(options)
