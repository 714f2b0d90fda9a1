"""The data flow is one way: consumers read Snapshots and never import a source (a ruff rule, checked here with
the project's own configuration), and the import graph has no loop and no upward edge (read from the source),
between modules and between packages."""

from __future__ import annotations

import ast
import functools
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _ruff(filename: str, code: str) -> subprocess.CompletedProcess[str]:
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff not installed")
    return subprocess.run([ruff, "check", "--no-cache", "--select", "TID251", "--stdin-filename", filename, "-"],
                          input=code, text=True, capture_output=True, cwd=ROOT)


@pytest.mark.parametrize("consumer", ["alerts", "doctor", "exporter", "tui", "daemon", "notify"])
@pytest.mark.parametrize("module", ["gpuwatch.sources.host", "gpuwatch.runtime.build"])
def test_a_consumer_that_imports_a_source_fails_the_lint(consumer: str, module: str) -> None:
    result = _ruff(f"gpuwatch/{consumer}/probe.py", f"import {module}\n")
    assert result.returncode == 1 and "TID251" in result.stdout


@pytest.mark.parametrize("composer", ["cli", "sampler", "runtime", "sources"])
def test_the_composition_roots_may_import_sources(composer: str) -> None:
    assert _ruff(f"gpuwatch/{composer}/probe.py", "import gpuwatch.sources.host\n").returncode == 0


# -- the import graph, read from the source ------------------------------------------------------------------
# Layers, bottom up: model; sources (and the sampler over them); consumers; the composition roots (cli,
# runtime) that put them together. An import goes down or sideways, never up, and never round in a loop.
# The reference workload stands apart: it imports nothing of gpuwatch, and loads torch only to run a stage.

PACKAGE = ROOT / "gpuwatch"
CONSUMERS = ("alerts", "diagnosis", "doctor", "exporter", "tui", "daemon", "notify", "validate", "efficiency")
COMPOSERS = ("cli", "runtime")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _dynamic_import(func: ast.expr) -> bool:
    """``importlib.import_module``, ``import_module`` or ``__import__`` (told apart without unparsing every
    call of the package, which cost each test of this file 2.5 s)."""
    if isinstance(func, ast.Name):
        return func.id in ("import_module", "__import__")
    return (isinstance(func, ast.Attribute) and func.attr == "import_module"
            and isinstance(func.value, ast.Name) and func.value.id == "importlib")


def imports(source: str, modules: set[str]) -> tuple[set[str], list[str]]:
    """(gpuwatch modules ``source`` imports, resolved to the module files; its dynamic or function-level
    imports of gpuwatch, in words)."""
    found: set[str] = set()
    hidden: list[str] = []
    tree = ast.parse(source)
    top_level = {id(node) for node in tree.body}
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # ``from pkg import submodule`` imports the submodule; ``from pkg import name`` the package
            names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                     for a in node.names]
        elif isinstance(node, ast.Call) and _dynamic_import(node.func):
            hidden.append(f"line {node.lineno}: {ast.unparse(node.func)}()")
        ours = [n for n in names if n.split(".")[0] == "gpuwatch"]
        if ours and id(node) not in top_level:
            hidden.append(f"line {node.lineno}: import inside a function ({ours[-1]})")
        for name in ours:
            while name not in modules and "." in name:
                name = name.rsplit(".", 1)[0]
            if name in modules:
                found.add(name)
    return found, hidden


@functools.cache
def graph() -> tuple[dict[str, set[str]], dict[str, list[str]]]:
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    edges, hidden = {}, {}
    for name, path in files.items():
        edges[name], hidden[name] = imports(path.read_text(encoding="utf-8"), set(files))
        edges[name].discard(name)
    return edges, hidden


def layer(module: str) -> str:
    return module.split(".")[1] if module.count(".") else "gpuwatch"


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected parts with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            # a package's __init__ re-exports its modules: importing the package is not importing them back
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                out.append(sorted(part))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_the_import_graph_has_no_cycle() -> None:
    edges, _ = graph()
    assert cycles(edges) == []


def packages(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """The import graph between packages (``gpuwatch.daemon`` imports ``gpuwatch.efficiency`` when any module
    of one imports any module of the other): modules that never loop can still tie two packages in a knot."""
    out: dict[str, set[str]] = {}
    for module, deps in edges.items():
        out.setdefault(layer(module), set()).update(layer(d) for d in deps if layer(d) != layer(module))
    for deps in list(out.values()):
        for d in deps:
            out.setdefault(d, set())
    return out


def test_no_two_packages_import_each_other() -> None:
    edges, _ = graph()
    assert cycles(packages(edges)) == []


def test_the_package_graph_sees_a_loop_no_module_closes() -> None:
    """A module of ``daemon`` imports ``efficiency``, and a different module of ``efficiency`` imports a
    different one of ``daemon``: no module loop, one package loop."""
    edges = {"gpuwatch.daemon.runner": {"gpuwatch.efficiency.install"},
             "gpuwatch.efficiency.install": {"gpuwatch.daemon.parts"}, "gpuwatch.daemon.parts": set()}
    assert cycles(edges) == []
    assert cycles(packages(edges)) == [["daemon", "efficiency"]]


def test_the_cycle_finder_finds_a_lazy_loop() -> None:
    edges = {"gpuwatch.alerts.a": {"gpuwatch.alerts.b"}, "gpuwatch.alerts.b": {"gpuwatch.alerts.a"},
             "gpuwatch.model.m": set()}
    assert cycles(edges) == [["gpuwatch.alerts.a", "gpuwatch.alerts.b"]]


@pytest.mark.parametrize(("lower", "allowed"), [("model", {"model"}), ("sources", {"model", "sources"})])
def test_the_model_and_the_sources_import_no_consumer(lower: str, allowed: set[str]) -> None:
    edges, _ = graph()
    upward = {m: sorted(d for d in deps if layer(d) not in allowed) for m, deps in edges.items() if layer(m) == lower}
    assert {m: d for m, d in upward.items() if d} == {}


def test_consumers_import_no_source_and_no_composition_root() -> None:
    edges, _ = graph()
    forbidden = {"sources", *COMPOSERS}
    upward = {m: sorted(d for d in deps if layer(d) in forbidden) for m, deps in edges.items() if layer(m) in CONSUMERS}
    assert {m: d for m, d in upward.items() if d} == {}


def test_the_workload_stands_apart() -> None:
    edges, _ = graph()
    outside = {m: sorted(d for d in deps if layer(d) != "workload") for m, deps in edges.items()
               if layer(m) == "workload"}
    assert {m: d for m, d in outside.items() if d} == {}


def test_consumers_import_nothing_dynamically() -> None:
    """An import inside a function or through importlib hides an edge of the graph (it once hid a loop)."""
    _, hidden = graph()
    assert {m: h for m, h in hidden.items() if h and layer(m) in (*CONSUMERS, "model", "sources", "sampler")} == {}


@pytest.mark.parametrize("probe", ["import importlib\nm = importlib.import_module('gpuwatch.alerts')\n",
                                   "def f():\n    from gpuwatch.alerts import windows\n",
                                   "m = __import__('gpuwatch.doctor')\n"])
def test_a_dynamic_or_lazy_import_is_caught(probe: str) -> None:
    _, hidden = imports(probe, {"gpuwatch.alerts", "gpuwatch.alerts.windows", "gpuwatch.doctor"})
    assert len(hidden) == 1


@pytest.mark.parametrize("consumer", ["alerts", "exporter", "tui", "daemon"])
def test_importlib_in_a_consumer_fails_the_lint(consumer: str) -> None:
    result = _ruff(f"gpuwatch/{consumer}/probe.py", "import importlib\n")
    assert result.returncode == 1 and "TID251" in result.stdout
