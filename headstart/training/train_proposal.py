"""Distil a proposal head (headstart/llm/proposal.py) from the model's own greedy replies, on CPU, in minutes.

1. Data: the model answers varied spoken-style prompts greedily (our system prompt; everyday questions,
   the bench's speech transcripts as user turns, follow-ups in a multi-turn chat, and any number of
   prompts composed by proposal_prompts.py). `generate_features` decodes them in batches over a shared
   system-prompt KV cache and records, at every position after the shared system prompt, the hidden
   state after each exit layer and the full model's next-token argmax and final (normed) hidden state
   (the same as one teacher-forced forward per conversation, `extract_features`, without the second
   pass). Cached on disk in shards keyed by the model, the prompts and the settings
   (`cached_generate_features`), so more data generates only the new shards and a rerun only trains.
2. Features of the held-out conversations come from the same pass; `extract_features` remains for
   sequences given from elsewhere.
3. Training: the adapter minimises cross-entropy against the full model's argmax plus KL to its
   softmax (both over the head's vocabulary V' = the tokens the full model chose in the training data;
   hard + soft distillation, Hinton et al. 2015), AdamW, a few epochs over the cached features.
4. Report: top-1 agreement with the full model on held-out conversations (the bench's questions and
   decode prompts plus every 8th prompt of ours), per exit layer and training-set size, trained vs
   untrained early exit, and the drafts per verify step greedy speculative decoding would accept
   (`draft_acceptance`, k = 3 and 4).
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from headstart.llm.proposal import LayerStack, ProposalHead
from headstart.corpus.texts import EVERYDAY

__all__ = ["Conversation", "Features", "TrainResult", "cached_generate_features", "collect_replies", "concat_features",
           "default_conversations", "draft_acceptance", "evaluate", "extract_features", "generate_features",
           "head_matches", "limit_training", "render_prompts", "train_head", "untrained_agreement"]

Progress = Callable[[str, int, int], None]  # (stage, done, total)

FOLLOW_UPS = [
    "Can you remind me which tram my sister wanted to take?", "What should we eat on Saturday night?",
    "Is the tile museum open on Sundays?", "How far is Belem from Alfama?", "Should we buy a travel card for the trams?",
    "What's a good breakfast spot near the cathedral?", "Could we fit in a day trip to Sintra?",
    "What should I pack for Lisbon in spring?", "Summarise our Friday plan in one sentence.",
    "Which viewpoint did you suggest for the sunset?",
]


@dataclass(frozen=True)
class Conversation:
    """Chat messages (no system prompt) ending with the user turn the model answers."""

    messages: tuple[tuple[str, str], ...]
    held_out: bool = False

    def as_messages(self) -> list[dict[str, str]]:
        return [{"role": r, "content": c} for r, c in self.messages]


def default_conversations(multi_turn_training: bool = True) -> list[Conversation]:
    """The training and held-out prompt set: held out are the bench's QUESTIONS and DECODE_PROMPTS (after
    its Lisbon CONVERSATION) and every 8th of our everyday prompts; the rest, the follow-ups in the same
    Lisbon chat and the bench speech transcripts (as things a user said) are for training."""
    from headstart.corpus import texts

    chat = tuple((m["role"], m["content"]) for m in texts.CONVERSATION)
    out = [Conversation((("user", q),), held_out=True) for q, _ in texts.QUESTIONS]
    out += [Conversation((*chat, ("user", t)), held_out=True) for t in texts.DECODE_PROMPTS]
    out += [Conversation((("user", q),), held_out=i % 8 == 7) for i, q in enumerate(EVERYDAY)]
    if multi_turn_training:  # long prompts: most of the data-generation time on a slow CPU
        out += [Conversation((*chat, ("user", t)),) for t in FOLLOW_UPS]
    out += [Conversation((("user", t.capitalize() + "."),)) for t in _transcripts()]
    return out


def _transcripts() -> list[str]:
    from headstart.corpus.recordings import recordings

    try:
        return sorted({r.text for r in recordings() if r.text})
    except (OSError, ValueError):
        return []


@dataclass
class Features:
    """Teacher-forced features at every kept position: `hidden[L]` [n, d] float32 after exit layer L,
    `final` [n, d] the full model's normed last hidden state, `target` [n] int64 its argmax token,
    `held_out` [n] bool (position belongs to a held-out conversation), `reply` [n] bool (a reply
    position rather than a prompt one), `conv` [n] int64 the index of the conversation (in the order
    given) the position belongs to."""

    hidden: dict[int, Any]
    final: Any
    target: Any
    held_out: Any
    reply: Any
    conv: Any = None


@dataclass
class TrainResult:
    """One trained head with its losses per epoch and held-out agreement (trained, untrained)."""

    head: ProposalHead
    losses: list[float] = field(default_factory=list)
    agreement: float = 0.0
    agreement_reply: float = 0.0
    untrained: float = 0.0
    untrained_reply: float = 0.0
    seconds: float = 0.0


def collect_replies(model: Any, tokenizer: Any, conversations: Sequence[Conversation], system_prompt: str,
                    max_new_tokens: int = 40, batch_size: int = 16, cache_path: Path | None = None,
                    progress: Progress | None = None) -> list[tuple[list[int], list[int]]]:
    """Greedy replies of `model` to each conversation: a list of (prompt ids, reply ids) with the reply
    ending at (and including) the first end-of-turn token or after `max_new_tokens`. Batched,
    left-padded `model.generate` (this is offline data, not the streaming path). With `cache_path`,
    the result is read from / written to that JSON file (keyed by the caller)."""
    import torch

    if cache_path is not None and cache_path.is_file():
        return [(p, r) for p, r in json.loads(cache_path.read_text())]
    prompts = render_prompts(tokenizer, conversations, system_prompt)
    ends = _end_ids(model, tokenizer)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else min(ends)
    # Similar lengths batched together: less left padding to compute.
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    replies: dict[int, list[int]] = {}
    for start in range(0, len(order), batch_size):
        members = order[start : start + batch_size]
        batch = [prompts[i] for i in members]
        width = max(map(len, batch))
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in batch])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in batch])
        with torch.inference_mode():
            gen = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new_tokens, do_sample=False,
                                 pad_token_id=pad, eos_token_id=sorted(ends), temperature=None, top_p=None, top_k=None)
        for i, row in zip(members, gen[:, width:].tolist()):
            reply = []
            for token in row:
                reply.append(int(token))
                if token in ends:
                    break
            replies[i] = reply
        if progress:
            progress("generate", min(start + batch_size, len(prompts)), len(prompts))
    out = [(prompts[i], replies[i]) for i in range(len(prompts))]
    if cache_path is not None:
        cache_path.parent.mkdir(parents=True, exist_ok=True)
        cache_path.write_text(json.dumps(out))
    return out


def render_prompts(tokenizer: Any, conversations: Sequence[Conversation], system_prompt: str) -> list[list[int]]:
    """Each conversation rendered with the chat template and the system prompt, ready for the reply."""
    from headstart.llm.stream import with_system_prompt

    prompts = []
    for conv in conversations:
        rendered = tokenizer.apply_chat_template(with_system_prompt(conv.as_messages(), system_prompt),
                                                 add_generation_prompt=True, tokenize=True)
        if isinstance(rendered, dict) or hasattr(rendered, "input_ids"):
            rendered = rendered["input_ids"]
        prompts.append([int(t) for t in rendered])
    return prompts


def generate_features(model: Any, prompts: Sequence[list[int]], exit_layers: Sequence[int], end_ids: set[int],
                      shared: int, max_new_tokens: int = 40, batch_size: int = 64, pad_id: int = 0,
                      progress: Progress | None = None, token_budget: int = 2048) -> tuple[list[list[int]], Features]:
    """Greedy replies and their features in one batched pass (no second, teacher-forced forward).

    The `shared` first tokens common to all prompts (the system prompt) are run once and their KV cache
    copied into each batch; the rest of each prompt is left-padded after it (padding masked out,
    positions given explicitly), then all rows decode greedily together, finished rows leaving the
    batch (`DynamicCache.batch_select_indices`). Every forward's hidden states are recorded, so the
    features are those `extract_features` gives for the same (prompt, reply) up to float rounding
    (batched and cached matmuls): the same positions, from the last shared one to the one before the
    reply's last token, in prompt order. A batch holds at most `batch_size` rows and, unless one prompt
    alone is longer, `token_budget` prompt tokens after the shared ones (padding included).
    Returns (replies, features with `held_out` all False);
    a reply ends at (and includes) its first end token or after `max_new_tokens`."""
    import copy

    import torch

    stack = LayerStack(model)
    for layer in exit_layers:
        if not 1 <= layer < stack.num_layers:
            raise ValueError(f"exit layer {layer} outside [1, {stack.num_layers - 1}]")
    if not prompts:
        raise ValueError("no prompts")
    start = max(0, min(shared, min(len(p) for p in prompts) - 1) - 1)
    if any(list(p[:start]) != list(prompts[0][:start]) for p in prompts):
        raise ValueError(f"the prompts do not share their first {start} tokens")
    device = stack.lm_head.weight.device
    prefix_cache = None
    with torch.inference_mode():
        if start:
            prefix_cache = model(input_ids=torch.tensor([prompts[0][:start]], device=device), use_cache=True).cache
    normed: bool | None = None
    rows_out: dict[int, dict[str, list]] = {}
    replies: dict[int, list[int]] = {}
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    # Similar lengths together (little padding); long prompts in smaller batches (bounded prefill memory:
    # all-position logits and hidden states of a [rows, width] prefill).
    batches: list[list[int]] = [[]]
    for i in order:
        rows, width = len(batches[-1]) + 1, len(prompts[i]) - start
        if batches[-1] and (rows > batch_size or rows * width > max(token_budget, width)):
            batches.append([])
        batches[-1].append(i)
    done_count = 0
    for members in batches:
        suffixes = [prompts[i][start:] for i in members]
        width = max(map(len, suffixes))
        n_rows = len(members)
        ids = torch.tensor([[pad_id] * (width - len(s)) + s for s in suffixes], device=device)
        mask = torch.tensor([[1] * start + [0] * (width - len(s)) + [1] * len(s) for s in suffixes], device=device)
        pos = torch.tensor([[0] * (width - len(s)) + list(range(start, start + len(s))) for s in suffixes], device=device)
        cache = None
        if prefix_cache is not None:
            cache = copy.deepcopy(prefix_cache)
            cache.batch_repeat_interleave(n_rows)
        for i in members:
            rows_out[i] = {"hidden": {L: [] for L in exit_layers}, "final": [], "target": []}
            replies[i] = []
        alive = list(members)
        with torch.inference_mode():
            out = model(input_ids=ids, attention_mask=mask, position_ids=pos, cache=cache, use_cache=True,
                        output_hidden_states=True)
            cache = out.cache
            if normed is None:  # transformers 5.x records the last layer's output after the final norm
                probe = out.hidden_states[-1][0, -1:]
                normed = torch.allclose(stack.lm_head(probe).float(), out.logits[0, -1:].float(), rtol=1e-3, atol=1e-3)
            lengths = [len(s) for s in suffixes]
            _record(rows_out, alive, out, exit_layers, stack, normed, keep=[range(width - n, width) for n in lengths])
            next_pos = torch.tensor([start + n for n in lengths], device=device)
            for step in range(max_new_tokens):
                tokens = out.logits[:, -1].argmax(-1)
                keep_rows = []
                for r, i in enumerate(alive):
                    token = int(tokens[r])
                    replies[i].append(token)
                    if token not in end_ids and len(replies[i]) < max_new_tokens:
                        keep_rows.append(r)
                if not keep_rows:
                    break
                if len(keep_rows) < len(alive):  # finished rows leave the batch
                    index = torch.tensor(keep_rows, device=device)
                    cache.batch_select_indices(index)
                    mask, next_pos, tokens = mask[index], next_pos[index], tokens[index]
                    alive = [alive[r] for r in keep_rows]
                mask = torch.cat([mask, torch.ones(len(alive), 1, dtype=mask.dtype, device=device)], dim=1)
                out = model(input_ids=tokens.unsqueeze(1), attention_mask=mask, position_ids=next_pos.unsqueeze(1),
                            cache=cache, use_cache=True, output_hidden_states=True)
                cache = out.cache
                _record(rows_out, alive, out, exit_layers, stack, normed, keep=[range(0, 1)] * len(alive))
                next_pos = next_pos + 1
        done_count += n_rows
        if progress:
            progress("generate", done_count, len(prompts))
    cat = torch.cat
    hidden = {L: cat([t for i in range(len(prompts)) for t in rows_out[i]["hidden"][L]]) for L in exit_layers}
    final = cat([t for i in range(len(prompts)) for t in rows_out[i]["final"]])
    target = cat([t for i in range(len(prompts)) for t in rows_out[i]["target"]])
    reply, conv = [], []
    for i in range(len(prompts)):
        n = sum(len(t) for t in rows_out[i]["target"])
        first_reply = len(prompts[i]) - 1 - start  # the last prompt position already predicts the reply
        reply.append(torch.arange(n) >= first_reply)
        conv.append(torch.full((n,), i, dtype=torch.long))
    features = Features(hidden, final, target, torch.zeros(len(target), dtype=torch.bool), cat(reply), cat(conv))
    return [replies[i] for i in range(len(prompts))], features


SHARD_CONVERSATIONS = 250


def cached_generate_features(model: Any, prompts: Sequence[list[int]], exit_layers: Sequence[int], end_ids: set[int],
                             shared: int, path: Path, max_new_tokens: int = 40, batch_size: int = 64, pad_id: int = 0,
                             progress: Progress | None = None) -> tuple[list[list[int]], Features, bool]:
    """`generate_features`, cached in one safetensors file at `path` (features stored as float16, read
    back as float32; the replies in its metadata). The caller keys `path` by the model, the prompts and
    the settings; a file that lacks one of `exit_layers` or holds other prompts is made again.
    Returns (replies, features, whether it came from the file)."""
    from safetensors import SafetensorError, safe_open
    from safetensors.torch import load_file, save_file

    if path.is_file():
        try:
            with safe_open(str(path), framework="pt") as f:
                meta = json.loads((f.metadata() or {}).get("headstart_shard", "{}"))
            if meta.get("prompts") == [list(p) for p in prompts] and set(exit_layers) <= set(meta.get("layers", [])):
                t = load_file(str(path))
                features = Features({L: t[f"hidden.{L}"].float() for L in exit_layers}, t["final"].float(), t["target"],
                                    t["held_out"], t["reply"], t["conv"])
                return meta["replies"], features, True
        except (OSError, ValueError, KeyError, SafetensorError):
            pass  # unreadable or foreign: make it again
    replies, features = generate_features(model, prompts, exit_layers, end_ids, shared, max_new_tokens, batch_size,
                                          pad_id, progress)
    tensors = {f"hidden.{L}": v.half().contiguous() for L, v in features.hidden.items()}
    tensors.update(final=features.final.half().contiguous(), target=features.target, held_out=features.held_out,
                   reply=features.reply, conv=features.conv)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    meta = {"prompts": [list(p) for p in prompts], "replies": replies, "layers": sorted(exit_layers)}
    save_file(tensors, str(tmp), metadata={"headstart_shard": json.dumps(meta)})
    tmp.replace(path)
    return replies, features, False


def concat_features(parts: Sequence[Features]) -> Features:
    """One Features of several, in order (conversation indices offset to stay distinct)."""
    import torch

    offset, convs = 0, []
    for part in parts:
        convs.append(part.conv + offset)
        offset += int(part.conv.max()) + 1 if len(part.conv) else 0
    cat = torch.cat
    layers = set.intersection(*(set(p.hidden) for p in parts))
    return Features({L: cat([p.hidden[L] for p in parts]) for L in sorted(layers)}, cat([p.final for p in parts]),
                    cat([p.target for p in parts]), cat([p.held_out for p in parts]), cat([p.reply for p in parts]),
                    cat(convs))


def _record(rows_out: dict, alive: list[int], out: Any, exit_layers: Sequence[int], stack: LayerStack, normed: bool,
            keep: list[range]) -> None:
    last = out.hidden_states[-1]
    final = last if normed else stack.norm(last)
    target = out.logits.argmax(-1)
    for r, i in enumerate(alive):
        sl = slice(keep[r].start, keep[r].stop)
        for L in exit_layers:
            rows_out[i]["hidden"][L].append(out.hidden_states[L][r, sl].float())
        rows_out[i]["final"].append(final[r, sl].float())
        rows_out[i]["target"].append(target[r, sl])


def _end_ids(model: Any, tokenizer: Any) -> set[int]:
    from headstart.llm.engine import _end_token_ids

    return _end_token_ids(model, tokenizer)


def extract_features(model: Any, sequences: Sequence[tuple[list[int], list[int]]], held_out: Sequence[bool],
                     exit_layers: Sequence[int], progress: Progress | None = None, shared: int | None = None) -> Features:
    """Run each (prompt, reply) once through the full model (teacher forcing) and keep, at each position
    from the first one where the prompts differ (the shared system prompt is skipped) up to the one
    before the reply's last token, the hidden states after `exit_layers`, the final normed hidden state
    and the argmax next token. `shared`: the length of the shared prefix (default: the prompts' own)."""
    import torch

    stack = LayerStack(model)
    for layer in exit_layers:
        if not 1 <= layer < stack.num_layers:
            raise ValueError(f"exit layer {layer} outside [1, {stack.num_layers - 1}]")
    if shared is None:
        shared = _shared_prefix([p for p, _ in sequences])
    hidden: dict[int, list] = {layer: [] for layer in exit_layers}
    finals, targets, held, reply, conv = [], [], [], [], []
    for i, ((prompt, answer), out_of_sample) in enumerate(zip(sequences, held_out)):
        ids = prompt + answer[:-1] if answer else prompt
        start = max(0, min(shared, len(prompt) - 1) - 1)
        with torch.inference_mode():
            out = model(input_ids=torch.tensor([ids]), output_hidden_states=True, use_cache=False)
        n = len(ids) - start
        for layer in exit_layers:
            hidden[layer].append(out.hidden_states[layer][0, start:].float())
        logits = out.logits[0, start:].float()
        targets.append(logits.argmax(-1))
        # The final normed hidden state gives the teacher's logits over any vocabulary subset later.
        last = out.hidden_states[-1][0, start:]
        finals.append(_normed_final(stack, last, out.logits[0, start:]).float())
        held.append(torch.full((n,), bool(out_of_sample)))
        reply.append(torch.arange(start, len(ids)) >= len(prompt) - 1)
        conv.append(torch.full((n,), i, dtype=torch.long))
        if progress:
            progress("features", i + 1, len(sequences))
    cat = torch.cat
    return Features({k: cat(v) for k, v in hidden.items()}, cat(finals), cat(targets), cat(held), cat(reply), cat(conv))


def _normed_final(stack: LayerStack, last: Any, logits: Any) -> Any:
    # transformers 5.24 records the last layer's output after the final norm; be safe either way.
    import torch

    with torch.inference_mode():
        is_normed = torch.allclose(stack.lm_head(last[:1]).float(), logits[:1].float(), rtol=1e-3, atol=1e-3)
        return last if is_normed else stack.norm(last)


def _shared_prefix(prompts: Sequence[Sequence[int]]) -> int:
    from headstart.llm.engine import common_prefix_len

    if len(prompts) < 2:
        return 0
    return min(common_prefix_len(prompts[0], p) for p in prompts[1:])


def untrained_agreement(model: Any, features: Features, layer: int, mask: Any) -> float:
    """Top-1 agreement of the untrained early exit (final norm + full LM head on the layer's hidden
    state) with the full model, over the positions `mask` selects."""
    import torch

    stack = LayerStack(model)
    x = features.hidden[layer][mask]
    if len(x) == 0:
        return 0.0
    hits = 0
    with torch.inference_mode():
        for chunk in range(0, len(x), 512):
            pred = stack.lm_head(stack.norm(x[chunk : chunk + 512].to(stack.lm_head.weight.dtype))).argmax(-1)
            hits += int((pred == features.target[mask][chunk : chunk + 512]).sum())
    return hits / len(x)


def evaluate(model: Any, head: ProposalHead, features: Features, mask: Any) -> float:
    """Top-1 agreement of `head` (over its vocabulary, mapped to full ids) with the full model at the
    positions `mask` selects."""
    import torch

    from headstart.llm.proposal import HeadRunner

    runner = HeadRunner(head, LayerStack(model))
    x = features.hidden[head.exit_layer][mask]
    y = features.target[mask]
    if len(x) == 0:
        return 0.0
    hits = 0
    with torch.inference_mode():
        for chunk in range(0, len(x), 512):
            idx = runner.logits(x[chunk : chunk + 512].unsqueeze(0)).argmax(-1)
            pred = runner.ids[idx] if runner.ids is not None else idx
            hits += int((pred == y[chunk : chunk + 512]).sum())
    return hits / len(x)


def train_head(model: Any, features: Features, exit_layer: int, kind: str = "linear", rank: int | None = None,
               epochs: int = 8, batch_size: int = 256, lr: float = 2e-3, weight_decay: float = 0.01,
               soft_weight: float = 0.5, seed: int = 0, progress: Progress | None = None,
               untrained: tuple[float, float] | None = None) -> TrainResult:
    """Train a head for `exit_layer` on the training positions of `features` (see the module docstring)
    and measure its held-out agreement. Deterministic for a given seed. `untrained`: the untrained
    exit's (all, reply) held-out agreement if already known (it costs a full LM head per position)."""
    import torch

    t0 = time.perf_counter()
    torch.manual_seed(seed)
    stack = LayerStack(model)
    train = ~features.held_out
    vocab = sorted(set(features.target[train].tolist()))
    head = ProposalHead.new(kind, stack.hidden_size, exit_layer, stack.num_layers, rank, vocab)
    index = torch.full((int(stack.lm_head.weight.shape[0]),), -1, dtype=torch.long)
    index[torch.tensor(vocab)] = torch.arange(len(vocab))
    weight = stack.lm_head.weight.detach().float().index_select(0, torch.tensor(vocab))
    norm = stack.norm
    x_all = features.hidden[exit_layer][train]
    y_all = index[features.target[train]]
    final_all = features.final[train]
    adapter = head.adapter.float().train().requires_grad_(True)
    opt = torch.optim.AdamW(adapter.parameters(), lr=lr, weight_decay=weight_decay)
    steps = epochs * math.ceil(len(x_all) / batch_size)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=max(1, steps), pct_start=0.1)
    losses = []
    step = 0
    for epoch in range(epochs):
        order = torch.randperm(len(x_all))
        total, count = 0.0, 0
        for b in range(0, len(order), batch_size):
            idx = order[b : b + batch_size]
            x, y = x_all[idx], y_all[idx]
            with torch.no_grad():
                teacher = torch.log_softmax(final_all[idx] @ weight.T, dim=-1)
            logits = norm(x + adapter(x)).float() @ weight.T
            logp = torch.log_softmax(logits, dim=-1)
            loss = torch.nn.functional.nll_loss(logp, y)
            if soft_weight:
                kl = torch.nn.functional.kl_div(logp, teacher, log_target=True, reduction="batchmean")
                loss = (1 - soft_weight) * loss + soft_weight * kl
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            step += 1
            total += float(loss.detach()) * len(idx)
            count += len(idx)
            if progress:
                progress(f"train L{exit_layer}", step, steps)
        losses.append(total / max(1, count))
    adapter.eval().requires_grad_(False)
    held = features.held_out
    held_reply = held & features.reply
    if untrained is None:
        untrained = (untrained_agreement(model, features, exit_layer, held),
                     untrained_agreement(model, features, exit_layer, held_reply))
    return TrainResult(
        head, losses,
        agreement=evaluate(model, head, features, held),
        agreement_reply=evaluate(model, head, features, held_reply),
        untrained=untrained[0], untrained_reply=untrained[1],
        seconds=time.perf_counter() - t0,
    )


def data_key(model_key: str, conversations: Sequence[Conversation], system_prompt: str, max_new_tokens: int) -> str:
    """A key for the cached replies: the model key and a hash of the prompts and settings."""
    blob = json.dumps([model_key, system_prompt, max_new_tokens, [c.messages for c in conversations]])
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def draft_acceptance(match: Any, conv: Any, k: int) -> dict[str, float]:
    """What greedy speculative decoding with this head would see on teacher-forced replies: `match` [n]
    bool says whether the head's guess equals the full model's token at each reply position (the first
    is the prompt's last position, whose token the prefill gives: never drafted), `conv` [n] which
    reply it belongs to (positions in order). From the second position on, each verify step accepts
    the run of matches from its position, at most k, then takes one token from the verify; since
    accepted drafts are the greedy tokens, the draft's hidden states are the teacher-forced ones, so
    this is exact for a drafter that always drafts k tokens (the last step of a reply is counted as
    drafting only up to the reply's end). Returns mean_accepted (drafts accepted per verify step),
    tokens_per_step (mean_accepted + 1, less at reply ends) and acceptance_rate (accepted / drafted)."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    flags = [bool(x) for x in match.tolist()]
    ids = conv.tolist()
    steps = accepted = drafted = tokens = 0
    start = 0
    while start < len(flags):
        end = start
        while end < len(flags) and ids[end] == ids[start]:
            end += 1
        p = start + 1
        while p < end:
            m = 0
            while m < k and p + m < end and flags[p + m]:
                m += 1
            steps += 1
            accepted += m
            drafted += min(k, end - p)
            tokens += min(m + 1, end - p)
            p += m + 1
        start = end
    return {"mean_accepted": accepted / max(1, steps), "tokens_per_step": tokens / max(1, steps),
            "acceptance_rate": accepted / max(1, drafted)}


def head_matches(model: Any, head: ProposalHead, features: Features, mask: Any) -> Any:
    """[m] bool: the head's guess equals the full model's token, at the positions `mask` selects."""
    import torch

    from headstart.llm.proposal import HeadRunner

    runner = HeadRunner(head, LayerStack(model))
    x = features.hidden[head.exit_layer][mask]
    y = features.target[mask]
    out = []
    with torch.inference_mode():
        for chunk in range(0, len(x), 512):
            idx = runner.logits(x[chunk : chunk + 512].unsqueeze(0)).argmax(-1)
            pred = runner.ids[idx] if runner.ids is not None else idx
            out.append(pred == y[chunk : chunk + 512])
    return torch.cat(out) if out else torch.zeros(0, dtype=torch.bool)


def limit_training(features: Features, positions: int | None) -> Features:
    """The held-out positions and the first `positions` training positions (whole conversations, in
    order: the hand-written set first, then the composed ones); None: all."""
    import torch

    if positions is None:
        return features
    train = ~features.held_out
    cum = torch.cumsum(train.long(), 0)
    # whole conversations: cut after the conversation holding the positions-th training position
    cut = int((cum < positions).sum())
    if cut < len(cum):
        last_conv = int(features.conv[cut])
        keep_train = train & ((torch.arange(len(train)) <= cut) | (features.conv == last_conv))
    else:
        keep_train = train
    keep = features.held_out | keep_train
    return Features({L: v[keep] for L, v in features.hidden.items()}, features.final[keep], features.target[keep],
                    features.held_out[keep], features.reply[keep], features.conv[keep])


# -- the run of `headstart llm train-proposal` (its flags: headstart/cli/train.py) ----------------------


@dataclass(frozen=True, slots=True)
class TrainProposalOptions:
    """The options of `headstart llm train-proposal`; their meaning and defaults: its `--help` (headstart/cli/)."""

    model: str
    exit_layer: int | None
    report_layers: str
    kind: str
    rank: int | None
    epochs: int
    max_new_tokens: int
    synthetic: int
    train_positions: str
    batch_size: int
    threads: int
    out: str | None
    no_save: bool
    quick: bool
    json: bool


def _parse_sizes(text: str) -> list[int | None]:
    sizes: list[int | None] = []
    for item in text.split(","):
        item = item.strip().lower()
        if not item:
            continue
        if item == "all":
            sizes.append(None)
        else:
            value = int(item.replace("k", "000"))
            if value < 1:
                raise ValueError(item)
            sizes.append(value)
    if not sizes:
        raise ValueError(text)
    return sizes


def main(args: TrainProposalOptions) -> int:
    import sys

    import torch
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from headstart.config import LLMConfig
    from headstart.llm.proposal import default_head_path, model_key
    from headstart.training.proposal_prompts import spoken_conversations
    from headstart.models.store import ModelError, cache_dir, resolve_model

    if args.threads < 1 or args.epochs < 1 or args.max_new_tokens < 2 or args.synthetic < 0 or args.batch_size < 1:
        print("error: --threads, --epochs and --batch-size must be >= 1, --max-new-tokens >= 2, --synthetic >= 0",
              file=sys.stderr)
        return 2
    try:
        sizes = _parse_sizes(args.train_positions)
    except ValueError:
        print(f"error: --train-positions must be comma-separated positive ints or 'all', got {args.train_positions!r}",
              file=sys.stderr)
        return 2
    try:
        folder = resolve_model(args.model)
    except (ModelError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    torch.set_num_threads(args.threads)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, local_files_only=True)
    model.eval().requires_grad_(False)
    try:
        stack = LayerStack(model)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    n = stack.num_layers
    exit_layer = args.exit_layer if args.exit_layer is not None else max(1, n // 4)
    try:
        layers = ([max(1, n // 6), max(1, n // 4), max(1, n // 3), max(1, n // 2)] if args.report_layers == "auto"
                  else [int(x) for x in args.report_layers.split(",") if x.strip()])
    except ValueError:
        print(f"error: --report-layers must be 'auto' or comma-separated ints, got {args.report_layers!r}", file=sys.stderr)
        return 2
    layers = sorted({*layers, exit_layer})
    if any(not 1 <= layer < n for layer in layers):
        print(f"error: exit layers must be in [1, {n - 1}] for this {n}-layer model, got {layers}", file=sys.stderr)
        return 2
    # Shards store these layers (n/6, n/4, n/3, n/2 and the asked ones) so that other choices reuse them.
    stored = sorted({*layers, max(1, n // 6), max(1, n // 4), max(1, n // 3), max(1, n // 2)})
    system_prompt = LLMConfig().system_prompt
    conversations = default_conversations(multi_turn_training=not args.quick)
    held_texts = [t for c in conversations if c.held_out for r, t in c.messages if r == "user"]
    synthetic = [Conversation(m) for m in spoken_conversations(args.synthetic, exclude=held_texts)]
    key = model_key(folder)
    t0 = time.perf_counter()
    interactive = sys.stderr.isatty()
    with Progress(TextColumn("{task.description:<12}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  disable=args.json or not interactive, transient=False) as bar:
        tasks: dict[str, Any] = {}
        last: dict[str, int] = {}

        def progress(stage: str, done: int, total: int) -> None:
            if not interactive and not args.json:  # a log file: a line every ~10 %
                step = max(1, total // 10)
                if done == total or done - last.get(stage, 0) >= step:
                    last[stage] = done
                    print(f"{stage}: {done}/{total} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
                return
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total)
            bar.update(tasks[stage], completed=done, total=total)

        base_prompts = render_prompts(tokenizer, conversations, system_prompt)
        shared = _shared_prefix(base_prompts)
        ends = _end_ids(model, tokenizer)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else min(ends)
        groups = [conversations] + [synthetic[i : i + SHARD_CONVERSATIONS]
                                    for i in range(0, len(synthetic), SHARD_CONVERSATIONS)]
        parts, cached_all = [], True
        for g, group in enumerate(groups):
            prompts = base_prompts if g == 0 else render_prompts(tokenizer, group, system_prompt)
            shard = data_key(key, group, system_prompt, args.max_new_tokens)
            path = cache_dir() / "proposal" / key / f"shard-{shard}.safetensors"
            _, part, cached = cached_generate_features(
                model, prompts, stored, ends, shared, path, args.max_new_tokens, args.batch_size, pad,
                lambda stage, done, total, g=g: progress(f"data {g + 1}/{len(groups)}", done, total))
            cached_all &= cached
            part.held_out = torch.tensor([group[int(c)].held_out for c in part.conv.tolist()], dtype=torch.bool) \
                if len(part.conv) else part.held_out
            parts.append(part)
        features = concat_features(parts)
        gen_s = time.perf_counter() - t0
        held_mask, held_reply_mask = features.held_out, features.held_out & features.reply
        untrained = {layer: (untrained_agreement(model, features, layer, held_mask),
                             untrained_agreement(model, features, layer, held_reply_mask)) for layer in layers}
        runs = []
        for size in sizes:
            subset = limit_training(features, size)
            for layer in layers:
                result = train_head(model, subset, layer, args.kind, args.rank, args.epochs, progress=progress,
                                    untrained=untrained[layer])
                runs.append((size, layer, subset, result))
    n_held = int(features.held_out.sum())
    held_reply = features.held_out & features.reply
    rows = []
    for size, layer, subset, r in runs:
        match = head_matches(model, r.head, subset, subset.held_out & subset.reply)
        conv = subset.conv[subset.held_out & subset.reply]
        spec = {k: draft_acceptance(match, conv, k) for k in (3, 4)}
        rows.append({"train_positions": int((~subset.held_out).sum()), "exit_layer": layer,
                     "agreement": round(r.agreement, 4), "agreement_reply": round(r.agreement_reply, 4),
                     "untrained": round(r.untrained, 4), "untrained_reply": round(r.untrained_reply, 4),
                     "agreement_train": round(evaluate(model, r.head, subset, ~subset.held_out), 4),
                     "mean_accepted_k3": round(spec[3]["mean_accepted"], 3),
                     "mean_accepted_k4": round(spec[4]["mean_accepted"], 3),
                     "acceptance_rate_k3": round(spec[3]["acceptance_rate"], 4),
                     "tokens_per_step_k3": round(spec[3]["tokens_per_step"], 3),
                     "tokens_per_step_k4": round(spec[4]["tokens_per_step"], 3),
                     "vocab_size": len(r.head.vocab_ids or ()), "first_loss": round(r.losses[0], 4),
                     "final_loss": round(r.losses[-1], 4), "train_s": round(r.seconds, 1)})
    chosen_size, _, chosen_subset, chosen = [x for x in runs if x[1] == exit_layer][-1]
    n_train = int((~chosen_subset.held_out).sum())
    chosen.head.meta = {
        "model_key": key, "kind": args.kind, "epochs": args.epochs, "train_positions": n_train,
        "held_out_positions": n_held, "agreement": chosen.agreement, "agreement_reply": chosen.agreement_reply,
        "untrained_agreement": chosen.untrained, "vocab_size": len(chosen.head.vocab_ids or ()),
        "synthetic_conversations": args.synthetic,
    }
    out = None
    if not args.no_save:
        out = Path(args.out) if args.out else default_head_path(folder, exit_layer)
        chosen.head.save(out)
    report = {
        "model": args.model, "num_layers": n, "exit_layer": exit_layer, "kind": args.kind, "rank": args.rank,
        "epochs": args.epochs, "head_path": str(out) if out else None,
        "conversations": len(conversations) + len(synthetic), "synthetic": len(synthetic),
        "train_positions": n_train, "held_out_positions": n_held, "held_out_reply_positions": int(held_reply.sum()),
        "data_cached": cached_all, "data_s": round(gen_s, 1), "total_s": round(time.perf_counter() - t0, 1),
        "runs": rows,
    }
    if not args.json:
        print(f"\nproposal head: {args.model} ({n} layers), {args.kind}, {n_held} held-out positions "
              f"({int(held_reply.sum())} reply), data {gen_s:.0f} s{' (cached)' if cached_all else ''}")
        print(f"{'train pos':>10}{'layer':>6}{'depth':>6}{'trained':>9}{'(reply)':>9}{'untrained':>10}{'(reply)':>9}"
              f"{'acc k3':>8}{'acc k4':>8}{'vocab':>7}{'train':>7}{'loss':>13}{'s':>6}")
        for row in rows:
            print(f"{row['train_positions']:>10}{row['exit_layer']:>6}{row['exit_layer'] / n:>6.2f}"
                  f"{row['agreement']:>9.1%}{row['agreement_reply']:>9.1%}{row['untrained']:>10.1%}"
                  f"{row['untrained_reply']:>9.1%}{row['mean_accepted_k3']:>8.2f}{row['mean_accepted_k4']:>8.2f}"
                  f"{row['vocab_size']:>7}{row['agreement_train']:>7.1%}{row['first_loss']:>6.2f}->{row['final_loss']:<5.2f}{row['train_s']:>6.0f}")
        if out:
            print(f"saved exit layer {exit_layer} head ({n_train} training positions) to {out}")
    print(json.dumps(report))
    return 0
