"""`headstart bench stages` and scripts/gpu_check.sh on CPU: the floor arithmetic, the floor data and
its sources, the packaged preset configs, device selection (CUDA only when present, a clear error for
`--device cuda` without it), what each stage really runs, and a real run with the table and the JSON line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from devices import DEVICES

from headstart.bench import stages
from headstart.bench.stages import StageTiming, v2v_floor

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str]) -> int:
    # imported here: the command line imports the audio stack, which a GPU machine running this file's
    # CUDA case (scripts/gpu_check.sh) may not have
    from headstart.cli import main as cli_main

    return cli_main(argv)


def test_the_floor_adds_the_stages_in_series():
    floor = v2v_floor(first_forward_s=(0.010, 0.020), decode_s=(0.005, 0.006), first_clause_tokens=(2, 8),
                      asr_s=(0.034, 0.083), eou_s=(0.032, 0.035), tts_s=(0.015, 0.020))
    # low: the chunk's first token, 1 decode step to a 2-token clause; high: 7 steps to an 8-token one
    assert floor.parts_low == pytest.approx({"asr": 0.034, "eou": 0.032, "llm": 0.015, "tts": 0.015})
    assert floor.parts_high == pytest.approx({"asr": 0.083, "eou": 0.035, "llm": 0.062, "tts": 0.020})
    assert floor.low_s == pytest.approx(0.096) and floor.high_s == pytest.approx(0.200)
    one = v2v_floor((0.1, 0.1), (9.0, 9.0), (1, 1), (0, 0), (0, 0), (0, 0))
    assert one.low_s == one.high_s == pytest.approx(0.1)  # a 1-token clause needs no decode step


@pytest.mark.parametrize("bad", [
    dict(first_forward_s=(0.2, 0.1)), dict(decode_s=(-0.1, 0.1)), dict(asr_s=(float("nan"), 0.1)),
    dict(tts_s=(0.1,)), dict(first_clause_tokens=(0, 4)), dict(first_clause_tokens=(5, 4)),
    dict(first_clause_tokens=(True, 4)), dict(first_clause_tokens=(2.0, 4)),
])
def test_bad_floor_inputs_are_clear_errors(bad):
    args = dict(first_forward_s=(0.01, 0.02), decode_s=(0.005, 0.006), first_clause_tokens=(2, 8),
                asr_s=(0.03, 0.08), eou_s=(0.03, 0.04), tts_s=(0.01, 0.02)) | bad
    with pytest.raises(ValueError, match=next(iter(bad))):
        v2v_floor(**args)


def test_floor_rows_per_preset_stack_and_llm_path():
    data = stages.load_floor_data()
    timing = lambda lo, med: StageTiming(lo, med, 3)  # noqa: E731
    measured = {"fast": {"prefill_300": timing(0.020, 0.025), "chunk_8": timing(0.004, 0.005),
                         "decode": timing(0.003, 0.004), "verify_2": timing(0.004, 0.005)}}
    rows = stages.floors(measured, data)
    assert len(rows) == 2 * len(data["combinations"])
    moon = next(r for r in rows if r["combination"].startswith("moonshine") and r["llm_path"] == "incremental")
    assert moon["first_forward"] == "chunk_8"
    assert moon["parts_low_s"]["llm"] == pytest.approx(0.004 + 0.003)  # chunk + one step (2-token clause)
    assert moon["low_s"] == pytest.approx(0.034 + 0.032 + 0.007 + 0.015)
    assert moon["meets_target_low"] and moon["meets_target_high"] == (moon["high_s"] <= 0.2)
    cold = next(r for r in rows if r["combination"] == moon["combination"] and r["llm_path"] == "cold")
    assert cold["first_forward"] == "prefill_300" and cold["parts_high_s"]["llm"] == pytest.approx(0.025 + 7 * 0.004)


def test_the_default_stack_of_the_floor_data_is_the_shipped_config():
    """The stack marked "default" is what PipelineConfig() runs (its label said "the defaults before
    hibari became the voice" after Piper had become the default voice again)."""
    from headstart.config import PipelineConfig

    config = PipelineConfig()
    (default,) = [c for c in stages.load_floor_data()["combinations"] if c.get("default")]
    assert default["asr"] == config.asr.model
    assert default["eou"] == (config.endpoint.acoustic_model or "text-head")
    assert default["tts"] == config.tts.engine
    assert config.tts.engine in default["name"] and "hibari" not in default["about"].split("(")[0]


def test_the_floor_data_is_complete_and_every_figure_has_a_source(tmp_path):
    data = stages.load_floor_data()
    assert {"moonshine-base", "whisper-tiny.en"} <= set(data["asr_final_pass"])
    assert {"hibari", "piper-joe"} <= set(data["tts_first_audio"])
    assert data["target_s"]["value"] == 0.2
    broken = json.loads(stages.FLOOR_DATA.read_text())
    broken["tts_first_audio"]["hibari"]["source"] = ""
    path = tmp_path / "floor.json"
    path.write_text(json.dumps(broken))
    with pytest.raises(ValueError, match="hibari has no source"):
        stages.load_floor_data(path)
    broken = json.loads(stages.FLOOR_DATA.read_text())
    broken["combinations"][0]["asr"] = "no-such-asr"
    path.write_text(json.dumps(broken))
    with pytest.raises(ValueError, match="no-such-asr"):
        stages.load_floor_data(path)


def test_the_packaged_configs_are_the_llm_presets_with_their_shapes():
    from headstart.models import catalog, store

    llm_presets = {p.name for p in catalog.PRESETS.values() if p.role == "llm"}
    assert set(stages.preset_names()) == llm_presets
    # the real checkpoints' sizes (Qwen's AWQ/GGUF conversions keep an untied lm_head)
    assert stages.count_parameters("smollm2-135m") == 134_515_008
    assert stages.count_parameters("qwen2.5-coder-0.5b") == 630_167_424
    assert stages.count_parameters("qwen2.5-coder-1.5b") == 1_777_088_000
    for name in llm_presets:  # where a preset is prepared here, its config is the packaged one
        prepared = store.cache_dir() / name / "config.json"
        if prepared.is_file():
            assert json.loads(prepared.read_text()) == json.loads((stages.CONFIGS / name / "config.json").read_text())


def test_auto_picks_cuda_only_when_torch_sees_it(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert stages.resolve_device("auto") == "cpu" and stages.resolve_device("cpu") == "cpu"
    with pytest.raises(ValueError, match="--device cuda: .*use --device auto"):
        stages.resolve_device("cuda")
    with pytest.raises(ValueError, match="unknown device"):
        stages.resolve_device("tpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert stages.resolve_device("auto") == "cuda" and stages.resolve_device("cuda") == "cuda"


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_device_cuda_without_cuda_is_a_clear_error(capsys):
    assert main(["bench", "stages", "--device", "cuda", "--presets", "smollm2-135m"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --device cuda:") and "Traceback" not in err


@pytest.mark.parametrize("argv, message", [
    (["--presets", "no-such-llm"], "unknown LLM preset"),
    (["--repeats", "0"], "--repeats must be >= 1"),
    (["--ks", "2,x"], "--ks must be comma-separated ints >= 1"),
])
def test_bad_arguments_are_clear_errors(capsys, argv, message):
    assert main(["bench", "stages", "--device", "cpu", *argv]) == 2
    assert message in capsys.readouterr().err


def _tiny_engine(device: str):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from headstart.bench.stages import _StubTokenizer
    from headstart.config import LLMConfig
    from headstart.llm.engine import LLMEngine

    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    model = Qwen2ForCausalLM(config).to(device).eval()
    return LLMEngine(model, _StubTokenizer(63), LLMConfig(model="tiny", dtype="float32", device=device))


@pytest.mark.parametrize("device", DEVICES)
def test_each_stage_runs_exactly_its_tokens(device, monkeypatch):
    engine = _tiny_engine(device)
    forwards: list[int] = []
    real = engine._forward

    def counting(new_ids, logits_to_keep):
        forwards.append(len(new_ids))
        return real(new_ids, logits_to_keep)

    monkeypatch.setattr(engine, "_forward", counting)
    result = stages.measure_stages(engine, prompt_tokens=20, chunk_tokens=4, ks=(2, 3), repeats=2, warmup=1)
    assert list(result) == ["prefill_20", "chunk_4", "decode", "verify_2", "verify_3"]
    assert all(t.runs == 2 and 0 < t.min_s <= t.median_s for t in result.values())
    # one round: the cold prompt, the chunk on top of it, one decode step, each verify; 3 rounds; the
    # set-ups cost no forward (the cache already holds, or is cropped back to, what the stage needs)
    assert forwards == [20, 4, 1, 2, 3] * 3
    assert engine.num_tokens == 0
    with pytest.raises(ValueError, match="repeats"):
        stages.measure_stages(engine, repeats=0)
    with pytest.raises(ValueError, match="context"):
        stages.measure_stages(engine, prompt_tokens=200)


def test_a_cpu_run_prints_the_tables_and_ends_with_the_json_line(capsys):
    argv = ["bench", "stages", "--device", "cpu", "--presets", "smollm2-135m", "--repeats", "1", "--warmup", "0",
            "--threads", "1", "--ks", "2,4"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    result = json.loads(lines[-1])
    table = "\n".join(lines[:-1])
    for heading in ("prefill_300", "chunk_8", "decode", "verify_2", "verify_4", "voice-to-voice floor",
                    "moonshine+smart-turn+hibari", "whisper+text-head+hibari", "moonshine+text-head+hibari"):
        assert heading in table
    assert result["bench"] == "stages" and result["device"] == "cpu"
    r = result["presets"]["smollm2-135m"]
    assert r["precision"] == "float32+int8" and r["params"] == 134_515_008  # the session's CPU path
    assert set(r["stages_ms"]) == {"prefill_300", "chunk_8", "decode", "verify_2", "verify_4"}
    assert all(s["min"] > 0 for s in r["stages_ms"].values())
    assert r["stages_ms"]["prefill_300"]["min"] > r["stages_ms"]["chunk_8"]["min"]  # 300 tokens against 8
    # two LLM paths (cold, incremental) for each of the three ASR/EOU/TTS combinations
    assert len(result["floor"]) == 6 and result["target_s"] == 0.2
    assert result["cpu"]["cores"] >= 1


@pytest.mark.slow
def test_gpu_check_script_runs_here_on_cpu(tmp_path):
    env = dict(os.environ, OUT=str(tmp_path / "out"), PYTHON=sys.executable,
               GPU_CHECK_TESTS="tests/test_llm_device.py -k cuda")
    done = subprocess.run(["bash", "scripts/gpu_check.sh", "--device", "cpu", "--presets", "smollm2-135m",
                           "--repeats", "1", "--warmup", "0", "--ks", "2"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "== gpu_check done: ok" in done.stdout
    assert "skipped" in done.stdout  # the CUDA cases, here
    result = json.loads((tmp_path / "out" / "stages.json").read_text())
    assert result["device"] == "cpu" and "smollm2-135m" in result["presets"]
    assert "voice-to-voice floor" in (tmp_path / "out" / "gpu_check.log").read_text()


def test_gpu_check_script_says_clearly_when_no_python_has_torch(tmp_path):
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho \"ModuleNotFoundError: No module named 'torch'\" >&2\nexit 1\n")
    fake.chmod(0o755)
    done = subprocess.run(["bash", "scripts/gpu_check.sh"], cwd=ROOT, env=dict(os.environ, PYTHON=str(fake)),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 3
    assert "no python with torch and transformers" in done.stderr and "No module named 'torch'" in done.stderr
