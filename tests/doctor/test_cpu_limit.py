"""A process held by its own CPU limit: a Kubernetes pod's CPU quota or a CPU affinity (taskset, a cpuset)
leaves the feeding thread waiting for a core while the host's cores idle. The doctor says which limit, with
the numbers, and gives the fix for that limit, not the host's; a limit that is not reached changes nothing."""

from __future__ import annotations

import dataclasses

from gpuwatch.doctor import diagnose, top_problem
from gpuwatch.model.finding import Finding
from gpuwatch.model.snapshot import Snapshot

from .synthetic import Load, window


def limited(snaps: list[Snapshot], *, cores: float | None, by: str | None, throttled: float | None,
            top_cpu: float, run_wait: float, host_cpu: float = 12.0, running: int = 3,
            cpu: float | None = None) -> list[Snapshot]:
    """The window's process with a CPU limit, its feeding thread's CPU and run delay, the whole process's CPU
    (its three working threads' by default) and the host's load."""
    out = []
    for s in snaps:
        p = dataclasses.replace(s.processes[0], cpu_limit_cores=cores, cpu_limit_by=by,
                                cpu_throttled_percent=throttled, thread_cpu_percents=(top_cpu, 12.0, 12.0),
                                thread_run_wait_percents=(run_wait, 70.0, 70.0),
                                thread_waits=("cpu", "cpu", "cpu"), top_thread_cpu_percent=top_cpu,
                                cpu_percent=top_cpu + 24.0 if cpu is None else cpu,
                                run_wait_percent=run_wait + 140.0)
        out.append(dataclasses.replace(s, processes=(p,), host=dataclasses.replace(s.host, cpu_percent=host_cpu,
                                                                                  procs_running=running)))
    return out


def top(snaps: list[Snapshot]) -> Finding:
    found = top_problem(diagnose(snaps))
    assert found is not None
    return found


IDLE_GPU = Load(util=5.0, sm=3.0, thread=14.0)


def test_threads_throttled_by_a_pods_quota_on_an_idle_host_are_the_quotas_not_the_code() -> None:
    f = top(limited(window(IDLE_GPU), cores=2.0, by="cgroup quota", throttled=94.0, top_cpu=14.0, run_wait=81.0))
    assert f.code == "host_cpu_contention" and f.title.startswith("CPU limit reached"), f
    assert "cgroup quota" in f.title and "oversubscribed" not in f.title
    assert any("may use 2 cores (its cgroup quota); its cgroup throttled in 94% of its quota's periods" in e
               for e in f.evidence), f.evidence
    assert any("cores idle" in e for e in f.evidence)  # the host's idle cores stand beside it, no contradiction
    assert "resources.limits.cpu" in f.fix and "torch.set_num_threads" in f.fix and "nr_throttled" in f.fix


def test_a_process_pinned_to_two_cores_is_its_affinitys_even_when_more_threads_run_than_the_host_has_cores() -> None:
    # 17 runnable on 16 cores reads as a full host; 14 idle cores and an affinity of 2 say whose limit it is
    snaps = limited(window(IDLE_GPU), cores=2.0, by="CPU affinity", throttled=None, top_cpu=14.0, run_wait=81.0,
                    running=17, cpu=195.0)  # its two cores used up
    f = top(snaps)
    assert f.code == "host_cpu_contention" and f.title.endswith("waits for a core its CPU affinity allows"), f
    assert "taskset -p 471" in f.fix and "resources.limits.cpu" not in f.fix


def test_a_quota_throttling_the_process_is_found_even_when_no_thread_shows_a_run_delay() -> None:
    snaps = limited(window(IDLE_GPU), cores=2.0, by="cgroup quota", throttled=60.0, top_cpu=30.0, run_wait=0.0)
    assert top(snaps).title.startswith("CPU limit reached")


def test_a_limit_the_process_does_not_reach_leaves_the_pegged_feeding_thread_as_the_cause() -> None:
    snaps = limited(window(Load(util=5.0, sm=3.0, thread=99.0)), cores=8.0, by="cgroup quota", throttled=0.0,
                    top_cpu=99.0, run_wait=0.5)
    for i, s in enumerate(snaps):  # its other threads idle: nothing waits for a core
        p = dataclasses.replace(s.processes[0], thread_run_wait_percents=(0.5,), thread_cpu_percents=(99.0,),
                                run_wait_percent=0.5, cpu_percent=99.0)
        snaps[i] = dataclasses.replace(s, processes=(p,))
    assert top(snaps).code == "input_cpu_bound"
    assert "host_cpu_contention" not in {f.code for f in diagnose(snaps)}


def test_without_a_limit_a_starved_thread_on_an_idle_host_is_still_not_blamed_on_the_host() -> None:
    snaps = limited(window(IDLE_GPU), cores=None, by=None, throttled=None, top_cpu=14.0, run_wait=40.0)
    assert "host_cpu_contention" not in {f.code for f in diagnose(snaps)}


def test_a_sidecar_that_takes_the_quota_is_named_and_the_fix_is_to_move_it() -> None:
    snaps = limited(window(IDLE_GPU), cores=2.0, by="cgroup quota", throttled=100.0, top_cpu=50.0, run_wait=50.0)
    for i, s in enumerate(snaps):
        p = dataclasses.replace(s.processes[0], cpu_percent=50.0, cpu_limit_peer_pids=(580, 581),
                                cpu_limit_peer_names=("fluent-bit", "python3"),
                                cpu_limit_peer_cpu_percents=(75.0, 70.0))
        snaps[i] = dataclasses.replace(s, processes=(p,))
    f = top(snaps)
    assert f.code == "host_cpu_contention" and f.title.startswith("CPU limit reached"), f
    assert any("under the same quota: pid 580 (fluent-bit) 75%, pid 581 (python3) 70%" in e for e in f.evidence)
    assert "move them out of the GPU process's cgroup" in f.fix


def test_on_a_full_host_a_process_well_under_its_limit_waits_for_the_hosts_cores_not_its_limit() -> None:
    snaps = limited(window(IDLE_GPU), cores=8.0, by="CPU affinity", throttled=None, top_cpu=14.0, run_wait=81.0,
                    host_cpu=99.0, running=60, cpu=60.0)
    f = top(snaps)
    assert f.code == "host_cpu_contention" and f.title.startswith("Host CPU oversubscribed"), f
