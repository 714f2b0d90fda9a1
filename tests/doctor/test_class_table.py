"""One declaration per doctor class: the class table (``doctor/classes.py``) is the only place a class is
named; every list the doctor and its readers use is read off it, and a class added to it in a test is
diagnosed, ranked and explained without touching anything else."""

from __future__ import annotations

import ast
from pathlib import Path

from gpuwatch.doctor import diagnose, top_problem
from gpuwatch.doctor.classes import CLASSES, DoctorClass, codes, explains_idle, info_causes, rules, thread_findings
from gpuwatch.doctor.evidence import finding, gpu_evidence
from gpuwatch.doctor.mechanisms import BY_NAME
from gpuwatch.doctor.rules import RULES
from gpuwatch.doctor.window import GpuWindow
from gpuwatch.model.causes import FINDING_CODES
from gpuwatch.model.finding import Finding
from tests.doctor.synthetic import Load, window

PACKAGE = Path(__file__).resolve().parents[2] / "gpuwatch"
TABLE = PACKAGE / "doctor" / "classes.py"
#: Fault variants are named after the class they reproduce (``workload/``, the fault catalogue).
CATALOGUE = PACKAGE / "workload"
#: Modules that still keep a copy of codes the table derives, each with the table's function to read instead.
NOT_YET_DERIVED: dict[Path, str] = {}


def test_the_models_label_set_is_the_tables_codes() -> None:
    assert sorted(FINDING_CODES) == sorted(codes()), "model/causes.py FINDING_CODES must list the table's codes"
    assert len(set(codes())) == len(codes())


def test_every_list_is_read_off_the_table() -> None:
    assert rules() == RULES
    assert all(c.rule is not None for c in CLASSES if c.closing) and set(explains_idle()) <= set(codes())
    assert {"demand_bound", "time_slicing"} == info_causes()
    assert {"input_cpu_bound", "feeder_bound", "idle_breakdown"} <= thread_findings()
    assert all(m in BY_NAME for c in CLASSES for m in c.mechanisms), "a class names an unknown mechanism"
    assert all(c.doc and c.severity for c in CLASSES)


def _literals(path: Path) -> set[str]:
    return {n.value for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Constant)
            and isinstance(n.value, str)}


def test_a_finding_code_is_a_literal_in_at_most_one_module_besides_the_table() -> None:
    where: dict[str, list[str]] = {c: [] for c in codes()}
    for path in PACKAGE.rglob("*.py"):
        if path == TABLE or path.is_relative_to(CATALOGUE) or path in NOT_YET_DERIVED \
                or path == PACKAGE / "model" / "causes.py":
            continue
        for code in _literals(path) & set(where):
            where[code].append(str(path.relative_to(PACKAGE)))
    assert {c: w for c, w in where.items() if len(w) > 1} == {}


def _spinning(g: GpuWindow) -> Finding | None:
    """A class only this test knows: any GPU under 50 % with a process on it."""
    if g.busy is None or g.busy >= 50 or not g.processes:
        return None
    return finding("test_only_class", "A class declared by one table entry", "warning", 99.0, g, gpu_evidence(g),
                   "nothing", pid=g.processes[0].pid)


def test_a_class_added_to_the_table_alone_is_diagnosed_ranked_and_explains_idle_time() -> None:
    extra = DoctorClass("test_only_class", "a test's class", _spinning, explains_idle=True, thread=True)
    snaps = window(Load(util=5.0, sm=4.0, thread=30.0))
    before = [f.code for f in diagnose(snaps)]
    after = diagnose(snaps, classes=(*CLASSES, extra))
    assert "test_only_class" not in before and "idle_breakdown" in before
    top = top_problem(after)
    assert top is not None and top.code == "test_only_class"
    assert "idle_breakdown" not in [f.code for f in after]  # it explains the idle time


#: Numbers that are units or counts, not choices: none, one, percent, the fewest samples, minutes, hours, GB.
UNITS = {0, 1, 2, 100, 60, 120, 3600, 1e9}


def test_the_rule_modules_name_every_number_they_choose() -> None:
    """Thresholds and score coefficients are module constants (with the line that says where they came
    from), never inline in a rule."""
    inline = []
    for path in [*sorted((PACKAGE / "doctor").glob("rules_*.py")), PACKAGE / "doctor" / "attribution.py"]:
        tree = ast.parse(path.read_text())
        named = {id(n) for node in tree.body if isinstance(node, ast.Assign | ast.AnnAssign) for n in ast.walk(node)}
        inline += [f"{path.name}:{n.lineno} {n.value}" for n in ast.walk(tree)
                   if isinstance(n, ast.Constant) and type(n.value) in (int, float) and id(n) not in named
                   and n.value not in UNITS]
    assert inline == []
