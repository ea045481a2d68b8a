"""`headstart serve`: its flags, read into a ServerConfig and a PipelineConfig (the server: headstart/server/server.py)."""

from __future__ import annotations

import argparse
import os
import sys

from headstart.cli.options import add_pipeline_arguments, build_config
from headstart.server.server import ServerConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    d = ServerConfig()
    parser.add_argument("--host", default=d.host, help="address to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=d.port)
    parser.add_argument("--origin", action="append", default=[], dest="origins",
                        help="a browser Origin allowed to connect (repeatable; default: localhost pages)")
    parser.add_argument("--token", default=None, help="require this bearer token (default: $HEADSTART_TOKEN if set)")
    parser.add_argument("--max-sessions", type=int, default=d.max_sessions)
    parser.add_argument("--max-message-bytes", type=int, default=d.max_message_bytes)
    parser.add_argument("--drain-s", type=float, default=d.drain_s,
                        help="on SIGTERM or Ctrl-C, how long replies in progress may take to finish before every "
                        f"connection closes with 1001 (seconds, default {d.drain_s:g}; a second signal stops at once)")
    add_pipeline_arguments(parser, "server")


def server_config_from_args(args: argparse.Namespace) -> ServerConfig | str:
    """The ServerConfig the flags ask for, or why they cannot serve (an empty token, a bad limit)."""
    token = args.token if args.token is not None else os.environ.get("HEADSTART_TOKEN")
    if token is not None and not token.strip():
        # `--token "$T"` with T unset would otherwise let every client in
        source = "--token" if args.token is not None else "$HEADSTART_TOKEN"
        return (f"{source} is empty: give a non-empty bearer token, or leave it out (and "
                "HEADSTART_TOKEN unset) to serve without one")
    if args.max_sessions < 1 or args.max_message_bytes < 1024:
        return "--max-sessions must be >= 1 and --max-message-bytes >= 1024"
    if not 0 <= args.drain_s < float("inf"):  # NaN too
        return "--drain-s must be a finite number of seconds >= 0"
    return ServerConfig(host=args.host, port=args.port, allowed_origins=tuple(args.origins), token=token,
                        max_sessions=args.max_sessions, max_message_bytes=args.max_message_bytes,
                        drain_s=args.drain_s)


def run_from_args(args: argparse.Namespace) -> int:
    """Exit status: 2 for bad flags (before any model loads), 1 when the models cannot load."""
    from headstart.models.store import ModelError
    from headstart.server.server import serve
    from headstart.session.session import Components
    from headstart.tts.base import TTSError

    config = server_config_from_args(args)
    if isinstance(config, str):
        print(f"error: {config}", file=sys.stderr)
        return 2
    try:
        components = Components.load(build_config(args), log=lambda msg: print(msg, flush=True))
    except (ModelError, TTSError, FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        serve(components, config)
    finally:
        components.close()
    return 0
