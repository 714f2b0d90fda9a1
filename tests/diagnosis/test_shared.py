"""One live-doctor evaluation per refresh: however many readers ask about the same newest window, the
doctor runs once; a new snapshot makes the next question evaluate once more. In the daemon, ``/metrics``,
``/api/v1/diagnosis`` and every remote dashboard read that one evaluation."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests
from daemon.conftest import RunningDaemon
from daemon.incident import write_recording
from prometheus_client.parser import text_string_to_metric_families

from gpuwatch.config import Config, DaemonConfig
from gpuwatch.data import bundled_recording
from gpuwatch.diagnosis import SharedDiagnosis, judge
from gpuwatch.doctor import LiveDoctor
from gpuwatch.exporter import Exporter, SnapshotCollector, render
from gpuwatch.model.finding import Finding
from gpuwatch.model.recording import iter_snapshots
from gpuwatch.model.snapshot import Snapshot

INCIDENT = list(iter_snapshots(bundled_recording()))[:300]


class CountingJudge:
    """The real judge, counting its calls (and holding each one a moment, so that askers overlap)."""

    def __init__(self) -> None:
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self, history: Sequence[Snapshot], window_s: float,
                 doctor: LiveDoctor) -> tuple[list[Finding] | None, str]:
        with self._lock:
            self.calls += 1
        threading.Event().wait(0.05)
        return judge(history, window_s, doctor)


def test_twenty_readers_of_one_window_cost_one_evaluation() -> None:
    counting = CountingJudge()
    shared = SharedDiagnosis(lambda: INCIDENT, every_s=60, judge=counting)
    with ThreadPoolExecutor(20) as pool:
        answers = list(pool.map(lambda _: shared.current(), range(20)))
    assert counting.calls == 1 and shared.runs == 1
    assert all(a is answers[0] for a in answers) and answers[0].findings


def test_a_new_snapshot_is_evaluated_once_more() -> None:
    history = INCIDENT[:200]
    counting = CountingJudge()
    shared = SharedDiagnosis(lambda: history, every_s=60, judge=counting)
    first = shared.current()
    history = INCIDENT[:201]
    second, again = shared.current(), shared.current()
    assert counting.calls == 2 and second is again and second.end == INCIDENT[200].time != first.end


def test_other_questions_are_kept_per_window_and_process_until_the_history_moves() -> None:
    shared = SharedDiagnosis(lambda: INCIDENT, every_s=60)
    wide = [shared.ask(window_s=60.0) for _ in range(5)]
    assert shared.other_runs == 1 and all(w is wide[0] for w in wide) and wide[0].window_s == 60.0
    assert shared.ask() is shared.current() and shared.runs == 1


def test_metrics_serve_the_shared_findings_and_a_failure_keeps_them() -> None:
    history: list[Snapshot] | None = INCIDENT

    def read() -> list[Snapshot]:
        if history is None:
            raise RuntimeError("broken history")
        return history

    shared = SharedDiagnosis(read, every_s=60)
    shared.current()
    body = render(Exporter(SnapshotCollector(lambda: INCIDENT[-1], findings=lambda: shared.findings)).registry)
    fam = next(f for f in text_string_to_metric_families(body.decode()) if f.name == "gpuwatch_diagnosis_finding")
    served = {(s.labels["code"], s.labels["severity"], s.labels["gpu"]) for s in fam.samples}
    assert served == {(f.code, f.severity, "" if f.gpu_index is None else str(f.gpu_index)) for f in shared.findings}
    before = shared.findings
    history = None
    failed = shared.current()
    assert failed.findings is None and "broken history" in failed.note
    assert shared.findings == before and before and shared.runs == 2


def test_the_daemon_answers_many_clients_and_its_metrics_from_one_evaluation(tmp_path: Path) -> None:
    recording = write_recording(tmp_path / "r.ndjson.gz", n=120, recovers=False)
    d = RunningDaemon(Config(daemon=DaemonConfig(listen="127.0.0.1:0", state_dir=str(tmp_path / "s"))), recording)
    try:
        d.wait_evaluated(120)
        while d.daemon.sampler.finished.is_set() is False:
            threading.Event().wait(0.05)
        shared = d.daemon.diagnosis
        runs = shared.runs
        with ThreadPoolExecutor(12) as pool:
            bodies = list(pool.map(lambda _: requests.get(d.url + "/api/v1/diagnosis", timeout=30).json(), range(12)))
        metrics = requests.get(d.url + "/metrics", timeout=30).text
        after = shared.runs
    finally:
        d.stop()
    assert after - runs <= 1, f"{after - runs} evaluations for 12 clients asking about one window"
    assert all(b == bodies[0] for b in bodies) and bodies[0]["findings"]
    fam = next(f for f in text_string_to_metric_families(metrics) if f.name == "gpuwatch_diagnosis_finding")
    assert {s.labels["code"] for s in fam.samples} == {f["code"] for f in bodies[0]["findings"]}


def test_the_refresh_thread_runs_the_doctor_only_when_nobody_else_did_for_a_refresh_interval() -> None:
    """/metrics must be at most ``every_s`` behind; an evaluation made for someone else (the accounting,
    an API client) counts, so the thread does not judge the same history again."""
    history = list(INCIDENT[:100])
    counting = CountingJudge()
    shared = SharedDiagnosis(lambda: history, every_s=0.6, judge=counting)
    shared.start()
    try:
        asks = 0
        for i in range(16):  # a snapshot every 0.2 s; another reader asks at every second one (0.4 s)
            history.append(INCIDENT[len(history)])
            if i % 2:
                shared.current()
                asks += 1
            time.sleep(0.2)
        assert counting.calls == shared.runs and shared.runs <= asks + 1  # the thread added at most its first
        history.append(INCIDENT[len(history)])  # nobody asks any more: the thread judges within every_s
        time.sleep(1.5)
        assert shared.latest is not None and shared.latest.end == history[-1].time
        runs = shared.runs
        time.sleep(1.5)  # nothing new: the thread looks, finds the same history, runs nothing
        assert shared.runs == runs
    finally:
        shared.stop()
