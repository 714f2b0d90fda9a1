"""The host-mechanism variants' catalogue entries (``fault_hidden``, ``fault_hidden_peers``): each names a
function of its own module that exists, and they cover six mechanisms, a fit and a check variant for each
mechanism reached more than once.
Read from the source, so it holds without torch."""

from __future__ import annotations

import ast
from pathlib import Path

from gpuwatch.workload.faults_catalogue import FAULTS, MECHANISM_FAULTS

WORKLOAD = Path(__file__).parents[2] / "gpuwatch" / "workload"
MODULES = ("fault_hidden.py", "fault_hidden_peers.py", "fault_hidden_waits.py")


def _defined(module: str) -> set[str]:
    tree = ast.parse((WORKLOAD / module).read_text())
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}


def _bodies(module: str) -> set[str]:
    """The variant names a module's ``BODIES`` literal lists (its own keys, not the ones it merges)."""
    tree = ast.parse((WORKLOAD / module).read_text())
    (node,) = [n for n in tree.body if isinstance(n, ast.AnnAssign) and getattr(n.target, "id", "") == "BODIES"]
    assert isinstance(node.value, ast.Dict)
    return {k.value for k in node.value.keys if isinstance(k, ast.Constant)}


HIDDEN = {name: module for module in MODULES for name in _bodies(module)}


def test_each_host_mechanism_variant_is_catalogued_with_a_function_of_its_own_module() -> None:
    assert len(HIDDEN) >= 10
    for name, module in HIDDEN.items():
        spec = FAULTS[name]
        assert name in MECHANISM_FAULTS and spec.mechanism and spec.function, name
        assert spec.function in _defined(module), f"{name}: {spec.function} is not defined in {module}"


def test_the_host_mechanism_variants_split_fit_and_check_over_six_mechanisms() -> None:
    halves = [FAULTS[name].half for name in HIDDEN]
    assert halves.count("fit") == halves.count("check")
    assert len({FAULTS[name].mechanism for name in HIDDEN}) >= 6
    for mechanism in {FAULTS[name].mechanism for name in HIDDEN}:
        halves_of = [FAULTS[n].half for n in HIDDEN if FAULTS[n].mechanism == mechanism]
        assert len(halves_of) == 1 or set(halves_of) == {"fit", "check"}, mechanism


def test_the_mechanisms_are_ones_the_earlier_variants_did_not_name_or_a_new_way_to_reach_them() -> None:
    earlier = {FAULTS[n].mechanism for n in FAULTS if n not in HIDDEN}
    new = {FAULTS[n].mechanism for n in HIDDEN}
    assert {"network", "collective"} <= new - earlier
