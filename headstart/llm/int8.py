"""Dynamic int8 Linear layers whose output rows do not depend on the rest of the batch.

PyTorch's dynamic int8 Linear (`torch.ao.nn.quantized.dynamic.Linear`, fbgemm on x86) quantises its
input with ONE scale per call, from the min and max of the whole [tokens, features] tensor. A token's
output then depends on the other tokens in the same forward: a 4-token verify step or a chunked
prefill is not the computation that one-token decode steps are, and at temperature 0 the top token
can change (measured: prompt lookup on SmolLM2-135M diverged from plain greedy of the same int8
model). That would break the exactness of speculative decoding and of incremental prefill.

`RowInt8Linear` makes the per-call scale the same for every call: each row (token) is divided by its
own absolute maximum, so its values lie in [-1, 1] with one of them exactly +-1, and two constant
features -1 and +1 (with zero weights) are appended. The tensor's min and max are then exactly -1 and
+1 whatever the batch, so fbgemm picks the same activation scale and zero point every time, quantises
each element alike, and accumulates exactly in int32; the row's scale is multiplied back afterwards
and the bias added in float32. Each output row is thus bit-identical whether the token runs alone or
with others (a per-token symmetric activation scale, as in LLM.int8()/SmoothQuant-style per-token
quantisation, through the stock fbgemm kernel). Weights: int8, one symmetric scale per output channel.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch

__all__ = ["RowInt8Linear", "quantize_linears"]

# a row of zeros stays zeros: any positive scale divides it into zeros
_TINY = 1e-30


class RowInt8Linear(torch.nn.Module):
    """Drop-in replacement for a float32 `torch.nn.Linear` on CPU: int8 weights (per output channel),
    activations quantised per row at call time (see the module docstring). Input [..., in_features]
    float32, output [..., out_features] float32. Inference only (no gradients)."""

    def __init__(self, linear: torch.nn.Linear) -> None:
        super().__init__()
        from torch.ao.quantization import per_channel_dynamic_qconfig

        weight = linear.weight.detach().float()
        self.in_features, self.out_features = int(weight.shape[1]), int(weight.shape[0])
        padded = torch.cat([weight, weight.new_zeros(self.out_features, 2)], dim=1)
        observer = per_channel_dynamic_qconfig.weight()  # symmetric per-channel qint8
        observer(padded)
        scale, zero_point = observer.calculate_qparams()
        with warnings.catch_warnings():  # "quantized tensor creation functions are deprecated": they still work
            warnings.filterwarnings("ignore", message=r".*quantize_per_tensor.*", category=UserWarning)
            qweight = torch.quantize_per_channel(padded, scale.double(), zero_point.long(), 0, torch.qint8)
        self._packed = torch.ops.quantized.linear_prepack(qweight, None)
        bias = linear.bias
        self.register_buffer("bias", None if bias is None else bias.detach().float().clone())
        self.register_buffer("_bounds", torch.tensor([-1.0, 1.0]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = x.abs().amax(dim=-1, keepdim=True).clamp_min_(_TINY)
        rows = torch.cat((x / scale, self._bounds.expand(*x.shape[:-1], 2)), dim=-1)
        out = torch.ops.quantized.linear_dynamic(rows, self._packed, True)  # reduce_range: 7-bit, no int16 overflow
        out.mul_(scale)
        if self.bias is not None:
            out.add_(self.bias)
        return out

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


def quantize_linears(model: Any) -> Any:
    """Replace every `torch.nn.Linear` in `model` with a `RowInt8Linear`, in place; returns the model.
    A Linear shared by several parents (tied weights) becomes one RowInt8Linear shared alike; the
    embeddings (not Linear) stay float32."""
    done: dict[int, RowInt8Linear] = {}
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is torch.nn.Linear:
                if id(child) not in done:
                    done[id(child)] = RowInt8Linear(child)
                setattr(parent, name, done[id(child)])
    return model


ROWWISE_ATTENTION = "headstart_rowwise_sdpa"


def rowwise_sdpa(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                 attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                 **kwargs: Any) -> tuple[torch.Tensor, None]:
    """transformers attention function (query [1, heads, q, d], key/value [1, kv_heads, kv, d];
    returns [1, q, heads, d]) that computes every query row exactly as a one-token decode step does:
    row i attends to the first kv - (q - 1 - i) keys in its own SDPA call, without a mask, its heads
    grouped by key/value head. One sequence, no padding, full causal attention only (the engine's
    case; `enable_rowwise_attention` checks the model)."""
    batch, heads, q_len, dim = query.shape
    kv_heads, kv_len = key.shape[1], key.shape[2]
    group = heads // kv_heads
    # [1, heads, q, d] -> [q, kv_heads, group, d]: each row's heads, packed per key/value head
    packed = query.transpose(1, 2).reshape(q_len, kv_heads, group, dim)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    rows = [sdpa(packed[i : i + 1], key[:, :, : kv_len - (q_len - 1 - i)], value[:, :, : kv_len - (q_len - 1 - i)],
                 scale=scaling) for i in range(q_len)]
    out = torch.cat(rows, dim=0)  # [q, kv_heads, group, d]
    return out.reshape(1, q_len, heads, dim), None


def enable_rowwise_attention(model: Any) -> bool:
    """Switch `model` to `rowwise_sdpa` when its attention is full causal attention on every layer
    (no sliding window); returns whether it did. With `RowInt8Linear` layers this makes a forward over
    several tokens bit-identical, row by row, to one-token steps: int8 rounding turns the last-bit
    differences of a batched SDPA into visibly different logits."""
    from transformers import AttentionInterface

    config = model.config
    layer_types = getattr(config, "layer_types", None) or []
    if getattr(config, "sliding_window", None) and getattr(config, "use_sliding_window", True) \
            or any(t != "full_attention" for t in layer_types):
        return False
    if ROWWISE_ATTENTION not in AttentionInterface._global_mapping:
        AttentionInterface.register(ROWWISE_ATTENTION, rowwise_sdpa)
    model.set_attn_implementation(ROWWISE_ATTENTION)
    return True
