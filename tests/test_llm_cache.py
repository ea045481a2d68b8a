"""The KV-cache shim, pinned on the installed transformers version (cases.md: a cache of 3 positions
cropped to 0 and to -5 leaves no stale positions after rollback)."""

from __future__ import annotations

import pytest
import torch

from headstart.llm.cache import KVCache, cache_keyword

NUM_LAYERS = 2


def _kv(num_positions: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    shape = (1, 2, num_positions, 4)  # batch, heads, positions, head_dim
    return torch.randn(shape, generator=g), torch.randn(shape, generator=g)


def _filled(num_positions: int, seed: int = 0) -> tuple[KVCache, list[tuple[torch.Tensor, torch.Tensor]]]:
    cache = KVCache()
    written = []
    for layer in range(NUM_LAYERS):
        k, v = _kv(num_positions, seed + layer)
        cache.raw.update(k, v, layer)
        written.append((k, v))
    return cache, written


def _layer(cache: KVCache, idx: int) -> tuple[torch.Tensor, torch.Tensor]:
    layer = cache.raw.layers[idx]
    return layer.keys, layer.values


def test_len_counts_positions():
    assert len(KVCache()) == 0
    cache, _ = _filled(3)
    assert len(cache) == 3 == cache.num_tokens


@pytest.mark.parametrize("keep", [0, 1, 2, 3])
def test_crop_to_keeps_exactly_the_first_positions(keep):
    cache, written = _filled(3)
    cache.crop_to(keep)
    assert len(cache) == keep
    for idx, (k, v) in enumerate(written):
        if keep == 0:
            continue  # layers are reset
        keys, values = _layer(cache, idx)
        assert keys.shape[-2] == keep and values.shape[-2] == keep
        assert torch.equal(keys, k[..., :keep, :]) and torch.equal(values, v[..., :keep, :])


@pytest.mark.parametrize("bad", [-5, -1, 4, 100, 1.5, True, "2", None])
def test_crop_to_rejects_invalid_lengths(bad):
    cache, _ = _filled(3)
    with pytest.raises(ValueError):
        cache.crop_to(bad)
    assert len(cache) == 3  # untouched


def test_crop_to_zero_then_refill_leaves_no_stale_positions():
    cache, _ = _filled(3, seed=0)
    cache.crop_to(0)
    assert len(cache) == 0
    new = []
    for layer in range(NUM_LAYERS):
        k, v = _kv(2, seed=100 + layer)
        cache.raw.update(k, v, layer)
        new.append((k, v))
    assert len(cache) == 2
    for idx, (k, v) in enumerate(new):
        keys, values = _layer(cache, idx)
        assert torch.equal(keys, k) and torch.equal(values, v)


def test_crop_then_append_continues_after_the_kept_prefix():
    cache, written = _filled(3, seed=0)
    cache.crop_to(1)
    k2, v2 = _kv(1, seed=50)
    for layer in range(NUM_LAYERS):
        cache.raw.update(k2, v2, layer)
    assert len(cache) == 2
    keys, _ = _layer(cache, 0)
    assert torch.equal(keys[..., :1, :], written[0][0][..., :1, :])
    assert torch.equal(keys[..., 1:, :], k2)


def test_installed_raw_crop_semantics_are_what_the_shim_assumes():
    # transformers >= 5.15: crop(n) drops -n positions; a positive n is refused; dropping more than
    # the cache holds empties it. If a release changes this, this test says so first.
    cache, _ = _filled(3)
    with pytest.raises(ValueError):
        cache.raw.crop(2)
    cache.raw.crop(-1)
    assert len(cache) == 2
    cache.raw.crop(-5)
    assert len(cache) == 0


def test_cache_keyword_matches_the_installed_model_forward():
    import transformers
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=NUM_LAYERS,
        num_attention_heads=2, num_key_value_heads=2,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    keyword = cache_keyword(model)
    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    assert keyword == ("cache" if (major, minor) >= (5, 24) else "past_key_values")

    # The keyword really feeds the cache: prefill in two pieces through KVCache equals one shot.
    ids = torch.tensor([[3, 7, 11, 5, 9]])
    with torch.inference_mode():
        full = model(input_ids=ids).logits[0, -1]
        cache = KVCache(model.config)
        model(input_ids=ids[:, :3], use_cache=True, **{keyword: cache.raw})
        assert len(cache) == 3
        # Roll back one position and redo it: no stale position may survive.
        cache.crop_to(2)
        piece = model(input_ids=ids[:, 2:], use_cache=True, **{keyword: cache.raw}).logits[0, -1]
    assert len(cache) == 5
    torch.testing.assert_close(piece, full, rtol=1e-4, atol=1e-4)


def test_cache_keyword_rejects_a_model_without_a_cache():
    class NoCache:
        def forward(self, input_ids):
            return input_ids

    with pytest.raises(ValueError, match="neither"):
        cache_keyword(NoCache())
