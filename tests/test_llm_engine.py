"""The LLM engine on the real SmolLM2-135M-Instruct (default dtype): our loop against transformers' own
`generate`, incremental prefill, the stale-cache guard, crop, verify, sampling."""

from __future__ import annotations

import pytest
import torch

from headstart.config import LLMConfig, ThreadPlan
from headstart.llm.engine import LLMEngine, LLMError, common_prefix_len
from headstart.llm.sampling import Sampling
from tests.prepared import model_path

pytestmark = pytest.mark.models  # loads a real prepared model (make test-unit leaves it out)

MODEL = "smollm2-135m"
PROMPTS = [
    "What is the capital of France?",
    "Tell me a short story about a robot who learns to paint.",
    "List three colours.",
]


def _model_path():
    return model_path(MODEL)


@pytest.fixture(scope="module")
def engine() -> LLMEngine:
    return LLMEngine.load(_model_path(), LLMConfig(model=MODEL, max_new_tokens=24), ThreadPlan())


@pytest.fixture
def fresh(engine: LLMEngine) -> LLMEngine:
    engine.reset()
    return engine


def _prompt(engine: LLMEngine, text: str) -> list[int]:
    return engine.render_prompt([{"role": "user", "content": text}])


def _assert_logits_close(a: torch.Tensor, b: torch.Tensor, rel: float) -> None:
    # bf16 on CPU: the same positions computed in differently shaped matmuls differ by ~1-2 % of the
    # logit scale; a real mistake (a stale or missing position) moves them far more.
    assert int(a.argmax()) == int(b.argmax())
    assert float((a - b).abs().max()) <= rel * float(b.abs().max())


def test_numpy_and_torch_integer_ids_are_accepted(fresh):
    import numpy as np

    ids = _prompt(fresh, PROMPTS[2])
    reference = fresh.prefill(ids)
    fresh.reset()
    _assert_logits_close(fresh.prefill(np.array(ids)), reference, rel=0.0)
    assert fresh.tokens == tuple(ids) and all(type(t) is int for t in fresh.tokens)
    fresh.reset()
    _assert_logits_close(fresh.prefill(torch.tensor(ids)), reference, rel=0.0)


def test_common_prefix_len():
    assert common_prefix_len([], [1]) == 0
    assert common_prefix_len([1, 2, 3], [1, 2, 3]) == 3
    assert common_prefix_len([1, 2, 3], [1, 2]) == 2
    assert common_prefix_len([1, 2, 3], [1, 5, 3]) == 1


def test_end_tokens_include_the_chat_template_end(engine):
    im_end = engine.tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert im_end in engine.eos_token_ids


def test_render_prompt_uses_the_chat_template(engine):
    ids = _prompt(engine, "Hi there")
    text = engine.tokenizer.decode(ids)
    assert text.endswith("<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n")
    without = engine.render_prompt([{"role": "user", "content": "Hi there"}], add_generation_prompt=False)
    assert ids[: len(without)] == without and len(ids) > len(without)


@pytest.mark.parametrize("text", PROMPTS)
def test_greedy_generate_equals_transformers_generate(fresh, text):
    ids = _prompt(fresh, text)
    ours = list(fresh.generate(ids, max_new_tokens=24, sampling=Sampling()))
    with torch.inference_mode():
        out = fresh.model.generate(torch.tensor([ids]), do_sample=False, max_new_tokens=24)
    theirs = out[0, len(ids):].tolist()
    if theirs and theirs[-1] in fresh.eos_token_ids:
        theirs = theirs[:-1]  # transformers emits the end token; our generator ends instead
    assert ours == theirs
    assert ours, "the model should say something"


def test_generate_stops_at_the_end_token_without_yielding_it(fresh):
    ids = _prompt(fresh, PROMPTS[0])
    tokens = list(fresh.generate(ids, max_new_tokens=60))
    assert 0 < len(tokens) < 60
    assert not set(tokens) & fresh.eos_token_ids
    # The cache holds the prompt and every yielded token (the end token itself is never decoded).
    assert fresh.tokens == tuple(ids + tokens)


def test_generate_stops_after_max_new_tokens(fresh):
    tokens = list(fresh.generate(_prompt(fresh, PROMPTS[1]), max_new_tokens=5))
    assert len(tokens) == 5
    # The last token was never asked to predict anything: it is not in the cache.
    assert fresh.tokens == tuple(_prompt(fresh, PROMPTS[1]) + tokens[:-1])
    assert list(fresh.generate(_prompt(fresh, PROMPTS[1]), max_new_tokens=0)) == []


def test_prefill_in_pieces_equals_one_shot(fresh):
    ids = _prompt(fresh, PROMPTS[1])
    one_shot = fresh.prefill(ids)
    fresh.reset()
    for end in (7, 20, 31):
        fresh.prefill(ids[:end])
        assert fresh.num_tokens == end
    pieces = fresh.prefill(ids)
    assert fresh.tokens == tuple(ids)
    _assert_logits_close(pieces, one_shot, rel=0.05)


@pytest.fixture(scope="module")
def engine_fp32() -> LLMEngine:
    # float32, so incremental and one-shot results can be compared tightly.
    return LLMEngine.load(_model_path(), LLMConfig(model=MODEL, dtype="float32"), ThreadPlan())


def test_prefill_in_pieces_equals_one_shot_in_float32(engine_fp32):
    engine = engine_fp32
    engine.reset()
    ids = _prompt(engine, PROMPTS[1])
    one_shot = engine.prefill(ids)
    engine.reset()
    engine.prefill(ids[:9])
    engine.prefill(ids[:-1])
    pieces = engine.decode(ids[-1])
    torch.testing.assert_close(pieces, one_shot, rtol=1e-3, atol=1e-3)


def test_prefill_of_a_changed_prompt_recomputes_from_the_first_difference(engine_fp32):
    engine = engine_fp32
    engine.reset()
    a = _prompt(engine, "My favourite animal is the cat. What is yours?")
    b = _prompt(engine, "My favourite animal is the dog. What is yours?")
    first_diff = common_prefix_len(a, b)
    assert 0 < first_diff < len(a) - 1
    engine.prefill(a)
    from_stale = engine.prefill(b)
    assert engine.tokens == tuple(b)
    engine.reset()
    from_scratch = engine.prefill(b)
    torch.testing.assert_close(from_stale, from_scratch, rtol=1e-3, atol=1e-3)
    # Reusing the cat's positions would have given something else: the guard is doing real work.
    engine.reset()
    from_cat = engine.prefill(a)
    assert float((from_cat - from_scratch).abs().max()) > 0.5


def test_prefill_of_a_prefix_of_the_cache_recomputes_its_last_position(fresh):
    ids = _prompt(fresh, PROMPTS[2])
    fresh.prefill(ids)
    shorter = fresh.prefill(ids[:-3])
    assert fresh.tokens == tuple(ids[:-3])
    fresh.reset()
    _assert_logits_close(shorter, fresh.prefill(ids[:-3]), rel=0.05)


def test_a_cache_changed_behind_the_engines_back_is_never_reused(fresh):
    ids = _prompt(fresh, PROMPTS[0])
    fresh.prefill(ids)
    fresh._cache.raw.crop(-3)  # someone rolls the raw cache back without telling the engine
    with pytest.raises(LLMError, match="no longer matches"):
        fresh.decode(ids[-1])
    assert fresh.num_tokens == 0  # reset: the next prefill recomputes everything
    logits = fresh.prefill(ids)
    fresh.reset()
    _assert_logits_close(logits, fresh.prefill(ids), rel=0.0)


def test_crop_rolls_back_and_continues(fresh):
    ids = _prompt(fresh, PROMPTS[1])
    reference = fresh.prefill(ids)
    fresh.crop(5)
    assert fresh.tokens == tuple(ids[:5]) and len(fresh._cache) == 5
    _assert_logits_close(fresh.prefill(ids), reference, rel=0.05)
    fresh.crop(0)
    assert fresh.num_tokens == 0 and len(fresh._cache) == 0
    _assert_logits_close(fresh.prefill(ids), reference, rel=0.0)
    for bad in (-5, -1, len(ids) + 1):
        with pytest.raises(ValueError):
            fresh.crop(bad)
    assert fresh.num_tokens == len(ids)


def test_verify_matches_step_by_step_decode(fresh):
    ids = _prompt(fresh, PROMPTS[1])
    logits = fresh.prefill(ids)
    drafts, stepwise = [], []
    for _ in range(4):
        token = int(logits.argmax())
        drafts.append(token)
        logits = fresh.decode(token)
        stepwise.append(logits)
    fresh.crop(len(ids))
    verified = fresh.verify(drafts)
    assert verified.shape == (4, fresh.vocab_size)
    assert fresh.tokens == tuple(ids + drafts)
    for row, step in zip(verified, stepwise):
        _assert_logits_close(row, step, rel=0.05)


def test_sampling_is_reproducible_for_a_seed(fresh):
    ids = _prompt(fresh, PROMPTS[1])
    hot = Sampling(temperature=1.0, top_p=0.95, seed=1234)
    first = list(fresh.generate(ids, max_new_tokens=10, sampling=hot))
    again = list(fresh.generate(ids, max_new_tokens=10, sampling=hot))
    assert first == again
    others = [
        list(fresh.generate(ids, max_new_tokens=10, sampling=Sampling(temperature=1.0, seed=seed)))
        for seed in (1, 2)
    ]
    assert any(other != first for other in others)


def test_tiny_top_p_is_greedy(fresh):
    ids = _prompt(fresh, PROMPTS[2])
    greedy = list(fresh.generate(ids, max_new_tokens=12, sampling=Sampling()))
    nucleus = list(fresh.generate(ids, max_new_tokens=12, sampling=Sampling(temperature=1.5, top_p=1e-6, seed=7)))
    assert nucleus == greedy


@pytest.mark.parametrize(
    "call",
    [
        lambda e: e.prefill([]),
        lambda e: e.prefill([1, -1]),
        lambda e: e.prefill([1, 10**9]),
        lambda e: e.prefill([1, 2.0]),
        lambda e: e.prefill([1, True]),
        lambda e: e.decode(None),
        lambda e: e.prefill(list(range(5)) * 2000),  # beyond the 8192-position context
        lambda e: e.verify([1, 2]),  # nothing to extend
        lambda e: e.generate([1, 2], max_new_tokens=-1),
        lambda e: e.generate([], max_new_tokens=3),
        lambda e: e.render_prompt([]),
        lambda e: e.render_prompt("hello"),
        lambda e: e.render_prompt([{"role": "user"}]),
        lambda e: e.render_prompt([{"role": "user", "content": 3}]),
    ],
)
def test_bad_input_is_a_clear_error(fresh, call):
    with pytest.raises(ValueError):
        call(fresh)


def test_bad_sampling_settings_are_rejected():
    with pytest.raises(ValueError):
        Sampling(temperature=-0.1)
    with pytest.raises(ValueError):
        Sampling(top_p=0.0)
    with pytest.raises(ValueError):
        Sampling(temperature=float("nan"))


def test_load_rejects_a_folder_that_is_not_a_model(tmp_path):
    with pytest.raises(FileNotFoundError, match="prepare"):
        LLMEngine.load(tmp_path, LLMConfig(), ThreadPlan())
    with pytest.raises(ValueError, match="dtype"):
        LLMEngine.load(_model_path(), LLMConfig(dtype="int7"), ThreadPlan())


def test_a_forward_that_raises_leaves_a_clean_engine(fresh, monkeypatch):
    ids = _prompt(fresh, PROMPTS[0])
    reference = fresh.prefill(ids)
    fresh.reset()
    calls = {"n": 0}
    real_forward = fresh.model.forward

    def flaky(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("injected failure")
        return real_forward(*args, **kwargs)

    monkeypatch.setattr(fresh.model, "forward", flaky)
    gen = fresh.generate(ids, max_new_tokens=10)
    next(gen), next(gen)
    with pytest.raises(RuntimeError, match="injected"):
        next(gen)
    assert fresh.num_tokens == 0 and len(fresh._cache) == 0
    monkeypatch.undo()
    _assert_logits_close(fresh.prefill(ids), reference, rel=0.0)


def test_auto_dtype_is_float32_on_every_cpu():
    from headstart.llm.engine import resolve_dtype

    # whatever bf16 support the CPU reports: bf16 was slower and inexact (llm/precision.py)
    assert resolve_dtype("auto", "cpu") == torch.float32 == resolve_dtype(LLMConfig().dtype)
    assert resolve_dtype("auto", "cuda") == torch.bfloat16
    assert resolve_dtype("bfloat16") == torch.bfloat16 and resolve_dtype("float32") == torch.float32
    for bad in ("int7", "int8", "auto2"):
        with pytest.raises(ValueError, match="dtype"):
            resolve_dtype(bad)


def test_from_config_names_an_unknown_model_clearly():
    from headstart.models.store import ModelError

    with pytest.raises(ModelError, match="unknown model"):
        LLMEngine.from_config(LLMConfig(model="no-such-model-xyz"), ThreadPlan())
