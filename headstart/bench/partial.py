"""`headstart bench partial`: partial-layer streaming measured in one run, a table then one JSON line.

- Layer costs: seconds of one full decode step, one draft step (layers 1..L + the head) and one verify
  of k+1 positions, on the same warm cache; the predicted self-speculative speedup from them and the
  measured acceptance (selfspec.predicted_speedup).
- Decode tokens/s on the bench's held-out decode prompts: plain greedy vs self-speculative (drafting
  forced on, so the raw trade-off shows; the shipped Decoder switches it off below break-even) with
  acceptance rate, mean accepted tokens per verify, speedup and `exact` (token-identical to plain).
- Early exit per threshold: agreement with the full model (teacher-forced, early tokens only), the
  fraction emitted early, first-token time and tokens/s vs plain, and whether the reply equals plain.

- `--drafter eagle`: plain greedy vs speculative decoding with the EAGLE-style network (llm/eagle.py) on
  the int8 default path, prompt by prompt in turn: tokens/s, acceptance, exactness.
- `--verify-costs`: a verify of k = 1..9 positions, layers 1..L, the full LM head and one EAGLE step
  against one decode step, the pipelined form on two threads, and the speed-up bound
  (bench/verify_costs.py).

`--device cuda` runs the same on a GPU (fp32 by default so `exact` stays meaningful). Untested on a
GPU here: this machine has none.
"""

from __future__ import annotations

from dataclasses import dataclass
import json
import statistics
import sys
import time

__all__ = ["PartialBenchOptions", "main"]


@dataclass(frozen=True, slots=True)
class PartialBenchOptions:
    """The options of `headstart bench partial`; their meaning and defaults: its `--help` (headstart/cli/)."""

    model: str
    exit_layer: int | None
    head: str | None
    drafter: str
    eagle: str | None
    min_confidence: float
    system_prompt: str | None
    verify_costs: bool
    k: int
    decode_tokens: int
    prompts: int
    thresholds: str
    device: str
    dtype: str
    quantize: str | None
    threads: int
    history_turns: int
    max_history_tokens: int
    json: bool


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def _costs(engine, drafter, prompt: list[int], k: int, device: str, repeats: int = 9) -> dict[str, float]:
    """Median seconds of a full decode step, a draft step and a verify of k+1 positions."""
    import torch

    engine.reset()
    first = int(engine.prefill(prompt).argmax())
    base = engine.num_tokens
    full, draft, verify = [], [], []
    for _ in range(repeats):
        _sync(device)
        t0 = time.perf_counter()
        engine.decode(first)
        _sync(device)
        full.append(time.perf_counter() - t0)
        engine.crop(base)
        with torch.inference_mode():
            _sync(device)
            t0 = time.perf_counter()
            h = drafter.stack.run(drafter.stack.embed_ids([first]), engine.raw_cache, 0, drafter.exit_layer, base)
            int(drafter.runner.logits(h)[-1].argmax())
            _sync(device)
            draft.append(time.perf_counter() - t0)
        from headstart.llm.selfspec import crop_layers

        crop_layers(engine.raw_cache, drafter.exit_layer, base)
        _sync(device)
        t0 = time.perf_counter()
        engine.verify([first] * (k + 1))
        _sync(device)
        verify.append(time.perf_counter() - t0)
        engine.crop(base)
    return {"full_step_s": statistics.median(full), "draft_step_s": statistics.median(draft),
            "verify_s": statistics.median(verify)}


def _timed(gen, device: str) -> tuple[list[int], float, float]:
    """(tokens, seconds to the first token, seconds for the rest)."""
    t0 = time.perf_counter()
    out = []
    first_s = 0.0
    for token in gen:
        if not out:
            _sync(device)
            first_s = time.perf_counter() - t0
        out.append(token)
    _sync(device)
    return out, first_s, time.perf_counter() - t0 - first_s


def main(args: PartialBenchOptions) -> int:
    from headstart.corpus.texts import CONVERSATION, DECODE_PROMPTS
    from headstart.config import LLMConfig, ThreadPlan
    from headstart.llm.early_exit import EarlyExitDecoder
    from headstart.llm.engine import LLMEngine
    from headstart.llm.sampling import Sampling
    from headstart.llm.selfspec import load_self_drafter, predicted_speedup
    from headstart.llm.speculative import Decoder, DraftingPolicy
    from headstart.llm.stream import with_system_prompt
    from headstart.models.store import ModelError, resolve_model

    def log(message: str) -> None:
        if not args.json:
            print(message, file=sys.stderr, flush=True)

    try:
        thresholds = [float(x) for x in args.thresholds.split(",") if x.strip()]
    except ValueError:
        print(f"error: --thresholds must be comma-separated numbers, got {args.thresholds!r}", file=sys.stderr)
        return 2
    if args.k < 1 or args.decode_tokens < 2 or args.threads < 1 or any(not 0 < t <= 1 for t in thresholds):
        print("error: need --k >= 1, --decode-tokens >= 2, --threads >= 1, thresholds in (0, 1]", file=sys.stderr)
        return 2
    if args.history_turns:
        return _history_curve(args)
    if args.verify_costs:
        return _verify_costs(args)
    if args.drafter == "eagle":
        return _eagle_run(args)
    # the proposal heads are trained on (and read) the float model's weights: no int8 here
    config = LLMConfig(model=args.model, dtype=args.dtype, device=args.device, max_new_tokens=args.decode_tokens,
                       quantize=None if args.quantize == "none" else args.quantize)
    try:
        folder = resolve_model(args.model)
        log(f"loading {args.model} on {args.device}")
        engine = LLMEngine.load(folder, config, ThreadPlan(torch_threads=args.threads))
        n = engine.model.config.num_hidden_layers
        exit_layer = args.exit_layer if args.exit_layer is not None else max(1, n // 4)
        drafter = load_self_drafter(engine, exit_layer, args.head, folder)
    except (ModelError, FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    engine.warm_up()
    prompts = [engine.render_prompt(with_system_prompt([*CONVERSATION, {"role": "user", "content": t}],
                                                       config.system_prompt)) for t in DECODE_PROMPTS[:max(1, args.prompts)]]
    log("layer costs ...")
    costs = _costs(engine, drafter, prompts[0], args.k, args.device)

    def decode_all(make):
        outs, first_s, rest_s, rest_n = [], 0.0, 0.0, 0
        for prompt in prompts:
            engine.reset()
            out, f, r = _timed(make(prompt), args.device)
            outs.append(out)
            first_s += f
            rest_s += r
            rest_n += max(0, len(out) - 1)
        return outs, first_s / len(prompts), rest_n / rest_s if rest_s else 0.0

    log("plain ...")
    ref, plain_first_s, plain_tps = decode_all(lambda p: engine.generate(p, args.decode_tokens, Sampling()))
    log("self-speculative ...")
    policy = DraftingPolicy(min_spec_steps=10**9)  # forced on: the raw trade-off
    policy.record_plain(costs["full_step_s"])
    decoder = Decoder(engine, drafter, args.k, policy)
    spec, _, spec_tps = decode_all(lambda p: decoder.generate(p, args.decode_tokens, Sampling()))
    stats = decoder.stats
    acc = stats.acceptance_rate or 0.0
    draft_cost = costs["draft_step_s"] / costs["full_step_s"]
    verify_cost = costs["verify_s"] / costs["full_step_s"]
    self_spec = {
        "exit_layer": exit_layer, "num_layers": n, "k": args.k,
        "acceptance_rate": round(acc, 4), "mean_accepted": round(stats.mean_accepted or 0.0, 3),
        "speedup": round(spec_tps / plain_tps, 3) if plain_tps else None, "exact": spec == ref,
        "predicted_speedup": round(predicted_speedup(acc, args.k, draft_cost, verify_cost), 3),
        "draft_cost": round(draft_cost, 3), "verify_cost": round(verify_cost, 3),
        "tok_per_s": round(spec_tps, 2),
    }
    early = []
    for threshold in thresholds:
        log(f"early exit {threshold} ...")
        ee = EarlyExitDecoder(engine, drafter.runner.head, threshold)
        outs, first_s, tps = decode_all(lambda p: ee.generate(p, args.decode_tokens))
        checker = EarlyExitDecoder(engine, drafter.runner.head, threshold, check=True)
        decode_all(lambda p: checker.generate(p, args.decode_tokens))  # agreement (untimed)
        early.append({
            "threshold": threshold, "agreement": None if checker.stats.agreement is None else round(checker.stats.agreement, 4),
            "early_fraction": round(ee.stats.early_fraction or 0.0, 4),
            "speedup": round(tps / plain_tps, 3) if plain_tps else None,
            "ttft_s": round(first_s, 4), "same_as_plain": sum(a == b for a, b in zip(outs, ref)) / len(ref),
            "tok_per_s": round(tps, 2),
        })
    result = {
        "model": args.model, "device": args.device, "dtype": args.dtype, "threads": args.threads,
        "decode_tokens": args.decode_tokens, "plain_tok_per_s": round(plain_tps, 2),
        "plain_ttft_s": round(plain_first_s, 4), "costs_s": {k: round(v, 5) for k, v in costs.items()},
        "self_speculative": self_spec, "early_exit": early,
    }
    if not args.json:
        _print_table(result)
    print(json.dumps(result))
    return 0


def _print_table(r: dict) -> None:
    s, c = r["self_speculative"], r["costs_s"]
    print(f"\npartial-layer bench: {r['model']} on {r['device']} ({r['dtype']}, {r['threads']} thread(s)), "
          f"exit layer {s['exit_layer']} of {s['num_layers']}, k={s['k']}")
    print(f"step costs: full decode {c['full_step_s'] * 1e3:.1f} ms, draft (L layers + head) "
          f"{c['draft_step_s'] * 1e3:.1f} ms ({s['draft_cost']:.2f}x), verify k+1 {c['verify_s'] * 1e3:.1f} ms "
          f"({s['verify_cost']:.2f}x)")
    print(f"\n{'decode':<22}{'tok/s':>8}{'speedup':>9}{'predicted':>11}{'accept':>8}{'mean acc':>10}{'exact':>7}")
    print(f"{'plain':<22}{r['plain_tok_per_s']:>8.2f}{'1.00x':>9}")
    print(f"{'self-speculative':<22}{s['tok_per_s']:>8.2f}{s['speedup']:>8.2f}x{s['predicted_speedup']:>10.2f}x"
          f"{s['acceptance_rate']:>8.0%}{s['mean_accepted']:>10.2f}{str(s['exact']):>7}")
    print(f"\n{'early exit threshold':<22}{'agree':>8}{'early':>8}{'tok/s':>8}{'speedup':>9}{'TTFT s':>9}{'= plain':>9}")
    print(f"{'(plain)':<22}{'':>8}{'':>8}{r['plain_tok_per_s']:>8.2f}{'1.00x':>9}{r['plain_ttft_s']:>9.4f}")
    for e in r["early_exit"]:
        agree = "" if e["agreement"] is None else f"{e['agreement']:.0%}"
        print(f"{e['threshold']:<22}{agree:>8}{e['early_fraction']:>8.0%}{e['tok_per_s']:>8.2f}{e['speedup']:>8.2f}x"
              f"{e['ttft_s']:>9.4f}{e['same_as_plain']:>9.0%}")


def _history_curve(args: PartialBenchOptions) -> int:
    """Prompt tokens (= KV-cache positions at the end of prefill) and KV bytes per turn over a long chat
    of varied turns, with and without the bounded history; re-prefilled tokens per turn (the cost of
    each eviction)."""
    from transformers import AutoConfig, AutoTokenizer

    from headstart.config import LLMConfig
    from headstart.llm.engine import common_prefix_len
    from headstart.llm.history import TurnWindow
    from headstart.llm.stream import with_system_prompt
    from headstart.corpus.texts import EVERYDAY
    from headstart.models.store import resolve_model

    folder = resolve_model(args.model)
    tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    mc = AutoConfig.from_pretrained(folder, local_files_only=True)
    head_dim = getattr(mc, "head_dim", None) or mc.hidden_size // mc.num_attention_heads
    bytes_per_token = 2 * mc.num_hidden_layers * mc.num_key_value_heads * head_dim * 4  # K and V, float32
    system = LLMConfig().system_prompt

    def render(msgs):
        return tok.apply_chat_template(with_system_prompt(msgs, system), add_generation_prompt=True, tokenize=True,
                                       return_dict=False)

    window = TurnWindow(args.max_history_tokens, lambda t: len(tok(t, add_special_tokens=False)["input_ids"]))
    history: list[dict] = []
    rows = []
    prev_bounded: list[int] = []
    for turn in range(args.history_turns):
        question = EVERYDAY[turn % len(EVERYDAY)]
        answer = f"Here is a short answer to that, number {turn}: it depends, but usually yes, about {turn % 13 + 2} of them."
        user = {"role": "user", "content": question}
        full = render([*history, user])
        bounded_msgs = window.select([{"role": "system", "content": system}, *history, user])
        bounded = render(bounded_msgs)
        reused = common_prefix_len(prev_bounded, bounded)
        rows.append({"turn": turn + 1, "unbounded_tokens": len(full), "bounded_tokens": len(bounded),
                     "prefilled_tokens": len(bounded) - reused, "dropped_turns": window.dropped_turns})
        history += [user, {"role": "assistant", "content": answer}]
        prev_bounded = bounded + tok(answer, add_special_tokens=False)["input_ids"]
    peak = max(r["bounded_tokens"] for r in rows)
    result = {"model": args.model, "turns": args.history_turns, "max_history_tokens": args.max_history_tokens,
              "kv_bytes_per_token": bytes_per_token, "evictions": window.evictions,
              "bounded_peak_tokens": peak, "bounded_peak_mib": round(peak * bytes_per_token / 2**20, 2),
              "unbounded_final_tokens": rows[-1]["unbounded_tokens"],
              "unbounded_final_mib": round(rows[-1]["unbounded_tokens"] * bytes_per_token / 2**20, 2),
              "mean_prefilled_tokens": round(sum(r["prefilled_tokens"] for r in rows) / len(rows), 1),
              "curve": [[r["turn"], r["unbounded_tokens"], r["bounded_tokens"]] for r in rows]}
    if not args.json:
        print(f"\nKV cache over a {args.history_turns}-turn chat, {args.model} (float32 KV: "
              f"{bytes_per_token / 1024:.0f} KiB per token), history budget {args.max_history_tokens} tokens")
        print(f"{'turn':>6}{'unbounded tok':>15}{'MiB':>8}{'bounded tok':>13}{'MiB':>8}{'prefilled':>11}{'dropped':>9}")
        step = max(1, len(rows) // 10)
        for r in rows[::step] + ([rows[-1]] if (len(rows) - 1) % step else []):
            print(f"{r['turn']:>6}{r['unbounded_tokens']:>15}{r['unbounded_tokens'] * bytes_per_token / 2**20:>8.1f}"
                  f"{r['bounded_tokens']:>13}{r['bounded_tokens'] * bytes_per_token / 2**20:>8.1f}"
                  f"{r['prefilled_tokens']:>11}{r['dropped_turns']:>9}")
        print(f"evictions: {window.evictions}; mean tokens prefilled per turn (bounded): {result['mean_prefilled_tokens']}")
    print(json.dumps(result))
    return 0


def trained_self_drafter(engine, model: str):
    """The self-speculative drafter of the lowest exit layer that has a trained head for `model` in the
    headstart cache, or None (for `headstart bench llm`, which adds a row when one exists)."""
    from headstart.llm.proposal import default_head_path
    from headstart.llm.selfspec import load_self_drafter
    from headstart.models.store import resolve_model

    try:
        folder = resolve_model(model)
        heads = sorted(default_head_path(folder, 1).parent.glob("exit-*.safetensors"),
                       key=lambda p: int(p.stem.split("-")[1]))
        return load_self_drafter(engine, int(heads[0].stem.split("-")[1]), heads[0]) if heads else None
    except Exception:  # noqa: BLE001 - an optional row: never fails the bench
        return None


def _load_engine(args: PartialBenchOptions, quantize: str | None):
    from headstart.config import LLMConfig, ThreadPlan
    from headstart.llm.engine import LLMEngine
    from headstart.models.store import resolve_model

    config = LLMConfig(model=args.model, dtype=args.dtype, device=args.device, max_new_tokens=args.decode_tokens,
                       quantize=quantize)
    folder = resolve_model(args.model)
    return LLMEngine.load(folder, config, ThreadPlan(torch_threads=args.threads)), folder, config


def _bench_prompts(engine, config, count: int) -> list[list[int]]:
    from headstart.corpus.texts import CONVERSATION, DECODE_PROMPTS
    from headstart.llm.stream import with_system_prompt

    return [engine.render_prompt(with_system_prompt([*CONVERSATION, {"role": "user", "content": t}],
                                                    config.system_prompt)) for t in DECODE_PROMPTS[:max(1, count)]]


def _quantize_arg(args: PartialBenchOptions) -> str:
    # the EAGLE network and the cost table are about the default path: int8 unless asked otherwise
    return args.quantize or "auto"


def _verify_costs(args: PartialBenchOptions) -> int:
    """The cost table of bench/verify_costs.py on the first decode prompt."""
    from headstart.bench.verify_costs import measure_costs, speedup_table
    from headstart.models.store import ModelError

    try:
        engine, _, config = _load_engine(args, None if _quantize_arg(args) == "none" else _quantize_arg(args))
    except (ModelError, FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    engine.warm_up()
    n = engine.model.config.num_hidden_layers
    exits = sorted({max(1, n // 6), max(1, n // 4), max(1, n // 3)} | ({args.exit_layer} if args.exit_layer else set()))
    costs = measure_costs(engine, _bench_prompts(engine, config, 1)[0], exits, list(range(1, 10)), repeats=9,
                          eagle_widths=[1024, int(engine.model.config.intermediate_size)], vocab_sizes=[4096, 8192])
    from headstart.bench.verify_costs import measure_pipeline

    pipe = measure_pipeline(engine, _bench_prompts(engine, config, 1)[0], args.exit_layer or max(1, n // 3))
    costs["pipeline"] = pipe
    draft = costs["eagle_step_s"][1024] + costs["head_rows_s"][8192]
    table = speedup_table(costs, draft, [0.3, 0.4, 0.5, 0.6, 0.7, 0.8], list(range(1, 9)))
    result = {"model": args.model, "threads": args.threads, "quantize": engine.quantize, **costs,
              "eagle_draft_step_s": draft, "speedup_bound": table}
    if not args.json:
        t = costs["decode_s"]
        print(f"\nverify costs: {args.model}, {engine.quantize or 'float32'}, {args.threads} thread(s), "
              f"context {costs['context_tokens']} tokens; one decode step {t * 1e3:.1f} ms")
        print(f"{'k positions':>12}" + "".join(f"{k:>7}" for k in costs["verify_s"]))
        print(f"{'verify / step':>12}" + "".join(f"{v / t:>7.2f}" for v in costs["verify_s"].values()))
        print("layers 1..L / step: " + ", ".join(f"L={L} {v / t:.3f}" for L, v in costs["layers_s"].items())
              + f"; full LM head {costs['lm_head_s'] / t:.3f}")
        print("EAGLE step / step: " + ", ".join(f"MLP {w} {v / t:.4f}" for w, v in costs["eagle_step_s"].items())
              + "; LM head rows " + ", ".join(f"{n} {v / t:.4f}" for n, v in costs["head_rows_s"].items()))
        print(f"pipelined (exit {pipe['exit_layer']}): layers L+1..N of step t then layers 1..L of step t+1 "
              f"{pipe['late_plus_early_sequential_s'] * 1e3:.1f} ms one after the other, "
              f"{pipe['late_beside_early_two_threads_s'] * 1e3:.1f} ms side by side on two threads; one decode step "
              f"{pipe['decode_1_thread_s'] * 1e3:.1f} ms on 1 thread, {pipe['decode_2_threads_s'] * 1e3:.1f} ms on 2")
        print(f"\npredicted speed-up E(a, k) / (k c + v(k+1)), c = {draft / t:.4f}:")
        keys = [key for key in table[0] if key.startswith("a=")]
        print(f"{'k':>3}{'cost':>7}" + "".join(f"{key:>8}" for key in keys))
        for row in table:
            print(f"{row['k']:>3}{row['cost_steps']:>7.2f}" + "".join(f"{row[key]:>8.2f}" for key in keys))
    print(json.dumps(result))
    return 0


def _eagle_run(args: PartialBenchOptions) -> int:
    """Plain greedy vs speculative decoding with the EAGLE drafter, the same prompts in turn, int8 by
    default: tokens/s, acceptance, accepted per verify, exactness, the drafter's step costs."""
    from headstart.llm.eagle import EagleDrafter, default_eagle_path, load_eagle
    from headstart.llm.sampling import Sampling
    from headstart.llm.speculative import Decoder, DraftingPolicy
    from headstart.models.store import ModelError

    quantize = _quantize_arg(args)
    try:
        engine, folder, config = _load_engine(args, None if quantize == "none" else quantize)
        n = engine.model.config.num_hidden_layers
        exit_layer = args.exit_layer if args.exit_layer is not None else max(1, n // 4)
        net = load_eagle(args.eagle or default_eagle_path(folder, exit_layer))
        drafter = EagleDrafter(engine, net, args.min_confidence, quantize=engine.quantize)
    except (ModelError, FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    engine.warm_up()
    if args.system_prompt is not None:
        from dataclasses import replace

        config = replace(config, system_prompt=args.system_prompt)
    prompts = _bench_prompts(engine, config, args.prompts)
    policy = DraftingPolicy(min_spec_steps=10**9)  # forced on: the raw trade-off
    policy.record_plain(1.0)
    decoder = Decoder(engine, drafter, args.k, policy)
    ref, spec = [], []
    plain_s = spec_s = 0.0
    plain_n = spec_n = 0
    for prompt in prompts:  # plain, then EAGLE on the same prompt: a load change hits both alike
        for which in ("plain", "eagle"):
            engine.reset()
            drafter.reset()
            gen = engine.generate(prompt, args.decode_tokens, Sampling()) if which == "plain" else \
                decoder.generate(prompt, args.decode_tokens, Sampling())
            out, _, rest = _timed(gen, args.device)
            if which == "plain":
                ref.append(out)
                plain_s, plain_n = plain_s + rest, plain_n + max(0, len(out) - 1)
            else:
                spec.append(out)
                spec_s, spec_n = spec_s + rest, spec_n + max(0, len(out) - 1)
    stats = decoder.stats
    plain_tps = plain_n / plain_s if plain_s else 0.0
    spec_tps = spec_n / spec_s if spec_s else 0.0
    import hashlib

    result = {"model": args.model, "drafter": "eagle", "quantize": engine.quantize, "threads": args.threads,
              "system_prompt_sha256": hashlib.sha256(config.system_prompt.encode()).hexdigest()[:16],
              "context_tokens": [len(p) for p in prompts],
              "exit_layer": exit_layer, "num_layers": n, "feature_offset": net.cfg.feature_offset, "k": args.k,
              "decode_tokens": args.decode_tokens, "prompts": len(prompts), "plain_tok_per_s": round(plain_tps, 2),
              "eagle_tok_per_s": round(spec_tps, 2), "speedup": round(spec_tps / plain_tps, 3) if plain_tps else None,
              "acceptance_rate": round(stats.acceptance_rate or 0.0, 4),
              "mean_accepted": round(stats.mean_accepted or 0.0, 3), "verify_steps": stats.verify_steps,
              "exact": spec == ref, "trained": net.cfg.meta}
    if not args.json:
        print(f"\nEAGLE drafter: {args.model} ({engine.quantize or 'float32'}, {args.threads} thread(s)), exit layer "
              f"{exit_layer} of {n}, feature offset {net.cfg.feature_offset}, k={args.k}, {len(prompts)} prompts x "
              f"{args.decode_tokens} tokens")
        print(f"{'decode':<12}{'tok/s':>8}{'speedup':>9}{'accept':>8}{'mean acc':>10}{'exact':>7}")
        print(f"{'plain':<12}{plain_tps:>8.2f}{'1.00x':>9}")
        print(f"{'eagle':<12}{spec_tps:>8.2f}{result['speedup'] or 0:>8.2f}x{result['acceptance_rate']:>8.0%}"
              f"{result['mean_accepted']:>10.2f}{str(result['exact']):>7}")
    print(json.dumps(result))
    return 0
