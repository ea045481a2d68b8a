"""`headstart bench asr` twice in one process: the text head alone (`--acoustic-model none`) and with
the acoustic model (`--acoustic-model smart-turn-v3.2`) as a fusion or, with `--acoustic-mode veto`, as
a veto, on the same code, recordings and pause set, one after the other. Extra arguments go to both
runs (e.g. `--timing cpu --llm-dtype float32 --limit 10`).

    .venv/bin/python scripts/bench_turn_fusion.py --timing cpu --llm-dtype float32
    .venv/bin/python scripts/bench_turn_fusion.py --timing cpu --acoustic-mode veto

Prints both runs' logs, a comparison table, and ends with one JSON line {"text": ..., MODE: ...} (MODE:
"fusion" or "veto").
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace

from headstart.bench import asr as bench_asr
from headstart.cli.bench import asr as bench_asr_cli
from headstart.cli.options import options_from_args

KEYS = ("wer", "final_delay_p50_s", "eou_delay_p50_s", "eou_delay_p90_s", "eou_decision_delay_p50_s",
        "false_cutoff_rate", "false_cutoff_noise", "false_cutoff_zero", "eou_call_p50_s", "acoustic_call_p50_s",
        "acoustic_ready_p50_s", "acoustic_last", "turns_ended_within_0_6_s", "load_avg_1m")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    bench_asr_cli.add_arguments(parser)
    parser.add_argument("--fusion-model", default="smart-turn-v3.2")
    args = parser.parse_args(argv)
    if args.acoustic_model:
        parser.error("pass --fusion-model, not --acoustic-model: the first run is without it")
    from headstart.config import EndpointConfig

    mode = args.acoustic_mode or EndpointConfig().acoustic_mode
    options = options_from_args(bench_asr.AsrBenchOptions, args)
    out = {}
    for name, model in (("text", "none"), (mode, args.fusion_model)):
        run_args = replace(options, acoustic_model=model, json=False)
        print(f"== {name} ==", flush=True)
        out[name] = bench_asr.run(run_args, log=lambda *a, **k: print(*a, **k, flush=True))
    print()
    print(f"  {'figure':26s} {'text head':>14s} {mode:>14s}")
    for key in KEYS:
        print(f"  {key:26s} {out['text'].get(key)!s:>14} {out[mode].get(key)!s:>14}")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
