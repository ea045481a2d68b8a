"""Per-call cost of the ASR engines, alternated call by call, and their one-pass WER on the packaged
recordings: the table docs/listening.md "Moonshine base" cites.

Run: `.venv/bin/python scripts/asr_engines_study.py [--calls 7] [--engines whisper-tiny.en,moonshine-base]`
(both presets prepared; ~2 min on an idle core). One thread per engine. Utterances: three packaged
recordings of about 1, 3 and 6 s, each transcribed whole. For each engine and length: the wall time and
the process CPU time of one `transcribe` call, min / median over `--calls` calls, the engines taking
turns call by call so that the machine's load falls on both alike. WER: one call per recording, the
52 recordings, corpus WER of the normalised text (headstart.corpus.wer). Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time

from headstart.corpus.recordings import recording, recordings
from headstart.corpus.wer import corpus_word_error_rate
from headstart.config import ASRConfig
from headstart.voice.asr_engines import load_asr

UTTERANCES = {"1 s": "cards_001", "3 s": "librivox-0880", "6 s": "librivox-0920"}


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=7)
    parser.add_argument("--engines", default="whisper-tiny.en,moonshine-base")
    args = parser.parse_args()
    names = [n.strip() for n in args.engines.split(",") if n.strip()]
    load_before = os.getloadavg()[0]
    engines = {}
    for name in names:
        engines[name] = load_asr(ASRConfig(model=name), cpu_threads=1)
        engines[name].warmup()
    audio = {label: recording(rec).read() for label, rec in UTTERANCES.items()}
    wall: dict = {(n, label): [] for n in names for label in UTTERANCES}
    cpu: dict = {(n, label): [] for n in names for label in UTTERANCES}
    for _ in range(args.calls):
        for label, samples in audio.items():
            for name in names:  # alternated call by call
                w0, c0 = time.perf_counter(), time.process_time()
                engines[name].transcribe(samples)
                wall[name, label].append(time.perf_counter() - w0)
                cpu[name, label].append(time.process_time() - c0)
    wer = {}
    for name in names:
        pairs = [(rec.text, engines[name].transcribe(rec.read()).text) for rec in recordings()]
        wer[name] = corpus_word_error_rate(pairs)
    load_after = os.getloadavg()[0]

    print(f"{'utterance':<10}" + "".join(f"{n + ' wall min/med ms':>34}{'cpu min/med ms':>18}" for n in names))
    rows = {}
    for label in UTTERANCES:
        cells = ""
        for name in names:
            ws, cs = wall[name, label], cpu[name, label]
            rows[f"{name} {label}"] = {
                "wall_min_ms": round(min(ws) * 1000), "wall_median_ms": round(statistics.median(ws) * 1000),
                "cpu_min_ms": round(min(cs) * 1000), "cpu_median_ms": round(statistics.median(cs) * 1000),
            }
            r = rows[f"{name} {label}"]
            cells += f"{r['wall_min_ms']:>25} / {r['wall_median_ms']:<6}{r['cpu_min_ms']:>11} / {r['cpu_median_ms']:<5}"
        print(f"{label + ' (' + UTTERANCES[label] + ')':<10} {cells}")
    print("WER, 52 recordings: " + ", ".join(f"{n} {wer[n]:.1%}" for n in names))
    print(f"load average {load_before:.2f} -> {load_after:.2f}, commit {_commit()}, {args.calls} calls per cell")
    print(json.dumps({"calls": args.calls, "per_call": rows, "wer": {n: round(v, 4) for n, v in wer.items()},
                      "load_before": round(load_before, 2), "load_after": round(load_after, 2), "commit": _commit()}))


if __name__ == "__main__":
    main()
