"""One road from flags to the Sampler: the sampling interval's default and limits are defined once
(``model/interval.py``) and a Sampler is built in one place (``runtime.build.open_sampler``). Read from the
source, like the layering test, so a second definition fails here before it drifts."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

from gpuwatch.cli.common import add_sampling_args
from gpuwatch.config import Config
from gpuwatch.model import interval
from gpuwatch.runtime.build import SamplingOptions
from gpuwatch.sampler.sampler import Sampler

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "gpuwatch"
HOME = "gpuwatch/model/interval.py"
OPENER = "gpuwatch/runtime/build.py"
#: Packages whose own ``interval`` is something else (a kubelet's ask, the health worker's, a benchmark rate).
OTHER_INTERVALS = ("gpuwatch/sources/", "gpuwatch/workload/")
BOUND_NAMES = {"DEFAULT_INTERVAL_S", "DOCTOR_INTERVAL_S", "MIN_INTERVAL_S", "MAX_INTERVAL_S"}


def _is_number(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(
        node.value, bool)


def interval_definitions(source: str) -> list[str]:
    """Where ``source`` defines a sampling interval's default or limit itself, in words."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            positional = [*args.posonlyargs, *args.args]
            pairs = [*zip(positional[len(positional) - len(args.defaults):], args.defaults, strict=True),
                     *zip(args.kwonlyargs, args.kw_defaults, strict=True)]
            found += [f"line {node.lineno}: parameter interval={ast.unparse(d)}" for a, d in pairs
                      if a.arg == "interval" and _is_number(d)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == "interval":
            value = node.value
            if _is_number(value) or (isinstance(value, ast.Call) and any(
                    k.arg == "default" and _is_number(k.value) for k in value.keywords)):
                found.append(f"line {node.lineno}: field interval = {ast.unparse(value)}")  # type: ignore[arg-type]
        elif isinstance(node, ast.Assign):
            names = {t.id for t in node.targets if isinstance(t, ast.Name)}
            found += [f"line {node.lineno}: {n} = {ast.unparse(node.value)}" for n in names & BOUND_NAMES]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and node.args[0].value == "--interval":
            found += [f"line {node.lineno}: --interval default={ast.unparse(k.value)}" for k in node.keywords
                      if k.arg == "default" and _is_number(k.value)]
    return found


def sampler_constructions(source: str) -> list[str]:
    return [f"line {n.lineno}: {ast.unparse(n)}" for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Call) and ast.unparse(n.func).split(".")[-1] == "Sampler"]


def _modules() -> dict[str, str]:
    return {p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8") for p in PACKAGE.rglob("*.py")}


def test_the_interval_default_and_limits_are_defined_once() -> None:
    seen = {path: interval_definitions(src) for path, src in _modules().items()
            if path != HOME and not path.startswith(OTHER_INTERVALS)}
    assert {p: d for p, d in seen.items() if d} == {}


def test_a_sampler_is_built_only_by_the_opener() -> None:
    seen = {path: sampler_constructions(src) for path, src in _modules().items() if path != OPENER}
    assert {p: c for p, c in seen.items() if c} == {}
    assert sampler_constructions((ROOT / OPENER).read_text()) != []


def test_every_road_starts_from_the_same_default() -> None:
    parser = argparse.ArgumentParser()
    add_sampling_args(parser)
    assert {parser.parse_args([]).interval, Config().sampler.interval, SamplingOptions().interval,
            Sampler(producer=None).interval} == {interval.DEFAULT_INTERVAL_S}  # type: ignore[arg-type]


# -- the scanner finds what it is meant to find ---------------------------------------------------------------

def test_the_scanner_finds_each_kind_of_second_definition() -> None:
    probe = ("MIN_INTERVAL_S = 0.1\n"
             "def local_feed(sampler, *, interval: float = 1.0): ...\n"
             "class Opts:\n    interval: float = 2.0\n"
             "class Sec:\n    interval: float = _opt(parse, 'help', default=1.0)\n"
             "parser.add_argument('--interval', type=float, default=0.5)\n")
    assert len(interval_definitions(probe)) == 5


def test_the_scanner_lets_a_reference_to_the_one_default_pass() -> None:
    probe = ("from gpuwatch.model.interval import DEFAULT_INTERVAL_S\n"
             "def f(interval: float = DEFAULT_INTERVAL_S): ...\n"
             "parser.add_argument('--interval', default=DEFAULT_INTERVAL_S)\n")
    assert interval_definitions(probe) == []


def test_the_scanner_finds_a_sampler_built_by_hand() -> None:
    assert len(sampler_constructions("s = sampler.Sampler(producer, interval=1.0)\nt = StackSampler()\n")) == 1
