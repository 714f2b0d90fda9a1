"""Specifications of the benchmark harness's own logic (fast, no GPU): statistics, the traced raw floor,
verdicts, profile summaries and pty handling. Run: ``.venv/bin/python -m pytest benchmarks -q``."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
for _p in (ROOT / "tests", ROOT):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from benchmarks.daemon_cpu import breakdown, by_thread  # noqa: E402
from benchmarks.procs import Meter, start_in_pty  # noqa: E402
from benchmarks.profiling import summarize_collapsed  # noqa: E402
from benchmarks.raw_floor import TracingNvml, describe, nvml_floor, typical_calls  # noqa: E402
from benchmarks.report import current_notes, load_results, rows, write_benchmarks_md  # noqa: E402
from benchmarks.stats import interleaved, percentile, ratio  # noqa: E402


@pytest.mark.parametrize(("values", "q", "expected"), [
    ([1.0], 90, 1.0),
    ([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0], 90, 9.0),
    ([10.0, 1.0, 5.0], 50, 5.0),
    ([3.0, 1.0, 2.0], 100, 3.0),
])
def test_percentile_is_an_observed_value_by_nearest_rank(values: list[float], q: float, expected: float) -> None:
    assert percentile(values, q) == expected


@pytest.mark.parametrize(("a", "b", "expected"), [(3.0, 2.0, 1.5), (None, 2.0, None), (1.0, 0.0, None)])
def test_ratio_is_none_when_it_cannot_be_formed(a: float | None, b: float | None, expected: float | None) -> None:
    assert ratio(a, b) == expected


def test_interleaved_calls_each_candidate_its_own_number_of_times() -> None:
    counts = {"a": 0, "b": 0}

    def bump(name: str) -> None:
        counts[name] += 1

    timings = interleaved({"a": (lambda: bump("a"), 5), "b": (lambda: bump("b"), 2)}, warmup=1)
    assert (timings["a"].n, timings["b"].n) == (5, 2)
    assert counts == {"a": 6, "b": 3}


def test_raw_floor_replays_exactly_the_nvml_calls_a_tick_made() -> None:
    from fakes.fake_pynvml import make_fake_nvml
    from fakes.fake_pynvml_native import SYMBOLS

    from gpuwatch.sources.nvml import NvmlSource

    fake = make_fake_nvml(gpus=1, processes_per_gpu=4)
    tracer = TracingNvml(fake)
    source = NvmlSource(nvml=tracer)
    clock = [time.monotonic()]

    def tick() -> None:
        clock[0] += 0.2
        fake.gpus[0].processes[0].used_memory += 2**20  # used memory moves: the process lists are asked
        source.poll(clock[0], ())

    calls = typical_calls(tracer, tick, ticks=3, gap_s=0.0)
    names = describe(calls)
    assert names["nvmlGpmSampleGet"] == 1 and names["nvmlGpmMetricsGet"] == 1
    assert names["nvmlDeviceGetComputeRunningProcesses_v3"] == 1  # its C function, called directly
    before = dict(fake.calls)
    nvml_floor(calls, fake.NVMLError)()
    made = {k: v - before.get(k, 0) for k, v in fake.calls.items() if v != before.get(k, 0)}
    assert made == {SYMBOLS.get(k, (k,))[0]: v for k, v in names.items()}  # the fake counts C calls by pynvml's name


@pytest.mark.parametrize(("result", "verdicts"), [
    ({"tick_ms": 2.0, "nvitop_refresh_ms": 50.0, "raw_nvml_ms": 1.0, "raw_nvml_host_ms": 1.5}, ["met", "met"]),
    ({"tick_ms": 6.0, "nvitop_refresh_ms": 50.0, "raw_nvml_ms": 1.0, "raw_nvml_host_ms": 3.0}, ["MISSED", "MISSED"]),
    ({"tick_ms": 3.5, "nvitop_refresh_ms": 51.0, "raw_nvml_ms": 3.0, "raw_nvml_host_ms": 3.0}, ["MISSED", "met"]),
    ({"tick_ms": 2.0, "raw_nvml_ms": 1.0, "raw_nvml_host_ms": 1.5}, ["n/a", "met"]),
])
def test_tick_verdicts_follow_the_issue_targets(result: dict, verdicts: list[str]) -> None:
    assert [row[4] for row in rows(result)[:2]] == verdicts


def _row(result: dict, starts: str) -> tuple[str, ...]:
    return next(r for r in rows(result) if r[0].startswith(starts))


@pytest.mark.parametrize(("ours", "exporter", "verdict"), [(0.32, 0.80, "met"), (0.33, 0.80, "MISSED"),
                                                           (0.30, None, "n/a")])
def test_daemon_cpu_is_judged_against_four_tenths_of_nvitop_exporters_at_the_same_interval(
        ours: float, exporter: float | None, verdict: str) -> None:
    result = {"daemon_cpu_pct_1s": ours, "daemon_rss_mib": 50.0, "nvitop_exporter_cpu_pct": exporter}
    assert _row(result, "daemon at 1 s, scraped")[4] == verdict


@pytest.mark.parametrize(("ours", "exporter", "verdict"), [(59.9, 54.5, "met"), (60.0, 54.5, "MISSED")])
def test_daemon_memory_is_judged_against_a_tenth_more_than_nvitop_exporters(
        ours: float, exporter: float, verdict: str) -> None:
    result = {"daemon_cpu_pct_1s": 0.3, "daemon_rss_mib": ours, "nvitop_exporter_rss_mib": exporter}
    assert _row(result, "daemon at 1 s: RSS")[4] == verdict


@pytest.mark.parametrize(("cpu", "rss", "verdicts"), [(1.1, 53.1, ["met", "met"]), (1.2, 53.2, ["MISSED", "MISSED"])])
def test_dashboard_cpu_and_memory_are_each_judged_against_nvitop_at_the_same_interval(
        cpu: float, rss: float, verdicts: list[str]) -> None:
    result = {"tui_cpu_pct": cpu, "tui_rss_mib": rss, "nvitop_tui_cpu_pct": 1.15, "nvitop_tui_rss_mib": 48.3}
    assert [_row(result, "dashboard at 1 s, 160x50")[4], _row(result, "dashboard at 1 s: RSS")[4]] == verdicts


@pytest.mark.parametrize(("pct", "verdict"), [(2.9, "met"), (3.1, "MISSED")])
def test_sampling_at_a_tenth_of_a_second_is_held_to_three_percent_of_a_core(pct: float, verdict: str) -> None:
    assert _row({"sampling_cpu_pct_100ms": pct}, "sampling alone at 0.1 s")[4] == verdict


@pytest.mark.parametrize(("ours", "nvitop", "verdict"), [(290.0, 290.0, "met"), (291.0, 290.0, "MISSED"),
                                                         (400.0, None, "n/a")])
def test_dashboard_terminal_bytes_are_judged_against_nvitops(ours: float, nvitop: float | None,
                                                                    verdict: str) -> None:
    result = {"tui_cpu_pct": 1.0, "tui_tty_bytes_per_s": ours, "nvitop_tty_bytes_per_s": nvitop}
    row = next(r for r in rows(result) if "bytes written to the terminal" in r[0])
    assert row[4] == verdict
    assert row[1] == f"{ours:.0f} B/s"


def test_meter_counts_terminal_bytes_written_inside_the_window_only() -> None:
    code = "import sys, time\nsys.stdout.write('x' * 5000); sys.stdout.flush(); time.sleep(1)\n" \
           "sys.stdout.write('y' * 300); sys.stdout.flush(); time.sleep(10)"
    proc = start_in_pty("writer", [sys.executable, "-c", code])
    deadline = time.monotonic() + 10
    while proc.pty_bytes < 5000 and time.monotonic() < deadline:  # the start-up screen lands before the window
        time.sleep(0.02)
    meter = Meter(proc)
    meter.begin()
    time.sleep(3.0)
    meter.end()
    proc.stop()
    assert meter.tty_bytes_per_s is not None and 50 <= meter.tty_bytes_per_s <= 150  # 300 bytes in 3 s
    assert meter.to_dict()["tty_bytes_per_s"] == meter.tty_bytes_per_s


def test_profile_summary_leaves_out_waiting_samples(tmp_path: Path) -> None:
    raw = tmp_path / "p.raw"
    raw.write_text("thread (1);main (a.py:1);work (a.py:5) 30\n"
                   "thread (1);main (a.py:1);select (/usr/lib/selectors.py:468) 70\n")
    text = summarize_collapsed(raw)
    assert text.startswith("30 samples not waiting")
    assert "100.0%  work (a.py:5)" in text and "selectors" not in text


def test_a_daemon_profile_is_broken_down_by_part_and_innermost_gpuwatch_module_without_waits(tmp_path: Path) -> None:
    raw = tmp_path / "daemon.raw"
    raw.write_text(
        "thread (1): gpuwatch-host;Thread.run (threading.py:982);HostSource.poll (gpuwatch/sources/host.py:213);"
        "_read_small (gpuwatch/sources/procfs.py:23) 6\n"
        "thread (2): gpuwatch-nvml;NvmlSource.poll (gpuwatch/sources/nvml/source.py:175);"
        "method (fakes/fake_pynvml_gpu.py:55) 2\n"
        "thread (3): gpuwatch-alerts;Pipeline._evaluate_loop (gpuwatch/daemon/pipeline.py:120);"
        "json.dumps (json/__init__.py:231) 2\n"
        "thread (4): gpuwatch-sampler;Sampler._loop (gpuwatch/sampler/sampler.py:121);"
        "Event.wait (threading.py:629) 90\n")
    found = breakdown(raw)
    assert found["working_samples"] == 10
    assert found["by_part"] == {"host source": 60.0, "fake NVML": 20.0, "alerts + notifier": 20.0}
    assert found["by_module"] == {"sources.procfs": 60.0, "fake NVML": 20.0, "daemon.pipeline": 20.0}


def test_thread_cpu_is_per_second_of_wall_time_by_name_and_threads_that_did_not_run_are_left_out() -> None:
    before = {10: 1.0, 11: 2.0, 12: 5.0}
    after = {10: 1.5, 11: 2.0, 12: 5.25, 13: 0.25}
    rows = by_thread(before, after, {11: "idle", 12: "gpuwatch-host"}, wall=100.0, pid=10)
    assert rows == {"MainThread": 5.0, "gpuwatch-host": 2.5, "thread 13": 2.5}


def test_a_pty_program_sees_the_requested_size_and_its_last_screen_is_kept() -> None:
    code = "import os; print('size', *os.get_terminal_size(1))"
    proc = start_in_pty("size", [sys.executable, "-c", code], cols=160, rows=50)
    proc.popen.wait(10)
    time.sleep(0.2)
    assert "size 160 50" in proc.log_tail()
    proc.stop()


@pytest.mark.serial  # bounds CPU share, wall time or RSS: measured alone, after the parallel part
def test_meter_reports_cpu_of_a_busy_child_in_percent_of_one_core() -> None:
    busy = "import time\nend = time.time() + 3\nwhile time.time() < end: pass"
    proc = start_in_pty("busy", [sys.executable, "-c", busy])
    meter = Meter(proc)
    meter.begin()
    time.sleep(1.0)
    meter.end()
    proc.stop()
    assert meter.cpu_pct is not None and 30.0 < meter.cpu_pct <= 110.0


def test_notes_keep_only_measured_results_of_a_merged_report() -> None:
    notes = ["Tick: the snapshot had None GPU(s), None processes", "Phase tick failed: TypeError: boom",
             "Tick: the snapshot had 1 GPU(s), 4 processes", "Scale: None; None.", "Phase leak failed: OSError: x",
             "Tick: the snapshot had 1 GPU(s), 4 processes"]
    assert current_notes(notes) == ["Tick: the snapshot had 1 GPU(s), 4 processes", "Phase leak failed: OSError: x"]


def test_the_committed_benchmarks_md_is_the_rendering_of_the_committed_results(tmp_path: Path) -> None:
    out = tmp_path / "BENCHMARKS.md"
    write_benchmarks_md(out, load_results(Path(__file__).parent))
    assert out.read_text() == (Path(__file__).parents[1] / "BENCHMARKS.md").read_text()
    assert "None" not in out.read_text() and "failed:" not in out.read_text()


def test_the_scale_grid_fit_recovers_the_cost_per_gpu_and_per_process() -> None:
    from benchmarks.scale_grid import _fit, markdown

    cells = [{"gpus": g, "processes": g * p, "tick_ms": 0.5 + 0.2 * g + 0.05 * g * p,
              "scrape_ms": 1.0 + 0.01 * g * p} for g in (1, 2, 4, 8) for p in (1, 16, 64, 256)]
    assert _fit(cells, "tick_ms") == {"base_ms": 0.5, "per_gpu_us": 200.0, "per_process_us": 50.0}
    table = markdown({"cells": cells, "tick_fit": _fit(cells, "tick_ms"), "scrape_fit": _fit(cells, "scrape_ms"),
                      "how": "test"})
    assert len([line for line in table if line.startswith("| 256 |")]) == 1
    assert "200 µs per GPU + 50 µs per process" in table[-1]


def test_terminal_bytes_are_attributed_to_the_pane_they_repaint_and_unchanged_cells_are_told_apart() -> None:
    from benchmarks.tui_bytes import analyse

    screen = [" gpuwatch 10:00:00", " GPU 0 NVIDIA H200", " GPU-Util  50%", " PID      USER", " 558      root",
              "╭─ Alerts 0 firing", "│ none", "╰──", "╭─ Diagnosis · 1 finding", "│ GPU idles 60%", "│ watching",
              "╰──", " q quit"]
    first = "".join(f"\x1b[{y + 1};1H{line}" for y, line in enumerate(screen)).encode()
    clock = b"\x1b[1;17H\x1b[1m01"  # the clock: two changed cells
    same = b"\x1b[0m\x1b[3;12H50"  # a figure rewritten as it was (same colours): written, not changed
    finding = b"\x1b[10;14H55"
    moved = b"\x1b[10;11r\x1b[1S\x1b[r"  # the finding's lines scrolled up one: they move, nothing is written
    stream = first + clock + same + finding + moved
    index = [(0.0, 0), (1.0, len(first)), (2.0, len(first) + len(clock)),
             (3.0, len(first) + len(clock) + len(same)), (4.0, len(first) + len(clock) + len(same) + len(finding))]
    result = analyse(stream, index, 30, 13, warmup=0.5)
    panes = result["panes"]
    assert panes["status line"]["cells_written"] == 2 and panes["status line"]["cells_changed"] == 2
    assert panes["GPU panel"]["cells_written"] == 2 and panes["GPU panel"]["cells_changed"] == 0
    assert panes["diagnosis pane"]["cells_changed"] == 2
    assert result["bytes"] == len(stream) - len(first)
    assert result["screen"][9].startswith("│ watching") and result["screen"][10].strip() == ""  # moved up
