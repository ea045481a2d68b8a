"""Dynamic int8 quantisation of the LLM (LLMConfig.quantize: "auto", the default, is int8 for a float32
model on CPU) on the real SmolLM2-135M: the quantised engine still answers, stays exact relative to its
(quantised) model, a multi-token forward is bit-identical row by row to one-token steps (so chunked
prefill equals one-shot prefill and verify equals decode), and the option is refused where it cannot
work."""

from __future__ import annotations

import pytest
import torch

from headstart.config import LLMConfig, ThreadPlan
from headstart.llm.engine import LLMEngine, quantize_model
from tests.prepared import model_path

pytestmark = pytest.mark.models  # loads a real prepared model (make test-unit leaves it out)

MODEL = "smollm2-135m"
PROMPTS = ["What is the capital of France?", "Name three colours."]


def _model_path():
    return model_path(MODEL)


@pytest.fixture(scope="module")
def engine() -> LLMEngine:
    config = LLMConfig(model=MODEL, max_new_tokens=20, dtype="float32", quantize="int8")
    return LLMEngine.load(_model_path(), config, ThreadPlan())


def _prompt(engine: LLMEngine, text: str) -> list[int]:
    return engine.render_prompt([{"role": "user", "content": text}])


def test_every_linear_is_int8_including_the_lm_head(engine):
    from headstart.llm.int8 import RowInt8Linear

    assert engine.quantize == "int8"
    assert isinstance(engine.model.lm_head, RowInt8Linear)
    assert not any(type(m) is torch.nn.Linear for m in engine.model.modules())
    # The embeddings (tied to the lm_head in SmolLM2) stay float32.
    assert engine.model.get_input_embeddings().weight.dtype == torch.float32


def test_auto_resolves_to_int8_only_for_a_float32_cpu_model():
    from headstart.llm.engine import resolve_quantize

    assert LLMConfig().quantize == "auto"
    assert resolve_quantize("auto", "float32", "cpu") == "int8"
    assert resolve_quantize("auto", "bfloat16", "cpu") is None  # no int8 kernels for bf16
    assert resolve_quantize("auto", "float32", "cuda") is None
    assert resolve_quantize("none", "float32", "cpu") is None
    assert resolve_quantize(None, "float32", "cpu") is None
    assert resolve_quantize("int8", "float32", "cpu") == "int8"


def test_explicit_none_loads_the_float32_model():
    off = LLMEngine.load(_model_path(), LLMConfig(model=MODEL, dtype="float32", quantize="none"), ThreadPlan())
    assert off.quantize is None
    assert any(type(m) is torch.nn.Linear for m in off.model.modules())


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


def test_chunked_prefill_is_bit_identical_to_one_shot_prefill(engine):
    # torch.ao's dynamic int8 quantises a forward's activations with one scale for all its tokens, so
    # a chunked prefill would differ visibly from a one-shot one; per-token scales and row-wise
    # attention make every row the same computation whatever the chunking.
    ids = _prompt(engine, PROMPTS[1])
    engine.reset()
    one_shot = engine.prefill(ids)
    engine.reset()
    engine.prefill(ids[:-7])
    engine.prefill(ids[:-3])
    chunked = engine.prefill(ids)
    assert torch.equal(one_shot, chunked)


def test_verify_rows_are_bit_identical_to_decode_steps(engine):
    ids = _prompt(engine, PROMPTS[0])
    engine.reset()
    logits = engine.prefill(ids)
    steps, tokens = [], []
    for _ in range(4):
        tokens.append(int(logits.argmax()))
        logits = engine.decode(tokens[-1])
        steps.append(logits)
    engine.crop(len(ids))
    rows = engine.verify(tokens)
    for i in range(4):
        assert torch.equal(rows[i], steps[i])


def test_row_int8_linear_rows_do_not_depend_on_the_batch():
    from headstart.llm.int8 import RowInt8Linear

    torch.manual_seed(0)
    linear = torch.nn.Linear(64, 48)
    quantised = RowInt8Linear(linear)
    x = torch.randn(1, 9, 64) * torch.logspace(-2, 2, 9).view(1, 9, 1)  # rows of very different scales
    x[0, 3] = 0.0  # an all-zero row stays finite
    with torch.inference_mode():
        batch = quantised(x)
        rows = torch.cat([quantised(x[:, i : i + 1]) for i in range(9)], dim=1)
        reference = linear(x)
    assert torch.equal(batch, rows)
    assert torch.isfinite(batch).all()
    # close to float32: int8 weights per channel, 7-bit activations per row
    error = (batch - reference).abs().mean(-1) / reference.abs().mean(-1)
    assert float(error.max()) < 0.05


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


def test_partial_layer_drafting_refuses_a_quantised_model_clearly(engine):
    from headstart.llm.proposal import LayerStack

    with pytest.raises(ValueError, match="quantize='none'"):
        LayerStack(engine.model)


@pytest.mark.parametrize("kind", ["llama", "qwen2", "gemma3"])
def test_rowwise_attention_only_where_attention_is_full_and_then_exact(kind):
    """Tiny random-init models: Llama and Qwen2 (full attention) switch to row-wise attention and
    their int8 verify rows equal decode steps bit for bit; Gemma3 (sliding-window layers) keeps SDPA."""
    from test_llm_speculative import _tiny

    from headstart.llm.int8 import enable_rowwise_attention

    engine = _tiny(kind)
    quantize_model(engine.model)
    switched = enable_rowwise_attention(engine.model)
    assert switched == (kind != "gemma3")
    if not switched:
        return
    engine = LLMEngine(engine.model, engine.tokenizer, engine.config)
    assert engine.quantize == "int8"
    prompt = [1, 5, 9, 2, 7, 3]
    logits = engine.prefill(prompt)
    steps, tokens = [], []
    for _ in range(5):
        tokens.append(int(logits.argmax()))
        logits = engine.decode(tokens[-1])
        steps.append(logits)
    engine.crop(len(prompt))
    rows = engine.verify(tokens)
    for i in range(5):
        assert torch.equal(rows[i], steps[i])
