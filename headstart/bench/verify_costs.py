"""`headstart bench partial --verify-costs`: what one verify of k positions, the first L layers and one
EAGLE proposal step cost against one plain decode step, on the engine's own path (by default float32 +
the project's int8 layers with row-wise attention), and the speed-up bound they put on any drafter.

Cost model (Leviathan et al. 2023): with per-position acceptance a and k drafts, a verify step yields
E(a, k) = (1 - a^(k+1)) / (1 - a) tokens and costs k * c + v(k + 1) decode steps, where c is one draft
step and v(k + 1) the verify of the last token and the k drafts. Speed-up = E / (k c + v(k + 1)).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

__all__ = ["measure_costs", "speedup_table"]


def _median_s(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure_costs(engine: Any, prompt: list[int], exit_layers: list[int], ks: list[int], repeats: int = 7,
                  eagle_widths: list[int] | None = None, vocab_sizes: list[int] | None = None) -> dict:
    """Median seconds (one thread as the engine was loaded) of: a decode step after `prompt`; a verify of
    k positions for each k in `ks`; the first L decoder layers on one position for each L in
    `exit_layers`; the full LM head on one position; one EAGLE step (fc + one decoder layer with the
    model's widths and MLP width in `eagle_widths`, over a cache as long as the prompt, int8 like the
    engine when it is int8) and the LM head rows of `vocab_sizes` tokens. Leaves the engine's cache
    holding `prompt`."""
    import torch

    from headstart.llm.eagle import EagleCache, EagleConfig, EagleNet, inner_model

    model = engine.model
    inner = inner_model(model)
    engine.reset()
    first = int(engine.prefill(prompt).argmax())
    base = engine.num_tokens

    def decode():
        engine.decode(first)
        engine.crop(base)

    out: dict[str, Any] = {"context_tokens": base, "quantize": engine.quantize}

    def run(k: int) -> None:
        engine.verify([first] * k)
        engine.crop(base)

    decode()
    for k in ks:
        run(k)
    # interleaved (decode, then each k, per round): a load change on a shared machine hits them alike
    times: dict[int, list[float]] = {0: [], **{k: [] for k in ks}}
    for _ in range(repeats):
        for k in [0, *ks]:
            t0 = time.perf_counter()
            decode() if k == 0 else run(k)
            times[k].append(time.perf_counter() - t0)
    out["decode_s"] = statistics.median(times[0])
    verify = {k: statistics.median(times[k]) for k in ks}
    out["verify_s"] = verify
    h0 = inner.embed_tokens(torch.tensor([[first]]))
    raw = engine.raw_cache
    layers = {}
    for L in exit_layers:
        def partial(L=L):
            with torch.inference_mode():
                pos = torch.tensor([[base]])
                emb = inner.rotary_emb(h0, pos)
                h = h0
                for layer in inner.layers[:L]:
                    h = layer(h, attention_mask=None, position_ids=pos, position_embeddings=emb, use_cache=True,
                              **{engine._cache_kw: raw})
                    h = h[0] if isinstance(h, tuple) else h
            _crop_layers(raw, L, base)
        partial()
        layers[L] = _median_s(partial, repeats)
    out["layers_s"] = layers
    h = torch.randn(1, 1, model.config.hidden_size)
    with torch.inference_mode():
        out["lm_head_s"] = _median_s(lambda: model.lm_head(inner.norm(h)), repeats)
    eagle = {}
    for width in eagle_widths or []:
        cfg = EagleConfig.for_model(model.config, exit_layers[0], width)
        net = EagleNet(cfg).eval().requires_grad_(False)
        if engine.quantize == "int8":
            from headstart.llm.int8 import quantize_linears

            quantize_linears(net)
        cache = EagleCache()
        with torch.inference_mode():
            net.step(torch.randn(1, base, cfg.hidden_size), torch.randn(1, base, cfg.hidden_size), cache)

            def step():
                net.step(h, h, cache)
                cache.crop(base)
            step()
            eagle[width] = _median_s(step, repeats)
    out["eagle_step_s"] = eagle
    heads = {}
    for size in vocab_sizes or []:
        lin = torch.nn.Linear(model.config.hidden_size, size, bias=False)
        if engine.quantize == "int8":
            from headstart.llm.int8 import RowInt8Linear

            lin = RowInt8Linear(lin)
        with torch.inference_mode():
            heads[size] = _median_s(lambda: lin(inner.norm(h)), repeats)
    out["head_rows_s"] = heads
    return out


def _crop_layers(raw: Any, num_layers: int, num_tokens: int) -> None:
    for layer in raw.layers[:num_layers]:
        if layer.keys is not None and layer.keys.shape[-2] > num_tokens:
            layer.keys = layer.keys[..., :num_tokens, :]
            layer.values = layer.values[..., :num_tokens, :]


def expected_tokens(a: float, k: int) -> float:
    return float(k + 1) if a >= 1.0 else (1 - a ** (k + 1)) / (1 - a)


def speedup_table(costs: dict, draft_step_s: float, acceptances: list[float], ks: list[int]) -> list[dict]:
    """Predicted speed-up E(a, k) / (k c + v(k + 1)) per acceptance a and k, with c = draft_step_s /
    decode_s and v from the measured verify costs (k + 1 positions must have been measured)."""
    rows = []
    t = costs["decode_s"]
    for k in ks:
        v = costs["verify_s"].get(k + 1)
        if v is None:
            continue
        cost = k * draft_step_s / t + v / t
        rows.append({"k": k, "cost_steps": round(cost, 3),
                     **{f"a={a:g}": round(expected_tokens(a, k) / cost, 3) for a in acceptances}})
    return rows


def measure_pipeline(engine: Any, prompt: list[int], exit_layer: int, repeats: int = 9) -> dict:
    """The pipelined form of the founding idea on this CPU: layers L+1..N of step t (thread 1) beside
    layers 1..L of step t+1 on a guessed token (thread 2), each on one torch thread, against the two
    run one after the other, and against one decode step on 1 and on 2 intra-op threads. Median
    seconds; leaves the engine's cache holding `prompt` and torch on the thread count it found."""
    import threading

    import torch

    from headstart.llm.eagle import inner_model

    inner = inner_model(engine.model)
    layers = inner.layers
    engine.reset()
    first = int(engine.prefill(prompt).argmax())
    base = engine.num_tokens
    raw = engine.raw_cache
    kw = engine._cache_kw
    h0 = inner.embed_tokens(torch.tensor([[first]]))

    def run(hidden, start: int, stop: int, position: int):
        with torch.inference_mode():
            pos = torch.tensor([[position]])
            emb = inner.rotary_emb(hidden, pos)
            for layer in layers[start:stop]:
                out = layer(hidden, attention_mask=None, position_ids=pos, position_embeddings=emb, use_cache=True,
                            **{kw: raw})
                hidden = out[0] if isinstance(out, tuple) else out
        return hidden

    def crop() -> None:
        _crop_layers(raw, len(layers), base)

    def early_then_state():
        return run(h0, 0, exit_layer, base)

    seq, par = [], []
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for _ in range(repeats + 1):
            mid = early_then_state()
            t0 = time.perf_counter()
            run(mid, exit_layer, len(layers), base)
            run(h0, 0, exit_layer, base + 1)
            seq.append(time.perf_counter() - t0)
            crop()
            mid = early_then_state()
            thread = threading.Thread(target=run, args=(h0, 0, exit_layer, base + 1))
            t0 = time.perf_counter()
            thread.start()
            run(mid, exit_layer, len(layers), base)
            thread.join()
            par.append(time.perf_counter() - t0)
            crop()

        def decode() -> None:
            engine.decode(first)
            engine.crop(base)
        decode()
        one = _median_s(decode, repeats)
        torch.set_num_threads(2)
        decode()
        two = _median_s(decode, repeats)
    finally:
        torch.set_num_threads(before)
    return {"exit_layer": exit_layer, "late_plus_early_sequential_s": statistics.median(seq[1:]),
            "late_beside_early_two_threads_s": statistics.median(par[1:]), "decode_1_thread_s": one,
            "decode_2_threads_s": two}
