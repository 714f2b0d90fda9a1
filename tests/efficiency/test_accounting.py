"""Lost GPU-time, attributed: every recorded fault's lost seconds land on the cause the doctor names for
it, the funnel adds up to the definition, and GPUs nobody holds or only holds memory on get their own causes."""

from __future__ import annotations

import ast
import dataclasses
import json
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from core.factories import full_gpu, full_process, full_snapshot

from efficiency.expected import FAULTS, expected_cause, expected_seconds
from gpuwatch.efficiency.ledger import STEP_S, Ledger
from gpuwatch.efficiency.offline import account_recording
from gpuwatch.efficiency.rows import Owner, States
from gpuwatch.efficiency.service import Accounting
from gpuwatch.efficiency.store import Rollup, Store
from gpuwatch.model.causes import CAUSES, FINDING_CODES, HELD_IDLE, NO_PROCESS, OWNER_LABELS, STATES
from gpuwatch.model.finding import Finding
from gpuwatch.model.recording import load, read_header
from gpuwatch.model.snapshot import Snapshot, SourceStatus
from gpuwatch.model.stacks import StackSample, ThreadStack

DOCTOR = Path(__file__).resolve().parents[2] / "gpuwatch" / "doctor"
RECORDINGS = sorted(FAULTS.glob("*.ndjson.gz"))
#: Causes the doctor tells from a shape over time (a trend of memory, per-process shares NVML answers every
#: few seconds): on a 10 s recording the first block is judged before the shape is in the window.
SHAPES_OVER_TIME = frozenset({"memory_leak", "memory_churn", "time_slicing"})
# Faults judged from their stacks land whole on their cause too: a window's first stack sample arrives 4 s or
# more into it, and the ledger holds back a thread verdict judged from /proc until the sampler has sampled the
# process (``doctor.diagnose.awaits_stacks``), so the cause the stacks name covers the first block.


def doctor_codes() -> set[str]:
    """Every code a doctor rule passes to ``finding(...)``, read from the rules' source."""
    codes = set()
    for path in DOCTOR.glob("rules_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "finding" and node.args \
                    and isinstance(node.args[0], ast.Constant):
                codes.add(node.args[0].value)
    return codes


def test_every_code_a_doctor_rule_gives_is_a_cause() -> None:
    codes = doctor_codes()
    assert len(codes) >= 10
    assert codes <= set(FINDING_CODES), f"add {sorted(codes - set(FINDING_CODES))} to model/causes.py"
    assert len(set(CAUSES)) == len(CAUSES)


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.name.split(".")[0])
def test_a_recorded_faults_lost_seconds_land_on_its_cause_to_the_second(path: Path) -> None:
    accounted = account_recording(path)
    want = expected_seconds(path)
    got = {state: sum(getattr(r.states, state) for r in accounted.rollup.seconds) for state in STATES}
    for state in STATES:
        assert got[state] == pytest.approx(want[state], abs=0.01), state
    lost = {}
    for row in accounted.rollup.lost:
        lost[row.key.cause] = lost.get(row.key.cause, 0.0) + row.seconds
    assert sum(lost.values()) == pytest.approx(want["lost"], abs=0.01)
    # seconds before the process reached the GPU are nobody's, to the second; the rest is the cause's
    assert lost.pop(NO_PROCESS, 0.0) == pytest.approx(want["observed"] - want["allocated"], abs=0.01)
    cause = expected_cause(path)
    if cause in SHAPES_OVER_TIME:  # seen once the window holds the shape
        assert lost.get(cause, 0.0) > 0.0, lost
    else:
        assert set(lost) == {cause}, lost
    assert accounted.rollup.fixes[cause][1]  # the doctor's fix text came along


def _snap(t: float, util: float, processes: int, pod: str = "") -> Snapshot:
    base = full_snapshot(t)
    gpu = dataclasses.replace(full_gpu(0, util), profiling={}, labels={"pod": pod, "namespace": "ml"} if pod else {})
    procs = tuple(dataclasses.replace(full_process(100 + i), sm_util=util) for i in range(processes))
    return dataclasses.replace(base, gpus=(gpu,), processes=procs)


def _run(snaps: list[Snapshot]) -> Store:
    store = Store(None, 86400.0)
    ledger = Ledger(max_gap=5.0, doctor=lambda window: [])  # a doctor with nothing to say
    for s in snaps:
        inc = ledger.add(s)
        if inc:
            store.commit(inc, "test")
    last = ledger.flush()
    if last:
        store.commit(last, "test")
    return store


def test_nobody_on_the_gpu_is_no_process_and_owned_by_the_pod_the_kubelet_gave_it() -> None:
    rollup = _run([_snap(1000.0 + i, 0.0, 0, pod="trainer-0") for i in range(31)]).rollup()
    (row,) = rollup.seconds
    assert row.states == States(observed=30.0)
    assert [(r.key.cause, r.key.owner.namespace, r.key.owner.pod, r.seconds) for r in rollup.lost] == \
        [(NO_PROCESS, "ml", "trainer-0", 30.0)]


def test_memory_held_with_nothing_running_and_no_finding_is_held_idle_by_user_and_command() -> None:
    rollup = _run([_snap(1000.0 + i, 0.0, 1) for i in range(21)]).rollup()
    assert [(r.key.cause, r.key.owner.user, r.key.owner.command, r.seconds) for r in rollup.lost] == \
        [(HELD_IDLE, "svc", "python3", 20.0)]


def test_a_gap_longer_than_the_limit_is_not_counted_and_a_restart_skips_what_was_committed() -> None:
    snaps = [_snap(1000.0 + i, 50.0, 1) for i in range(25)] + [_snap(1100.0 + i, 50.0, 1) for i in range(11)]
    store = _run(snaps)
    assert store.rollup().seconds[0].states.observed == 34.0  # 24 + 10: the 76 s gap was not watched
    again = Ledger(max_gap=5.0, skip_until=store.mark("test"), doctor=lambda window: [])
    assert all(not again.add(s) for s in snaps) and not again.flush()
    assert STEP_S == 10.0


def test_the_rows_are_named_as_the_store_columns_and_metric_labels_and_survive_the_api_unchanged() -> None:
    assert States._fields == STATES and Owner._fields == OWNER_LABELS
    rollup = account_recording(RECORDINGS[0]).rollup
    assert rollup.seconds and rollup.lost and rollup.hist
    assert Rollup.from_dict(json.loads(json.dumps(rollup.to_dict()))) == rollup


def test_the_metrics_gpu_seconds_advance_every_tick_so_a_one_minute_rate_is_one_per_gpu() -> None:
    """rate(gpuwatch_gpu_seconds_total{state="observed"}[1m]) of one GPU reads 1.0 wherever the minute falls
    (not 0.83-1.17, as a counter that moves in 10-second blocks reads): after each snapshot the counter holds
    every second watched up to it. The lost seconds still follow their block's cause."""
    path = FAULTS / "launch_bound.ndjson.gz"
    snaps = load(path)
    accounting = Accounting(Store(None, retention_s=86400.0), read_header(path).interval_s, max_owners=16)
    accounting.start()

    def observed() -> float:
        return sum(states.observed for states in list(accounting.totals.seconds.values()))

    try:
        for snap in snaps:
            accounting.offer(snap)
            want = (snap.time - snaps[0].time) * len(snap.gpus)
            deadline = time.monotonic() + 2.0
            while observed() < want - 1e-6:
                assert time.monotonic() < deadline, f"{observed():.1f} GPU-s served where {want:.1f} were watched"
                time.sleep(0.001)
            assert observed() == pytest.approx(want, abs=1e-6)
    finally:
        accounting.stop()
    assert sum(accounting.totals.lost.values()) == pytest.approx(expected_seconds(path)["lost"], abs=0.01)


def _sampled(snap: Snapshot, pid: int | None, stacks_state: str = "ok") -> Snapshot:
    """``snap`` with a stack source in ``stacks_state``, carrying a stack sample of ``pid`` (None: none)."""
    sample = () if pid is None else (StackSample(pid, snap.time, 4.0, (ThreadStack(pid, (), count=40),)),)
    return dataclasses.replace(snap, stacks=sample, sources=(*snap.sources, SourceStatus("stacks", stacks_state)))


def _thread_doctor(window: Sequence[Snapshot]) -> list[Finding]:
    """A doctor that says "waiting off the CPU" from /proc until a stack sample of pid 100 is in the window,
    then what the stacks say: the children are the bottleneck."""
    sampled = any(st.pid == 100 for s in window for st in s.stacks)
    code = "feeder_bound" if sampled else "off_cpu_wait"
    return [Finding(code, code, "warning", 50.0, 0, 100, (), "fix")]


def _charged(snaps: list[Snapshot]) -> dict[str, float]:
    store = Store(None, 86400.0)
    ledger = Ledger(max_gap=5.0, doctor=_thread_doctor)
    for inc in [*(ledger.add(s) for s in snaps), ledger.flush()]:
        if inc:
            store.commit(inc, "test")
    lost: dict[str, float] = {}
    for row in store.rollup().lost:
        lost[row.key.cause] = lost.get(row.key.cause, 0.0) + row.seconds
    return lost


def test_a_thread_verdict_judged_before_the_stacks_arrive_is_held_back_and_the_stacks_cause_covers_it() -> None:
    """The stack sampler is on but has not sampled the process in the first block: its /proc verdict is not
    charged; the cause named once the stacks arrive (12 s in) takes every lost second."""
    snaps = [_sampled(_snap(1000.0 + i, 10.0, 1), 100 if i == 12 else None) for i in range(25)]
    lost = _charged(snaps)
    assert set(lost) == {"feeder_bound"} and sum(lost.values()) == pytest.approx(24 * 0.9 * 1.0, abs=0.01)


def test_without_a_working_stack_sampler_the_proc_verdict_is_charged_at_once() -> None:
    """No ptrace (the source in error) or no source at all: /proc is all there will be, nothing waits."""
    for snaps in ([_sampled(_snap(1000.0 + i, 10.0, 1), None, "error") for i in range(25)],
                  [_snap(1000.0 + i, 10.0, 1) for i in range(25)]):
        assert set(_charged(snaps)) == {"off_cpu_wait"}


def test_stacks_that_never_arrive_hold_a_verdict_back_for_a_bounded_time_then_the_proc_verdict_is_charged() -> None:
    snaps = [_sampled(_snap(1000.0 + i, 10.0, 1), None) for i in range(80)]
    assert set(_charged(snaps)) == {"off_cpu_wait"}
