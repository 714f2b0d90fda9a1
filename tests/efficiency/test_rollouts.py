"""The rollout detector: what counts as a rollout (a new workload of the same owner on a GPU), what does not
(a restart, a GPU going idle, another owner), when it is judged, and what it says."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from gpuwatch.efficiency.rollouts import RolloutSettings, detect, workload_of
from gpuwatch.efficiency.store import Store, load_rollouts
from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.model.rollout import Rollout
from gpuwatch.model.snapshot import GpuSample, HostSample, Profiling, Snapshot

T0 = 1_764_666_000.0
GIB = 2**30
SETTINGS = RolloutSettings(settle_s=10.0, window_s=60.0, min_window_s=20.0, idle_grace_s=30.0)
FAST = dict(util=97.0, sm=90.0, tensor=40.0)
SLOW = dict(util=35.0, sm=28.0, tensor=4.0)


@dataclass
class Run:
    """``seconds`` of one workload on a GPU: its command, user, pid and how busy it keeps the GPU."""

    seconds: int
    cmd: str | None = "python3 serve.py --v1"
    user: str = "svc"
    pid: int = 4000
    gpu: int = 0
    load: dict[str, float] = field(default_factory=lambda: dict(FAST))
    pod: str | None = None


def gpu(index: int, load: dict[str, float] | None) -> GpuSample:
    load = load or dict(util=0.0, sm=0.0, tensor=0.0)
    return GpuSample(index=index, uuid=f"GPU-{index:08d}-aaaa", name="NVIDIA H200", gpu_util=load["util"],
                     mem_used_bytes=20 * GIB, mem_total_bytes=141 * GIB,
                     profiling={"gpm": Profiling(sm_active=load["sm"], tensor_active=load["tensor"],
                                                 dram_active=load["sm"] / 2)})


def timeline(*runs: Run, gpus: int = 1, other: Run | None = None) -> Iterator[Snapshot]:
    """One snapshot a second through ``runs`` in turn on their GPU (``cmd`` None: the GPU is idle);
    ``other`` runs beside them the whole time on its own GPU."""
    t = 0
    for run in runs:
        for _ in range(run.seconds):
            active = [r for r in (run, other) if r is not None and r.cmd is not None]
            procs = tuple(ProcessSample(pid=r.pid, gpu_index=r.gpu, gpu_memory_bytes=18 * GIB, user=r.user,
                                        name="python3", cmdline=r.cmd, cpu_percent=60.0, pod=r.pod,
                                        namespace="ml" if r.pod else None, container="server" if r.pod else None)
                          for r in active)
            loads = {r.gpu: r.load for r in active}
            yield Snapshot(time=T0 + t, host=HostSample(hostname="node-1", cpu_count=32),
                           gpus=tuple(gpu(i, loads.get(i)) for i in range(gpus)), processes=procs, seq=t)
            t += 1


def test_a_process_replaced_by_a_slower_one_is_one_worse_rollout_judged_once_the_new_one_settled() -> None:
    [r] = detect(timeline(Run(90), Run(2, cmd=None), Run(120, cmd="python3 serve.py --v2", pid=4100, load=SLOW)),
                 SETTINGS)
    assert (r.owner, r.before, r.after, r.gpu_index) == ("svc", "serve.py --v1", "serve.py --v2", 0)
    assert r.verdict == "worse"
    assert r.changed_at == T0 + 89  # the old workload's last sample
    # Judged once the new one ran its settle time and a steady minimum window, not at the end of the recording.
    new_start = T0 + 92
    assert new_start + SETTINGS.settle_s + SETTINGS.min_window_s <= r.judged_at < new_start + 60
    tensor = {row.key: row for row in r.rows}["tensor_active"]
    assert (tensor.before, tensor.after, tensor.verdict) == (FAST["tensor"], SLOW["tensor"], "worse")
    assert {row.key: row for row in r.rows}["sm_active"].verdict == "changed"  # shown, never judged
    assert "tensor activity 40 -> 4 %" in r.summary


def test_a_faster_replacement_is_better_and_one_alike_is_the_same() -> None:
    [better] = detect(timeline(Run(90, load=SLOW), Run(120, cmd="python3 serve.py --v2", load=FAST)), SETTINGS)
    assert better.verdict == "better"
    [same] = detect(timeline(Run(90), Run(120, cmd="python3 serve.py --v2")), SETTINGS)
    assert same.verdict == "same"


def test_a_restart_with_the_same_command_line_is_no_rollout() -> None:
    assert detect(timeline(Run(90), Run(3, cmd=None), Run(120, pid=5000, load=SLOW)), SETTINGS) == []


def test_a_gpu_going_idle_is_no_rollout_nor_is_a_new_workload_long_after() -> None:
    assert detect(timeline(Run(90), Run(60, cmd=None)), SETTINGS) == []
    late = Run(120, cmd="python3 serve.py --v2", load=SLOW)
    assert detect(timeline(Run(90), Run(int(SETTINGS.idle_grace_s) + 5, cmd=None), late), SETTINGS) == []


def test_another_owner_taking_the_gpu_is_no_rollout() -> None:
    assert detect(timeline(Run(90), Run(120, cmd="python3 train.py", user="alice", load=SLOW)), SETTINGS) == []


def test_a_new_workload_that_ends_too_soon_is_inconclusive_and_says_why() -> None:
    [r] = detect(timeline(Run(90), Run(12, cmd="python3 serve.py --v2", load=SLOW), Run(20, cmd=None)), SETTINGS)
    assert r.verdict == "inconclusive" and r.rows == ()
    assert "new workload" in r.summary and "at least 3 are needed" in r.summary


def test_a_step_that_never_settles_is_skipped_and_the_rollout_goes_from_the_old_to_the_newest() -> None:
    found = detect(timeline(Run(90), Run(4, cmd="python3 migrate.py"), Run(120, cmd="python3 serve.py --v2",
                                                                            load=SLOW)), SETTINGS)
    assert [(r.before, r.after, r.verdict) for r in found] == [("serve.py --v1", "serve.py --v2", "worse")]


def test_a_new_pod_of_the_same_container_is_a_rollout_owned_by_namespace_and_container() -> None:
    [r] = detect(timeline(Run(90, pod="server-7d9f"), Run(120, pod="server-5c21", pid=4100, load=SLOW)), SETTINGS)
    assert (r.owner, r.before, r.after, r.verdict) == ("ml/server", "server-7d9f", "server-5c21", "worse")


def test_each_gpu_is_judged_on_its_own_numbers() -> None:
    busy_neighbour = Run(400, cmd="python3 train.py", user="alice", pid=7000, gpu=0, load=FAST)
    found = detect(timeline(Run(90, gpu=1, load=SLOW), Run(120, cmd="python3 serve.py --v2", gpu=1, load=FAST),
                            gpus=2, other=busy_neighbour), SETTINGS)
    [r] = found
    assert r.gpu_index == 1 and r.gpu == "GPU-00000001-aaaa" and r.verdict == "better"
    assert {row.key: row for row in r.rows}["tensor_active"].before == SLOW["tensor"]


def test_worker_places_are_no_part_of_a_workload() -> None:
    snaps = list(timeline(Run(1)))
    base = snaps[0]
    one = ProcessSample(pid=11, ppid=10, gpu_index=0, user="svc", gpu_memory_bytes=GIB,
                        cmdline="python3 -c from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=4)")
    two = ProcessSample(pid=12, ppid=10, gpu_index=0, user="svc", gpu_memory_bytes=GIB,
                        cmdline="python3 -c from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=4)")
    alone = Snapshot(time=base.time, host=base.host, gpus=base.gpus, processes=(one,))
    pair = Snapshot(time=base.time, host=base.host, gpus=base.gpus, processes=(one, two))
    assert workload_of(alone, 0) == workload_of(pair, 0) == ("svc", "[mp worker]")
    assert workload_of(Snapshot(time=base.time, host=base.host, gpus=base.gpus), 0) is None


def test_rollouts_are_kept_once_and_loaded_by_time_from_the_store_or_its_file(tmp_path: Path) -> None:
    [r] = detect(timeline(Run(90), Run(120, cmd="python3 serve.py --v2", load=SLOW)), SETTINGS)
    path = tmp_path / "efficiency.sqlite"
    assert load_rollouts(path) == []  # no file yet: none
    store = Store(path, retention_s=86400.0)
    assert store.add_rollout(r) is True
    assert store.add_rollout(r) is False  # the same change judged again (a replay run twice)
    later = Rollout(**{**r.to_dict(), "rows": r.rows, "changed_at": r.changed_at + 500,
                       "judged_at": r.judged_at + 500})
    assert store.add_rollout(later)
    assert load_rollouts(store) == [r, later]
    store.close()
    assert load_rollouts(path) == [r, later]
    assert load_rollouts(path, since=r.judged_at + 1) == [later]
    assert load_rollouts(str(path), until=r.judged_at) == [r]


def test_a_clock_that_goes_back_starts_the_detector_afresh() -> None:
    old = list(timeline(Run(90)))
    new = [s for s in timeline(Run(90), Run(120, cmd="python3 serve.py --v2", load=SLOW))][90:]
    back = [Snapshot(time=s.time - 3600, host=s.host, gpus=s.gpus, processes=s.processes) for s in new]
    assert detect(old + back, SETTINGS) == []  # v1, then (an hour earlier) v2: nothing to compare


def test_a_moments_extra_process_neither_makes_a_rollout_nor_cuts_the_before_window() -> None:
    snaps = list(timeline(Run(90), Run(120, cmd="python3 serve.py --v2", load=SLOW)))
    # At 60 s a health probe of the same user holds the GPU beside the server for 2 s.
    extra = ProcessSample(pid=4999, gpu_index=0, gpu_memory_bytes=GIB, user="svc", cmdline="python3 probe.py")
    snaps[60:62] = [Snapshot(time=s.time, host=s.host, gpus=s.gpus, processes=(*s.processes, extra))
                    for s in snaps[60:62]]
    [r] = detect(snaps, SETTINGS)
    assert (r.before, r.after, r.verdict) == ("serve.py --v1", "serve.py --v2", "worse")
    assert r.extra["seconds_before"] == SETTINGS.window_s  # the last window of v1, not the 27 s since the probe


def test_a_process_that_execs_a_new_version_under_the_same_pid_is_a_rollout() -> None:
    """The labels that name a workload are made again when a process's command line changes, though its pid
    and everything else stay (an exec into the new version)."""
    old, new = Run(60, cmd="python3 serve.py --v1", pid=4000), Run(60, cmd="python3 serve.py --v2", pid=4000, load=SLOW)
    [rollout] = detect(timeline(old, new), SETTINGS)
    assert (rollout.before, rollout.after, rollout.verdict) == ("serve.py --v1", "serve.py --v2", "worse")
