"""Where models are: the user cache, preset names, local paths and hub ids resolved to the folder a
loader opens. Nothing here downloads: `resolve_model(name)` only looks, and raises
`ModelNotPreparedError` naming the prepare command (`headstart.models.prepare.prepare` is the one step that
fetches).

Layout of the cache (`$HEADSTART_CACHE`, else the XDG user cache dir `~/.cache/headstart`):
    downloads/            the pinned wheels
    models/NAME/          the prepared model; `manifest.json` lists each file's size and sha256
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path
from collections.abc import Callable

from headstart.models.catalog import DEMO_PRESETS, PRESETS, ROLE_NAMES, Preset

MANIFEST = "manifest.json"


class ModelError(RuntimeError):
    """A model could not be prepared or found."""


class ModelNotPreparedError(ModelError):
    """The model is known but not prepared (or its files are damaged); the message says how to prepare it."""



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
    if path.name == "__main__.py" and path.resolve().parent == Path(__file__).resolve().parents[1]:
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
