"""A thin shim over the installed transformers KV-cache API.

transformers 5.x moves this API often: `Cache.crop(n)` takes a *negative* count of
tokens to drop from 5.15 on (a positive `max_length` before), the forward keyword is `cache=` from
5.24 on (`past_key_values=` before, removed in 5.40), and a sliding-window layer cannot be cropped
past its window. Everything in headstart that touches the cache goes through this module, so one
place adapts to a new release, and its tests pin the behaviour of the installed one.
"""

from __future__ import annotations

import inspect
from typing import Any

__all__ = ["KVCache", "cache_keyword"]


def cache_keyword(model: Any) -> str:
    """The keyword under which `model.forward` takes its KV cache: "cache" (transformers >= 5.24)
    or "past_key_values" (older). Raises ValueError for a model whose forward takes neither."""
    params = inspect.signature(model.forward).parameters
    for name in ("cache", "past_key_values"):
        if name in params:
            return name
    raise ValueError(
        f"{type(model).__name__}.forward takes neither `cache` nor `past_key_values`: "
        "not a causal LM with a KV cache this transformers version supports"
    )


def _crop_takes_count(cache: Any) -> bool:
    """True when `crop(n)` means "drop n tokens" and wants n <= 0 (transformers >= 5.15)."""
    params = list(inspect.signature(cache.crop).parameters)
    return bool(params) and params[0] == "tokens_to_remove"


class KVCache:
    """One sequence's key/value cache (a transformers `DynamicCache`, batch size 1).

    `raw` is the object to pass to the model's forward under `cache_keyword(model)`; the model grows
    it in place. Lengths are counted in token positions.
    """

    def __init__(self, model_config: Any | None = None) -> None:
        """`model_config`: the model's `PretrainedConfig`, so sliding-window or hybrid layers get the
        right cache layer type (None: plain full-attention layers, created lazily)."""
        from transformers import DynamicCache

        self.raw = DynamicCache(config=model_config)
        self._crop_takes_count = _crop_takes_count(self.raw)
        # Sliding-window layers (Gemma 3) drop positions older than the window as they go, and then
        # cannot roll back; recording keeps them until the next crop (transformers >= 5.x).
        if hasattr(self.raw, "activate_past_recording"):
            self.raw.activate_past_recording()

    def __len__(self) -> int:
        return int(self.raw.get_seq_length())

    @property
    def num_tokens(self) -> int:
        """Token positions the cache holds."""
        return len(self)

    def can_crop_to(self, num_tokens: int) -> bool:
        """Whether `crop_to(num_tokens)` can be exact. Full-attention layers always can; a
        sliding-window layer past its window only while it still holds the positions the shorter
        sequence's window needs (with past recording: those added since its last crop, plus the
        window). False for a length outside [0, len(cache)]."""
        current = len(self)
        if isinstance(num_tokens, bool) or not isinstance(num_tokens, int) or not 0 <= num_tokens <= current:
            return False
        if num_tokens in (0, current):
            return True
        for layer in getattr(self.raw, "layers", ()):
            if not getattr(layer, "is_sliding", False) or not getattr(layer, "is_initialized", False):
                continue
            window = int(layer.sliding_window)
            length = int(getattr(layer, "cumulative_length", current))
            if length < window:
                continue  # below the window a sliding layer holds everything
            if not getattr(layer, "record_past", False):
                return False
            drop = length - num_tokens
            if int(layer.keys.shape[-2]) < drop + min(window - 1, num_tokens):
                return False
        return True

    def crop_to(self, num_tokens: int) -> None:
        """Keep the first `num_tokens` positions and drop the rest (rollback).

        `crop_to(0)` empties the cache; `crop_to(len(cache))` does nothing.
        Raises ValueError when `num_tokens` is not an int in [0, len(cache)] (a negative length or a
        longer one is a caller's bug, never silently clamped) and RuntimeError when the installed
        transformers could not crop to exactly that length (e.g. a sliding-window layer past its
        window), so no stale position is ever left behind.
        """
        if isinstance(num_tokens, bool) or not isinstance(num_tokens, int):
            raise ValueError(f"crop_to needs an int number of tokens, got {num_tokens!r}")
        current = len(self)
        if not 0 <= num_tokens <= current:
            raise ValueError(
                f"cannot crop a cache of {current} positions to {num_tokens}: keep between 0 and {current}"
            )
        if num_tokens == current:
            return
        if not self.can_crop_to(num_tokens):
            raise RuntimeError(
                f"cannot roll the KV cache back from {current} to {num_tokens} positions: a sliding-window "
                "layer no longer holds the positions that window needs (prefill again from scratch)"
            )
        if num_tokens == 0:
            # Dropping everything: reset is exact on every layer type, crop is not (sliding windows).
            self.reset()
        elif self._crop_takes_count:
            self.raw.crop(num_tokens - current)  # a negative count of tokens to drop
        else:
            self.raw.crop(num_tokens)  # before 5.15: the length to keep
        if len(self) != num_tokens:
            raise RuntimeError(
                f"the KV cache holds {len(self)} positions after cropping to {num_tokens}; "
                "this cache type cannot roll back that far"
            )

    def reset(self) -> None:
        """Drop every position, on every layer type. RuntimeError if some layer still holds one."""
        import torch

        # On transformers 5.17 (not 5.24) `reset` zeroes the tensors in place (refused, outside inference
        # mode, for those the model wrote under it) and keeps their positions: drop what it left.
        with torch.inference_mode():
            self.raw.reset()
        for layer in getattr(self.raw, "layers", ()):
            keys, values = getattr(layer, "keys", None), getattr(layer, "values", None)
            if keys is not None and values is not None and keys.dim() >= 2 and keys.shape[-2]:
                layer.keys, layer.values = keys[..., :0, :], values[..., :0, :]
            if isinstance(getattr(layer, "cumulative_length", None), int):
                layer.cumulative_length = 0
        if len(self):
            raise RuntimeError(f"the KV cache still holds {len(self)} positions after a reset")
