"""A step is not jitter and not a leak: the shipped memory rules, run locally by ``gpuwatch rules test`` and
exported to PromQL for promtool, tell one allocation (memory stepping once from 1 % to 75 % and staying
there) from memory that keeps swinging and from memory that keeps climbing.

The recordings are synthetic, one snapshot a second like ``gpuwatch record``; promtool reads the same
recordings every 15 s, as Prometheus would scrape them.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from tools import require_tool

from alerts.build import gpu, snap
from gpuwatch.model.metrics import METRICS
from gpuwatch.model.recording import RecordingHeader, RecordingWriter
from gpuwatch.model.snapshot import Snapshot

ROOT = Path(__file__).resolve().parents[2]
MEMORY_RULES = ("GpuMemoryVolatile", "GpuMemoryLeak")
MINUTES = 20
SCRAPE_S = 15


def step(t: int) -> float:
    """One allocation 10 s in: 1 % -> 75 %, flat after (the bundled recording's start, without the rest)."""
    return 1.0 if t < 10 else 75.0


def leak(t: int) -> float:
    """A leak: 20 % climbing 3 points a minute, in small allocations every 5 s."""
    return 20.0 + 3.0 * (t - t % 5) / 60


def jitter(seed: int = 7) -> Callable[[int], float]:
    """Memory that swings between 30 % and 70 %, a new level every 4 s."""
    rng = random.Random(seed)
    levels = [rng.uniform(30, 70) for _ in range(MINUTES * 15 + 1)]
    return lambda t: levels[t // 4]


def trace(shape: Callable[[int], float]) -> list[Snapshot]:
    return [snap(float(t), [gpu(0, util=60.0, mem=shape(t))]) for t in range(MINUTES * 60)]


def write(path: Path, snaps: list[Snapshot]) -> Path:
    with RecordingWriter(path, RecordingHeader(created=snaps[0].time, interval_s=1.0, hostname="node-1")) as w:
        for s in snaps:
            w.write(s)
    return path


def local_alerts(recording: Path | None) -> dict[str, set[str]]:
    """``gpuwatch rules test --json`` as a user runs it: the states each memory rule reached."""
    argv = [sys.executable, "-m", "gpuwatch", "rules", "test", "--json"]
    done = subprocess.run(argv + (["--replay", str(recording)] if recording else []), capture_output=True,
                          text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    states: dict[str, set[str]] = {}
    for line in done.stdout.splitlines():
        tr = json.loads(line)
        alert = tr.get("alert", tr)
        states.setdefault(alert["name"], set()).add(alert["state"])
    return {name: s for name, s in states.items() if name in MEMORY_RULES}


def test_the_bundled_recording_start_up_allocation_raises_no_memory_alert() -> None:
    assert local_alerts(None) == {}


#: (shape, the rule that must fire, or None: no memory rule even pending). Swings may look like a climb
#: for a moment (pending), never for long enough to fire.
SHAPES = [(step, None), (leak, "GpuMemoryLeak"), (jitter(), "GpuMemoryVolatile")]
IDS = ["one allocation: nothing, not even pending", "a leak: GpuMemoryLeak", "swings: GpuMemoryVolatile"]


def check(states: dict[str, set[str]], fires: str | None) -> None:
    if fires is None:
        assert states == {}
    else:
        assert {name for name, s in states.items() if "firing" in s} == {fires}, states


@pytest.mark.parametrize(("shape", "fires"), SHAPES, ids=IDS)
def test_local_rules_tell_a_step_from_a_leak_and_from_swings(
        shape: Callable[[int], float], fires: str | None, tmp_path: Path) -> None:
    check(local_alerts(write(tmp_path / "shape.ndjson.gz", trace(shape))), fires)


def promtool_alerts(shape: Callable[[int], float], tmp_path: Path) -> dict[str, set[str]]:
    """The exported rules over the shape scraped every 15 s: which memory rules were pending or firing at
    any minute (read from ``ALERTS``, which holds both states)."""
    promtool = require_tool("promtool")
    ratio = METRICS["gpu.mem_used_percent"]
    values = " ".join(repr(shape(t) * ratio.prom_scale) for t in range(0, MINUTES * 60, SCRAPE_S))
    rules = json.dumps("|".join(MEMORY_RULES))
    labels = 'instance="node-1:19464",job="gpuwatch",gpu="0",uuid="GPU-0000",name="NVIDIA H200"'
    spec = {"rule_files": [str(ROOT / "alerts" / "prometheus" / "gpuwatch-rules.yml")], "evaluation_interval": "1m",
            "tests": [{"interval": f"{SCRAPE_S}s",
                       "input_series": [{"series": f"{ratio.prom_name}{{{labels}}}", "values": values}],
                       # every minute, expect no memory alert in ALERTS: promtool's failure report lists those there
                       "promql_expr_test": [{"expr": f"count by (alertname, alertstate) (ALERTS{{alertname=~{rules}}})",
                                             "eval_time": f"{m}m", "exp_samples": []}
                                            for m in range(1, MINUTES)]}]}
    (tmp_path / "test.yml").write_text(json.dumps(spec))
    done = subprocess.run([promtool, "test", "rules", "test.yml"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    states: dict[str, set[str]] = {}
    for line in (done.stdout + done.stderr).splitlines():
        if "alertname=" in line and "alertstate=" in line:
            name = line.split('alertname="')[1].split('"')[0]
            states.setdefault(name, set()).add(line.split('alertstate="')[1].split('"')[0])
    assert (done.returncode == 0) == (not states), done.stdout + done.stderr
    return states


@pytest.mark.parametrize(("shape", "fires"), SHAPES, ids=IDS)
def test_exported_rules_tell_a_step_from_a_leak_and_from_swings(
        shape: Callable[[int], float], fires: str | None, tmp_path: Path) -> None:
    check(promtool_alerts(shape, tmp_path), fires)
