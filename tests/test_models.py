"""The model catalogue: resolving, preparing, detecting damage, failing fast offline."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from headstart.models import catalog, prepare, store

REAL_CACHE = store.cache_dir()


@pytest.fixture
def tmp_cache(tmp_path, monkeypatch):
    """An empty cache whose downloads/ folder reuses the real one's wheels (no network needed)."""
    cache = tmp_path / "cache"
    (cache).mkdir()
    real_downloads = REAL_CACHE / "downloads"
    if real_downloads.is_dir():
        (cache / "downloads").symlink_to(real_downloads)
    monkeypatch.setenv("HEADSTART_CACHE", str(cache))
    return cache


def test_unknown_name_is_a_clear_error():
    with pytest.raises(store.ModelError, match="unknown model"):
        store.resolve_model("no-such-model")


def test_unprepared_preset_names_the_prepare_command(tmp_cache):
    with pytest.raises(store.ModelNotPreparedError, match="headstart models prepare whisper-tiny.en"):
        store.resolve_model("whisper-tiny.en")
    assert store.status("whisper-tiny.en") == "missing"


def test_local_path_is_returned_as_is(tmp_path):
    assert store.resolve_model(str(tmp_path)) == tmp_path


def test_hub_id_offline_fails_fast_naming_prepare(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    start = time.monotonic()
    with pytest.raises(store.ModelNotPreparedError, match="headstart models prepare Qwen/Qwen2.5-0.5B"):
        store.resolve_model("Qwen/Qwen2.5-0.5B")
    assert time.monotonic() - start < 5.0


def test_silero_vad_is_bundled():
    path = store.resolve_model("silero-vad")
    assert path.name == "silero_vad_v6.onnx" and path.stat().st_size > 100_000


def _copy_prepared(name: str, cache: Path) -> Path:
    src = REAL_CACHE / "models" / name
    if not (src / store.MANIFEST).is_file():
        pytest.skip(f"{name} is not prepared in the real cache (make test prepares it)")
    dst = cache / "models" / name
    shutil.copytree(src, dst)
    return dst


def test_truncated_file_is_detected_and_reprepared(tmp_cache):
    folder = _copy_prepared("piper-joe", tmp_cache)
    assert store.resolve_model("piper-joe") == folder / "en_US-joe-medium.onnx"
    onnx = folder / "en_US-joe-medium.onnx"
    with open(onnx, "r+b") as f:
        f.truncate(1000)
    assert store.status("piper-joe") == "damaged"
    with pytest.raises(store.ModelNotPreparedError, match="damaged"):
        store.resolve_model("piper-joe")
    logs: list[str] = []
    prepare.prepare("piper-joe", log=logs.append)
    assert any("re-preparing" in line for line in logs)
    assert store.sha256_file(onnx) == catalog.PRESETS["piper-joe"].sha256["en_US-joe-medium.onnx"]


def test_same_size_corruption_is_caught_by_prepare(tmp_cache):
    folder = _copy_prepared("piper-joe", tmp_cache)
    card = folder / "MODEL_CARD"
    data = bytearray(card.read_bytes())
    data[0] ^= 0xFF
    card.write_bytes(bytes(data))
    logs: list[str] = []
    prepare.prepare("piper-joe", log=logs.append)
    assert any("re-preparing" in line for line in logs)
    assert card.read_bytes()[0] != data[0]


def test_second_prepare_is_a_no_op(tmp_cache):
    folder = _copy_prepared("whisper-tiny.en", tmp_cache)
    before = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    logs: list[str] = []
    prepare.prepare("whisper-tiny.en", log=logs.append)
    assert logs == [f"whisper-tiny.en: ready at {folder}"]
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == before


def test_sha256_mismatch_is_refused(tmp_cache, monkeypatch):
    preset = catalog.PRESETS["piper-joe"]
    bad = dataclasses.replace(preset, sha256={"MODEL_CARD": "0" * 64})
    monkeypatch.setitem(catalog.PRESETS, "piper-joe", bad)
    with pytest.raises(store.ModelError, match="sha256 of MODEL_CARD"):
        prepare.prepare("piper-joe", log=lambda _: None)
    with pytest.raises(store.ModelNotPreparedError):
        store.resolve_model("piper-joe")


def test_cli_path_and_missing_model_message(tmp_cache):
    env = {**os.environ, "HEADSTART_CACHE": str(tmp_cache)}
    result = subprocess.run(
        [sys.executable, "-m", "headstart", "models", "path", "smollm2-135m"],
        capture_output=True, text=True, env=env, timeout=60,
    )
    assert result.returncode == 1
    assert "headstart models prepare smollm2-135m" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_converted_llm_matches_the_gguf():
    """The bf16 safetensors folder gives the same greedy tokens as loading the GGUF itself."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = store.resolve_model("smollm2-135m")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}],
        add_generation_prompt=True, return_tensors="pt", return_dict=True,
    )["input_ids"]
    outputs = []
    for kwargs in ({}, {"gguf_file": "model.gguf"}):
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16, **kwargs)
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=12, do_sample=False)
        outputs.append(out[0, ids.shape[1]:].tolist())
    assert outputs[0] == outputs[1]
    assert len(outputs[0]) > 0


def test_the_demo_presets_are_what_make_models_demo_prepares():
    """`_prepare_hint` suggests `make models-demo` only for the models that target prepares."""
    makefile = (Path(__file__).parent.parent / "Makefile").read_text()
    line = next(line for line in makefile.splitlines() if line.startswith("DEMO_MODELS"))
    assert tuple(line.split(":=")[1].split()) == catalog.DEMO_PRESETS
    assert "make models-demo" in store._prepare_hint("piper-joe")
    assert "make models-demo" not in store._prepare_hint("qwen2.5-coder-1.5b")


# -- every configured model checked up front (a new user's trial: missing models named one run at a time) --


def _no_model_loads(monkeypatch):
    """Make any model load fail the test: the checks must come first."""
    from headstart.llm.engine import LLMEngine
    from headstart.voice import asr_engines

    def loaded(*args, **kwargs):
        raise AssertionError("a model was loaded before the configuration was checked")

    monkeypatch.setattr(asr_engines, "load_asr", loaded)
    monkeypatch.setattr(LLMEngine, "load", loaded)


def test_every_missing_model_is_named_in_one_error_with_one_command(tmp_cache, monkeypatch):
    from headstart.session.components import Components
    from headstart.config import EndpointConfig, PipelineConfig, TTSConfig

    _no_model_loads(monkeypatch)
    # a Piper voice too (the default voice, hibari, is built into its wheel: nothing to prepare)
    config = dataclasses.replace(PipelineConfig(), endpoint=EndpointConfig(acoustic_model="smart-turn-v3.2"),
                                 tts=TTSConfig(engine="piper-joe"))
    with pytest.raises(store.ModelNotPreparedError) as caught:
        Components.load(config)
    message = str(caught.value)
    for name in ("moonshine-base", "qwen2.5-coder-0.5b", "piper-joe", "smart-turn-v3.2"):
        assert f"'{name}' (not prepared)" in message, message
    assert "run `headstart models prepare moonshine-base qwen2.5-coder-0.5b smart-turn-v3.2 piper-joe` first" in message
    # the demo's models alone: `make models-demo` prepares them too
    with pytest.raises(store.ModelNotPreparedError, match=r"qwen2\.5-coder-0\.5b` \(or `make models-demo`\) first"):
        Components.load(PipelineConfig())


def test_resolve_models_names_unknown_and_missing_together(tmp_cache, tmp_path):
    with pytest.raises(store.ModelError) as caught:
        store.resolve_models([("asr", "whisper-tny.en"), ("llm", "smollm2-135m"), ("tts", str(tmp_path))])
    message = str(caught.value)
    assert not isinstance(caught.value, store.ModelNotPreparedError)
    assert "unknown ASR model 'whisper-tny.en': not a preset (whisper-tiny.en, whisper-base, moonshine-base)" in message
    assert "LLM 'smollm2-135m' (not prepared): run `headstart models prepare smollm2-135m` first" in message
    assert store.resolve_models([("tts", str(tmp_path))]) == [tmp_path]


@pytest.mark.models
def test_a_mistyped_asr_or_llm_preset_lists_only_that_roles_presets(monkeypatch):
    from headstart.session.components import Components
    from headstart.config import ASRConfig, LLMConfig, PipelineConfig

    _no_model_loads(monkeypatch)
    for config, expected, other in (
        (dataclasses.replace(PipelineConfig(), asr=ASRConfig(model="whisper-tny.en")), "unknown ASR model", "qwen"),
        (dataclasses.replace(PipelineConfig(), llm=LLMConfig(model="qwen2.5-0.5b")), "unknown LLM model", "whisper"),
        (dataclasses.replace(PipelineConfig(), asr=ASRConfig(model="piper-joe")), "a TTS preset, not an ASR", "qwen"),
    ):
        with pytest.raises(store.ModelError, match=expected) as caught:
            Components.load(config)
        assert other not in str(caught.value) and "silero" not in str(caught.value)


def test_the_prepare_hint_names_the_command_as_the_user_ran_it(tmp_path, monkeypatch):
    """A Quick-start user has `.venv/bin/headstart`, not `headstart` on PATH: the hint says so."""
    script = tmp_path / ".venv" / "bin" / "headstart"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert store.invoked_command(str(script), cwd=tmp_path) == ".venv/bin/headstart"
    (tmp_path / "elsewhere").mkdir()
    assert store.invoked_command(str(script), cwd=tmp_path / "elsewhere") == str(script)
    monkeypatch.setenv("PATH", str(script.parent))
    script.chmod(0o755)
    assert store.invoked_command(str(script), cwd=tmp_path) == "headstart"
    main = Path(store.__file__).parents[1] / "__main__.py"
    assert store.invoked_command(str(main)).endswith(" -m headstart")
    assert store.invoked_command("/usr/bin/pytest") == "headstart"
    monkeypatch.setattr(store.sys, "argv", [str(script)])
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.chdir(tmp_path)
    assert "run `.venv/bin/headstart models prepare qwen2.5-coder-1.5b` first" in store._prepare_hint("qwen2.5-coder-1.5b")


@pytest.mark.models
def test_a_folder_that_is_no_model_is_reported_before_any_model_loads(tmp_path, monkeypatch):
    """A new user's trial: `--llm some/folder` without a model in it was found only when the LLM loaded,
    after the ASR (seconds later); now the configuration check names it, for the LLM and the ASR."""
    from headstart.session.components import Components
    from headstart.config import ASRConfig, LLMConfig, PipelineConfig

    _no_model_loads(monkeypatch)
    empty = tmp_path / "my-model"
    empty.mkdir()
    config = dataclasses.replace(PipelineConfig(), llm=LLMConfig(model=str(empty)))
    with pytest.raises(store.ModelError, match=r"LLM '.*my-model' is not a model folder \(no config.json\)"):
        Components.load(config)
    config = dataclasses.replace(PipelineConfig(), asr=ASRConfig(model=str(empty)))
    with pytest.raises(store.ModelError, match=r"ASR '.*my-model' is not a model folder"):
        Components.load(config)
    (empty / "config.json").write_text("{}")  # the folder check passes; the loader opens the rest
    assert store.resolve_model(str(empty), "llm") == empty


def test_models_list_marks_the_configured_defaults(capsys):
    """`headstart models list` said whisper-tiny.en and piper-joe were the defaults after the config had
    moved on (a new user's trial): the column now follows PipelineConfig, and a default that is no
    preset (hibari, inside its wheel) is named under the table."""
    from headstart.cli import main
    from headstart.config import PipelineConfig

    assert main(["models", "list"]) == 0
    out = capsys.readouterr().out
    marked = {line.split("│")[1].strip() for line in out.splitlines()
              if line.startswith("│") and len(line.split("│")) > 4 and line.split("│")[4].strip() == "yes"}
    config = PipelineConfig()
    assert {config.asr.model, config.llm.model, "silero-vad"} <= marked
    assert marked <= set(catalog.default_presets().values())
    assert "whisper-tiny.en" not in marked or config.asr.model == "whisper-tiny.en"
    if config.tts.engine not in catalog.PRESETS:
        assert f"default TTS: {config.tts.engine}" in out
