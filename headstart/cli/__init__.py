"""The `headstart` command line: `models list | prepare NAME... | path NAME`, `demo [WAV ...]`, `serve`, `mic`,
`llm train-proposal | train-eou`, `bench NAME`."""

# argparse lives in this package and only here: each command's module declares its flags and reads them
# into the configs and option records the layers below take (demo.py, serve.py, mic.py, train.py,
# bench/); the flags several commands share are declared once, in options.py.

from __future__ import annotations

import argparse
import sys


def _models(args: argparse.Namespace) -> int:
    from headstart.models import catalog, prepare, store

    if args.action == "list":
        from rich.console import Console
        from rich.table import Table

        defaults = catalog.default_presets()
        table = Table("name", "role", "state", "default", "what it is")
        for preset in catalog.PRESETS.values():
            table.add_row(
                preset.name, preset.role, store.status(preset.name),
                "yes" if defaults.get(preset.role) == preset.name else "", f"{preset.description} [{preset.license}]",
            )
        Console().print(table)
        for role, name in defaults.items():
            if name not in catalog.PRESETS:
                print(f"default {catalog.ROLE_NAMES.get(role, role)}: {name} (built into its package: nothing to prepare)")
        print(f"cache: {store.cache_dir()}")
        return 0
    if not args.names:
        print(f"headstart models {args.action}: name a model", file=sys.stderr)
        return 2
    try:
        for name in args.names:
            if args.action == "prepare":
                from headstart.cli.model_checks import check_prepared

                prepare.prepare(name, force=args.force, check=check_prepared)
            else:
                print(store.resolve_model(name))
    except store.ModelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="headstart", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    m = sub.add_parser("models", help="list, prepare or locate models")
    m.add_argument("action", choices=["list", "prepare", "path"])
    m.add_argument("names", nargs="*", help="preset names (see `models list`) or hub ids")
    m.add_argument("--force", action="store_true", help="prepare again even if ready")
    m.set_defaults(func=_models)

    from headstart.cli import bench, demo, mic, serve, train

    d = sub.add_parser("demo", help="answer recorded utterances by voice, with a latency table")
    demo.add_arguments(d)
    d.set_defaults(func=demo.run_from_args)

    s = sub.add_parser("serve", help="serve the voice assistant over websockets (/ws) and the web page")
    serve.add_arguments(s)
    s.set_defaults(func=serve.run_from_args)

    mc = sub.add_parser("mic", help="talk through this computer's microphone and speakers (--server URL or --local)")
    mic.add_arguments(mc)
    mc.set_defaults(func=mic.run_from_args)

    llm = sub.add_parser("llm", help="LLM tools: train-proposal (a proposal head for self-speculative decoding), train-eou")
    train.add_trainers(llm)

    b = sub.add_parser("bench", help="benchmarks: a table, then one JSON line")
    bench.add_benches(b)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)
