"""The host source, for real: psutil and /proc on this machine, against processes the test starts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from processes import python_child

from gpuwatch.sources.host import HostSource
from gpuwatch.sources.procfs import container_id_from_cgroup, read_children

BUSY_THREAD = """
import threading, time
def spin():
    while True: pass
threading.Thread(target=spin, daemon=True).start()
for _ in range(4): threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
print('ready', flush=True)
time.sleep(60)
"""


@pytest.fixture
def busy_child() -> Iterator[subprocess.Popen[str]]:
    with python_child(BUSY_THREAD) as proc:
        yield proc


@pytest.mark.serial  # spinning threads measured against a whole core: alone, after the parallel part
def test_the_busiest_thread_of_a_gpu_process_shows_one_full_core(busy_child: subprocess.Popen[str]) -> None:
    source = HostSource()
    source.poll(0.0, [busy_child.pid])
    time.sleep(0.6)
    details = source.poll(0.0, [busy_child.pid]).process_details[busy_child.pid]
    assert details["top_thread_cpu_percent"] > 60, details  # one spinning thread: near 100 % of a core
    assert details["num_threads"] >= 6
    assert details["rss_bytes"] > 1_000_000 and details["state"] in {"R", "S"}
    assert details["cmdline"].startswith(sys.executable) and details["user"]
    assert details["threads_in_io_wait"] == 0


def test_the_machine_is_described_from_the_second_poll_on() -> None:
    source = HostSource()
    first = source.poll(0.0, []).host
    assert first is not None and first.cpu_percent is None  # a rate needs two readings
    time.sleep(0.2)
    host = source.poll(0.0, []).host
    assert host is not None and host.cpu_percent is not None and 0 <= host.cpu_percent <= 100
    assert host.mem_total_bytes and host.mem_used_bytes and host.iowait_percent is not None


def test_a_process_that_exits_disappears_without_an_error(busy_child: subprocess.Popen[str]) -> None:
    source = HostSource()
    source.poll(0.0, [busy_child.pid])
    busy_child.kill()
    busy_child.wait()
    assert source.poll(0.0, [busy_child.pid]).process_details == {}


@pytest.mark.parametrize(
    ("cgroup", "expected"),
    [
        ("0::/system.slice/docker-" + "a" * 64 + ".scope", "a" * 64),
        ("0::/kubepods/besteffort/pod1234/cri-containerd-" + "b" * 64 + ".scope", "b" * 64),
        ("12:pids:/docker/" + "c" * 64, "c" * 64),
        ("0::/user.slice/user-1000.slice/session-2.scope", None),
        ("", None),
    ],
)
def test_container_ids_are_read_from_the_cgroup_path(cgroup: str, expected: str | None) -> None:
    assert container_id_from_cgroup(cgroup) == expected


LOADER = """
import subprocess, sys, time
workers = [subprocess.Popen([sys.executable, '-c', 'while True: pass']) for _ in range(2)]
time.sleep(0.5)
print('ready', flush=True)
time.sleep(60)
"""

READER = """
import os, tempfile, time
with tempfile.TemporaryFile() as f:
    f.write(os.urandom(1 << 20)); f.flush()
    print('ready', flush=True)
    end = time.time() + 60
    while time.time() < end:
        os.pread(f.fileno(), 1 << 20, 0)
        time.sleep(0.02)
"""

#: Touches every page of a mapped file whose pages it has just evicted: each touch a major fault, the page read
#: from storage (4 MiB a pass, a pause between passes so as not to load a shared disk).
MAPPED_READER = """
import mmap, os, tempfile, time
with tempfile.TemporaryFile() as f:
    f.write(os.urandom(4 << 20)); f.flush(); os.fsync(f.fileno())
    print('ready', flush=True)
    end = time.time() + 60
    while time.time() < end:
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        with mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as m:
            m.madvise(mmap.MADV_RANDOM)
            sum(m[i] for i in range(0, len(m), 4096))
        time.sleep(0.05)
"""


def details_after_a_second(code: str) -> dict[str, object]:
    """Start ``code`` (it prints 'ready'), poll it twice a second apart, kill it and its children."""
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        source = HostSource()
        source.poll(0.0, [proc.pid])
        time.sleep(1.0)
        return source.poll(0.0, [proc.pid]).process_details[proc.pid]
    finally:
        for child in read_children(proc.pid):
            os.kill(child, signal.SIGKILL)
        proc.kill()
        proc.wait()


@pytest.mark.serial  # spinning threads measured against a whole core: alone, after the parallel part
def test_busy_worker_children_without_a_gpu_context_are_counted() -> None:
    details: Any = details_after_a_second(LOADER)
    assert details["workers"] == 2, details
    assert details["workers_cpu_percent"] > 60, details  # two spinners on a shared 2-core machine
    assert details["cpu_percent"] < 20 and details["threads_running"] == 0, details  # the parent sleeps


def test_a_sleeping_reader_shows_its_read_rate_and_where_it_waits() -> None:
    details: Any = details_after_a_second(READER)
    assert details["io_read_chars_s"] > 10e6, details  # ~50 reads of 1 MiB a second, from the page cache
    assert details["cpu_percent"] < 50, details
    if details["wait_channel"] is not None:  # hidden where the kernel restricts /proc/PID/wchan
        assert "sleep" in details["wait_channel"] or "nanosleep" in details["wait_channel"], details


def test_a_reader_of_a_mapped_file_shows_its_major_page_faults_and_a_reader_through_calls_none() -> None:
    """Touching evicted pages of a mapped file reads them from storage with no read call: only the major fault
    count (``/proc/PID/stat`` majflt) shows it; reads through calls from the page cache take none."""
    mapped: Any = details_after_a_second(MAPPED_READER)
    assert mapped["major_faults_s"] >= 100, mapped  # ~1000 pages a pass, several passes a second
    calls: Any = details_after_a_second(READER)
    assert calls["major_faults_s"] < 10, calls


@pytest.mark.serial  # spinning threads measured against a whole core: alone, after the parallel part
def test_threads_of_a_busy_process_are_scanned_every_tick_and_of_an_idle_one_every_few_seconds(
        busy_child: subprocess.Popen[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import gpuwatch.sources.host_threads as threads_module

    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    time.sleep(0.5)  # past the interpreter's start-up
    scanned: list[int] = []
    real = threads_module.read_thread_stats
    monkeypatch.setattr(threads_module, "read_thread_stats",
                        lambda pid, tids=None: scanned.append(pid) or real(pid, tids))
    try:
        source = HostSource()
        pids = [busy_child.pid, idle.pid]
        source.poll(0.0, pids)
        scanned.clear()
        for _ in range(4):
            time.sleep(0.15)
            details = source.poll(0.0, pids).process_details
        assert scanned.count(busy_child.pid) == 4  # a spinning thread: read every tick (its hot threads at least)
        assert scanned.count(idle.pid) == 0  # under a quarter of a core: held for THREADS_EVERY_S
        assert details[busy_child.pid]["top_thread_cpu_percent"] > 60
        held = details[idle.pid]
        assert held["threads_running"] == 0 and held["threads_in_io_wait"] == 0  # the last scan's states
        assert held.get("top_thread_cpu_percent", 0.0) <= held["cpu_percent"]  # never above its process
    finally:
        idle.kill()
        idle.wait()
