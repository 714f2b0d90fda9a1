"""The process screen shows a process's own CPU limit where it has one, and says nothing of one it lacks; the
kernel's share of its CPU and its page faults have rows of their own."""

from __future__ import annotations

import io

from rich.console import Console

from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.tui.widgets.process_screen import details


def _text(p: ProcessSample) -> str:
    console = Console(width=120, file=io.StringIO(), record=True)
    console.print(details(p))
    return console.export_text()


def test_a_quota_shows_under_the_cpu_with_its_throttling_and_nowhere_else() -> None:
    text = _text(ProcessSample(pid=9, gpu_index=0, cpu_percent=200.0, cpu_limit_cores=2.0,
                               cpu_limit_by="cgroup quota", cpu_throttled_percent=94.0, cpu_limit_peer_pids=(12,),
                               cpu_limit_peer_names=("fluent-bit",), cpu_limit_peer_cpu_percents=(97.0,)))
    row = " ".join(line.strip() for line in text.splitlines() if "its CPU limit" in line or "same quota" in line)
    assert " ".join(row.split()) == ("its CPU limit 2 cores (cgroup quota), throttled in 94% of its periods; pid 12 "
                                     "(fluent-bit) 97% under the same quota")
    assert "\nother" not in text  # none of its fields left to the catch-all group


def test_no_limit_no_row() -> None:
    assert "CPU limit" not in _text(ProcessSample(pid=9, gpu_index=0, cpu_percent=200.0))


def test_the_kernels_share_of_its_cpu_and_its_page_faults_have_rows_of_their_own() -> None:
    text = _text(ProcessSample(pid=9, gpu_index=0, cpu_percent=100.0, cpu_system_percent=92.0,
                               minor_faults_s=591494.0, major_faults_s=0.0))
    lines = [" ".join(line.split()) for line in text.splitlines()]
    assert "of it in the kernel (system time) 92%" in lines, lines
    assert any(line.startswith("page faults per second") and line.endswith("591,494 / 0") for line in lines), lines
    assert "\nother" not in text


def test_what_a_blocked_call_waits_for_is_said_beside_its_wait_channel() -> None:
    writing = _text(ProcessSample(pid=9, gpu_index=0, wait_channel="wait_woken", write_target="/dev/pts/3"))
    timer = _text(ProcessSample(pid=9, gpu_index=0, wait_channel="do_epoll_wait", poll_wait="timer"))
    assert "wait_woken, writing to /dev/pts/3" in writing
    assert "do_epoll_wait, only a timer can end it" in timer
    assert "\nother" not in writing and "\nother" not in timer
