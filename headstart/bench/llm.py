"""`headstart bench llm --model NAME [--json]`: the streaming-token core, measured side by side.

- TTFT after end of turn on a ~300-token conversation: cold (whole prompt prefilled at end of
  turn) vs incremental (partials prefilled while the user spoke; only the tail remains:
  `TurnPrefill`, synchronous) vs the head start as the session runs it (a `LiveTurn` opened on the
  chat, `update("")` then one `update` per partial on the llm executor, then `reply(final)`: request
  to first token of its `ReplyStream`); `logits_to_keep=1` on every side. A held reply is this same
  `reply` started before the end of turn (`bench conversation` measures what it buys end to end).
- Decode tokens/s: plain vs each drafter (prompt lookup; a draft model when one is given or known
  for the model), with acceptance rate, mean accepted draft tokens per verify step, speedup and
  whether the tokens equal plain greedy exactly.
- Answer quality: everyday spoken questions with one key fact each.
A table, then one JSON line. The machine is shared: compare ratios within one run.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
import time
from dataclasses import dataclass, replace

from headstart.bench.machine import cpu_description
from headstart.config import LLMConfig, ThreadPlan
from headstart.corpus.texts import (
    CONVERSATION,
    DECODE_PROMPTS,
    FINAL_USER_TEXT,
    QUESTIONS,
)

__all__ = ["CONVERSATION", "QUESTIONS", "LLMBenchOptions", "main"]

# Known draft models (same tokenizer, smaller) for a target.
DRAFTS = {"qwen2.5-coder-1.5b": "qwen2.5-coder-0.5b"}


@dataclass(frozen=True, slots=True)
class LLMBenchOptions:
    """The options of `headstart bench llm` (a local model); their meaning and defaults: its `--help` (headstart/cli/)."""

    model: str
    draft: str | None
    threads: int
    dtype: str
    quantize: str
    draft_quantize: str
    decode_tokens: int
    repeats: int
    speculate_k: int | None
    no_quality: bool
    divergence: bool
    divergence_tokens: int
    json: bool


def _partials(text: str) -> list[str]:
    words = text.split(" ")
    return [" ".join(words[:i]) for i in range(1, len(words) + 1)]


def _ttft(engine, config, repeats: int, log) -> dict[str, float]:
    import asyncio

    from headstart.llm.sampling import Sampling
    from headstart.llm.speculative import Decoder
    from headstart.llm.stream import llm_executor, with_system_prompt
    from headstart.llm.turn import TurnPrefill

    history = with_system_prompt(CONVERSATION, config.system_prompt)
    sampling = Sampling()
    cold, incremental, head_start, tails = [], [], [], []
    prefill = TurnPrefill(engine, history)
    prompt = prefill.prompt_ids(FINAL_USER_TEXT)
    executor = llm_executor()
    try:
        for _ in range(repeats):
            # Cold: everything is prefilled after end of turn.
            engine.reset()
            t0 = time.perf_counter()
            first_cold = next(Decoder(engine).generate(prompt, 1, sampling))
            cold.append(time.perf_counter() - t0)
            # Incremental: partials while the user spoke (synchronous), then the tail.
            engine.reset()
            prefill = TurnPrefill(engine, history)
            for text in _partials(FINAL_USER_TEXT):
                prefill.update(text)
            tails.append(len(prompt) - engine.num_tokens)
            t0 = time.perf_counter()
            tokens = Decoder(engine).generate(prompt, config.max_new_tokens, sampling)
            first_inc = next(tokens)
            incremental.append(time.perf_counter() - t0)
            tokens.close()
            # The head start as the session runs it: a LiveTurn on the llm executor.
            engine.reset()
            ttft, first_text = asyncio.run(_head_start_ttft(engine, history, config, executor))
            head_start.append(ttft)
            if first_cold != first_inc or not first_text:
                log(f"warning: first tokens differ or no reply: {first_cold} {first_inc} {first_text!r}")
    finally:
        executor.shutdown(wait=True)
    return {
        "prompt_tokens": len(prompt),
        "tail_tokens": int(statistics.median(tails)),
        "ttft_cold_s": statistics.median(cold),
        "ttft_incremental_s": statistics.median(incremental),
        "ttft_head_start_s": statistics.median(head_start),
    }


async def _head_start_ttft(engine, history, config, executor) -> tuple[float, str]:
    """One user turn through `LiveTurn` as the session drives it (headstart/session/session.py): opened on the
    chat and pre-warmed with `update("")` while the agent is silent, one `update` per partial (each
    awaited: partials come ~0.4 s apart and a few words prefill faster), then `reply(final)`. Returns
    (request to first token in seconds, the first token's text)."""
    from headstart.events import TokenDelta
    from headstart.llm.live import LiveTurn

    turn = LiveTurn(engine, history, config, executor)
    for text in ["", *_partials(FINAL_USER_TEXT)]:
        turn.update(text)
        await turn.wait_idle()
    if turn.errors:
        raise turn.errors[0]
    stream = turn.reply(FINAL_USER_TEXT)
    first = ""
    async for event in stream:
        if isinstance(event, TokenDelta) and not first:
            first = event.text
            stream.cancel()
    await stream.wait_finished()
    return stream.stats.ttft_s, first


def _decode(engine, config, methods: dict, n_tokens: int, log) -> dict[str, dict]:
    """Decode tok/s per method. The methods take turns prompt by prompt (plain, then each drafter, on
    the same prompt; the order reversed every other prompt, ABBA), so load changes on a shared machine
    hit them alike and the ratios hold."""
    from headstart.llm.sampling import Sampling
    from headstart.llm.stream import with_system_prompt

    prompts = [engine.render_prompt(with_system_prompt([*CONVERSATION, {"role": "user", "content": text}],
                                                       config.system_prompt))
               for text in DECODE_PROMPTS]
    totals = {name: {"tokens": 0, "seconds": 0.0, "outputs": [], "prime_s": []} for name in methods}
    for i, prompt in enumerate(prompts):
        order = list(methods.items())
        for name, decoder in order if i % 2 == 0 else order[::-1]:
            engine.reset()
            if decoder is not None and decoder.drafter is not None:
                decoder.drafter.reset()
            gen = (decoder or engine).generate(prompt, n_tokens, Sampling())
            first = next(gen)  # TTFT is measured elsewhere: time the decode steps only
            prime = getattr(decoder.drafter, "prime", None) if decoder is not None else None
            if prime is not None:
                # A draft model's own prompt prefill is setup, like the target's (excluded from decode
                # tok/s, reported as draft_prefill_s): otherwise it lands on the first decode step.
                t0 = time.perf_counter()
                prime(prompt)
                totals[name]["prime_s"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            rest = list(gen)
            totals[name]["seconds"] += time.perf_counter() - t0
            totals[name]["tokens"] += len(rest)
            totals[name]["outputs"].append([first, *rest])
    reference = totals["plain"]["outputs"]
    results: dict[str, dict] = {}
    for name, decoder in methods.items():
        t = totals[name]
        stats = decoder.stats if decoder is not None else None
        results[name] = {
            "tok_per_s": t["tokens"] / t["seconds"] if t["seconds"] else 0.0,
            "acceptance_rate": stats.acceptance_rate if stats else None,
            "mean_accepted": stats.mean_accepted if stats else None,
            "switched_off": stats.times_switched_off if stats else 0,
            "exact": t["outputs"] == reference,
            "prime_s": statistics.median(t["prime_s"]) if t["prime_s"] else None,
        }
        log(f"decode {name}: {results[name]['tok_per_s']:.2f} tok/s")
    plain = results["plain"]["tok_per_s"]
    for r in results.values():
        r["speedup"] = r["tok_per_s"] / plain if plain else None
    return results


DIVERGENCE_PROMPTS = [q for q, _ in QUESTIONS[:3]]


def _greedy(engine, config, text: str, n_tokens: int) -> list[int]:
    from headstart.llm.sampling import Sampling
    from headstart.llm.stream import with_system_prompt

    engine.reset()
    prompt = engine.render_prompt(with_system_prompt([{"role": "user", "content": text}], config.system_prompt))
    return list(engine.generate(prompt, n_tokens, Sampling()))


def first_divergence(reference: list[int], other: list[int]) -> int | None:
    """Index of the first token where two greedy outputs differ (a length difference counts at the
    shorter one's end), or None when they are equal."""
    for i, (a, b) in enumerate(zip(reference, other)):
        if a != b:
            return i
    return None if len(reference) == len(other) else min(len(reference), len(other))


def _divergence(engine, config, threads, n_tokens: int, log) -> dict:
    """Greedy outputs of the model in bfloat16 (and of `engine` when it is quantised) against float32,
    on DIVERGENCE_PROMPTS: per prompt, the first divergent token index or None. Exactness is defined
    in float32 (bf16 kernels may reorder sums); this reports how often and where the others depart."""
    from dataclasses import replace

    from headstart.llm.engine import LLMEngine

    t0 = time.perf_counter()
    reference_engine = LLMEngine.from_config(replace(config, dtype="float32", quantize="none"), threads)
    reference = [_greedy(reference_engine, config, text, n_tokens) for text in DIVERGENCE_PROMPTS]
    del reference_engine
    variants = {"bf16": None}
    if engine.quantize is not None:
        variants[engine.quantize] = engine
    out: dict[str, dict] = {}
    for name, variant in variants.items():
        start = time.perf_counter()
        if variant is None:
            log("divergence: loading bfloat16 ...")
            variant = LLMEngine.from_config(replace(config, dtype="bfloat16", quantize="none"), threads)
        rows = []
        for text, ref in zip(DIVERGENCE_PROMPTS, reference):
            got = _greedy(variant, config, text, n_tokens)
            rows.append({"prompt": text, "first_divergence": first_divergence(ref, got),
                         "tokens": len(ref), "text": variant.tokenizer.decode(got, skip_special_tokens=True)})
        out[name] = {"prompts": rows, "diverged": sum(r["first_divergence"] is not None for r in rows),
                     "total": len(rows), "seconds": round(time.perf_counter() - start, 1)}
        log(f"divergence {name}: {out[name]['diverged']}/{len(rows)} prompts diverge from float32")
    out["seconds_total"] = round(time.perf_counter() - t0, 1)
    return out


def _quality(engine, config) -> dict:
    from headstart.llm.sampling import Sampling
    from headstart.llm.shaping import SentenceBudget
    from headstart.llm.stream import with_system_prompt

    right, answers = 0, []
    for question, fact in QUESTIONS:
        prompt = engine.render_prompt(with_system_prompt([{"role": "user", "content": question}],
                                                         config.system_prompt))
        engine.reset()
        budget = SentenceBudget(config.soft_max_tokens)
        ids: list[int] = []
        for token in engine.generate(prompt, config.max_new_tokens, Sampling()):
            ids.append(token)
            if budget.push(len(ids), engine.tokenizer.decode(ids, skip_special_tokens=True)):
                break
        text = engine.tokenizer.decode(ids, skip_special_tokens=True).strip()
        ok = re.search(fact, text.lower()) is not None
        right += ok
        answers.append({"question": question, "answer": text, "ok": ok})
    return {"score": right / len(QUESTIONS), "right": right, "total": len(QUESTIONS), "answers": answers}


def main(args: LLMBenchOptions) -> int:
    from headstart.llm.engine import LLMEngine
    from headstart.llm.speculative import (
        Decoder,
        DraftingPolicy,
        DraftModelDrafter,
        PromptLookupDrafter,
    )
    from headstart.models.store import ModelError

    def log(message: str) -> None:
        if not args.json:
            print(message, file=sys.stderr, flush=True)

    if args.threads < 1 or args.decode_tokens < 2 or args.repeats < 1 or args.divergence_tokens < 1:
        print("error: --threads, --repeats and --divergence-tokens must be >= 1, --decode-tokens >= 2",
              file=sys.stderr)
        return 2
    threads = ThreadPlan(torch_threads=args.threads)
    config = LLMConfig(model=args.model, dtype=args.dtype, max_new_tokens=60, quantize=args.quantize)
    draft_name = args.draft if args.draft is not None else DRAFTS.get(args.model)
    if draft_name == "none":
        draft_name = None
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # "loading ..." lines say what happens
    try:
        log(f"loading {args.model}")
        engine = LLMEngine.from_config(config, threads)
        from headstart.llm.speculative import resolve_draft_quantize

        draft_quantize = resolve_draft_quantize(
            replace(config, draft_quantize=None if args.draft_quantize == "none" else args.draft_quantize))
        draft = (LLMEngine.from_config(replace(config, model=draft_name, quantize=draft_quantize), threads)
                 if draft_name else None)
    except (ModelError, FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    engine.warm_up()
    if draft is not None:
        draft.warm_up()
    from headstart.llm.exactness import check_exactness

    exactness = check_exactness(engine, k=args.speculate_k or 4)
    log(f"self-test: {exactness.summary()}")
    log("TTFT ...")
    ttft = _ttft(engine, config, args.repeats, log)
    lookup = PromptLookupDrafter()
    methods: dict = {
        "plain": None,
        "prompt_lookup": Decoder(engine, lookup, args.speculate_k or 4, DraftingPolicy.for_drafter(lookup)),
    }
    if draft is not None:
        methods["draft_model"] = Decoder(engine, DraftModelDrafter(draft, engine), args.speculate_k or 3,
                                         DraftingPolicy())
    from headstart.bench.partial import (
        trained_self_drafter,  # partial-layer: a row when a head is trained
    )

    self_drafter = trained_self_drafter(engine, args.model)
    if self_drafter is not None:
        methods["self_speculative"] = Decoder(engine, self_drafter, args.speculate_k or 3, DraftingPolicy())
    log("decode ...")
    decode = _decode(engine, config, methods, args.decode_tokens, log)
    quality = None
    if not args.no_quality:
        log("quality ...")
        quality = _quality(engine, config)

    divergence = None
    if args.divergence:
        log("divergence ...")
        divergence = _divergence(engine, config, threads, args.divergence_tokens, log)

    cold = ttft["ttft_cold_s"]
    result = {
        "model": args.model,
        "draft_model": draft_name,
        "draft_quantize": draft_quantize if draft_name else None,
        "threads": args.threads,
        "dtype": str(engine.model.dtype).removeprefix("torch."),
        "quantize": engine.quantize,
        "cpu": cpu_description(),
        "selftest": exactness.as_dict(),
        "prompt_tokens": ttft["prompt_tokens"],
        "tail_tokens": ttft["tail_tokens"],
        "ttft_cold_s": round(cold, 4),
        "ttft_incremental_s": round(ttft["ttft_incremental_s"], 4),
        "ttft_head_start_s": round(ttft["ttft_head_start_s"], 4),
        "ttft_reduction": {
            "incremental": round(ttft["ttft_incremental_s"] / cold, 4),
            "head_start": round(ttft["ttft_head_start_s"] / cold, 4),
        },
        "decode_tok_per_s": {k: round(v["tok_per_s"], 2) for k, v in decode.items()},
        "acceptance_rate": {k: _round(v["acceptance_rate"]) for k, v in decode.items() if k != "plain"},
        "mean_accepted": {k: _round(v["mean_accepted"]) for k, v in decode.items() if k != "plain"},
        "speedup": {k: _round(v["speedup"]) for k, v in decode.items() if k != "plain"},
        "exact": {k: v["exact"] for k, v in decode.items() if k != "plain"},
        "switched_off": {k: v["switched_off"] for k, v in decode.items() if k != "plain"},
        "draft_prefill_s": {k: round(v["prime_s"], 3) for k, v in decode.items() if v["prime_s"] is not None},
        "quality_score": quality["score"] if quality else None,
    }
    if "self_speculative" in decode:  # early-exit rows: `headstart bench partial`
        ss = decode["self_speculative"]
        result["self_speculative"] = {"exit_layer": self_drafter.exit_layer, "acceptance_rate": _round(ss["acceptance_rate"]),
                                      "mean_accepted": _round(ss["mean_accepted"]), "speedup": _round(ss["speedup"]),
                                      "exact": ss["exact"]}
    if divergence is not None:
        result["bf16_divergence"] = [r["first_divergence"] for r in divergence["bf16"]["prompts"]]
        if engine.quantize is not None:
            result[f"{engine.quantize}_divergence"] = [r["first_divergence"] for r in divergence[engine.quantize]["prompts"]]
        result["divergence"] = divergence
    if not args.json:
        _print_table(result, decode, quality)
    print(json.dumps(result))
    return 0


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _print_table(result: dict, decode: dict, quality: dict | None) -> None:
    cold = result["ttft_cold_s"]
    quant = result["quantize"] or "no quantisation"
    drafter = (f"; drafter {result['draft_model']} ({result['draft_quantize'] or 'no quantisation'})"
               if result["draft_model"] else "")
    print(f"\nLLM bench: {result['model']} ({result['dtype']}, {quant}, {result['threads']} thread(s){drafter}); "
          f"prompt {result['prompt_tokens']} tokens, tail after partials {result['tail_tokens']} tokens")
    cpu = result["cpu"]
    print(f"CPU {cpu['model']} ({', '.join(cpu['flags']) or 'no AVX2'}; torch {cpu['torch_capability']}), "
          f"load {cpu['load_avg_1m']}; self-test: {'exact' if result['selftest']['exact'] else 'NOT exact'}")
    print(f"{'TTFT after end of turn':<28}{'seconds':>10}{'of cold':>10}")
    for name, key in (("cold prefill", "ttft_cold_s"), ("incremental prefill", "ttft_incremental_s"),
                      ("head start (LiveTurn)", "ttft_head_start_s")):
        print(f"{name:<28}{result[key]:>10.4f}{result[key] / cold:>10.1%}")
    target = result["quantize"] or {"float32": "fp32"}.get(result["dtype"], result["dtype"])
    print(f"\n{'decode':<16}{'tok/s':>8}{'speedup':>9}{'accept':>8}{'mean acc':>10}{'exact':>7}{'off':>5}"
          f"  quantisation")
    for name, r in decode.items():
        acc = "" if r["acceptance_rate"] is None else f"{r['acceptance_rate']:.0%}"
        mean = "" if r["mean_accepted"] is None else f"{r['mean_accepted']:.2f}"
        quant = f"target {target}" + (f", drafter {result['draft_quantize'] or 'fp32'}" if name == "draft_model" else "")
        print(f"{name:<16}{r['tok_per_s']:>8.2f}{r['speedup']:>8.2f}x{acc:>8}{mean:>10}{str(r['exact']):>7}"
              f"{r['switched_off']:>5}  {quant}")
    for name, seconds in (result.get("draft_prefill_s") or {}).items():
        print(f"{name}: the drafter's own prompt prefill {seconds:.2f} s per reply (median; not in tok/s)")
    for name, d in (result.get("divergence") or {}).items():
        if isinstance(d, dict):
            where = ", ".join("none" if r["first_divergence"] is None else f"token {r['first_divergence']}"
                              for r in d["prompts"])
            print(f"\n{name} vs float32 greedy: {d['diverged']}/{d['total']} prompts diverge ({where}); {d['seconds']} s")
    if quality:
        print(f"\nanswer quality: {quality['right']}/{quality['total']}")
        for a in quality["answers"]:
            print(f"  [{'x' if a['ok'] else ' '}] {a['question']} -> {a['answer'][:90]}")
    print()
