"""Train the EAGLE-style proposal network (headstart/llm/eagle.py) on the model's own greedy replies, on CPU.

1. Data (`collect`): the model (float32 + the project's int8 layers, as it runs by default; stock
   batched attention, whose rows differ from the engine's row-wise ones only in the last bits) answers
   the spoken-style prompts of train_proposal.default_conversations and proposal_prompts greedily, in
   left-padded batches after a shared system-prompt KV cache. The same pass records, at every position,
   the hidden state after each stored exit layer and the full model's greedy next token. Cached on disk
   (keyed by the model, the prompts, the layers and the settings).
2. Training (`train`): slot i reads (feature h_i, embedding of token i+1) and predicts the full model's
   token after position i+1 through the frozen final norm and LM head rows of the vocabulary subset V'
   (the tokens the full model chose in the training data); cross-entropy, unrolled over `steps` draft
   steps ("training-time test", Li et al. 2025, EAGLE-3): step j feeds the network's own output of
   step j-1 in place of the feature, so drafting at position j is trained as it runs. AdamW.
3. Report (`evaluate`): on held-out conversations (the bench's prompts and every 8th everyday one),
   top-1 agreement at draft position j = 1..k on reply slots (teacher-forced tokens: position j's
   agreement given that drafts 1..j-1 were right, i.e. its acceptance rate), and the tokens a greedy
   verify step would yield per step at k (a walk over each held-out reply).

`headstart llm train-eagle --model smollm2-135m --exit-layer 7`; the JSON line ends the report. Times are in docs/llm.md.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch loads when a function runs, not at import (the CLI builds its parser without it)
    import torch

    from headstart.llm.eagle import EagleNet

__all__ = ["EagleData", "collect", "evaluate", "train"]


@dataclass
class EagleData:
    """Recorded sequences: `tokens[c]` the ids of conversation c (prompt + reply), `features[L][c]`
    [len(tokens[c]) - 1, d] float16 the hidden state after layer L at each position but the last,
    `targets[c]` [len(tokens[c]) - 1] int64 the full model's greedy token after each position,
    `first_loss[c]` the first position whose target is trained (after the shared system prompt),
    `reply_start[c]` the first reply token's index, `held_out[c]`; `finals[c]` (None if not recorded)
    [len(tokens[c]) - 1, d] float16 the full model's last hidden state after its final norm at each of
    those positions (its logits over any vocabulary subset are the LM head rows times it: the teacher of
    the distillation loss)."""

    tokens: list[list[int]]
    features: dict[int, list[torch.Tensor]]
    targets: list[torch.Tensor]
    first_loss: list[int]
    reply_start: list[int]
    held_out: list[bool]
    finals: list[torch.Tensor] | None = None

    def subset(self, index: list[int]) -> EagleData:
        return EagleData([self.tokens[i] for i in index], {L: [f[i] for i in index] for L, f in self.features.items()},
                         [self.targets[i] for i in index], [self.first_loss[i] for i in index],
                         [self.reply_start[i] for i in index], [self.held_out[i] for i in index],
                         [self.finals[i] for i in index] if self.finals is not None else None)

    def positions(self, held_out: bool | None = None) -> int:
        return sum(len(t) - f for t, f, h in zip(self.targets, self.first_loss, self.held_out)
                   if held_out is None or h == held_out)


def collect(model: Any, prompts: list[list[int]], exit_layers: list[int], end_ids: set[int], max_new_tokens: int = 40,
            batch_size: int = 32, pad_id: int = 0, progress: Any = None, record_finals: bool = False) -> tuple:
    """Greedy replies to `prompts` and, per prompt, features after `exit_layers` and greedy targets at
    every position of prompt + reply[:-1]. Returns (replies, {L: [tensor [n, d] float16]}, [targets [n]]),
    and with `record_finals` a fourth item: [tensor [n, d] float16] the last hidden state after the final
    norm at those positions (the teacher's logits are the LM head of it)."""
    import torch

    from headstart.llm.eagle import inner_model

    n_prompts = len(prompts)
    shared = 0
    while all(len(p) > shared + 1 for p in prompts) and len({p[shared] for p in prompts}) == 1:
        shared += 1
    inner = inner_model(model)
    device = next(model.parameters()).device
    with torch.inference_mode():
        pre = model(input_ids=torch.tensor([prompts[0][:shared]]), use_cache=True, output_hidden_states=True,
                    logits_to_keep=1) if shared else None
    pre_feats = {L: pre.hidden_states[L][0].half() for L in exit_layers} if pre is not None else None
    pre_final = pre.hidden_states[-1][0] if pre is not None else None
    normed = _final_is_normed(model, pre) if pre is not None else None
    feats: dict[int, dict[int, list]] = {L: {i: [] for i in range(n_prompts)} for L in exit_layers}
    finals: dict[int, list] = {i: [] for i in range(n_prompts)}
    replies: dict[int, list[int]] = {i: [] for i in range(n_prompts)}
    order = sorted(range(n_prompts), key=lambda i: len(prompts[i]))
    done = 0
    for b in range(0, n_prompts, batch_size):
        members = order[b : b + batch_size]
        suffixes = [prompts[i][shared:] for i in members]
        width = max(map(len, suffixes))
        rows = len(members)
        ids = torch.tensor([[pad_id] * (width - len(s)) + s for s in suffixes], device=device)
        mask = torch.tensor([[1] * shared + [0] * (width - len(s)) + [1] * len(s) for s in suffixes], device=device)
        pos = torch.tensor([[0] * (width - len(s)) + list(range(shared, shared + len(s))) for s in suffixes])
        cache = None
        if pre is not None:
            cache = copy.deepcopy(pre.cache)
            cache.batch_repeat_interleave(rows)
        alive = list(members)
        with torch.inference_mode():
            out = model(input_ids=ids, attention_mask=mask, position_ids=pos, cache=cache, use_cache=True,
                        output_hidden_states=True, logits_to_keep=1)
            cache = out.cache
            if normed is None:
                normed = _final_is_normed(model, out)
            for r, i in enumerate(members):
                n = len(suffixes[r])
                for L in exit_layers:
                    feats[L][i].append(out.hidden_states[L][r, width - n :].half())
                finals[i].append(out.hidden_states[-1][r, width - n :])
            next_pos = torch.tensor([shared + len(s) for s in suffixes])
            tokens = out.logits[:, -1].argmax(-1)
            for _ in range(max_new_tokens):
                keep = []
                for r, i in enumerate(alive):
                    replies[i].append(int(tokens[r]))
                    if int(tokens[r]) not in end_ids and len(replies[i]) < max_new_tokens:
                        keep.append(r)
                if not keep:
                    break
                if len(keep) < len(alive):
                    index = torch.tensor(keep)
                    cache.batch_select_indices(index)
                    mask, next_pos, tokens = mask[index], next_pos[index], tokens[index]
                    alive = [alive[r] for r in keep]
                mask = torch.cat([mask, torch.ones(len(alive), 1, dtype=mask.dtype)], dim=1)
                out = model(input_ids=tokens.unsqueeze(1), attention_mask=mask, position_ids=next_pos.unsqueeze(1),
                            cache=cache, use_cache=True, output_hidden_states=True, logits_to_keep=1)
                cache = out.cache
                for r, i in enumerate(alive):
                    for L in exit_layers:
                        feats[L][i].append(out.hidden_states[L][r, -1:].half())
                    finals[i].append(out.hidden_states[-1][r, -1:])
                tokens = out.logits[:, -1].argmax(-1)
                next_pos = next_pos + 1
        done += rows
        if progress:
            progress(done, n_prompts)
    features = {L: [] for L in exit_layers}
    targets, finals_out = [], []
    with torch.inference_mode():
        for i in range(n_prompts):
            final = torch.cat(finals[i])
            if pre_final is not None:
                final = torch.cat([pre_final, final])
            if not normed:
                final = inner.norm(final)
            if record_finals:
                finals_out.append(final.half())
            # the greedy token after every position, in chunks (an all-position logits tensor is GBs)
            targets.append(torch.cat([model.lm_head(final[c : c + 256]).argmax(-1) for c in range(0, len(final), 256)]))
            for L in exit_layers:
                f = torch.cat(feats[L][i])
                features[L].append(torch.cat([pre_feats[L], f]) if pre_feats is not None else f)
    if record_finals:
        return [replies[i] for i in range(n_prompts)], features, targets, finals_out
    return [replies[i] for i in range(n_prompts)], features, targets


def _final_is_normed(model: Any, out: Any) -> bool:
    """transformers 5.x records the last layer's output after the final norm: check on one position."""
    import torch

    probe = out.hidden_states[-1][0, -1:]
    return bool(torch.allclose(model.lm_head(probe).float(), out.logits[0, -1:].float(), rtol=1e-3, atol=1e-3))


# -- training ---------------------------------------------------------------------------------------


def _batches(data: EagleData, layer: int, index: list[int], embed: Any, batch: int, offset: int = 0,
             finals: bool = False):
    """Right-padded batches: features [B, T, d], embeddings of tokens 1..T [B, T, d], targets [B, T]
    (the target of slot i is the greedy token after position i+1), loss mask [B, T], reply mask [B, T],
    and the full model's final hidden states at positions 1..T [B, T, d] (None unless `finals`)."""
    import torch

    for b in range(0, len(index), batch):
        members = index[b : b + batch]
        # slots 0..n-2: position i+1 needs a target (and, with offset 1, a feature)
        lengths = [len(data.targets[i]) - 1 for i in members]
        t = max(lengths)
        d = data.features[layer][members[0]].shape[1]
        feats = torch.zeros(len(members), t, d)
        toks = torch.zeros(len(members), t, dtype=torch.long)
        targets = torch.zeros(len(members), t, dtype=torch.long)
        loss_mask = torch.zeros(len(members), t, dtype=torch.bool)
        reply_mask = torch.zeros(len(members), t, dtype=torch.bool)
        teacher = torch.zeros(len(members), t, data.finals[members[0]].shape[1]) if finals else None
        for r, i in enumerate(members):
            n = lengths[r]
            feats[r, :n] = data.features[layer][i][offset : n + offset].float()
            toks[r, :n] = torch.tensor(data.tokens[i][1 : n + 1])
            targets[r, :n] = data.targets[i][1 : n + 1]
            loss_mask[r, max(0, data.first_loss[i] - 1) : n] = True
            # slot i drafts the token at index i+2; decoding drafts from the second reply token on
            reply_mask[r, max(0, data.reply_start[i] - 1) : n] = True
            if teacher is not None:
                teacher[r, :n] = data.finals[i][1 : n + 1].float()
        with torch.no_grad():
            emb = embed(toks).float()
        yield feats, emb, targets, loss_mask, reply_mask, teacher


def train_vocab(data: EagleData) -> list[int]:
    """V': the full model's tokens at the trained positions of the training conversations (sorted)."""
    return sorted({int(v) for i, h in enumerate(data.held_out) if not h
                   for v in data.targets[i][data.first_loss[i]:].tolist()})


def untrained(model: Any, data: EagleData, exit_layer: int, feature_offset: int, k: int) -> dict:
    """`evaluate` of a network as initialised: the logit lens of its feature over V' at every draft
    position (with feature_offset 1: the untrained early exit after layer L on the newest token)."""
    from headstart.llm.eagle import EagleConfig, EagleNet

    cfg = EagleConfig.for_model(model.config, exit_layer, 64, train_vocab(data), feature_offset)
    return evaluate(model, EagleNet(cfg).eval(), data, k)


def train(model: Any, data: EagleData, exit_layer: int, steps: int = 3, epochs: int = 4, intermediate_size: int | None = None,
          lr: float = 1e-3, batch: int = 8, step_weight: float = 0.8, seed: int = 0, feature_offset: int = 0,
          progress: Any = None, loss: str = "ce", reply_only: bool = False) -> tuple[EagleNet, list[float]]:
    """A trained network for `exit_layer` on the training conversations of `data`; returns (net, mean
    loss per epoch). V' = the targets of the training slots.

    `loss`: "ce" cross-entropy to the full model's greedy token; "kl" distillation, KL(p || q) with p the
    full model's softmax over V' (its LM head rows of V' on `data.finals`) and q the network's; "mix"
    their mean. `reply_only`: the loss on reply slots only (the slots decoding drafts), not on the user
    turn and template tokens after the system prompt. Raises ValueError for an unknown `loss` or "kl"/"mix"
    without `data.finals` (collect with record_finals)."""
    import torch

    from headstart.llm.eagle import EagleConfig, EagleNet, inner_model, lm_head_rows

    if loss not in ("ce", "kl", "mix"):
        raise ValueError(f"loss must be ce, kl or mix, got {loss!r}")
    distil = loss != "ce"
    if distil and data.finals is None:
        raise ValueError("the kl and mix losses need the full model's final hidden states (collect with record_finals)")
    torch.manual_seed(seed)
    inner = inner_model(model)
    train_idx = [i for i, h in enumerate(data.held_out) if not h]
    vocab = train_vocab(data)
    cfg = EagleConfig.for_model(model.config, exit_layer, intermediate_size, vocab, feature_offset)
    net = EagleNet(cfg)
    ids = torch.tensor(vocab)
    weight, bias = lm_head_rows(model.lm_head, ids)
    remap = torch.full((int(model.config.vocab_size) + 1,), -100, dtype=torch.long)
    remap[ids] = torch.arange(len(vocab))
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=0.0)
    total = epochs * math.ceil(len(train_idx) / batch)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=max(1, total), pct_start=0.1)
    norm = inner.norm
    losses = []
    gen = torch.Generator().manual_seed(seed)
    done = 0
    for epoch in range(epochs):
        order = [train_idx[i] for i in torch.randperm(len(train_idx), generator=gen).tolist()]
        # similar lengths together within chunks of 8 batches: less padding
        order = [i for c in range(0, len(order), batch * 8)
                 for i in sorted(order[c : c + batch * 8], key=lambda i: len(data.targets[i]))]
        total_loss, count = 0.0, 0
        net.train()
        for feats, emb, targets, loss_mask, reply_mask, teacher in _batches(
                data, exit_layer, order, inner.embed_tokens, batch, feature_offset, finals=distil):
            if reply_only:
                loss_mask = loss_mask & reply_mask
            outs = net.forward_unrolled(feats, emb, steps)
            value = 0.0
            wsum = 0.0
            for j, out in enumerate(outs, start=1):
                valid = loss_mask.clone()
                valid[:, : j - 1] = False
                if not bool(valid.any()):
                    continue
                logits = torch.nn.functional.linear(norm(out[valid]), weight, bias)
                term = 0.0
                if loss != "kl":
                    term = torch.nn.functional.cross_entropy(logits, remap[targets[valid]], ignore_index=-100)
                if distil:
                    with torch.no_grad():  # the teacher's log-probabilities over V'
                        p_log = torch.nn.functional.linear(teacher[valid], weight, bias).log_softmax(-1)
                    kl = torch.nn.functional.kl_div(logits.log_softmax(-1), p_log, log_target=True,
                                                    reduction="batchmean")
                    term = kl if loss == "kl" else 0.5 * (term + kl)
                value = value + step_weight ** (j - 1) * term
                wsum += step_weight ** (j - 1)
            if not wsum:
                continue
            value = value / wsum
            opt.zero_grad()
            value.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            sched.step()
            total_loss += float(value.detach())
            count += 1
            done += 1
            if progress:
                progress(done, total)
        losses.append(total_loss / max(1, count))
    net.eval().requires_grad_(False)
    return net, losses


def evaluate(model: Any, net: EagleNet, data: EagleData, k: int = 4, held_out: bool = True) -> dict:
    """Top-1 agreement at draft position 1..k on the reply slots of the held-out (or training)
    conversations, and the mean tokens per verify step of greedy speculative decoding with k drafts
    (walking each reply: a step drafts from a true slot, keeps the leading right drafts, yields them and
    one target token)."""
    import torch

    from headstart.llm.eagle import inner_model, lm_head_rows

    inner = inner_model(model)
    ids = torch.tensor(net.cfg.vocab_ids) if net.cfg.vocab_ids is not None else None
    weight, bias = lm_head_rows(model.lm_head, ids)
    index = [i for i, h in enumerate(data.held_out) if h == held_out]
    hits = [0] * k
    counts = [0] * k
    steps = tokens = accepted = 0
    with torch.inference_mode():
        for feats, emb, targets, _, reply_mask, _ in _batches(data, net.cfg.exit_layer, index, inner.embed_tokens, 16,
                                                           net.cfg.feature_offset):
            outs = net.forward_unrolled(feats, emb, k)
            correct = []
            for j, out in enumerate(outs, start=1):
                pred = torch.nn.functional.linear(inner.norm(out), weight, bias).argmax(-1)
                pred = ids[pred] if ids is not None else pred
                ok = pred == targets
                correct.append(ok)
                valid = reply_mask.clone()
                valid[:, : j - 1] = False
                # a chain starting before the reply drafts prompt tokens: not what decoding does
                start_ok = torch.zeros_like(valid)
                start_ok[:, j - 1 :] = reply_mask[:, : reply_mask.shape[1] - (j - 1)]
                valid &= start_ok
                hits[j - 1] += int(ok[valid].sum())
                counts[j - 1] += int(valid.sum())
            for r in range(feats.shape[0]):
                slots = reply_mask[r].nonzero().flatten().tolist()
                if not slots:
                    continue
                p, end = slots[0], slots[-1] + 1
                while p < end:
                    m = 0
                    while m < k and p + m < end and bool(correct[m][r, p + m]):
                        m += 1
                    steps += 1
                    accepted += m
                    tokens += min(m + 1, end - p)
                    p += m + 1
    return {"agreement": [round(h / c, 4) if c else None for h, c in zip(hits, counts)], "slots": counts[0],
            "tokens_per_step": round(tokens / max(1, steps), 3), "mean_accepted": round(accepted / max(1, steps), 3)}


# -- data on disk -------------------------------------------------------------------------------------


def data_path(folder: Path, key: str) -> Path:
    from headstart.llm.proposal import model_key
    from headstart.models.store import cache_dir

    return cache_dir() / "proposal" / model_key(folder) / f"eagle-data-{key}.pt"


def load_or_collect(model: Any, tokenizer: Any, folder: Path, conversations: list, exit_layers: list[int],
                    max_new_tokens: int, batch_size: int, quantize: str | None, log: Any,
                    system_prompt: str | None = None, need_finals: bool = False) -> tuple[EagleData, bool, float]:
    """The recorded data for `conversations` (train_proposal.Conversation) after `system_prompt` (None:
    LLMConfig's), from the cache or collected now in shards of 250 conversations (a longer run reuses the
    shards of a shorter one). A shard collected now also stores the final hidden states; `need_finals`
    recollects a cached shard that lacks them (one from before they were recorded). Returns (data, all
    cached, seconds spent collecting)."""
    import torch

    from headstart.config import LLMConfig
    from headstart.training.train_proposal import _end_ids, render_prompts

    system_prompt = LLMConfig().system_prompt if system_prompt is None else system_prompt
    prompts = render_prompts(tokenizer, conversations, system_prompt)
    ends = _end_ids(model, tokenizer)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else min(ends)
    shared = 0
    while all(len(p) > shared + 1 for p in prompts) and len({p[shared] for p in prompts}) == 1:
        shared += 1
    tokens, feats, targets, first_loss, reply_start = [], {L: [] for L in exit_layers}, [], [], []
    finals: list | None = []
    cached_all, spent = True, 0.0
    shard = 250
    for s in range(0, len(prompts), shard):
        part = prompts[s : s + shard]
        key = hashlib.sha256(json.dumps([part, sorted(exit_layers), max_new_tokens, quantize, prompts[0][:shared]])
                             .encode()).hexdigest()[:16]
        path = data_path(folder, key)
        loaded = None
        if path.is_file():
            try:
                loaded = torch.load(path, weights_only=True)
            except (OSError, RuntimeError, ValueError):
                loaded = None
        if loaded is not None and need_finals and "finals" not in loaded:
            loaded = None
        if loaded is None:
            cached_all = False
            t0 = time.perf_counter()
            log(f"collecting {len(part)} conversations ({s + len(part)}/{len(prompts)}) ...")
            replies, f, t, fin = collect(model, part, exit_layers, ends, max_new_tokens, batch_size, pad,
                                         progress=lambda d, n: log(f"  {d}/{n} ({time.perf_counter() - t0:.0f} s)")
                                         if d % (batch_size * 4) == 0 or d == n else None, record_finals=True)
            spent += time.perf_counter() - t0
            loaded = {"replies": replies, "features": {str(L): v for L, v in f.items()}, "targets": t, "finals": fin}
            path.parent.mkdir(parents=True, exist_ok=True)
            torch.save(loaded, path.with_suffix(".tmp"))
            path.with_suffix(".tmp").replace(path)
        for j, prompt in enumerate(part):
            reply = loaded["replies"][j]
            tokens.append(list(prompt) + list(reply))
            for L in exit_layers:
                feats[L].append(loaded["features"][str(L)][j])
            targets.append(loaded["targets"][j])
            if finals is not None and "finals" in loaded:
                finals.append(loaded["finals"][j])
            else:
                finals = None
            first_loss.append(shared)
            reply_start.append(len(prompt))
    held = [c.held_out for c in conversations]
    return EagleData(tokens, feats, targets, first_loss, reply_start, held, finals), cached_all, spent


def limit(data: EagleData, positions: int | None) -> EagleData:
    """The held-out conversations and the first training conversations holding `positions` trained
    positions (None: all)."""
    if positions is None:
        return data
    keep, count = [], 0
    for i, h in enumerate(data.held_out):
        if h:
            keep.append(i)
        elif count < positions:
            keep.append(i)
            count += len(data.targets[i]) - data.first_loss[i]
    return data.subset(keep)


# -- the run of `headstart llm train-eagle` (its flags: headstart/cli/train.py) ---------------------------


@dataclass(frozen=True, slots=True)
class TrainEagleOptions:
    """The options of `headstart llm train-eagle`; their meaning and defaults: its `--help` (headstart/cli/)."""

    model: str
    exit_layer: int | None
    report_layers: str
    synthetic: int
    train_positions: str
    steps: int
    k: int
    epochs: int
    intermediate_size: int
    lr: float
    feature_offset: int
    loss: str
    loss_positions: str
    batch_size: int
    max_new_tokens: int
    quantize: str
    threads: int
    out: str | None
    no_save: bool
    collect_only: bool
    system_prompt: str | None
    json: bool


def main(args: TrainEagleOptions) -> int:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from headstart.llm.eagle import default_eagle_path, save_eagle
    from headstart.models.store import ModelError, resolve_model
    from headstart.training.proposal_prompts import spoken_conversations
    from headstart.training.train_proposal import Conversation, default_conversations

    def log(msg: str) -> None:
        if not args.json:
            print(msg, file=sys.stderr, flush=True)

    if args.threads < 1 or args.epochs < 1 or args.steps < 1 or args.k < 1 or args.synthetic < 0:
        print("error: --threads, --epochs, --steps, --k must be >= 1 and --synthetic >= 0", file=sys.stderr)
        return 2
    try:
        sizes = [None if s.strip() == "all" else int(s) for s in args.train_positions.split(",") if s.strip()]
        extra = [int(x) for x in args.report_layers.split(",") if x.strip()]
    except ValueError:
        print("error: --train-positions and --report-layers take comma-separated ints", file=sys.stderr)
        return 2
    try:
        folder = resolve_model(args.model)
    except (ModelError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    torch.set_num_threads(args.threads)
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, local_files_only=True).eval()
    model.requires_grad_(False)
    if args.quantize == "int8":
        from headstart.llm.engine import quantize_model

        quantize_model(model, "int8")
    n = int(model.config.num_hidden_layers)
    exit_layer = args.exit_layer if args.exit_layer is not None else max(1, n // 4)
    layers = sorted({exit_layer, *extra})
    if any(not 1 <= L < n for L in layers):
        print(f"error: exit layers must be in [1, {n - 1}], got {layers}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    conversations = default_conversations(multi_turn_training=True)
    held_texts = [t for c in conversations if c.held_out for r, t in c.messages if r == "user"]
    conversations += [Conversation(m) for m in spoken_conversations(args.synthetic, exclude=held_texts)]
    from headstart.config import LLMConfig

    system_prompt = LLMConfig().system_prompt if args.system_prompt is None else args.system_prompt
    data, cached, data_s = load_or_collect(model, tokenizer, folder, conversations, layers, args.max_new_tokens,
                                           args.batch_size, args.quantize, log, system_prompt,
                                           need_finals=args.loss != "ce")
    if args.collect_only:
        print(json.dumps({"model": args.model, "conversations": len(conversations), "data_cached": cached,
                          "data_s": round(data_s, 1), "train_positions": data.positions(False),
                          "held_out_positions": data.positions(True)}))
        return 0
    rows, chosen = [], None
    for size in sizes:
        subset = limit(data, size)
        for L in layers:
            t1 = time.perf_counter()
            last = [0.0]

            def progress(d: int, total: int) -> None:
                if time.perf_counter() - last[0] > 30:
                    last[0] = time.perf_counter()
                    log(f"  train L={L} size={size}: {d}/{total} ({time.perf_counter() - t1:.0f} s)")

            net, losses = train(model, subset, L, args.steps, args.epochs, args.intermediate_size, args.lr,
                                feature_offset=args.feature_offset, progress=progress, loss=args.loss,
                                reply_only=args.loss_positions == "reply")
            train_s = time.perf_counter() - t1
            held = evaluate(model, net, subset, args.k)
            base = untrained(model, subset, L, args.feature_offset, 1)
            rows.append({"train_positions": subset.positions(False), "exit_layer": L, "agreement": held["agreement"],
                         "untrained": base["agreement"][0],
                         "tokens_per_step": held["tokens_per_step"], "mean_accepted": held["mean_accepted"],
                         "held_out_slots": held["slots"], "vocab_size": len(net.cfg.vocab_ids or ()),
                         "losses": [round(x, 3) for x in losses], "train_s": round(train_s, 1)})
            log(f"  {rows[-1]}")
            if L == exit_layer:
                chosen = (net, rows[-1])
    net, row = chosen
    net.cfg.meta = {"system_prompt_sha256": hashlib.sha256(system_prompt.encode()).hexdigest()[:16],
                    "train_positions": row["train_positions"], "agreement": row["agreement"], "steps": args.steps,
                    "epochs": args.epochs, "quantize": args.quantize, "synthetic": args.synthetic,
                    "loss": args.loss, "loss_positions": args.loss_positions}
    out = None
    if not args.no_save:
        out = Path(args.out) if args.out else default_eagle_path(folder, exit_layer)
        save_eagle(net, out)
    params = sum(p.numel() for p in net.parameters())
    report = {"model": args.model, "num_layers": n, "exit_layer": exit_layer, "quantize": args.quantize,
              "loss": args.loss, "loss_positions": args.loss_positions,
              "conversations": len(conversations), "held_out_positions": data.positions(True),
              "data_cached": cached, "data_s": round(data_s, 1), "total_s": round(time.perf_counter() - t0, 1),
              "params": params, "path": str(out) if out else None, "runs": rows}
    if not args.json:
        print(f"\nEAGLE proposal network: {args.model} ({n} layers), {params / 1e6:.2f} M parameters, "
              f"{args.steps} unrolled steps, {args.epochs} epochs, data {data_s:.0f} s{' (cached)' if cached else ''}")
        print(f"{'train pos':>10}{'layer':>6}" + "".join(f"{'pos ' + str(j):>8}" for j in range(1, args.k + 1))
              + f"{'untrained':>10}{'tok/step':>10}{'vocab':>7}{'train s':>9}")
        for r in rows:
            print(f"{r['train_positions']:>10}{r['exit_layer']:>6}"
                  + "".join(f"{a:>8.1%}" if a is not None else f"{'':>8}" for a in r["agreement"])
                  + f"{r['untrained']:>10.1%}{r['tokens_per_step']:>10.2f}{r['vocab_size']:>7}{r['train_s']:>9.0f}")
        if out:
            print(f"saved exit layer {exit_layer} network to {out}")
    print(json.dumps(report))
    return 0

