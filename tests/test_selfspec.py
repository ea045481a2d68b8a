"""Self-speculative decoding (headstart/llm/selfspec.py) is exact: layers 1..L + a proposal head draft
on the engine's own KV cache, the full model verifies, and the output is plain greedy's token for token
(fp32, tiny random Llama/Qwen2 and smollm2-135m); the draft leaves the cache as it found it."""

from __future__ import annotations

import pytest
import torch

from headstart.config import LLMConfig
from headstart.llm.engine import LLMEngine
from headstart.llm.proposal import LayerStack, ProposalHead
from headstart.llm.sampling import Sampling
from headstart.llm.selfspec import (
    SelfSpeculativeDrafter,
    expected_tokens_per_step,
    predicted_speedup,
)
from headstart.llm.speculative import Decoder, DraftingPolicy

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py

VOCAB = 96
CONFIG = LLMConfig(model="tiny", dtype="float32", max_new_tokens=24)
PROMPT = [3, 17, 42, 8, 8, 19, 3, 17, 42, 60, 11, 5, 23, 3, 17, 42, 9, 30, 31, 32, 33, 12]


class TinyTokenizer:
    eos_token_id = VOCAB - 1
    unk_token_id = None
    chat_template = None

    def get_vocab(self) -> dict[str, int]:
        return {f"t{i}": i for i in range(VOCAB)}

    def convert_tokens_to_ids(self, token: str) -> None:
        return None


def tiny(kind: str, layers: int = 4, seed: int = 0, identity_after: int | None = None) -> LLMEngine:
    """A random-init model; with `identity_after=L` the layers after L add nothing to the residual
    stream (zeroed output projections), so the untrained exit at L equals the full model."""
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    common = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                  initializer_range=0.2)
    model_cls, config = {"llama": (LlamaForCausalLM, LlamaConfig), "qwen2": (Qwen2ForCausalLM, Qwen2Config)}[kind]
    torch.manual_seed(seed)
    model = model_cls(config(**common)).eval()
    if identity_after is not None:
        for layer in model.model.layers[identity_after:]:
            torch.nn.init.zeros_(layer.self_attn.o_proj.weight)
            torch.nn.init.zeros_(layer.mlp.down_proj.weight)
    model.requires_grad_(False)
    model.generation_config.eos_token_id = None
    return LLMEngine(model, TinyTokenizer(), CONFIG)


def random_head(engine: LLMEngine, exit_layer: int, vocab: list[int] | None = None, scale: float = 0.3) -> ProposalHead:
    stack = LayerStack(engine.model)
    head = ProposalHead.new("linear", stack.hidden_size, exit_layer, stack.num_layers, vocab_ids=vocab)
    if scale:
        torch.manual_seed(1)
        torch.nn.init.normal_(head.adapter.proj.weight, std=scale / stack.hidden_size**0.5)
    head.adapter.eval().requires_grad_(False)
    return head


def plain(engine: LLMEngine, prompt, n: int) -> tuple[list[int], tuple[int, ...]]:
    engine.reset()
    out = list(engine.generate(prompt, n, Sampling()))
    return out, engine.tokens


def speculative(engine: LLMEngine, drafter, prompt, n: int, k: int) -> tuple[list[int], tuple[int, ...], Decoder]:
    engine.reset()
    # never switched off: every step drafts, so the verify path is what is tested
    decoder = Decoder(engine, drafter, k, DraftingPolicy(min_spec_steps=10**9))
    decoder.policy.record_plain(1.0)
    out = list(decoder.generate(prompt, n, Sampling()))
    return out, engine.tokens, decoder


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
@pytest.mark.parametrize("k", [1, 4])
def test_self_speculative_equals_plain_greedy_with_a_poor_head(kind, k):
    engine = tiny(kind)
    drafter = SelfSpeculativeDrafter(engine, random_head(engine, 2))
    for prompt in (PROMPT, [10]):
        ref, ref_cache = plain(engine, prompt, 20)
        out, cache, decoder = speculative(engine, drafter, prompt, 20, k)
        assert out == ref
        assert cache == ref_cache
        assert decoder.stats.verify_steps > 0


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_self_speculative_with_a_perfect_head_accepts_everything_and_stays_exact(kind):
    for seed in range(8):  # a model whose reply does not end at once (the tiny vocab's EOS is a token)
        engine = tiny(kind, seed=seed, identity_after=2)
        ref, ref_cache = plain(engine, PROMPT, 21)
        if len(ref) >= 10:
            break
    assert len(ref) >= 10
    drafter = SelfSpeculativeDrafter(engine, random_head(engine, 2, scale=0.0))
    out, cache, decoder = speculative(engine, drafter, PROMPT, 21, 4)
    assert out == ref and cache == ref_cache
    assert decoder.stats.acceptance_rate == 1.0
    assert decoder.stats.mean_accepted > 3.0  # all 4 drafts kept (the last step may draft fewer)


def test_a_vocabulary_subset_head_is_still_exact():
    engine = tiny("llama", identity_after=1)
    drafter = SelfSpeculativeDrafter(engine, random_head(engine, 1, vocab=list(range(0, VOCAB, 2)), scale=0.0))
    ref, _ = plain(engine, PROMPT, 20)
    out, _, decoder = speculative(engine, drafter, PROMPT, 20, 3)
    assert out == ref
    engine.reset()
    engine.prefill(PROMPT)
    draft = drafter.propose([*PROMPT, 4], 3)
    assert draft and all(t % 2 == 0 for t in draft)


def test_a_draft_leaves_the_cache_as_it_found_it():
    engine = tiny("qwen2")
    drafter = SelfSpeculativeDrafter(engine, random_head(engine, 2))
    engine.reset()
    logits = engine.prefill(PROMPT)
    before = engine.tokens
    lengths = [layer.keys.shape[-2] for layer in engine.raw_cache.layers]
    draft = drafter.propose([*PROMPT, int(logits.argmax())], 4)
    assert len(draft) == 4 and all(0 <= t < VOCAB for t in draft)
    assert engine.tokens == before
    assert [layer.keys.shape[-2] for layer in engine.raw_cache.layers] == lengths
    # the next full decode is the one a fresh cache gives
    after = engine.decode(int(logits.argmax()))
    engine.reset()
    engine.prefill(PROMPT)
    assert torch.equal(after, engine.decode(int(logits.argmax())))


def test_no_draft_from_a_cache_that_does_not_hold_the_context():
    engine = tiny("llama")
    drafter = SelfSpeculativeDrafter(engine, random_head(engine, 2))
    engine.reset()
    engine.prefill(PROMPT)  # the cache holds PROMPT: a valid context is PROMPT + one token
    assert len(drafter.propose([*PROMPT, 5], 3)) == 3
    assert drafter.propose([*PROMPT[:-1], 7, 5], 3) == []  # same length, a different token cached
    assert drafter.propose(list(PROMPT), 3) == []  # the cache would have to hold one token less
    assert drafter.propose([*PROMPT, 5, 6], 3) == []
    assert drafter.propose([*PROMPT, 5], 0) == []
    assert engine.tokens == tuple(PROMPT)


def test_layer_stack_with_a_mask_matches_the_models_own_hidden_states():
    from transformers import DynamicCache

    engine = tiny("llama")
    stack = LayerStack(engine.model)
    ids = torch.tensor([PROMPT])
    with torch.inference_mode():
        ref = engine.model(input_ids=ids, output_hidden_states=True, use_cache=False).hidden_states
        cache = DynamicCache(config=engine.model.config)
        first = stack.run(stack.embed_ids(PROMPT[:10]), cache, 0, 3, 0, stack.causal_mask(10, 0, torch.float32, "cpu"))
        rest = stack.run(stack.embed_ids(PROMPT[10:]), cache, 0, 3, 10,
                         stack.causal_mask(len(PROMPT) - 10, 10, torch.float32, "cpu"))
    torch.testing.assert_close(torch.cat([first, rest], dim=1), ref[3], rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="mask"):
        stack.run(stack.embed_ids([1, 2]), cache, 0, 1, 0)


def test_unsupported_models_and_heads_are_clear_errors():
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    config = Gemma3TextConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                              num_attention_heads=4, num_key_value_heads=2, head_dim=8, sliding_window=6,
                              layer_types=["sliding_attention", "full_attention"])
    with pytest.raises(ValueError, match="full-attention"):
        LayerStack(Gemma3ForCausalLM(config))
    engine = tiny("llama", layers=4)
    head = ProposalHead.new("linear", 32, 2, 6)
    with pytest.raises(ValueError, match="6-layer"):
        SelfSpeculativeDrafter(engine, head)
    with pytest.raises(ValueError, match="exit layer"):
        ProposalHead.new("linear", 32, 4, 4)
    with pytest.raises(ValueError, match="min_confidence"):
        SelfSpeculativeDrafter(engine, random_head(engine, 2), min_confidence=1.0)


def test_confidence_cutoff_shortens_drafts_and_stays_exact():
    engine = tiny("qwen2")
    drafter = SelfSpeculativeDrafter(engine, random_head(engine, 2), min_confidence=0.99)
    ref, _ = plain(engine, PROMPT, 16)
    out, _, decoder = speculative(engine, drafter, PROMPT, 16, 4)
    assert out == ref
    assert decoder.stats.drafted_tokens < 4 * decoder.stats.verify_steps


def test_cost_model_arithmetic():
    assert expected_tokens_per_step(0.5, 3) == pytest.approx(1.875)
    assert expected_tokens_per_step(1.0, 3) == 4.0
    assert expected_tokens_per_step(0.0, 3) == 1.0
    # free drafts, free verify beyond one step: the speedup is the expected tokens per step
    assert predicted_speedup(0.5, 3, 0.0, 1.0) == pytest.approx(1.875)
    # issue's break-even arithmetic: half-depth drafts need ~70 % acceptance to pay at all
    assert predicted_speedup(0.6, 3, 0.5, 1.1) < 1.0 < predicted_speedup(0.9, 3, 0.5, 1.1)
    with pytest.raises(ValueError):
        expected_tokens_per_step(1.5, 3)


@pytest.mark.slow
def test_self_speculative_equals_plain_greedy_on_smollm2():
    from headstart.config import ThreadPlan
    from tests.prepared import model_path

    engine = LLMEngine.load(model_path("smollm2-135m"), LLMConfig(model="smollm2-135m", dtype="float32", quantize="none"),
                             ThreadPlan(torch_threads=1))
    stack = LayerStack(engine.model)
    head = ProposalHead.new("linear", stack.hidden_size, 10, stack.num_layers)  # untrained: the logit lens
    drafter = SelfSpeculativeDrafter(engine, head)
    prompt = engine.render_prompt([{"role": "user", "content": "Name three colours of the rainbow."}])
    ref, ref_cache = plain(engine, prompt, 24)
    out, cache, decoder = speculative(engine, drafter, prompt, 24, 3)
    assert out == ref and cache == ref_cache
    assert decoder.stats.verify_steps > 0
