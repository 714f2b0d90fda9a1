"""A process's CPU limit, for real: its affinity set by the kernel call taskset makes, a CFS quota set on a real
cgroup where this machine lets the test make one, and the cgroup files' layouts (v1 and v2) read from files
laid out as the kernel lays them out."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from processes import python_child

from gpuwatch.model.process_sample import CPU_AFFINITY, CPU_QUOTA
from gpuwatch.sources.cpu_limits import CpuLimits, cgroup_dirs, quota_cores, throttle_counts
from gpuwatch.sources.host import HostSource

SPIN = "import time\nprint('ready', flush=True)\nwhile True: pass\n"


@pytest.fixture
def spinner() -> Iterator[subprocess.Popen[str]]:
    with python_child(SPIN) as proc:
        yield proc


# -- where the cgroup files are ----------------------------------------------------------------------------

def test_a_v2_process_has_its_cgroup_and_every_one_above_it_innermost_first() -> None:
    assert cgroup_dirs("0::/kubepods/pod1/ctr\n", "/cg") == ["/cg/kubepods/pod1/ctr", "/cg/kubepods/pod1",
                                                              "/cg/kubepods", "/cg"]


def test_a_v1_process_is_found_under_the_mount_of_the_cpu_controller(tmp_path: Path) -> None:
    (tmp_path / "cpu,cpuacct").mkdir()
    text = "12:memory:/pod\n4:cpu,cpuacct:/kubepods/pod1\n1:name=systemd:/x\n"
    assert cgroup_dirs(text, str(tmp_path)) == [str(tmp_path / "cpu,cpuacct/kubepods/pod1"),
                                                str(tmp_path / "cpu,cpuacct/kubepods"), str(tmp_path / "cpu,cpuacct")]


def test_no_cpu_controller_and_no_v2_line_is_no_cgroup_to_read() -> None:
    assert cgroup_dirs("12:memory:/pod\n1:name=systemd:/x\n", "/cg") == []
    assert cgroup_dirs("", "/cg") == []


def test_a_cgroup_outside_the_readers_namespace_is_not_guessed_at() -> None:
    assert cgroup_dirs("0::/../../kubepods/pod1/ctr\n", "/cg") == []


# -- what the files say -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("files", "cores"), [
    ({"cpu.max": "max 100000\n"}, None),
    ({"cpu.max": "150000 100000\n"}, 1.5),
    ({"cpu.cfs_quota_us": "-1\n", "cpu.cfs_period_us": "100000\n"}, None),
    ({"cpu.cfs_quota_us": "50000\n", "cpu.cfs_period_us": "100000\n"}, 0.5),
    ({}, None),
    ({"cpu.max": "garbage\n"}, None),
])
def test_a_quota_is_read_in_cores_from_either_layout(tmp_path: Path, files: dict[str, str],
                                                     cores: float | None) -> None:
    for name, body in files.items():
        (tmp_path / name).write_text(body)
    assert quota_cores(str(tmp_path)) == cores


def test_the_throttle_counters_come_from_cpu_stat_and_a_stat_without_them_gives_none() -> None:
    assert throttle_counts(b"usage_usec 9\nnr_periods 422\nnr_throttled 397\nthrottled_usec 5\n") == (422, 397)
    assert throttle_counts(b"usage_usec 9\nuser_usec 5\n") is None


def test_the_smallest_quota_up_the_hierarchy_binds_and_its_throttling_is_a_share_of_its_periods(
        tmp_path: Path, spinner: subprocess.Popen[str]) -> None:
    pod, ctr = tmp_path / "kubepods/pod1", tmp_path / "kubepods/pod1/ctr"
    ctr.mkdir(parents=True)
    (pod / "cpu.max").write_text("50000 100000\n")  # the pod's limit: half a core
    (ctr / "cpu.max").write_text("90000 100000\n")  # the container's: 0.9, not the one that binds
    (pod / "cpu.stat").write_text("nr_periods 100\nnr_throttled 10\n")
    limits = CpuLimits()  # the spinner is allowed every core of this machine: its affinity is no limit
    limits.track(spinner.pid, "0::/kubepods/pod1/ctr\n", str(tmp_path))
    first = limits.read(spinner.pid, 0.0)
    assert first == {"cpu_limit_cores": 0.5, "cpu_limit_by": CPU_QUOTA}  # a share needs two readings
    (pod / "cpu.stat").write_text("nr_periods 150\nnr_throttled 50\n")
    assert limits.read(spinner.pid, 1.0)["cpu_throttled_percent"] == 80.0
    limits.forget(spinner.pid)
    assert limits.read(spinner.pid, 2.0) == {}


@pytest.mark.serial  # a spinning sidecar's CPU measured against a bound: alone, after the parallel part
def test_the_busiest_other_processes_under_the_quota_are_named_with_their_cpu(
        tmp_path: Path, spinner: subprocess.Popen[str]) -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    sidecar = subprocess.Popen([sys.executable, "-c", SPIN], stdout=subprocess.PIPE, text=True)
    try:
        assert sidecar.stdout is not None and sidecar.stdout.readline()
        pod, ctr, side = tmp_path / "pod", tmp_path / "pod/gpu", tmp_path / "pod/sidecar"
        ctr.mkdir(parents=True)
        side.mkdir()
        (pod / "cpu.max").write_text("50000 100000\n")
        (pod / "cpu.stat").write_text("nr_periods 10\nnr_throttled 9\n")
        (ctr / "cgroup.procs").write_text(f"{spinner.pid}\n{sleeper.pid}\n")
        (side / "cgroup.procs").write_text(f"{sidecar.pid}\n")  # a sibling container: the pod's quota binds it too
        limits = CpuLimits(every_s=0.4)  # the members' CPU is read at each refresh of the limits, not every tick
        limits.track(spinner.pid, "0::/pod/gpu\n", str(tmp_path))
        limits.read(spinner.pid, time.monotonic())
        time.sleep(0.5)
        assert "cpu_limit_peer_pids" not in limits.read(spinner.pid, time.monotonic() - 0.2)  # not refreshed yet
        out = limits.read(spinner.pid, time.monotonic())
        assert out["cpu_limit_peer_pids"] == (sidecar.pid,)  # the sleeper uses no CPU, the process is not its own peer
        assert out["cpu_limit_peer_names"] == ("python3",) or out["cpu_limit_peer_names"][0].startswith("python")
        assert out["cpu_limit_peer_cpu_percents"][0] > 30.0
    finally:
        for proc in (sleeper, sidecar):
            proc.kill()
            proc.wait()


def test_a_quota_as_large_as_the_host_is_no_limit(tmp_path: Path, spinner: subprocess.Popen[str]) -> None:
    cores = len(os.sched_getaffinity(spinner.pid))
    (tmp_path / "cpu.max").write_text(f"{cores * 100000} 100000\n")
    limits = CpuLimits(host_cores=cores)
    limits.track(spinner.pid, "0::/\n", str(tmp_path))
    assert limits.read(spinner.pid, 0.0)["cpu_limit_cores"] is None


# -- for real ---------------------------------------------------------------------------------------------------

@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or (os.cpu_count() or 1) < 2, reason="needs 2 cores")
def test_a_process_pinned_to_one_core_may_use_one_and_the_host_source_says_so(
        spinner: subprocess.Popen[str]) -> None:
    os.sched_setaffinity(spinner.pid, {min(os.sched_getaffinity(0))})
    source = HostSource()
    details = source.poll(0.0, [spinner.pid]).process_details[spinner.pid]
    assert details["cpu_limit_cores"] == 1.0 and details["cpu_limit_by"] == CPU_AFFINITY
    unpinned = subprocess.Popen([sys.executable, "-c", SPIN], stdout=subprocess.PIPE, text=True)
    try:
        assert unpinned.stdout is not None and unpinned.stdout.readline()
        assert source.poll(0.0, [unpinned.pid]).process_details[unpinned.pid]["cpu_limit_cores"] is None
    finally:
        unpinned.kill()
        unpinned.wait()


def _new_cgroup() -> tuple[Path, str] | None:
    """A fresh cgroup with the cpu controller (v2, else v1) and its quota file's name; None where not allowed."""
    root = Path("/sys/fs/cgroup")
    candidates = [(root, "cpu.max")] if (root / "cgroup.controllers").exists() else \
        [(root / "cpu,cpuacct", "cpu.cfs_quota_us"), (root / "cpu", "cpu.cfs_quota_us")]
    for base, quota in candidates:
        made = base / f"gpuwatch-test-{os.getpid()}"
        try:
            made.mkdir()
        except OSError:
            continue
        if (made / quota).exists():
            return made, quota
        made.rmdir()
    return None


@pytest.fixture
def quota_cgroup() -> Iterator[Path]:
    made = _new_cgroup()
    if made is None:
        pytest.skip("this machine does not let the test make a cgroup with the cpu controller")
    path, quota = made
    try:
        (path / quota).write_text("20000 100000\n" if quota == "cpu.max" else "20000\n")  # a fifth of a core
        yield path
    finally:
        for _ in range(50):
            with contextlib.suppress(OSError):
                path.rmdir()
                break
            time.sleep(0.1)


@pytest.mark.serial  # a spinning child measured against its quota
def test_a_spinning_process_under_a_fifth_of_a_core_is_throttled_in_most_periods(
        quota_cgroup: Path, spinner: subprocess.Popen[str]) -> None:
    (quota_cgroup / "cgroup.procs").write_text(str(spinner.pid))
    source = HostSource()
    source.poll(0.0, [spinner.pid])
    time.sleep(1.5)  # fifteen 100 ms periods
    details = source.poll(0.0, [spinner.pid]).process_details[spinner.pid]
    spinner.kill()
    spinner.wait()
    assert details["cpu_limit_cores"] == 0.2 and details["cpu_limit_by"] == CPU_QUOTA
    assert details["cpu_throttled_percent"] >= 80.0
    assert details["cpu_percent"] <= 30.0  # the quota, not the loop, set its CPU
