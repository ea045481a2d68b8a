"""`headstart mic`: its flags, read into MicOptions (the app: headstart/mic/client.py)."""

from __future__ import annotations

import argparse
import sys

from headstart.cli.options import add_pipeline_arguments, build_config


def add_arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--server", help="websocket URL of a running `headstart serve`, e.g. ws://127.0.0.1:8765/ws")
    where.add_argument("--local", action="store_true", help="run the whole pipeline in this process")
    parser.add_argument("--list-devices", action="store_true", help="list the audio devices and exit")
    parser.add_argument("--input", default=None, help="input device: index or part of its name")
    parser.add_argument("--output", default=None, help="output device: index or part of its name")
    parser.add_argument("--echo", default="auto", choices=["auto", "aec", "gate", "off"],
                        help="echo control: WebRTC AEC (livekit), gate the mic during playback, or off "
                             "(headphones); auto: AEC if installed, else the gate")
    add_pipeline_arguments(parser, "local")


def device(value: str | None) -> int | str | None:
    """A device flag's value: an index ("3") as an int, else the name (or None) as given."""
    return int(value) if value is not None and value.strip().isdigit() else value


def run_from_args(args: argparse.Namespace) -> int:
    """Exit status: 2 without --server or --local, 1 for a MicError (its message on stderr)."""
    from headstart.mic.client import MicError, MicOptions, list_devices, run

    try:
        if args.list_devices:
            print(list_devices())
            return 0
        if not args.server and not args.local:
            print("error: give --server ws://HOST:PORT/ws or --local", file=sys.stderr)
            return 2
        return run(MicOptions(server=args.server, local=build_config(args) if args.local else None,
                              echo=args.echo, input_device=device(args.input), output_device=device(args.output)))
    except MicError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
