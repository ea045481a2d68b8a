"""`headstart bench asr` for several ASR models in one process, one after the other: the same code,
recordings, pause set and EOU head, so the engines compare in the same run. Extra arguments go to
every run (e.g. `--timing cpu --threads 1 --limit 10`).

    .venv/bin/python scripts/bench_asr_engines.py --models whisper-tiny.en moonshine-base --timing cpu --threads 1

Prints every run's log, a comparison table, and ends with one JSON line {model: result, ...}.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace

from headstart.bench import asr as bench_asr
from headstart.cli.bench import asr as bench_asr_cli
from headstart.cli.options import options_from_args

KEYS = ("wer", "partial_p50_s", "partial_p90_s", "final_delay_p50_s", "final_after_vad_p50_s", "final_after_vad_p90_s",
        "eou_delay_p50_s", "eou_delay_p90_s", "eou_decision_delay_p50_s", "turns_ended_within_0_6_s",
        "false_cutoff_rate", "false_cutoff_noise", "false_cutoff_zero", "rtf", "asr_passes", "eou_call_p50_s",
        "stages_p50_s", "load_avg_1m")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    bench_asr_cli.add_arguments(parser)
    parser.add_argument("--models", nargs="+", required=True, help="ASR models (presets or folders), run in this order")
    args = parser.parse_args(argv)
    if args.model:
        parser.error("pass --models, not --model")
    options = options_from_args(bench_asr.AsrBenchOptions, args)
    out = {}
    for model in args.models:
        run_args = replace(options, model=model, json=False)
        print(f"== {model} ==", flush=True)
        out[model] = bench_asr.run(run_args, log=lambda *a, **k: print(*a, **k, flush=True))
    print()
    print(f"  {'figure':26s} " + " ".join(f"{m:>22s}" for m in args.models))
    for key in KEYS:
        print(f"  {key:26s} " + " ".join(f"{json.dumps(out[m].get(key))!s:>22}" for m in args.models))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
