"""How ``validate --doctor`` scores a mechanism variant: besides the class, whether the top finding names the
mechanism the catalogue expects and whether the function doing the injected work is among its top three code
locations; findings without stack evidence count as neither."""

from __future__ import annotations

from dataclasses import dataclass

from gpuwatch.model.finding import Finding
from gpuwatch.validate.doctor_accuracy import FaultRun, function_among, markdown
from gpuwatch.workload.faults_catalogue import FAULTS, MECHANISM_FAULTS, part


@dataclass(frozen=True)
class Located(Finding):
    """A finding with the stack evidence the doctor attaches (mechanism, top code locations)."""

    mechanism: str | None = None
    locations: tuple[tuple[str, float], ...] = ()


def _finding(code: str, **evidence: object) -> Finding:
    base = dict(code=code, title=code, severity="warning", score=50.0, gpu_index=0, pid=1, evidence=("e",), fix="f")
    return Located(**base, **evidence) if evidence else Finding(**base)  # type: ignore[arg-type]


def _row(fault: str, *findings: Finding) -> dict:
    run = FaultRun(fault, FAULTS[fault].expected)
    run.findings = list(findings)
    return run.row()


def test_every_mechanism_variant_names_its_mechanism_and_injected_function() -> None:
    assert len(MECHANISM_FAULTS) >= 12
    assert len({FAULTS[f].mechanism for f in MECHANISM_FAULTS}) >= 6
    for fault in MECHANISM_FAULTS:
        assert FAULTS[fault].mechanism and FAULTS[fault].function, fault


def test_the_right_mechanism_and_the_injected_function_in_the_top_three_score_both() -> None:
    row = _row("host_op_fft", _finding("input_cpu_bound", mechanism="host_op", locations=(
        ("fault_mechanisms.py:host_op_fft", 0.1), ("fault_mechanisms.py:spectrogram", 0.8), ("x.py:y", 0.05))))
    assert row["correct"] and row["mechanism_right"] and row["function_in_top3"]
    assert row["locations"][1] == ["fault_mechanisms.py:spectrogram", 0.8]


def test_a_fourth_location_or_another_mechanism_does_not_count() -> None:
    row = _row("host_op_fft", _finding("input_cpu_bound", mechanism="python", locations=(
        ("a.py:f", 0.4), ("b.py:g", 0.3), ("c.py:h", 0.2), ("fault_mechanisms.py:spectrogram", 0.1))))
    assert row["correct"] and row["mechanism_right"] is False and row["function_in_top3"] is False


def test_a_finding_without_stack_evidence_scores_neither() -> None:
    row = _row("lock_cache_refresh", _finding("idle_breakdown"))
    assert row["top_mechanism"] is None and row["locations"] == []
    assert row["mechanism_right"] is False and row["function_in_top3"] is False


def test_a_variant_naming_no_host_work_carries_no_mechanism_columns() -> None:
    assert "mechanism" not in _row("d2h_results", _finding("d2h_copies"))


def test_a_function_matches_as_a_whole_name_only() -> None:
    assert function_among("spectrogram", [["fault_mechanisms.py:Audio.spectrogram", 1.0]])
    assert not function_among("spectrogram", [["fault_mechanisms.py:spectrogram_of", 1.0]])


def test_the_page_gives_the_hit_rate_over_the_variants_that_name_a_function() -> None:
    rows = [_row("host_op_fft", _finding("input_cpu_bound", mechanism="host_op",
                                         locations=(("fault_mechanisms.py:spectrogram", 0.9),))),
            _row("compile_shapes", _finding("idle_breakdown", mechanism="compile", locations=(("t.py:f", 1.0),))),
            _row("d2h_results", _finding("d2h_copies"))]
    page = markdown(rows, {"window_s": 15})
    assert "Mechanism right: 2 of 2 variants" in page
    assert "among the top 3 code locations: 1 of 2 CPU-side variants (50%; fit 0 of 1, check 1 of 1)" in page
    assert "| compile_shapes | fit | `compile` | `compile` (yes) | `recompile_step` | `t.py:f` 100% | no |" in page


def test_a_long_kernel_variant_is_shown_but_not_counted_in_the_cpu_side_hit_rate() -> None:
    rows = [_row("long_kernel_sync", _finding("long_kernels", mechanism="gpu_wait",
                                              locations=(("fault_device.py:wait_for_long_kernel", 1.0),)))]
    page = markdown(rows, {"window_s": 15})
    assert "0 of 0 CPU-side variants" in page
    assert "`wait_for_long_kernel` (GPU-side) | `fault_device.py:wait_for_long_kernel` 100% | yes |" in page


def test_two_parts_record_every_variant_once_the_mechanism_variants_first() -> None:
    one, two = part(1, 2), part(2, 2)
    assert sorted(one + two) == sorted(FAULTS) and not set(one) & set(two)
    for share in (one, two):
        flags = [name in MECHANISM_FAULTS for name in share]
        assert flags == sorted(flags, reverse=True) and abs(sum(flags) - len(MECHANISM_FAULTS) / 2) <= 1
