"""A quantised drafter (LLMConfig.draft_quantize="int8") for an fp32 target on the real SmolLM2-135M:
the drafter's proposals are only proposals, so the speculative output stays token-identical to plain
greedy decoding of the fp32 target, while the drafter really is int8 and really drafts."""

from __future__ import annotations

import pytest

from headstart.config import LLMConfig, ThreadPlan
from headstart.llm.sampling import Sampling
from headstart.llm.speculative import DraftingPolicy, build_decoder
from tests.prepared import llm_engine

pytestmark = pytest.mark.models  # loads a real prepared model (make test-unit leaves it out)

MODEL = "smollm2-135m"
PROMPTS = ["Tell me a short story about a robot who learns to paint."]


@pytest.fixture(scope="module")
def decoder():
    config = LLMConfig(model=MODEL, dtype="float32", quantize="none", speculative="draft_model", draft_model=MODEL,
                       draft_quantize="int8", speculate_k=3)
    target = llm_engine(config)
    built = build_decoder(target, config, ThreadPlan())
    built.policy = DraftingPolicy(margin=0.0)  # never switch drafting off: both paths must run
    return built


def test_the_drafter_is_int8_and_the_target_is_not(decoder):
    import torch

    from headstart.llm.int8 import RowInt8Linear

    draft = decoder.drafter.draft
    assert isinstance(draft.model.lm_head, RowInt8Linear)
    assert draft.quantize == "int8" and decoder.engine.quantize is None
    assert type(decoder.engine.model.lm_head) is torch.nn.Linear
    assert decoder.engine.model.dtype == torch.float32


@pytest.mark.slow
@pytest.mark.parametrize("text", PROMPTS)
def test_int8_drafter_output_equals_plain_fp32_greedy(decoder, text):
    engine = decoder.engine
    prompt = engine.render_prompt([{"role": "user", "content": text}])
    engine.reset()
    expected = list(engine.generate(prompt, 24, Sampling()))
    engine.reset()
    decoder.drafter.reset()
    before = decoder.stats.verify_steps
    got = list(decoder.generate(prompt, 24, Sampling()))
    assert got == expected
    assert decoder.stats.verify_steps > before  # it really drafted and verified


def test_draft_quantize_is_refused_where_int8_cannot_work(decoder):
    config = LLMConfig(model=MODEL, dtype="float32", speculative="draft_model", draft_model=MODEL,
                       draft_quantize="int4")
    with pytest.raises(ValueError, match="int4"):
        build_decoder(decoder.engine, config, ThreadPlan())


def test_auto_draft_quantize_is_int8_only_for_an_fp32_cpu_drafter():
    from headstart.llm.speculative import resolve_draft_quantize

    assert LLMConfig().draft_quantize == "auto"
    assert resolve_draft_quantize(LLMConfig(dtype="float32")) == "int8"
    assert resolve_draft_quantize(LLMConfig(dtype="bfloat16")) is None  # no int8 kernels for bf16
    assert resolve_draft_quantize(LLMConfig(dtype="float32", device="cuda")) is None
    assert resolve_draft_quantize(LLMConfig(dtype="float32", draft_quantize=None)) is None
    assert resolve_draft_quantize(LLMConfig(dtype="float32", draft_quantize="int8")) == "int8"
