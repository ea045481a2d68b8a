"""Fit the end-of-turn fusion (headstart/voice/turn_fusion.py) of the text EOU head, Smart Turn v3.2 and
whisper's trailing-off marks, on a training split of the packaged recordings, and report on the rest.

For every packaged recording (headstart/bench/data): the complete turn (its audio up to the true
speech end + the pause heard so far) and, for those of four words or more, the same recording cut at
the word gap nearest its middle (as `headstart bench asr`'s pause set cuts it), followed by room noise
and, again, digital zero. For each: the text whisper writes for the audio up to the pause (+ the VAD's
0.1 s padding), the text head's probability for it (the session's LLM, float32 + int8 layers), and Smart
Turn's probability at `--after` s of silence. Split: recordings alternate in name order (train: even,
test: odd), so the cut and complete versions of one recording stay in one split.

    .venv/bin/python scripts/fit_turn_fusion.py --out /tmp/turn_fusion.json

With `--fit-dir DIR` (a folder `headstart.bench.asr.load_items` reads, e.g. the Asterisk prompts of
scripts/make_fit_speech.py) every recording of DIR is training and all 52 packaged recordings are the
test: nothing of the bench tunes the fit. Besides the fusion, the text head's own thresholds are
recalibrated on the training rows alone (`calibrate_thresholds`, as `train-eou` does) and reported
on the test beside the head's shipped pair.

    .venv/bin/python scripts/fit_turn_fusion.py --fit-dir ~/.cache/headstart/fit_speech --out /tmp/rows.json

Also chooses the threshold of Smart Turn as a veto on the text head's shipped pair (`fit_veto`,
EndpointConfig.acoustic_mode "veto") on the training rows and reports it on both splits.

Prints a table per split and ends with one JSON line (the fitted weights and the test figures).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

import numpy as np

SR = 16000


def _logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


def collect(args) -> list[dict]:
    from headstart.bench.asr import room_noise
    from headstart.corpus.recordings import recordings
    from headstart.config import ASRConfig, LLMConfig, ThreadPlan
    from headstart.llm.engine import LLMEngine
    from headstart.llm.eou_head import EOUHead
    from headstart.voice.asr_engines import has_word_timestamps, load_asr
    from headstart.voice.smart_turn import SmartTurn

    asr = load_asr(ASRConfig(model=args.asr), cpu_threads=1)
    asr.warmup()
    # the cut points come from whisper's word timestamps whatever the engine (as bench asr's pause set)
    timer = asr if has_word_timestamps(asr) else load_asr(ASRConfig(model="whisper-tiny.en"), cpu_threads=1)
    turn = SmartTurn.load(threads=1)
    llm_config = LLMConfig(model=args.llm, dtype="float32")
    engine = LLMEngine.from_config(llm_config, ThreadPlan(torch_threads=1))
    head = EOUHead.load(engine, llm_config.model)
    messages = [{"role": "system", "content": llm_config.system_prompt}]
    head.estimate(messages, "Hello")
    rng = np.random.default_rng(0)
    rows = []
    # (name, text, audio, speech start s, speech end s, split)
    recs = sorted(recordings(), key=lambda r: r.name)
    if args.fit_dir:
        from headstart.bench.asr import load_items

        items = [(it.name, it.text, it.audio, it.speech_start_s, it.speech_end_s, "train")
                 for it in sorted(load_items(args.fit_dir), key=lambda it: it.name)]
        if args.limit:
            items = items[:: max(1, len(items) // args.limit)][: args.limit]
        items += [(r.name, r.text, r.read(), r.speech_start_s, r.speech_end_s, "test") for r in recs]
    else:
        items = [(r.name, r.text, r.read(), r.speech_start_s, r.speech_end_s, "train" if i % 2 == 0 else "test")
                 for i, r in enumerate(recs)]
    started_all = time.monotonic()
    for i, (name, ref_text, audio, speech_start_s, speech_end_s, split) in enumerate(items):
        print(f"[{i + 1}/{len(items)} {time.monotonic() - started_all:.0f} s]", end=" ", file=sys.stderr)
        tail = room_noise(audio, speech_start_s, 2.0, rng)
        samples = []  # (kind, audio before the pause, fill after it)
        end = int(round(speech_end_s * SR))
        samples.append(("complete", audio[:end], np.concatenate([audio[end:], tail])))
        words = timer.transcribe(audio).words
        if len(ref_text.replace("...", " ").split()) >= 4 and len(words) >= 4:
            k = len(words) // 2
            cut = int(round((words[k - 1].end_s + words[k].start_s) / 2 * SR))
            samples.append(("noise", audio[:cut], room_noise(audio, speech_start_s, 2.0, rng)))
            samples.append(("zero", audio[:cut], np.zeros(2 * SR, np.float32)))
        for kind, before, fill in samples:
            text = asr.transcribe(np.concatenate([before, fill[: int(0.1 * SR)]])).text.strip()
            p_text = head.estimate(messages, text).probability if text else 0.0
            acoustic = {}
            for after in args.after:
                started = time.perf_counter()
                acoustic[str(after)] = turn.completion_probability(
                    np.concatenate([before, fill[: int(round(after * SR))]])
                )
                cost = time.perf_counter() - started
            row = dict(name=name, split=split, kind=kind, label=int(kind == "complete"), text=text,
                       p_text=p_text, p_acoustic=acoustic, acoustic_cost_s=cost)
            rows.append(row)
            print(f"{name:28s} {kind:8s} text {p_text:.3f} acoustic "
                  + " ".join(f"{v:.3f}" for v in acoustic.values()) + f"  {text!r}", file=sys.stderr)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--llm", default="qwen2.5-coder-0.5b")
    parser.add_argument("--asr", default="whisper-tiny.en", help="the ASR whose text the head reads (preset or folder)")
    parser.add_argument("--after", type=float, nargs="+", default=[0.2, 0.5])
    parser.add_argument("--rows", default=None, help="read collected rows from this JSON instead of computing them")
    parser.add_argument("--out", default=None, help="write the collected rows here")
    parser.add_argument("--max-cutoff", type=float, default=0.02)
    parser.add_argument("--fit-dir", default=None,
                        help="train on every recording of this folder (transcripts.tsv), test on the 52 packaged ones")
    parser.add_argument("--limit", type=int, default=None, help="with --fit-dir: at most this many of its recordings, evenly spread")
    parser.add_argument("--text-thresholds", type=float, nargs=2, default=(0.805, 0.825),
                        help="the text head's shipped pair (eou_low eou_high), the baseline")
    args = parser.parse_args()
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be >= 1")
    if args.rows:
        rows = json.load(open(args.rows))
    else:
        rows = collect(args)
        if args.out:
            json.dump(rows, open(args.out, "w"), indent=1)
    from headstart.bench.turn_fusion_fit import evaluate, fit, fit_text_thresholds

    train = [r for r in rows if r["split"] == "train"]
    test = [r for r in rows if r["split"] == "test"]
    weights = fit(train, max_cutoff=args.max_cutoff)
    text_pair = fit_text_thresholds(train, max_cutoff=args.max_cutoff)
    shipped = tuple(args.text_thresholds)
    out = {"weights": weights.as_dict(), "text_thresholds_refit": text_pair, "text_thresholds_shipped": shipped}
    print(f"fusion: {weights.as_dict()}\ntext head refit: {text_pair} (shipped {shipped})")
    for name, part in (("train", train), ("test", test), ("all", rows)):
        out[name] = evaluate(weights, part, text_thresholds=shipped)
        refit = evaluate(weights, part, text_thresholds=(text_pair["eou_low"], text_pair["eou_high"]))
        out[name].update({k.replace("text_", "text_refit_"): v for k, v in refit.items()
                          if k.startswith("text_") and not k.startswith("text_refit")})
        print(f"{name:5s} " + " ".join(f"{k}={v}" for k, v in out[name].items()))
    # Smart Turn as a veto on the shipped pair (EndpointConfig.acoustic_mode "veto"): the threshold chosen
    # on the training rows (the steepest cut-off reduction per second of added wait; and, beside, the
    # least one within --max-cutoff), figures on each split
    from headstart.bench.turn_fusion_fit import evaluate_veto, fit_veto

    veto = {"steepest": fit_veto(train, text_thresholds=shipped),
            "max_cutoff": fit_veto(train, text_thresholds=shipped, max_cutoff=args.max_cutoff)}
    out["veto"] = {}
    for rule, v in (("none", 0.0), *veto.items()):
        out["veto"][rule] = {name: evaluate_veto(part, v, text_thresholds=shipped)
                             for name, part in (("train", train), ("test", test))}
        for name, fig in out["veto"][rule].items():
            print(f"veto {rule:10s} {name:5s} " + " ".join(f"{k}={v}" for k, v in fig.items()))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
