"""The `headstart` command line: `models list | prepare NAME... | path NAME`, `demo [WAV ...]`, `serve`, `mic`,
`llm train-proposal | train-eou`, `bench NAME`."""

from __future__ import annotations

import argparse
import importlib
import sys

# `headstart bench NAME`: modules in headstart/bench/ with add_arguments(parser) and run_from_args(args)
# (`headstart.bench.NAME`, or the module named in BENCH_MODULES).
BENCH_MODULES = {"conversation": "headstart.bench.conversation.run"}
BENCHES = {
    "asr": "WER, partial latency, final and end-of-turn delay, false cut-offs, RTF of the listening stage",
    "llm": "TTFT cold vs incremental vs the head start (LiveTurn), decode tok/s per drafter, answer quality",
    "answers": "spoken-answer quality per kind, model and system prompt: content, spoken form, decode speed",
    "tts": "time to first audio of the first clause and RTF per TTS engine",
    "partial": "partial-layer streaming: self-speculative decoding and early exit with a trained proposal head",
    "conversation": "voice-to-voice latency over websockets, baseline vs headstart vs ablations, with plots",
    "stages": "the LLM core's stage costs on CPU or CUDA (random weights, each preset's shapes) and the v2v floor",
    "tools": "tool matching over 150+ text requests: right tool and arguments, false actions (target 0)",
}


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

    from headstart.cli import demo

    d = sub.add_parser("demo", help="answer recorded utterances by voice, with a latency table")
    demo.add_arguments(d)
    d.set_defaults(func=demo.run_from_args)

    from headstart.server import server

    s = sub.add_parser("serve", help="serve the voice assistant over websockets (/ws) and the web page")
    server.add_arguments(s)
    s.set_defaults(func=server.run_from_args)

    from headstart.mic import client as mic

    mc = sub.add_parser("mic", help="talk through this computer's microphone and speakers (--server URL or --local)")
    mic.add_arguments(mc)
    mc.set_defaults(func=mic.run_from_args)

    from headstart.training import train_eou, train_proposal

    llm = sub.add_parser("llm", help="LLM tools: train-proposal (a proposal head for self-speculative decoding), train-eou")
    llm_sub = llm.add_subparsers(dest="llm_command", required=True)
    tp = llm_sub.add_parser("train-proposal", help="distil an early-exit proposal head from the model's own replies")
    train_proposal.add_arguments(tp)
    tp.set_defaults(func=train_proposal.run_from_args)
    te = llm_sub.add_parser("train-eou", help="train the EOU head (end-of-utterance probe on the LLM's last hidden state)")
    train_eou.add_arguments(te)
    te.set_defaults(func=train_eou.run_from_args)
    from headstart.training import train_eagle

    tg = llm_sub.add_parser("train-eagle", help="train the EAGLE-style proposal network on an early exit layer")
    train_eagle.add_arguments(tg)
    tg.set_defaults(func=train_eagle.run_from_args)

    b = sub.add_parser("bench", help="benchmarks: a table, then one JSON line")
    benches = b.add_subparsers(dest="bench", required=True)
    for name, help_text in BENCHES.items():
        module = importlib.import_module(BENCH_MODULES.get(name, f"headstart.bench.{name}"))
        p = benches.add_parser(name, help=help_text)
        module.add_arguments(p)
        p.set_defaults(func=module.run_from_args)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)
