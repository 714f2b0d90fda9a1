"""The machine's CPU and memory counters, read from /proc without psutil on the tick."""

from __future__ import annotations

import psutil
import pytest

from gpuwatch.sources.machine import CpuJiffies, parse_cpu_jiffies, parse_meminfo, read_cpu_stat, read_meminfo

STAT = (b"cpu  300 0 100 5000 40 0 10 0 77 0\n"
        b"cpu0 200 0 50 2000 30 0 5 0 77 0\n"
        b"cpu1 100 0 50 3000 10 0 5 0 0 0\n"
        b"intr 12345 0 0\nctxt 999\nbtime 1700000000\n")


def test_the_machine_line_gives_all_idle_and_iowait_ticks_with_guest_time_counted_once() -> None:
    # guest (77) is already inside user (300): counting it again would inflate busy time
    assert parse_cpu_jiffies(STAT) == CpuJiffies(total=5450, idle=5040, iowait=40)


def test_an_old_kernel_with_only_four_fields_still_parses() -> None:
    assert parse_cpu_jiffies(b"cpu 1 2 3 4\ncpu0 1 2 3 4\n") == CpuJiffies(total=10, idle=4, iowait=0)


def test_a_body_without_the_machine_line_first_is_refused_for_psutil_to_answer() -> None:
    with pytest.raises(ValueError):
        parse_cpu_jiffies(b"cpu0 1 2 3 4\nintr 5\n")


def test_meminfo_gives_total_and_available_bytes() -> None:
    body = b"MemTotal:       16384 kB\nMemFree:         1024 kB\nMemAvailable:    8192 kB\nBuffers: 1 kB\n"
    assert parse_meminfo(body) == (16384 * 1024, 8192 * 1024)


def test_meminfo_without_memavailable_is_left_to_psutil() -> None:
    assert parse_meminfo(b"MemTotal:       16384 kB\nMemFree:         1024 kB\n") is None


@pytest.mark.skipif(not psutil.LINUX, reason="/proc is Linux's")
def test_this_machine_reads_psutils_cpu_time_and_memory_total() -> None:
    jiffies, running = read_cpu_stat()
    cpu = psutil.cpu_times()
    assert abs(jiffies.idle / 100 - (cpu.idle + cpu.iowait)) < 5.0 and running is not None and running >= 1
    found = read_meminfo()
    assert found is not None and found[0] == psutil.virtual_memory().total and 0 < found[1] <= found[0]
