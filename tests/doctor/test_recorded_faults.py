"""The doctor on real signals: every variant of ``gpuwatch workload --fault``, recorded on an H200 by
``gpuwatch validate --doctor``. The variants the thresholds were chosen on must all get their class first;
the held-back half at least 95 % of the time; healthy look-alikes no warning at all."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuwatch.cli.main import main
from gpuwatch.doctor import diagnose, top_problem
from gpuwatch.doctor.current import window
from gpuwatch.model.recording import load, read_header
from gpuwatch.validate.doctor_accuracy import judge_recordings, markdown
from gpuwatch.workload import fault_hidden
from gpuwatch.workload.faults_catalogue import FAULTS, MECHANISM_FAULTS

FIXTURES = Path(__file__).parent / "fixtures" / "faults"


RECORDED = {p.name.split(".")[0] for p in FIXTURES.glob("*.ndjson.gz")}


def test_every_fault_class_has_a_recording_from_the_h200() -> None:
    """Every variant has its recording, except mechanism variants whose recording run is still to come."""
    assert not RECORDED - set(FAULTS), sorted(RECORDED - set(FAULTS))
    assert sorted(set(FAULTS) - RECORDED) == sorted(set(MECHANISM_FAULTS) - RECORDED)
    for path in FIXTURES.glob("*.ndjson.gz"):
        assert any(g.name == "NVIDIA H200" for g in load(path)[0].gpus), path


ACCURACY = Path(__file__).parents[2] / "docs" / "doctor-accuracy-h200.json"
WINDOW_S = json.loads(ACCURACY.read_text())["meta"]["window_s"]
FIT = sorted(f for f, spec in FAULTS.items() if spec.half == "fit" and f in RECORDED)
CHECK = sorted(f for f, spec in FAULTS.items() if spec.half == "check" and f in RECORDED)
NO_WARNING = ("healthy", "demand_bound")  # the verdict that all is well, and a server with no work


def _findings(fault: str) -> list:
    return diagnose(window(load(FIXTURES / f"{fault}.ndjson.gz"), WINDOW_S))


@pytest.mark.parametrize("fault", FIT)
def test_every_variant_the_thresholds_were_chosen_on_gets_its_class_first(fault: str) -> None:
    findings = _findings(fault)
    top = top_problem(findings)
    assert top is not None and top.code == FAULTS[fault].expected, [f"{f.severity}:{f.code}" for f in findings]
    assert read_header(FIXTURES / f"{fault}.ndjson.gz").meta["expected"] == FAULTS[fault].expected


def _right_first(faults: list[str]) -> list[str]:
    return [f for f in faults if (top := top_problem(_findings(f))) is not None and top.code == FAULTS[f].expected]


def test_the_held_back_variants_are_right_first_at_least_95_percent_of_the_time() -> None:
    """The classes' held-back variants (recorded before the mechanism variants): the bar they were judged by."""
    earlier = [f for f in CHECK if f not in MECHANISM_FAULTS]
    right = _right_first(earlier)
    assert len(right) >= 0.95 * len(earlier), sorted(set(earlier) - set(right))


#: The mechanism variants' held-back half scored 9 of 11 right first when first judged (the goal is 90 %), 10 once
#: a host that sleeps between polls of an event counted as waiting for long kernels, 11 once feeder_socket_peer
#: was recorded again with its socket peer found:
#: a ratchet, so that no change loses one of them; raise it as they are won, never lower it.
MECHANISM_CHECK_RIGHT = 11


def test_the_held_back_mechanism_variants_keep_what_they_scored_when_first_judged() -> None:
    mechanism = [f for f in CHECK if f in MECHANISM_FAULTS and f not in HIDDEN]
    right = _right_first(mechanism)
    assert len(right) >= MECHANISM_CHECK_RIGHT, sorted(set(mechanism) - set(right))


#: The host-mechanism variants (``workload/fault_hidden*.py``: the garbage collector, lists to tensors, pinning,
#: page faults, a network round trip, a log collector, gloo, an event poll, a thread pool), recorded later.
HIDDEN = frozenset(fault_hidden.BODIES)
#: Their held-back half scored 3 of 7 right first when first judged, by the doctor as it stood when their
#: recordings arrived (goal 90 %); 4 once page-locking host memory stopped reading as copies (a premise the fit
#: half's pin_register_per_batch showed); 7 once a feeding thread in D state under numpy frames read as page
#: faults on a mapped file, a thread blocked sending as waiting on its peer, and copies yielded to a feeding thread
#: that mostly waits in a collective: a ratchet, raise it as they are won, never lower it.
HIDDEN_CHECK_RIGHT = 7


def test_the_held_back_host_mechanism_variants_keep_what_they_scored_when_first_judged() -> None:
    hidden = [f for f in CHECK if f in HIDDEN]
    assert len(hidden) == 7
    right = _right_first(hidden)
    assert len(right) >= HIDDEN_CHECK_RIGHT, sorted(set(hidden) - set(right))


@pytest.mark.parametrize("fault", sorted(f for f, spec in FAULTS.items() if spec.expected in NO_WARNING
                                         and f in RECORDED))
def test_healthy_look_alikes_and_idle_servers_get_no_warning(fault: str) -> None:
    findings = _findings(fault)
    assert all(f.severity == "info" for f in findings), [f"{f.severity}:{f.code}" for f in findings]


def test_the_cli_names_the_launch_bound_loop_with_its_evidence(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--replay", str(FIXTURES / "launch_bound.ndjson.gz"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    top = out["findings"][0]
    assert top["code"] == "launch_bound"
    assert any("but SM activity" in e and "busy only launching" in e for e in top["evidence"]), top["evidence"]
    assert "CUDA graphs" in top["fix"]


def test_the_committed_accuracy_table_is_what_the_current_doctor_says_of_the_recordings() -> None:
    data = json.loads(ACCURACY.read_text())
    rows = [r.row() for r in judge_recordings(FIXTURES, WINDOW_S)]
    assert data["faults"] == rows
    assert ACCURACY.with_suffix(".md").read_text() == markdown(rows, data["meta"])


#: CPU-side variants whose injected function is among the top finding's top 3 code locations: 27 of 44 when the
#: mechanism variants arrived, 37 once every earlier one was recorded with stacks, 41 once threads that wait for
#: the GIL (or for results of threads that hold it) were charged to what those threads run, 43 once feeders in
#: storage I/O had their stacks sampled, 44 (all) once feeder_random_reads ran its whole window: a ratchet.
CODE_LOCATED = 44


def test_the_injected_function_is_among_the_top_code_locations_of_the_cpu_side_variants() -> None:
    rows = [r.row() for r in judge_recordings(FIXTURES, WINDOW_S)]
    located = [r["fault"] for r in rows if r.get("cpu_side") and r.get("function_in_top3")]
    assert len(located) >= CODE_LOCATED, sorted(r["fault"] for r in rows if r.get("cpu_side")
                                                   and not r.get("function_in_top3"))
