"""The package rule of docs/architecture.md, checked on the source: each package imports only the
packages below it (the table), nothing imports upward, and no module imports itself back through
others (lazy and TYPE_CHECKING imports included: every `import` statement in a file counts)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "headstart"
# The kernel: plain modules at the top level, no I/O, importing only each other.
KERNEL = {"audio", "clock", "config", "events", "seams", "timeline"}
# package -> the packages it may import (itself and the kernel always). The order is the layering:
# stages know the kernel and the model store; the session composes the stages; the wire and the desktop
# client sit on the session; the offline tools (training, bench) and the command line come last.
ALLOWED: dict[str, set[str]] = {
    "kernel": set(),
    "models": set(),
    "corpus": {"models"},
    "voice": {"models"},
    "llm": {"models"},
    "tts": {"models"},
    "tools": {"models"},
    "session": {"models", "voice", "llm", "tts", "tools"},
    "server": {"models", "session", "tts"},
    "mic": {"models", "session", "server", "tts"},
    "training": {"models", "corpus", "voice", "llm", "tts"},
    "bench": {"models", "corpus", "voice", "llm", "tts", "tools", "session", "server", "training"},
    "cli": {"models", "corpus", "voice", "llm", "tts", "tools", "session", "server", "mic", "training", "bench"},
}
# Programs that run as their own process (a worker in another environment, an offline index builder):
# they parse their own command line.
OWN_PROGRAMS = {"tts/coqui_worker.py", "tts/coqui_tiny.py", "corpus/make_speech_index.py"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_of(module: str) -> str:
    """The package a `headstart.X...` module belongs to: "kernel" for the top-level modules."""
    parts = module.split(".")
    if len(parts) == 1:
        return "kernel"
    if parts[1] == "__main__":
        return "cli"
    return "kernel" if parts[1] in KERNEL else parts[1]


def imported_modules(path: Path, known: set[str]) -> set[str]:
    """The headstart modules a file imports: for `from a.b import c`, `a.b.c` when that is a module,
    else `a.b`. Relative imports are resolved against the file's package."""
    found = set()
    own = module_name(path).split(".")
    if path.name != "__init__.py":
        own.pop()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*own[: len(own) - node.level + 1], *([base] if base else [])])
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in known else base)
    return {m for m in found if m == "headstart" or m.startswith("headstart.")}


def import_graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    known = set(files)
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in files.items():
        for target in imported_modules(path, known):
            while target not in known and "." in target:
                target = target.rsplit(".", 1)[0]
            if target != name:
                graph[name].add(target)
    return {name: set(graph.get(name, ())) for name in files}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_every_package_is_in_the_rule_table():
    packages = {package_of(module_name(p)) for p in PACKAGE.rglob("*.py")}
    assert packages <= set(ALLOWED), f"add {sorted(packages - set(ALLOWED))} to ALLOWED (and to docs/architecture.md)"
    top_modules = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__", "__main__"}
    assert top_modules == KERNEL, f"the top level holds only the kernel: move {sorted(top_modules - KERNEL)}"


def test_no_package_imports_upward():
    bad = []
    for source, targets in import_graph().items():
        src = package_of(source)
        for target in targets:
            dst = package_of(target)
            if dst != src and dst != "kernel" and dst not in ALLOWED[src]:
                bad.append(f"{source} -> {target}")
    assert not bad, "imports the rule table does not allow:\n" + "\n".join(sorted(bad))


def test_no_import_cycles():
    found = cycles(import_graph())
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_argparse_lives_only_in_the_command_line():
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] == "cli" or str(rel) in OWN_PROGRAMS:
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) else []
            if "argparse" in names:
                bad.append(str(rel))
    assert not bad, f"argparse outside headstart/cli/: {bad}"


def test_import_has_no_heavy_side_effects():
    """Importing the package and its layers loads no model library (torch, faster_whisper, piper)."""
    import subprocess
    import sys

    code = (
        "import sys, headstart, headstart.voice, headstart.llm, headstart.tts, headstart.models.store, "
        "headstart.session.session, headstart.server.server, headstart.cli\n"
        "heavy = [m for m in ('torch', 'transformers', 'faster_whisper', 'piper', 'ctranslate2') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


@pytest.mark.parametrize("package", ["server", "mic", "session"])
def test_the_product_layers_do_not_import_the_demo(package):
    """The server and the mic app build their config with headstart/cli/options.py, not the demo."""
    graph = import_graph()
    bad = [f"{m} -> {t}" for m, targets in graph.items() if package_of(m) == package for t in targets
           if t == "headstart.cli.demo"]
    assert not bad, bad
