"""An EAGLE-style proposal network on an early exit layer: one small decoder layer with its own KV cache
over the context, reading the target's hidden state after exit layer L and the embedding of the next
token, drafting k tokens autoregressively through the model's frozen final norm and LM head.

Slot i of the network pairs the target's feature at position i (the hidden state after decoder layer
L, `h_i`) with the embedding of token i+1, `e(x_{i+1})`; its output `o_i` (a residual-stream vector of
width d) goes through the model's final norm and (a vocabulary subset of) its LM head and predicts the
full model's greedy token after position i+1 (Li et al. 2024, "EAGLE: Speculative Sampling Requires
Rethinking Feature Uncertainty": the feature of one position and the token sampled after it). The
target's features come free: a forward hook on layer L records them for every position the engine
runs (prefill, decode, verify). After a verify step the newest token is the target's own, so the
first draft's slot holds only true features; drafted slots feed the network's own output back in place
of the feature (trained for, see headstart/training/train_eagle.py: "training-time test", Li et al.
2025, EAGLE-3), and are cropped from the network's cache when the proposal is done.

Shapes: features and embeddings [1, q, d] float32; the network's cache per slot is one layer's keys and
values [1, kv_heads, slots, head_dim]. The network is the model family's decoder layer written out
(RMSNorm, grouped-query attention with RoPE, SwiGLU MLP), so it needs no transformers internals.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

__all__ = ["EagleCache", "EagleConfig", "EagleDrafter", "EagleNet", "FeatureRecorder", "default_eagle_path",
           "load_eagle", "save_eagle"]

_FORMAT = 1


@dataclass
class EagleConfig:
    """The network's shape and what it was trained for: `exit_layer` (1-based: the hidden state after
    decoder layer `exit_layer` of `num_layers`), widths of the target model (`hidden_size`, heads),
    the MLP width `intermediate_size` (may be smaller than the model's), the vocabulary subset
    `vocab_ids` (sorted ints; None: the whole vocabulary) and `feature_offset`: 0 pairs the feature of
    position i with token i+1 (EAGLE: the features come free from the target's own forwards), 1 pairs
    the feature of position i+1 with token i+1 (the first draft then runs layers 1..L on the newest
    token, as partial-layer drafting does, and sees that token through L layers)."""

    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    exit_layer: int
    num_layers: int
    rope_theta: float = 10000.0
    rms_eps: float = 1e-6
    vocab_ids: list[int] | None = None
    feature_offset: int = 0
    meta: dict = field(default_factory=dict)

    @staticmethod
    def for_model(model_config: Any, exit_layer: int, intermediate_size: int | None = None,
                  vocab_ids: Sequence[int] | None = None, feature_offset: int = 0) -> EagleConfig:
        """The shape matching a transformers Llama/Qwen2-style config. ValueError for an exit layer
        outside [1, num_layers - 1]."""
        n = int(model_config.num_hidden_layers)
        if not 1 <= exit_layer < n:
            raise ValueError(f"exit layer must be in [1, {n - 1}] for a {n}-layer model, got {exit_layer}")
        d = int(model_config.hidden_size)
        heads = int(model_config.num_attention_heads)
        rope = getattr(model_config, "rope_parameters", None) or {}
        theta = float(rope.get("rope_theta", getattr(model_config, "rope_theta", 10000.0)))
        return EagleConfig(
            hidden_size=d, num_heads=heads, num_kv_heads=int(getattr(model_config, "num_key_value_heads", heads)),
            head_dim=int(getattr(model_config, "head_dim", None) or d // heads),
            intermediate_size=int(intermediate_size or model_config.intermediate_size), exit_layer=exit_layer,
            num_layers=n, rope_theta=theta, rms_eps=float(getattr(model_config, "rms_norm_eps", 1e-6)),
            vocab_ids=sorted(set(int(v) for v in vocab_ids)) if vocab_ids is not None else None,
            feature_offset=feature_offset)


class _RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


class EagleCache:
    """The network's own KV cache: keys and values [1, kv_heads, slots, head_dim]."""

    def __init__(self) -> None:
        self.keys: torch.Tensor | None = None
        self.values: torch.Tensor | None = None

    def __len__(self) -> int:
        return 0 if self.keys is None else int(self.keys.shape[2])

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.keys is None:
            self.keys, self.values = k, v
        else:
            self.keys = torch.cat([self.keys, k], dim=2)
            self.values = torch.cat([self.values, v], dim=2)
        return self.keys, self.values

    def crop(self, slots: int) -> None:
        if self.keys is not None and self.keys.shape[2] > slots:
            self.keys, self.values = self.keys[:, :, :slots], self.values[:, :, :slots]

    def reset(self) -> None:
        self.keys = self.values = None


class EagleNet(nn.Module):
    """fc([norm(feature); norm(embedding)]) -> one decoder layer -> output o (pre-final-norm, width d).

    `forward_unrolled` is the training pass over whole sequences for steps 1..S at once; `step` the
    incremental pass over new slots with an `EagleCache`. Both compute the same function: slot i at
    step 1 attends to slots 0..i; at step j it is the (j-1)-th drafted slot after the true slot
    i-j+1 and attends to true slots 0..i-j+1 and to the drafted slots of its own chain."""

    def __init__(self, cfg: EagleConfig) -> None:
        super().__init__()
        d, hd = cfg.hidden_size, cfg.head_dim
        self.cfg = cfg
        self.feat_norm = _RMSNorm(d, cfg.rms_eps)
        self.emb_norm = _RMSNorm(d, cfg.rms_eps)
        self.fc = nn.Linear(2 * d, d, bias=False)
        self.attn_norm = _RMSNorm(d, cfg.rms_eps)
        self.q_proj = nn.Linear(d, cfg.num_heads * hd, bias=True)
        self.k_proj = nn.Linear(d, cfg.num_kv_heads * hd, bias=True)
        self.v_proj = nn.Linear(d, cfg.num_kv_heads * hd, bias=True)
        self.o_proj = nn.Linear(cfg.num_heads * hd, d, bias=False)
        self.mlp_norm = _RMSNorm(d, cfg.rms_eps)
        self.gate_proj = nn.Linear(d, cfg.intermediate_size, bias=False)
        self.up_proj = nn.Linear(d, cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, d, bias=False)
        inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
        self.register_buffer("inv_freq", inv, persistent=False)
        # Initialised as the logit lens of its feature: fc passes the normed feature through unchanged and
        # the attention and MLP branches add zero, so training starts from the untrained early exit
        # (with feature_offset 1: the final norm and LM head on the hidden state after layer L).
        gen = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for lin in (self.fc, self.q_proj, self.k_proj, self.v_proj, self.gate_proj, self.up_proj):
                lin.weight.normal_(0.0, 0.02, generator=gen)
                if lin.bias is not None:
                    lin.bias.zero_()
            self.fc.weight[:, :d].copy_(torch.eye(d))
            self.o_proj.weight.zero_()
            self.down_proj.weight.zero_()

    # -- pieces ---------------------------------------------------------------------------------------

    def _rope(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """x [B, heads, T, hd], positions [T] -> rotated x (rotate-half convention)."""
        angles = positions.to(self.inv_freq.dtype)[:, None] * self.inv_freq[None, :]
        emb = torch.cat([angles, angles], dim=-1)
        cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos + rotated * sin

    def inputs(self, features: torch.Tensor, embeddings: torch.Tensor) -> torch.Tensor:
        """[B, T, d] features and [B, T, d] embeddings -> the layer's input [B, T, d]."""
        return self.fc(torch.cat([self.feat_norm(features), self.emb_norm(embeddings)], dim=-1))

    def _qkv(self, x: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        c = self.cfg
        b, t, _ = x.shape
        h = self.attn_norm(x)
        q = self.q_proj(h).view(b, t, c.num_heads, c.head_dim).transpose(1, 2)
        k = self.k_proj(h).view(b, t, c.num_kv_heads, c.head_dim).transpose(1, 2)
        v = self.v_proj(h).view(b, t, c.num_kv_heads, c.head_dim).transpose(1, 2)
        return self._rope(q, positions), self._rope(k, positions), v

    def _finish(self, x: torch.Tensor, attn: torch.Tensor) -> torch.Tensor:
        """attn [B, heads, T, hd] -> the layer's output o [B, T, d] (residual + attention + MLP)."""
        b, _, t, _ = attn.shape
        x = x + self.o_proj(attn.transpose(1, 2).reshape(b, t, -1))
        h = self.mlp_norm(x)
        return x + self.down_proj(nn.functional.silu(self.gate_proj(h)) * self.up_proj(h))

    def _expand(self, kv: torch.Tensor) -> torch.Tensor:
        return kv.repeat_interleave(self.cfg.num_heads // self.cfg.num_kv_heads, dim=1)

    # -- incremental ----------------------------------------------------------------------------------

    def step(self, features: torch.Tensor, embeddings: torch.Tensor, cache: EagleCache) -> torch.Tensor:
        """Run q new slots ([1, q, d] each) after the `len(cache)` cached ones, appending their keys and
        values; slot i attends to every cached slot and the new ones up to itself. Returns o [1, q, d]."""
        x = self.inputs(features, embeddings)
        start, q = len(cache), x.shape[1]
        positions = torch.arange(start, start + q, device=x.device)
        qh, k, v = self._qkv(x, positions)
        keys, values = cache.append(k, v)
        mask = None
        if q > 1:
            allowed = torch.arange(start + q, device=x.device)[None, :] <= positions[:, None]
            mask = torch.zeros(q, start + q, dtype=x.dtype, device=x.device).masked_fill_(~allowed, float("-inf"))
        # grouped-query attention without copying the cache per head (enable_gqa): a copy per draft step
        # cost more than the rest of the step (measured, docs/llm.md)
        attn = nn.functional.scaled_dot_product_attention(qh, keys, values, attn_mask=mask,
                                                          enable_gqa=self.cfg.num_heads != self.cfg.num_kv_heads)
        return self._finish(x, attn)

    # -- training -------------------------------------------------------------------------------------

    def forward_unrolled(self, features: torch.Tensor, embeddings: torch.Tensor, steps: int) -> list[torch.Tensor]:
        """The outputs o^1..o^steps [B, T, d] for whole sequences of T slots (features [B, T, d]: h_i;
        embeddings [B, T, d]: e(x_{i+1})). Step 1 reads the true features; step j reads o^{j-1} of the
        slot before (shifted right by one) with the same embeddings, and slot i attends to step-1 keys
        0..i-j+1 and to the step-s key at slot i-j+s for s = 2..j (its own drafted chain), exactly as
        `step` does during drafting. Rows i < j-1 have no chain (their outputs are meaningless)."""
        b, t, d = features.shape
        device = features.device
        positions = torch.arange(t, device=device)
        scale = 1.0 / math.sqrt(self.cfg.head_dim)
        neg = torch.finfo(features.dtype).min
        outs: list[torch.Tensor] = []
        keys: list[torch.Tensor] = []
        values: list[torch.Tensor] = []
        feats = features
        for j in range(1, steps + 1):
            x = self.inputs(feats, embeddings)
            qh, k, v = self._qkv(x, positions)
            keys.append(self._expand(k))
            values.append(self._expand(v))
            scores = torch.matmul(qh, keys[0].transpose(-1, -2)) * scale  # [B, H, T, T]
            allowed = positions[None, :] <= positions[:, None] - (j - 1)
            scores = scores.masked_fill(~allowed, neg)
            diag_scores, diag_values = [], []
            for s in range(2, j + 1):
                shift = j - s  # key of step s at slot i - shift
                ks = _shift_right(keys[s - 1], shift)
                diag_scores.append(((qh * ks).sum(-1) * scale).masked_fill(positions < shift, neg).unsqueeze(-1))
                diag_values.append(_shift_right(values[s - 1], shift))
            weights = torch.softmax(torch.cat([scores, *diag_scores], dim=-1), dim=-1)
            attn = torch.matmul(weights[..., :t], values[0])
            for n, vs in enumerate(diag_values):
                attn = attn + weights[..., t + n : t + n + 1] * vs
            out = self._finish(x, attn)
            outs.append(out)
            feats = _shift_right(out, 1, dim=1)
        return outs


def _shift_right(x: torch.Tensor, shift: int, dim: int = 2) -> torch.Tensor:
    """x moved `shift` places towards higher indices along `dim` (zeros fill the front)."""
    if shift == 0:
        return x
    pad = torch.zeros_like(x.narrow(dim, 0, shift))
    return torch.cat([pad, x.narrow(dim, 0, x.shape[dim] - shift)], dim=dim)


# -- the frozen output side -------------------------------------------------------------------------


def lm_head_rows(lm_head: Any, ids: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The float32 weight rows [|ids|, d] (and bias) of a model's LM head for the token ids `ids` (None:
    all), from a float `nn.Linear` or the project's int8 `RowInt8Linear` (dequantised: the int8 model's
    own weights)."""
    weight = getattr(lm_head, "weight", None)
    if not isinstance(weight, torch.Tensor):
        packed = getattr(lm_head, "_packed", None)
        if packed is None:
            raise ValueError(f"cannot read the LM head weights of {type(lm_head).__name__}")
        qweight, _ = torch.ops.quantized.linear_unpack(packed)
        weight = qweight.dequantize()[:, : lm_head.in_features]
    bias = getattr(lm_head, "bias", None)
    weight = weight.detach().float()
    if ids is not None:
        weight = weight.index_select(0, ids)
        bias = None if bias is None else bias.index_select(0, ids)
    return weight.contiguous(), None if bias is None else bias.detach().float()


def inner_model(model: Any) -> Any:
    """`model.model` with embed_tokens, layers and norm; ValueError for another layout."""
    inner = getattr(model, "model", None)
    if inner is None or not all(hasattr(inner, p) for p in ("embed_tokens", "layers", "norm")) \
            or not hasattr(model, "lm_head"):
        raise ValueError(f"{type(model).__name__} is not a Llama-style causal LM (model.model.embed_tokens, "
                         "layers, norm and model.lm_head): the EAGLE drafter does not support it")
    return inner


# -- recording the target's features ------------------------------------------------------------------


class FeatureRecorder:
    """A forward hook on decoder layer L (1-based: its output is the hidden state after layer L) that
    keeps the feature of every position the model runs, indexed by position (from `position_ids`), for
    one sequence at a time (batch 1). `written` counts the positions 0..written-1 recorded without a
    gap since the hook was attached. `remove()` detaches it."""

    def __init__(self, model: Any, exit_layer: int) -> None:
        layers = inner_model(model).layers
        if not 1 <= exit_layer < len(layers):
            raise ValueError(f"exit layer must be in [1, {len(layers) - 1}], got {exit_layer}")
        self.buffer = torch.zeros(0, int(model.config.hidden_size))
        self.written = 0
        self._handle = layers[exit_layer - 1].register_forward_hook(self._hook, with_kwargs=True)

    def _hook(self, module: Any, args: Any, kwargs: dict, output: Any) -> None:
        hidden = output[0] if isinstance(output, tuple) else output
        if hidden.shape[0] != 1:
            return
        pos = kwargs.get("position_ids")
        if pos is None:
            pos = kwargs.get("cache_position")
        if pos is None:
            return
        pos = pos.reshape(-1)
        start, q = int(pos[0]), hidden.shape[1]
        need = start + q
        with torch.inference_mode():  # one kind of tensor whatever mode the forward ran in
            if need > self.buffer.shape[0]:
                grown = torch.zeros(max(need, 2 * self.buffer.shape[0], 256), self.buffer.shape[1])
                grown[: self.buffer.shape[0]] = self.buffer
                self.buffer = grown
            self.buffer[start:need] = hidden[0].detach().float()
        if start <= self.written:  # a forward starting past the recorded prefix would leave a gap
            self.written = max(self.written, need)

    def features(self, start: int, stop: int) -> torch.Tensor:
        """Recorded features of positions [start, stop): [1, stop - start, d]."""
        return self.buffer[start:stop].unsqueeze(0)

    def remove(self) -> None:
        self._handle.remove()


# -- the drafter --------------------------------------------------------------------------------------


class EagleDrafter:
    """Drafts with an `EagleNet` on `engine`'s model (the `Drafter` protocol of speculative.py): reads the
    features the engine's own forwards left after exit layer L, keeps the network's cache over the
    context in step with the engine's tokens, drafts greedily over the vocabulary subset and stops early
    at an end token or when the top probability falls below `min_confidence` (0: never; the first draft
    too, so an unsure step proposes nothing and the decoder takes a plain step). Proposes
    nothing (the decoder then decodes plainly) when the engine's cache does not hold `context[:-1]` or
    its features were not all recorded (e.g. the cache was filled before this drafter was attached).
    `quantize="int8"` runs the network's Linear layers and the LM head rows as the project's int8
    layers (float32 CPU only)."""

    name = "eagle"

    def __init__(self, engine: Any, net: EagleNet, min_confidence: float = 0.0, quantize: str | None = None) -> None:
        """ValueError when the model is not Llama-style or the network was trained for another shape."""
        if not 0.0 <= min_confidence < 1.0:
            raise ValueError(f"min_confidence must be in [0, 1), got {min_confidence!r}")
        model = engine.model
        inner = inner_model(model)
        cfg = net.cfg
        if cfg.hidden_size != int(model.config.hidden_size) or cfg.num_layers != int(model.config.num_hidden_layers):
            raise ValueError(f"this network was trained for a {cfg.num_layers}-layer, d={cfg.hidden_size} model; the "
                             f"model has {model.config.num_hidden_layers} layers, d={model.config.hidden_size}")
        self.engine, self.net, self.min_confidence = engine, net.eval().requires_grad_(False), min_confidence
        self.inner, self.embed, self.norm = inner, inner.embed_tokens, inner.norm
        self.ids = torch.tensor(cfg.vocab_ids, dtype=torch.long) if cfg.vocab_ids is not None else None
        if self.ids is not None and int(self.ids.max()) >= engine.vocab_size:
            raise ValueError("the network's vocabulary does not fit this model's LM head")
        weight, bias = lm_head_rows(model.lm_head, self.ids)
        head = nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None)
        with torch.no_grad():
            head.weight.copy_(weight)
            if bias is not None:
                head.bias.copy_(bias)
        self.head = head.eval().requires_grad_(False)
        if quantize == "int8":
            from headstart.llm.int8 import RowInt8Linear, quantize_linears

            quantize_linears(self.net)
            self.head = RowInt8Linear(self.head)
        elif quantize not in (None, "none"):
            raise ValueError(f"unknown quantize {quantize!r}: use None or 'int8'")
        self.recorder = FeatureRecorder(model, cfg.exit_layer)
        self.cache = EagleCache()
        self._slot_tokens: list[int] = []  # tokens 0..m of the m cached slots (slot i: feature i, token i+1)
        self.draft_steps = 0  # network steps run (for cost accounting)
        self.early_steps = 0  # layer 1..L runs on the newest token (feature_offset 1)

    @property
    def exit_layer(self) -> int:
        return self.net.cfg.exit_layer

    def logits(self, out: torch.Tensor) -> torch.Tensor:
        """o [.., d] -> logits over the subset [.., |V'|] (the model's final norm, then the LM head rows)."""
        return self.head(self.norm(out))

    def to_token(self, index: int) -> int:
        return int(self.ids[index]) if self.ids is not None else int(index)

    def sync(self, context: Sequence[int]) -> torch.Tensor | None:
        """Bring the network's cache to the true slots 0..n-1 for `context` (n = engine.num_tokens,
        context = the engine's tokens + the newest token). Returns the last slot's output o [1, 1, d], or
        None when the context or the recorded features do not fit."""
        engine = self.engine
        n = engine.num_tokens
        if n < 1 or len(context) != n + 1 or self.recorder.written < n or not _tail_matches(engine.tokens, context):
            return None
        ctx = [int(t) for t in context]
        common = 0
        limit = min(len(self._slot_tokens), len(ctx))
        while common < limit and self._slot_tokens[common] == ctx[common]:
            common += 1
        keep = min(max(0, common - 1), len(self.cache), n - 1)  # slot i needs tokens 0..i+1 unchanged
        self.cache.crop(keep)
        offset = self.net.cfg.feature_offset
        if offset:  # the newest token's feature: layers 1..L at position n on the engine's cache, cropped back
            self._run_early_layers(ctx[n], n)
        feats = self.recorder.features(keep + offset, n + offset)
        emb = self.embed(torch.tensor([ctx[keep + 1 : n + 1]], dtype=torch.long)).float()
        out = self.net.step(feats, emb, self.cache)
        self._slot_tokens = ctx[: n + 1]
        return out[:, -1:]

    def _run_early_layers(self, token: int, position: int) -> None:
        layers = self.inner.layers[: self.exit_layer]
        raw = self.engine.raw_cache
        hidden = self.embed(torch.tensor([[token]], dtype=torch.long))
        pos = torch.tensor([[position]])
        emb = self.inner.rotary_emb(hidden, pos)
        try:
            for layer in layers:
                out = layer(hidden, attention_mask=None, position_ids=pos, position_embeddings=emb, use_cache=True,
                            **{self.engine._cache_kw: raw})
                hidden = out[0] if isinstance(out, tuple) else out
        finally:
            for cached in raw.layers[: self.exit_layer]:
                if getattr(cached, "keys", None) is not None and cached.keys.shape[-2] > position:
                    cached.keys = cached.keys[..., :position, :]
                    cached.values = cached.values[..., :position, :]
        self.early_steps += 1

    def propose(self, context: Sequence[int], k: int) -> list[int]:
        if k < 1:
            return []
        with torch.inference_mode():
            out = self.sync(context)
            if out is None:
                return []
            n = len(self.cache)
            drafts: list[int] = []
            try:
                while True:
                    logits = self.logits(out)[0, -1]
                    self.draft_steps += 1
                    if self.min_confidence > 0.0:  # an unsure first draft too: a plain step is cheaper than a verify
                        probs = torch.softmax(logits, dim=-1)
                        conf, index = probs.max(-1)
                        if float(conf) < self.min_confidence:
                            break
                        index = int(index)
                    else:
                        index = int(logits.argmax())
                    token = self.to_token(index)
                    drafts.append(token)
                    if len(drafts) == k or token in self.engine.eos_token_ids:
                        break
                    emb = self.embed(torch.tensor([[token]], dtype=torch.long)).float()
                    out = self.net.step(out, emb, self.cache)
            finally:
                self.cache.crop(n)  # drafted slots never stay: the next sync appends the true ones
        return drafts

    def reset(self) -> None:
        self.cache.reset()
        self._slot_tokens = []

    def close(self) -> None:
        """Detach the feature hook from the model."""
        self.recorder.remove()


def _tail_matches(tokens: Sequence[int], context: Sequence[int], n: int = 8) -> bool:
    m = min(n, len(tokens))
    return list(tokens[len(tokens) - m :]) == [int(t) for t in context[len(tokens) - m : len(tokens)]]


# -- files ------------------------------------------------------------------------------------------


def save_eagle(net: EagleNet, path: str | Path) -> Path:
    """Write the network (weights and its EagleConfig as JSON metadata) to a .safetensors file."""
    from safetensors.torch import save_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().cpu().contiguous() for k, v in net.state_dict().items()}
    header = {"format": _FORMAT, "config": asdict(net.cfg)}
    tmp = path.with_suffix(path.suffix + ".tmp")
    save_file(tensors, str(tmp), metadata={"headstart_eagle": json.dumps(header)})
    tmp.replace(path)
    return path


def load_eagle(path: str | Path) -> EagleNet:
    """Read a network written by `save_eagle` (float32, eval mode). FileNotFoundError when missing (the
    message names the training command); ValueError for a file that is not one."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no EAGLE proposal network at {path}; train one with "
                                "`headstart llm train-eagle --model NAME --exit-layer L`")
    with safe_open(str(path), framework="pt") as f:
        raw = (f.metadata() or {}).get("headstart_eagle")
    if raw is None:
        raise ValueError(f"{path} is not a headstart EAGLE network (no metadata)")
    header = json.loads(raw)
    if header.get("format") != _FORMAT:
        raise ValueError(f"{path}: EAGLE network format {header.get('format')!r}, expected {_FORMAT}")
    net = EagleNet(EagleConfig(**header["config"]))
    net.load_state_dict(load_file(str(path)))
    return net.eval().requires_grad_(False)


def default_eagle_path(model_folder: str | Path, exit_layer: int) -> Path:
    """<headstart cache>/proposal/<model key>/eagle-exit-L.safetensors (keyed by the model's manifest)."""
    from headstart.llm.proposal import model_key
    from headstart.models.store import cache_dir

    return cache_dir() / "proposal" / model_key(model_folder) / f"eagle-exit-{exit_layer}.safetensors"
