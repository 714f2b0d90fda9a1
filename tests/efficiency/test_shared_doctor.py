"""In a live daemon the accounting reads the shared live-doctor evaluation instead of diagnosing again,
but only for the window its block ends with: a replay faster than real time judges each block itself."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuwatch.diagnosis.shared import Evaluation
from gpuwatch.doctor import diagnose
from gpuwatch.doctor.current import window
from gpuwatch.efficiency.install import shared_doctor
from gpuwatch.model.finding import Finding
from gpuwatch.model.recording import load

RECORDING = Path(__file__).resolve().parents[1] / "doctor" / "fixtures" / "faults" / "gil_threads.ndjson.gz"
MARK = Finding("input_cpu_bound", "from the shared evaluation", "warning", 99.0, 0, 1, (), "")


@dataclass
class FakeShared:
    snapshots: list[Any]
    asked: int = 0
    history_calls: list[int] = field(default_factory=list)

    def history(self) -> list[Any]:
        return self.snapshots

    def current(self) -> Evaluation:
        self.asked += 1
        return Evaluation((MARK,), "", self.snapshots[-1].time, 30.0, len(self.snapshots), 0.001)


def test_a_block_that_ends_with_the_newest_snapshot_takes_the_shared_findings() -> None:
    snaps = load(RECORDING)
    shared = FakeShared(snaps)
    assert shared_doctor(shared)(window(snaps, 30.0)) == [MARK] and shared.asked == 1


def test_a_block_behind_the_sampler_is_judged_on_its_own_window_and_costs_the_shared_doctor_nothing() -> None:
    snaps = load(RECORDING)
    shared = FakeShared(snaps)
    behind = window(snaps[:-5], 30.0)
    assert shared_doctor(shared)(behind) == diagnose(behind) and shared.asked == 0
