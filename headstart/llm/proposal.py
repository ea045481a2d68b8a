"""A trained proposal head on an early layer: guess the full model's next token from the hidden state
after decoder layer L (of N).

The head is a small residual adapter on that hidden state followed by the model's own (frozen) final
norm and LM head, restricted to a vocabulary subset: logits = W_lm[V'] · norm(h + A(h)). The adapter is
a zero-initialised linear map ("linear", d² parameters) or a two-layer SiLU MLP ("mlp", 2·d·r); at
zero it is exactly the untrained early exit (final norm + LM head after layer L, the logit lens).
Restricting the LM head to the V' tokens the full model actually produced in training keeps the draft
cheap: the full LM head costs as much as ~9 of Qwen2.5-0.5B's 24 layers. A proposal outside V' is
simply never made; verification keeps the output exact either way.

Sources: self-speculative / early-exit drafting (Elhoushi et al. 2024, "LayerSkip"; Zhang et al.
2023, "Draft & Verify"); trained early-exit heads (Schuster et al. 2022, "CALM"); distillation from
the model's own generations (Zhou et al. 2023, "DistillSpec"). Training lives in headstart/training/train_proposal.py.

`LayerStack` runs any contiguous range of decoder layers of a Llama-style model (Llama, SmolLM2,
Qwen2, Mistral: `model.model.{embed_tokens, layers, norm, rotary_emb}` + `model.lm_head`) on one new
position at a time over the engine's own KV cache, so a draft reuses the cache of layers 1..L.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

__all__ = [
    "HEAD_KINDS",
    "LayerStack",
    "ProposalHead",
    "default_head_path",
    "load_head",
    "model_key",
]

HEAD_KINDS = ("linear", "mlp")
_FORMAT = 1


class LayerStack:
    """Handles on a Llama-style causal LM's parts, and a one-position forward through a layer range.

    ValueError for a model of another layout, or one with sliding-window / non-full-attention layers
    (their masks are not built here).
    """

    def __init__(self, model: Any) -> None:
        inner = getattr(model, "model", None)
        parts = ("embed_tokens", "layers", "norm", "rotary_emb")
        if inner is None or not all(hasattr(inner, p) for p in parts) or not hasattr(model, "lm_head"):
            raise ValueError(
                f"{type(model).__name__} is not a Llama-style causal LM (model.model.{{{', '.join(parts)}}} "
                "and model.lm_head): partial-layer drafting does not support it"
            )
        config = model.config
        types = getattr(config, "layer_types", None) or ["full_attention"] * config.num_hidden_layers
        if any(t != "full_attention" for t in types) or getattr(config, "use_sliding_window", False):
            raise ValueError("partial-layer drafting supports full-attention layers only (no sliding windows)")
        import torch

        if not isinstance(getattr(model.lm_head, "weight", None), torch.Tensor):
            raise ValueError("partial-layer drafting needs float Linear layers; this model is quantised "
                             "(load it with LLMConfig.quantize='none')")
        self.model = model
        self.embed = inner.embed_tokens
        self.layers = inner.layers
        self.norm = inner.norm
        self.rotary = inner.rotary_emb
        self.lm_head = model.lm_head
        self.num_layers = int(config.num_hidden_layers)
        self.hidden_size = int(config.hidden_size)
        params = inspect.signature(self.layers[0].forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"

    def embed_ids(self, ids: list[int]) -> torch.Tensor:
        """Token embeddings, shape [1, len(ids), d]."""
        import torch

        return self.embed(torch.tensor([ids], dtype=torch.long, device=self.lm_head.weight.device))

    def run(self, hidden: torch.Tensor, raw_cache: Any, start: int, stop: int, position: int,
            attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Run decoder layers [start, stop) on `hidden` ([1, q, d]) at positions position..position+q-1,
        appending their keys/values to those layers of `raw_cache` (a transformers DynamicCache).
        `attention_mask` may be None only for q == 1 (one new position attends to all cached ones);
        for q > 1 pass an additive float mask [1, 1, q, position + q] (see `causal_mask`).
        Returns the hidden state after layer stop-1 (pre-norm), shape [1, q, d]. Call under
        torch.inference_mode()."""
        import torch

        q = hidden.shape[1]
        if q > 1 and attention_mask is None:
            raise ValueError("a multi-position layer run needs an explicit causal mask")
        pos = torch.arange(position, position + q, device=hidden.device).unsqueeze(0)
        embeddings = self.rotary(hidden, pos)
        for layer in self.layers[start:stop]:
            out = layer(hidden, attention_mask=attention_mask, position_ids=pos, position_embeddings=embeddings,
                        use_cache=True, **{self._cache_kw: raw_cache})
            hidden = out[0] if isinstance(out, tuple) else out
        return hidden

    @staticmethod
    def causal_mask(q: int, past: int, dtype: Any, device: Any) -> torch.Tensor:
        """Additive causal mask [1, 1, q, past + q]: 0 where query i may attend key j (j <= past + i),
        the dtype's minimum elsewhere."""
        import torch

        keys = torch.arange(past + q, device=device)
        queries = torch.arange(past, past + q, device=device).unsqueeze(1)
        mask = torch.zeros(q, past + q, dtype=dtype, device=device)
        mask.masked_fill_(keys > queries, torch.finfo(dtype).min)
        return mask.view(1, 1, q, past + q)


@dataclass
class ProposalHead:
    """An adapter module (torch.nn.Module on [.., d] float tensors) for exit layer `exit_layer` (1-based:
    the hidden state after decoder layer `exit_layer` of `num_layers`), the vocabulary subset it
    proposes from (`vocab_ids`, a sorted list of ints; None: the whole vocabulary) and its training
    report (`meta`: acceptance figures, data sizes, the model key)."""

    adapter: Any
    exit_layer: int
    num_layers: int
    hidden_size: int
    kind: str
    vocab_ids: list[int] | None = None
    meta: dict = field(default_factory=dict)

    @staticmethod
    def new(kind: str, hidden_size: int, exit_layer: int, num_layers: int, rank: int | None = None,
            vocab_ids: list[int] | None = None) -> ProposalHead:
        """A zero-initialised head (it starts as the untrained early exit). ValueError for an unknown
        kind or an exit layer outside [1, num_layers - 1]."""
        if kind not in HEAD_KINDS:
            raise ValueError(f"unknown head kind {kind!r}; use one of {HEAD_KINDS}")
        if not 1 <= exit_layer < num_layers:
            raise ValueError(f"exit layer must be in [1, {num_layers - 1}] for a {num_layers}-layer model, got {exit_layer}")
        return ProposalHead(_make_adapter(kind, hidden_size, rank), exit_layer, num_layers, hidden_size, kind,
                            sorted(set(vocab_ids)) if vocab_ids is not None else None)

    @property
    def rank(self) -> int | None:
        return getattr(self.adapter, "rank", None)

    def adapt(self, hidden: torch.Tensor) -> torch.Tensor:
        """h + A(h): the adapted hidden state, same shape as `hidden` ([..., d])."""
        return hidden + self.adapter(hidden)

    def save(self, path: str | Path) -> Path:
        """Write the head to `path` (a .safetensors file, with its metadata as JSON inside)."""
        from safetensors.torch import save_file

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tensors = {k: v.detach().cpu().contiguous() for k, v in self.adapter.state_dict().items()}
        if self.vocab_ids is not None:
            import torch

            tensors["vocab_ids"] = torch.tensor(self.vocab_ids, dtype=torch.int64)
        header = {"format": _FORMAT, "kind": self.kind, "exit_layer": self.exit_layer, "num_layers": self.num_layers,
                  "hidden_size": self.hidden_size, "rank": self.rank, "meta": self.meta}
        tmp = path.with_suffix(path.suffix + ".tmp")
        save_file(tensors, str(tmp), metadata={"headstart_proposal": json.dumps(header)})
        tmp.replace(path)
        return path


def load_head(path: str | Path, *, dtype: torch.dtype | None = None, device: str = "cpu") -> ProposalHead:
    """Read a head written by `ProposalHead.save`. FileNotFoundError when missing (the message names the
    training command); ValueError for a file that is not a proposal head."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no proposal head at {path}; train one with "
                                "`headstart llm train-proposal --model NAME --exit-layer L`")
    with safe_open(str(path), framework="pt") as f:
        raw = (f.metadata() or {}).get("headstart_proposal")
    if raw is None:
        raise ValueError(f"{path} is not a headstart proposal head (no metadata)")
    header = json.loads(raw)
    if header.get("format") != _FORMAT:
        raise ValueError(f"{path}: proposal head format {header.get('format')!r}, expected {_FORMAT}")
    tensors = load_file(str(path))
    vocab = tensors.pop("vocab_ids", None)
    head = ProposalHead.new(header["kind"], header["hidden_size"], header["exit_layer"], header["num_layers"],
                            header.get("rank"), vocab.tolist() if vocab is not None else None)
    head.adapter.load_state_dict(tensors)
    head.adapter.to(device=device, dtype=dtype).eval().requires_grad_(False)
    head.meta = header.get("meta", {})
    return head


def _make_adapter(kind: str, d: int, rank: int | None) -> Any:
    import torch
    from torch import nn

    class Linear(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(d, d)
            nn.init.zeros_(self.proj.weight)
            nn.init.zeros_(self.proj.bias)

        def forward(self, h: torch.Tensor) -> torch.Tensor:
            return self.proj(h)

    class MLP(nn.Module):
        def __init__(self, r: int) -> None:
            super().__init__()
            self.rank = r
            self.up = nn.Linear(d, r)
            self.down = nn.Linear(r, d)
            nn.init.zeros_(self.down.weight)
            nn.init.zeros_(self.down.bias)

        def forward(self, h: torch.Tensor) -> torch.Tensor:
            return self.down(torch.nn.functional.silu(self.up(h)))

    return Linear() if kind == "linear" else MLP(rank or d)


class HeadRunner:
    """The head bound to a model's final norm and (sub-vocabulary) LM head: hidden [1, q, d] -> logits
    [q, |V'|] and proposals mapped back to full-vocabulary ids. Dtype and device follow the model."""

    def __init__(self, head: ProposalHead, stack: LayerStack) -> None:
        import torch

        if head.hidden_size != stack.hidden_size or head.num_layers != stack.num_layers:
            raise ValueError(f"this head was trained for a {head.num_layers}-layer, d={head.hidden_size} model; "
                             f"the model has {stack.num_layers} layers, d={stack.hidden_size}")
        weight = stack.lm_head.weight
        head.adapter.to(device=weight.device, dtype=weight.dtype)
        self.head, self.stack = head, stack
        if head.vocab_ids is not None:
            ids = torch.tensor(head.vocab_ids, dtype=torch.long, device=weight.device)
            if int(ids.max()) >= weight.shape[0]:
                raise ValueError("the head's vocabulary does not fit this model's LM head")
            self.weight = weight.index_select(0, ids).contiguous()
            self.ids = ids
        else:
            self.weight, self.ids = weight, None
        self.bias = getattr(stack.lm_head, "bias", None)
        if self.bias is not None and self.ids is not None:
            self.bias = self.bias.index_select(0, self.ids)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Logits over the head's vocabulary for each position: [q, |V'|] (float in the model's dtype)."""
        import torch

        normed = self.stack.norm(self.head.adapt(hidden))
        return torch.nn.functional.linear(normed[0], self.weight, self.bias)

    def to_token(self, index: int) -> int:
        return int(self.ids[index]) if self.ids is not None else int(index)


def model_key(folder: str | Path) -> str:
    """A short key for a prepared model folder: its name and the first 12 hex digits of the sha256 of its
    manifest.json (the per-file sha256 list written at prepare) or, for other folders, of config.json."""
    folder = Path(folder)
    for name in ("manifest.json", "config.json"):
        path = folder / name
        if path.is_file():
            return f"{folder.name}-{hashlib.sha256(path.read_bytes()).hexdigest()[:12]}"
    raise FileNotFoundError(f"{folder} is not a model folder (no manifest.json or config.json)")


def default_head_path(model_folder: str | Path, exit_layer: int) -> Path:
    """Where `headstart llm train-proposal` saves a head: <headstart cache>/proposal/<model key>/exit-L.safetensors
    (beside the prepared models, keyed by model name and manifest sha, so a changed model never meets
    an old head)."""
    from headstart.models.store import cache_dir

    return cache_dir() / "proposal" / model_key(model_folder) / f"exit-{exit_layer}.safetensors"
