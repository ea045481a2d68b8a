"""The LLM's precision on every CPU (llm/precision.py) and the exactness self-test at load
(llm/exactness.py, components.choose_decoder), on the real SmolLM2-135M-Instruct."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from headstart.config import LLMConfig, ThreadPlan
from headstart.llm.engine import LLMEngine
from headstart.llm.exactness import check_exactness
from headstart.llm.precision import int8_unsupported_reason, resolve_precision, resolve_quantize
from tests.prepared import model_path

pytestmark = pytest.mark.models  # loads a real prepared model (make test-unit leaves it out)

MODEL = "smollm2-135m"
ROOT = Path(__file__).resolve().parents[1]


def _model_path():
    return model_path(MODEL)


@pytest.fixture(scope="module")
def int8_engine():
    if int8_unsupported_reason() is not None:
        pytest.skip(int8_unsupported_reason())
    return LLMEngine.load(_model_path(), LLMConfig(model=MODEL), ThreadPlan())


def test_the_default_is_float32_with_int8_layers_where_the_cpu_runs_them(int8_engine):
    precision = resolve_precision(LLMConfig().dtype, LLMConfig().quantize)
    assert precision.dtype == torch.float32 and precision.quantize == "int8" and precision.note is None
    assert int8_engine.quantize == "int8" and int8_engine.dtype == torch.float32
    assert resolve_quantize("auto", "bfloat16", "cpu") is None  # bf16 only when asked for, then no int8


@pytest.mark.parametrize(("dtype", "quantize", "flag"), [
    ("bfloat16", "int8", "--llm-dtype float32"),
    ("float16", "int8", "--llm-dtype float32"),
    ("float32", "int4", "--llm-quantize"),
    ("bf16", "auto", "dtype"),
])
def test_a_combination_that_cannot_run_is_refused_with_the_flag_to_change(dtype, quantize, flag):
    with pytest.raises(ValueError, match=flag):
        resolve_precision(dtype, quantize)


def _python(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env}, cwd=ROOT)


def test_a_cpu_without_the_int8_kernels_runs_plain_float32_and_refuses_int8():
    # ATEN_CPU_CAPABILITY=default makes torch report a CPU without AVX2, as on QEMU's Nehalem model
    code = (
        "from headstart.llm.precision import resolve_precision\n"
        "p = resolve_precision('auto', 'auto')\n"
        "print(p.label, '|', p.note)\n"
        "try:\n"
        "    resolve_precision('auto', 'int8')\n"
        "except ValueError as exc:\n"
        "    print('refused:', exc)\n"
    )
    out = _python(code, ATEN_CPU_CAPABILITY="default")
    assert out.returncode == 0, out.stderr
    first, second = out.stdout.strip().splitlines()
    assert first.startswith("float32 |") and "AVX2" in first and "int8 off" in first
    assert second.startswith("refused:") and "--llm-quantize none" in second


def test_the_entry_points_refuse_it_before_any_model_loads():
    for command in (["demo", "--fast"], ["serve", "--port", "0"], ["bench", "llm", "--no-quality"]):
        out = subprocess.run([sys.executable, "-m", "headstart", *command, "--llm-dtype", "bfloat16",
                              "--llm-quantize", "int8"], capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert out.returncode != 0, command
        assert "--llm-dtype float32" in out.stderr, (command, out.stderr)
        assert "loading ASR" not in out.stdout + out.stderr, command  # nothing loaded first


def test_the_int8_path_passes_the_self_test(int8_engine):
    report = check_exactness(int8_engine, k=4)
    assert report.exact and report.verify_max_abs_diff == 0.0 and report.prefill_max_abs_diff == 0.0
    assert report.first_divergence is None and report.positions == 8
    assert int8_engine.num_tokens == 0  # the self-test leaves the cache empty


def _per_call_int8_engine():
    """The same model with torch.ao's dynamic int8 (one activation scale per call): a multi-token
    forward is not the computation of one-token steps, on every CPU."""
    engine = LLMEngine.load(_model_path(), LLMConfig(model=MODEL, dtype="float32", quantize="none"), ThreadPlan())
    engine.model = torch.ao.quantization.quantize_dynamic(engine.model, {torch.nn.Linear}, dtype=torch.qint8)
    return engine


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.ao: the per-call-scale int8 on purpose
def test_a_model_whose_multi_token_forwards_differ_fails_the_self_test_and_decodes_plainly():
    from headstart.session.components import choose_decoder

    engine = _per_call_int8_engine()
    report = check_exactness(engine, k=4)
    assert not report.exact and report.verify_max_abs_diff > 0
    assert "not exact" in report.summary()
    messages: list[str] = []
    decoder, again, reason = choose_decoder(engine, LLMConfig(model=MODEL), ThreadPlan(), messages.append)
    assert decoder is None and not again.exact
    assert reason is not None and reason.startswith("speculative decoding off") and reason in messages


def test_an_exact_model_gets_the_configured_speculative_decoder(int8_engine):
    from headstart.session.components import choose_decoder
    from headstart.llm.speculative import Decoder

    decoder, report, reason = choose_decoder(int8_engine, LLMConfig(model=MODEL), ThreadPlan())
    assert isinstance(decoder, Decoder) and report.exact and reason is None
    none, _, reason = choose_decoder(int8_engine, LLMConfig(model=MODEL, speculative="none"), ThreadPlan())
    assert none is None and reason is None


def test_bf16_keeps_its_promise_same_text_up_to_a_reported_divergence_point():
    """Where bf16 runs (only when asked for), its self-test says whether it is exact here, and a reply
    is plain greedy's text in float32 up to the first divergent token that the bench reports."""
    from headstart.bench.llm import first_divergence

    from headstart.session.components import choose_decoder

    bf16 = LLMEngine.load(_model_path(), LLMConfig(model=MODEL, dtype="bfloat16", quantize="none"), ThreadPlan())
    decoder, report, reason = choose_decoder(bf16, LLMConfig(model=MODEL, dtype="bfloat16"), ThreadPlan())
    assert (decoder is not None) == report.exact and (reason is None) == report.exact
    fp32 = LLMEngine.load(_model_path(), LLMConfig(model=MODEL, dtype="float32", quantize="none"), ThreadPlan())
    prompt = fp32.render_prompt([{"role": "user", "content": "Name three colours of the rainbow."}])
    reference = list(fp32.generate(prompt, max_new_tokens=16))
    got = list(bf16.generate(prompt, max_new_tokens=16))
    point = first_divergence(reference, got)
    assert point is None or point >= 3, (reference, got)  # the same model to within rounding
