"""`headstart bench tts [--json]`: time to first audio of the first clause, and RTF, per TTS engine.

For each engine the reply text is cut by the real ClauseChunker and normalised as in a session; then,
`--runs` times:
  - TTFA: wall time from calling `synthesize(first clause)` to its first audio array;
  - RTF: wall time to synthesise every chunk of the reply / seconds of audio produced.
The medians are reported. Engines load (and warm up) before timing; their load time is shown apart.

coqui has no real checkpoint here: without `--coqui-model` a tiny VITS with random weights is built in
the coqui venv (`make coqui-env`) and timed; its row is marked `"random_weights": true` (its speed says
nothing about a real model's, only about the worker path's overhead).

The last line printed is one JSON object:
    {"bench": "tts", "engines": {"piper": {"ttfa_s", "rtf", ...}, "coqui": {..., "random_weights": true},
     "espeak": {...}, "hibari": {...}}, "targets": {...}, ...}
An engine that is not available gets {"skipped": "<why>"} instead of figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

ENGINES = ("piper", "coqui", "espeak", "hibari")
DEFAULT_TEXT = (
    "Sure, here is the plan for today. First, we meet Dr. Lee at 9:30 am, and lunch costs about $12.50. "
    "After that we walk to the park by the river, and we should be home by six."
)
TARGETS = {"piper": {"ttfa_s": 0.2, "rtf": 0.15}}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the `bench tts` options to `parser`."""
    parser.add_argument("--json", action="store_true", help="print only the JSON line")
    parser.add_argument(
        "--engines", default=",".join(ENGINES), help=f"comma-separated subset of {','.join(ENGINES)} (default: all)"
    )
    parser.add_argument("--runs", type=int, default=5, help="timed runs per engine (median reported)")
    parser.add_argument("--threads", type=int, default=1, help="compute threads per engine (ThreadPlan.tts_threads)")
    parser.add_argument("--text", default=DEFAULT_TEXT, help="the reply text to speak")
    parser.add_argument("--coqui-model", default=None, help="a coqui checkpoint (default: tiny random-weight VITS)")
    parser.add_argument("--coqui-config", default=None, help="its config.json (default: next to the checkpoint)")
    parser.add_argument("--coqui-python", default=None, help="the coqui venv's python (default: .venv-coqui)")


def _chunks(text: str) -> list[str]:
    from headstart.tts.chunker import ClauseChunker
    from headstart.tts.normalize import normalize_text

    chunker = ClauseChunker()
    raw = list(chunker.push(text)) + list(chunker.flush())
    return [spoken for spoken in (normalize_text(c) for c in raw) if spoken]


def measure(synth: Any, chunks: list[str], runs: int) -> dict[str, float]:
    """Time `synth` on `chunks` `runs` times. Returns median `ttfa_s` (first chunk, call -> first
    array), median `rtf` (whole reply: wall s / audio s), `audio_s` (of the whole reply)."""
    if not chunks:
        raise ValueError("nothing to speak: the text normalises to no chunks")
    ttfas: list[float] = []
    rtfs: list[float] = []
    audio_s = 0.0
    for _ in range(max(1, runs)):
        num_samples = 0
        start = time.perf_counter()
        first: float | None = None
        for i, chunk in enumerate(chunks):
            for audio in synth.synthesize(chunk):
                if first is None and i == 0:
                    first = time.perf_counter() - start
                num_samples += int(audio.shape[0])
        wall = time.perf_counter() - start
        if first is None or num_samples == 0:
            raise RuntimeError(f"{synth.name} produced no audio for the first clause {chunks[0]!r}")
        audio_s = num_samples / synth.sample_rate
        ttfas.append(first)
        rtfs.append(wall / audio_s)
    return {"ttfa_s": statistics.median(ttfas), "rtf": statistics.median(rtfs), "audio_s": audio_s}


def _load(engine: str, args: argparse.Namespace, workdir: Path) -> tuple[Any, dict[str, Any]]:
    from headstart.config import ThreadPlan, TTSConfig
    from headstart.tts.engines import load_synthesizer

    threads = ThreadPlan(tts_threads=args.threads)
    if engine == "piper":
        return load_synthesizer(TTSConfig(engine="piper-joe"), threads), {}
    if engine == "espeak":
        return load_synthesizer(TTSConfig(engine="espeak"), threads), {}
    if engine == "hibari":
        return load_synthesizer(TTSConfig(engine="hibari"), threads), {}
    if engine == "coqui":
        extra: dict[str, Any] = {"random_weights": args.coqui_model is None}
        model, config = args.coqui_model, args.coqui_config
        if model is None:
            model, config = _tiny_vits(workdir, args.coqui_python)
        cfg = TTSConfig(engine="coqui", coqui_model=model, coqui_config=config, coqui_python=args.coqui_python)
        return load_synthesizer(cfg, threads), extra
    raise ValueError(f"unknown engine {engine!r}: use {', '.join(ENGINES)}")


def _tiny_vits(workdir: Path, python: str | None) -> tuple[str, str]:
    import subprocess

    from headstart.tts.base import EngineNotAvailableError, TTSError
    from headstart.tts.coqui import WORKER_PATH, default_coqui_python

    interpreter = Path(python) if python else default_coqui_python()
    if not interpreter.is_file():
        raise EngineNotAvailableError(f"the coqui-tts environment is missing ({interpreter}): `make coqui-env`")
    out = workdir / "tiny-vits"
    builder = WORKER_PATH.with_name("coqui_tiny.py")
    proc = subprocess.run(
        [str(interpreter), "-I", str(builder), "vits", str(out), "--sample-rate", "22050"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if proc.returncode != 0:
        raise TTSError(f"building the tiny coqui VITS failed: {proc.stderr[-500:]}")
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    return info["model"], info["config"]


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run the benchmark; returns the JSON-able result (see the module docstring)."""
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    unknown = [e for e in engines if e not in ENGINES]
    if unknown:
        raise ValueError(f"unknown engine(s) {', '.join(unknown)}: use {', '.join(ENGINES)}")
    chunks = _chunks(args.text)
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="headstart-bench-tts-") as tmp:
        for engine in engines:
            t0 = time.perf_counter()
            try:
                synth, extra = _load(engine, args, Path(tmp))
            except Exception as exc:  # an engine that is not installed/prepared is reported, not fatal
                results[engine] = {"skipped": f"{type(exc).__name__}: {exc}"}
                continue
            load_s = time.perf_counter() - t0
            try:
                figures = measure(synth, chunks, args.runs)
            except Exception as exc:
                results[engine] = {"skipped": f"{type(exc).__name__}: {exc}"}
                continue
            finally:
                close = getattr(synth, "close", None)
                if close is not None:
                    close()
            results[engine] = {
                **{k: round(v, 4) for k, v in figures.items()},
                "load_s": round(load_s, 2),
                "sample_rate": synth.sample_rate,
                "name": synth.name,
                **extra,
            }
    result: dict[str, Any] = {
        "bench": "tts",
        "engines": results,
        "targets": TARGETS,
        "first_clause": chunks[0],
        "chunks": len(chunks),
        "runs": args.runs,
        "threads": args.threads,
    }
    piper = results.get("piper", {})
    if "ttfa_s" in piper:
        result["piper_meets_targets"] = piper["ttfa_s"] <= TARGETS["piper"]["ttfa_s"] and piper["rtf"] <= TARGETS["piper"]["rtf"]
    return result


def format_table(result: dict[str, Any]) -> str:
    """The human-readable table of a `run` result."""
    lines = [
        f"TTS bench: first clause {result['first_clause']!r}, {result['chunks']} chunks, "
        f"median of {result['runs']} runs, {result['threads']} thread(s)",
        f"{'engine':<8} {'TTFA s':>8} {'RTF':>7} {'audio s':>8} {'load s':>7} {'rate Hz':>8}  note",
    ]
    for engine, r in result["engines"].items():
        if "skipped" in r:
            lines.append(f"{engine:<8} {'-':>8} {'-':>7} {'-':>8} {'-':>7} {'-':>8}  skipped: {r['skipped'][:90]}")
            continue
        note = "random weights (noise): worker path only" if r.get("random_weights") else ""
        target = result["targets"].get(engine)
        if target:
            ok = r["ttfa_s"] <= target["ttfa_s"] and r["rtf"] <= target["rtf"]
            note = f"target TTFA <= {target['ttfa_s']} s, RTF <= {target['rtf']}: {'met' if ok else 'MISSED'}"
        lines.append(
            f"{engine:<8} {r['ttfa_s']:>8.3f} {r['rtf']:>7.3f} {r['audio_s']:>8.2f} {r['load_s']:>7.2f} "
            f"{r['sample_rate']:>8}  {note}"
        )
    return "\n".join(lines)


def run_from_args(args: argparse.Namespace) -> int:
    """Entry point for `headstart bench tts`: prints the table (unless --json) and the JSON line.
    Returns 0, or 1 if no engine could be measured, 2 for bad arguments."""
    if args.runs < 1 or args.threads < 1:
        print("error: --runs and --threads must be >= 1")
        return 2
    try:
        result = run(args)
    except ValueError as exc:
        print(f"error: {exc}")
        return 2
    if not args.json:
        print(format_table(result))
    print(json.dumps(result))
    return 0 if any("ttfa_s" in r for r in result["engines"].values()) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="headstart bench tts", description=__doc__.split("\n")[0])
    add_arguments(parser)
    return run_from_args(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
