"""The dependency rule of design.md §2, checked on the source: voice/, llm/ and tts/ import only the
shared modules, never each other or the composing layers."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "headstart"
SHARED = {"audio", "events", "clock", "config", "models", "seams"}
STAGES = ("voice", "llm", "tts")
# Offline tools, never imported by a running pipeline: the benchmarks and the trainers (training/
# reads the packaged bench prompts, which its training sets hold out).
OFFLINE = {"bench", "training"}
# The only modules that may import the trainers: the command line, the benchmarks and the trainers.
TRAINING_IMPORTERS = {"cli.py"}


def headstart_imports(path: Path) -> set[str]:
    """The `headstart.X` top-level modules a file imports (absolute or relative)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the file's package
                base = path.relative_to(PACKAGE.parent).with_suffix("").parts[: -node.level]
                names = [".".join([*base, node.module] if node.module else base)]
            else:
                names = [node.module or ""]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "headstart" and len(parts) > 1:
                found.add(parts[1])
    return found


@pytest.mark.parametrize("stage", STAGES)
def test_stage_imports_only_shared_modules(stage):
    for path in sorted((PACKAGE / stage).rglob("*.py")):
        allowed = SHARED | {stage}
        bad = headstart_imports(path) - allowed
        assert not bad, f"{path.relative_to(PACKAGE)} imports headstart.{', headstart.'.join(sorted(bad))}"


def test_runtime_llm_imports_no_offline_code():
    """llm/ is the runtime LLM: the benchmarks and the trainers import it, never the other way (the
    cycle llm/train_proposal.py -> bench/llm.py -> llm/ ended when the trainers moved to training/)."""
    for path in sorted((PACKAGE / "llm").rglob("*.py")):
        bad = headstart_imports(path) & OFFLINE
        assert not bad, f"{path.relative_to(PACKAGE)} imports headstart.{', headstart.'.join(sorted(bad))}"


def test_only_the_command_line_and_offline_code_import_the_trainers():
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] in OFFLINE or str(rel) in TRAINING_IMPORTERS:
            continue
        assert "training" not in headstart_imports(path), f"{rel} imports headstart.training (offline code)"


def test_shared_modules_import_no_stage():
    for name in SHARED:
        bad = headstart_imports(PACKAGE / f"{name}.py") & set(STAGES)
        assert not bad, f"headstart/{name}.py imports a stage: {bad}"


def test_import_has_no_heavy_side_effects():
    """Importing the package and its stages loads no model library (torch, faster_whisper, piper)."""
    import subprocess
    import sys

    code = (
        "import sys, headstart, headstart.voice, headstart.llm, headstart.tts, headstart.models, "
        "headstart.session, headstart.cli\n"
        "heavy = [m for m in ('torch', 'transformers', 'faster_whisper', 'piper', 'ctranslate2') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


@pytest.mark.parametrize("entry", ["server.py", "mic.py"])
def test_entry_points_take_their_options_from_cli_options_not_the_demo(entry):
    """The server and the mic app build their config with headstart/cli_options.py (issue 17)."""
    assert "demo" not in headstart_imports(PACKAGE / entry)
