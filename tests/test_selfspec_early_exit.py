"""Early-exit emission (headstart/llm/early_exit.py): lossy only where the head is confident; the KV
cache is always the full model's, so a threshold nobody reaches gives plain greedy, and a perfect head
(deeper layers add nothing) gives plain greedy while emitting every token early."""

from __future__ import annotations

import pytest
import torch

from headstart.llm.early_exit import EarlyExitDecoder
from tests.test_selfspec import PROMPT, plain, random_head, tiny

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py


def run(decoder: EarlyExitDecoder, prompt, n: int):
    decoder.engine.reset()
    out = list(decoder.generate(prompt, n))
    return out, decoder.engine.tokens


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_unreachable_threshold_is_plain_greedy(kind):
    engine = tiny(kind)
    ref, ref_cache = plain(engine, PROMPT, 16)
    decoder = EarlyExitDecoder(engine, random_head(engine, 2), threshold=1.0)
    out, cache = run(decoder, PROMPT, 16)
    assert out == ref and cache == ref_cache
    assert decoder.stats.early_tokens == 0


def test_perfect_head_emits_everything_early_and_keeps_the_full_cache():
    for seed in range(8):
        engine = tiny("llama", seed=seed, identity_after=2)
        ref, ref_cache = plain(engine, PROMPT, 16)
        if len(ref) >= 8:
            break
    decoder = EarlyExitDecoder(engine, random_head(engine, 2, scale=0.0), threshold=1e-9, check=True)
    out, cache = run(decoder, PROMPT, 16)
    assert out == ref and cache == ref_cache
    assert decoder.stats.full_tokens == 0 and decoder.stats.early_tokens == len(ref)
    assert decoder.stats.agreement == 1.0
    # the cache is usable for exact decoding afterwards
    logits = engine.decode(out[-1])
    engine.reset()
    engine.prefill([*PROMPT, *out])
    torch.testing.assert_close(logits, engine.prefill([*PROMPT, *out]))


def test_a_poor_head_is_lossy_but_its_agreement_is_measured():
    engine = tiny("qwen2")
    decoder = EarlyExitDecoder(engine, random_head(engine, 2, scale=1.0), threshold=1e-9, check=True)
    out, cache = run(decoder, PROMPT, 12)
    assert len(cache) == len(PROMPT) + len(out) - 1
    assert decoder.stats.checked > 0
    assert decoder.stats.agreed < decoder.stats.checked  # lossy: some early tokens are not the model's
    assert decoder.stats.agreement == decoder.stats.agreed / decoder.stats.checked


@pytest.mark.parametrize("bad", [0.0, -0.1, 1.5])
def test_bad_threshold_is_a_clear_error(bad):
    engine = tiny("llama")
    with pytest.raises(ValueError, match="threshold"):
        EarlyExitDecoder(engine, random_head(engine, 2), threshold=bad)
