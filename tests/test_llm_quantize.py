"""Opt-in dynamic int8 quantisation of the LLM (LLMConfig.quantize="int8") on the real SmolLM2-135M:
the quantised engine still answers, stays exact relative to its (quantised) model, and the option is
refused where it cannot work."""

from __future__ import annotations

import pytest
import torch

from headstart.config import LLMConfig, ThreadPlan
from headstart.llm.engine import LLMEngine, quantize_model

MODEL = "smollm2-135m"
PROMPTS = ["What is the capital of France?", "Name three colours."]


def _model_path():
    from headstart.models import ModelNotPreparedError, resolve_model

    try:
        return resolve_model(MODEL)
    except ModelNotPreparedError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def engine() -> LLMEngine:
    config = LLMConfig(model=MODEL, max_new_tokens=20, dtype="float32", quantize="int8")
    return LLMEngine.load(_model_path(), config, ThreadPlan())


def _prompt(engine: LLMEngine, text: str) -> list[int]:
    return engine.render_prompt([{"role": "user", "content": text}])


def test_every_linear_is_int8_including_the_lm_head(engine):
    from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear

    assert isinstance(engine.model.lm_head, DynamicLinear)
    assert engine.model.lm_head.weight().qscheme() == torch.per_channel_affine
    assert not any(type(m) is torch.nn.Linear for m in engine.model.modules())
    # The embeddings (tied to the lm_head in SmolLM2) stay float32.
    assert engine.model.get_input_embeddings().weight.dtype == torch.float32


def test_quantised_engine_gives_a_coherent_reply(engine):
    engine.reset()
    reply = list(engine.generate(_prompt(engine, PROMPTS[0])))
    text = engine.tokenizer.decode(reply, skip_special_tokens=True)
    assert reply and "paris" in text.lower()


@pytest.mark.parametrize("text", PROMPTS)
def test_greedy_tokens_equal_transformers_generate_on_the_same_quantised_model(engine, text):
    ids = _prompt(engine, text)
    engine.reset()
    ours = list(engine.generate(ids, max_new_tokens=16))
    with torch.inference_mode():
        out = engine.model.generate(
            torch.tensor([ids]), max_new_tokens=16, do_sample=False,
            eos_token_id=sorted(engine.eos_token_ids), pad_token_id=engine.tokenizer.eos_token_id,
        )
    theirs = [int(t) for t in out[0, len(ids):] if int(t) not in engine.eos_token_ids]
    assert ours == theirs


def test_incremental_prefill_equals_the_same_chunked_forwards_of_the_quantised_model(engine):
    # Activation scales are per tensor per forward, so a chunked prefill is not the same computation
    # as a one-shot one (its logits differ visibly, and can change the top token); the engine must
    # still give exactly what the model gives for the same chunks over its own cache.
    from transformers import DynamicCache

    ids = _prompt(engine, PROMPTS[1])
    engine.reset()
    engine.prefill(ids[:-3])
    ours = engine.prefill(ids)
    assert engine.tokens == tuple(ids)
    cache = DynamicCache(config=engine.model.config)
    kwargs = {engine._cache_kw: cache, "use_cache": True}  # "cache" or "past_key_values"
    with torch.inference_mode():
        engine.model(input_ids=torch.tensor([ids[:-3]]), **kwargs)
        theirs = engine.model(input_ids=torch.tensor([ids[-3:]]), **kwargs).logits[0, -1]
    torch.testing.assert_close(ours, theirs.float(), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_int8_with_a_non_float32_dtype_is_refused(dtype):
    with pytest.raises(ValueError, match="float32"):
        LLMEngine.load(_model_path(), LLMConfig(dtype=dtype, quantize="int8"), ThreadPlan())


def test_unknown_quantize_mode_is_refused():
    with pytest.raises(ValueError, match="unknown quantize mode"):
        LLMEngine.load(_model_path(), LLMConfig(dtype="float32", quantize="int4"), ThreadPlan())


def test_quantize_model_refuses_a_bfloat16_model():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4)).to(torch.bfloat16)
    with pytest.raises(ValueError, match="float32"):
        quantize_model(model)


def test_demo_option_reaches_the_llm_config():
    import argparse

    from headstart.demo import add_arguments, build_config

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert build_config(parser.parse_args([])).llm.quantize is None
    assert build_config(parser.parse_args(["--llm-quantize", "int8"])).llm.quantize == "int8"
    with pytest.raises(SystemExit):
        parser.parse_args(["--llm-quantize", "int4"])
