"""The LLM core on each device (tests/devices.py: CPU always, CUDA where torch sees one; scripts/gpu_check.sh
runs the CUDA cases on a lent GPU machine): the KV cache drops and keeps exactly what it is told, an
incremental prefill equals a cold one, a verify of k tokens equals k decode steps, and the greedy decode
loop equals argmax over uncached forwards. Tiny random-weight models built from configs (Llama and Qwen2,
the presets' architectures): the GPU machine has no model files and reaches no hub."""

from __future__ import annotations

import pytest
import torch
from devices import DEVICES, tolerance

from headstart.config import LLMConfig
from headstart.llm.cache import KVCache
from headstart.llm.engine import LLMEngine
from headstart.llm.sampling import Sampling

VOCAB = 96
KINDS = ["llama", "qwen2"]
PROMPT = [(7 * i + 3) % (VOCAB - 1) for i in range(40)]  # no end token (VOCAB - 1)
DRAFT = [11, 42, 7, 88, 23, 5, 61, 30]


class _Tokenizer:
    eos_token_id = VOCAB - 1
    unk_token_id = None
    chat_template = None

    def convert_tokens_to_ids(self, token: str) -> None:
        return None


def _tiny(kind: str, device: str, dtype: torch.dtype = torch.float32, seed: int = 0) -> LLMEngine:
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    common = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                  initializer_range=0.2)  # peaky logits: greedy never hinges on a near tie
    model_cls, config = {"llama": (LlamaForCausalLM, LlamaConfig), "qwen2": (Qwen2ForCausalLM, Qwen2Config)}[kind]
    torch.manual_seed(seed)
    model = model_cls(config(**common)).to(device=device, dtype=dtype).eval()
    model.requires_grad_(False)
    model.generation_config.eos_token_id = None
    return LLMEngine(model, _Tokenizer(), LLMConfig(model="tiny", dtype="float32", device=device, quantize="none"))


def _kv(num_positions: int, seed: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    shape = (1, 2, num_positions, 4)  # batch, heads, positions, head_dim
    return torch.randn(shape, generator=g).to(device), torch.randn(shape, generator=g).to(device)


@pytest.mark.parametrize("device", DEVICES)
def test_reset_and_crop_to_zero_drop_every_position(device):
    # Written under inference mode, as the engine's forwards write it (transformers 5.17's reset zeroed
    # such tensors in place, which torch refuses, and kept their positions).
    cache = KVCache()
    with torch.inference_mode():
        written = [_kv(3, seed, device) for seed in range(2)]
        for layer, (k, v) in enumerate(written):
            cache.raw.update(k, v, layer)
    cache.crop_to(1)
    assert len(cache) == 1
    assert torch.equal(cache.raw.layers[0].keys, written[0][0][..., :1, :])
    cache.reset()
    assert len(cache) == 0
    new = [_kv(2, 100 + layer, device) for layer in range(2)]
    for layer, (k, v) in enumerate(new):
        cache.raw.update(k, v, layer)
    assert len(cache) == 2
    for layer, (k, v) in enumerate(new):
        assert cache.raw.layers[layer].keys.device.type == device
        assert torch.equal(cache.raw.layers[layer].keys, k) and torch.equal(cache.raw.layers[layer].values, v)
    cache.crop_to(0)
    assert len(cache) == 0


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", KINDS)
def test_incremental_prefill_equals_a_cold_prefill(kind, device):
    engine = _tiny(kind, device)
    cold = engine.prefill(PROMPT)
    assert cold.device.type == device and cold.dtype == torch.float32
    engine.reset()
    for end in (8, 16, 24, 32):  # partial transcripts arriving while the user speaks
        assert engine.sync_to(PROMPT[:end]) == 8
    incremental = engine.prefill(PROMPT)  # the end of turn: only the last 8 tokens are new
    assert engine.tokens == tuple(PROMPT)
    torch.testing.assert_close(incremental, cold, **tolerance(device))
    assert int(incremental.argmax()) == int(cold.argmax())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("k", [2, 4, 8])
def test_verify_of_k_tokens_equals_k_decode_steps(kind, device, k):
    engine = _tiny(kind, device)
    engine.prefill(PROMPT)
    base = engine.num_tokens
    verified = engine.verify(DRAFT[:k])
    assert verified.shape == (k, VOCAB) and engine.num_tokens == base + k
    engine.crop(base)
    stepped = torch.stack([engine.decode(t) for t in DRAFT[:k]])
    assert engine.tokens == tuple(PROMPT + DRAFT[:k])
    torch.testing.assert_close(verified, stepped, **tolerance(device))
    assert verified.argmax(-1).tolist() == stepped.argmax(-1).tolist()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", KINDS)
def test_greedy_decode_loop_equals_argmax_over_uncached_forwards(kind, device):
    engine = _tiny(kind, device)
    prompt = PROMPT[:12]
    got = list(engine.generate(prompt, max_new_tokens=16, sampling=Sampling()))
    ids, expected = list(prompt), []
    with torch.inference_mode():
        for _ in range(16):
            logits = engine.model(input_ids=torch.tensor([ids], device=device), use_cache=False).logits[0, -1]
            token = int(logits.argmax())
            if token in engine.eos_token_ids:
                break
            expected.append(token)
            ids.append(token)
    assert len(expected) >= 8  # a loop that stops at once would prove nothing
    assert got == expected
    assert engine.tokens == tuple(prompt + got[:-1])  # the last token is never run through the cache


@pytest.mark.parametrize("device", DEVICES)
def test_bfloat16_core_keeps_its_cache_in_step(device):
    # What `headstart bench stages` runs on CUDA by default: not exact against float32, but every call
    # must leave the cache and its tokens in step and return float32 logits.
    engine = _tiny("qwen2", device, dtype=torch.bfloat16)
    got = list(engine.generate(PROMPT[:12], max_new_tokens=8, sampling=Sampling()))
    assert engine.tokens == tuple(PROMPT[:12] + got[:-1])
    base = engine.num_tokens
    logits = engine.verify(DRAFT[:4])
    assert logits.dtype == torch.float32 and logits.shape == (4, VOCAB) and bool(torch.isfinite(logits).all())
    engine.crop(base + 1)
    assert engine.num_tokens == base + 1 and len(engine._cache) == base + 1
    engine.reset()
    assert engine.num_tokens == 0 and len(engine._cache) == 0
