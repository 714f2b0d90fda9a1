"""The daemon live on a real GPU beside a workload: scrape it, time it, keep what it said.

Run on the GPU machine from the repository root (needs the image's torch, prometheus-client):
    PYTHONPATH=$PWD python3 benchmarks/daemon_gpu.py [--naive 90 --bf16 45]
Phases: idle, the incident's naive service, its bf16 fix (``gpuwatch workload``). Every second it scrapes
/metrics and samples the daemon's CPU and RSS; at the end of each phase it saves /metrics, /api/v1/alerts
and /api/v1/diagnosis. Writes under $OUT/daemon (default ./out/daemon): summary.json, <phase>-*.{prom,json},
daemon.log, workload-<phase>.txt and, where promtool is installed, promtool.txt.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import requests
from prometheus_client.parser import text_string_to_metric_families

KEY_SERIES = ("gpuwatch_gpu_utilization_ratio", "gpuwatch_gpu_sm_active_ratio", "gpuwatch_gpu_sm_occupancy_ratio",
              "gpuwatch_gpu_tensor_active_ratio", "gpuwatch_gpu_memory_used_ratio", "gpuwatch_gpu_power_watts")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Sampler(threading.Thread):
    """Scrapes /metrics once a second and samples the daemon process, tagging rows with the phase."""

    def __init__(self, url: str, pid: int) -> None:
        super().__init__(daemon=True)
        self.url, self.proc = url, psutil.Process(pid)
        self.phase = "start"
        self.rows: list[dict[str, Any]] = []
        self.stop_event = threading.Event()
        self.proc.cpu_percent(None)

    def run(self) -> None:
        while not self.stop_event.wait(1.0):
            t0 = time.perf_counter()
            try:
                body = requests.get(self.url + "/metrics", timeout=5).text
            except requests.RequestException as exc:
                self.rows.append({"phase": self.phase, "error": str(exc)})
                continue
            ms = (time.perf_counter() - t0) * 1e3
            values: dict[str, float] = {}
            series = 0
            for fam in text_string_to_metric_families(body):
                series += len(fam.samples)
                for s in fam.samples:
                    if s.name in KEY_SERIES and s.labels.get("gpu") == "0":
                        values[s.name] = s.value
            self.rows.append({"phase": self.phase, "scrape_ms": ms, "bytes": len(body), "series": series,
                              "cpu_percent": self.proc.cpu_percent(None),
                              "rss_mib": self.proc.memory_info().rss / 2**20, **values})


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for phase in dict.fromkeys(r["phase"] for r in rows):
        ok = [r for r in rows if r["phase"] == phase and "scrape_ms" in r]
        if not ok:
            continue
        ms = sorted(r["scrape_ms"] for r in ok)
        out[phase] = {
            "samples": len(ok), "scrape_ms_p50": round(ms[len(ms) // 2], 2),
            "scrape_ms_p95": round(ms[int(len(ms) * 0.95)], 2), "bytes": ok[-1]["bytes"], "series": ok[-1]["series"],
            "daemon_cpu_percent_mean": round(statistics.fmean(r["cpu_percent"] for r in ok), 2),
            "daemon_rss_mib_max": round(max(r["rss_mib"] for r in ok), 1),
            **{k: round(statistics.fmean(r[k] for r in ok if k in r), 4)
               for k in KEY_SERIES if any(k in r for r in ok)},
        }
    return out


def save_phase(url: str, out: Path, phase: str) -> None:
    for name, path in (("metrics.prom", "/metrics"), ("alerts.json", "/api/v1/alerts"),
                       ("diagnosis.json", "/api/v1/diagnosis?window=30")):
        try:
            (out / f"{phase}-{name}").write_bytes(requests.get(url + path, timeout=30).content)
        except requests.RequestException as exc:
            (out / f"{phase}-{name}").write_text(f"error: {exc}\n")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--idle", type=float, default=15)
    p.add_argument("--naive", type=float, default=90)
    p.add_argument("--bf16", type=float, default=45)
    p.add_argument("--interval", type=float, default=1.0)
    p.add_argument("--replay", metavar="FILE", help="a recording instead of the GPU (a dry run of this script)")
    p.add_argument("--no-workload", action="store_true", help="sleep through the phases instead of loading the GPU")
    args = p.parse_args()
    out = Path(os.environ.get("OUT", "out")) / "daemon"
    out.mkdir(parents=True, exist_ok=True)
    port, state = free_port(), tempfile.mkdtemp(prefix="gpuwatch-daemon-")
    url = f"http://127.0.0.1:{port}"
    daemon = subprocess.Popen([sys.executable, "-m", "gpuwatch", "daemon", "--listen", f"127.0.0.1:{port}",
                               "--state-dir", state, "--interval", str(args.interval),
                               *(["--replay", args.replay, "--loop"] if args.replay else [])],
                              stderr=(out / "daemon.log").open("wb"), stdout=subprocess.DEVNULL)
    summary: dict[str, Any] = {"listen": url}
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if requests.get(url + "/healthz", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if daemon.poll() is not None or time.monotonic() > deadline:
                print((out / "daemon.log").read_text(), file=sys.stderr)
                return 1
            time.sleep(0.2)
        sampler = Sampler(url, daemon.pid)
        sampler.start()
        for phase, seconds in (("idle", args.idle), ("naive", args.naive), ("bf16", args.bf16)):
            sampler.phase = phase
            if phase == "idle" or args.no_workload:
                time.sleep(seconds)
            else:
                with (out / f"workload-{phase}.txt").open("wb") as log:
                    subprocess.run([sys.executable, "-m", "gpuwatch", "workload", "--stage", phase, "--duration",
                                    str(seconds)], stdout=log, stderr=subprocess.STDOUT, timeout=seconds + 240,
                                   check=False)
            save_phase(url, out, phase)
        sampler.stop_event.set()
        sampler.join(5)
        summary["phases"] = summarise(sampler.rows)
        promtool = shutil.which("promtool")
        if promtool:
            check = subprocess.run([promtool, "check", "metrics"], input=(out / "bf16-metrics.prom").read_bytes(),
                                   capture_output=True, timeout=60, check=False)
            (out / "promtool.txt").write_bytes(check.stdout + check.stderr + f"exit {check.returncode}\n".encode())
            summary["promtool_exit"] = check.returncode
    finally:
        daemon.send_signal(signal.SIGTERM)
        try:
            summary["daemon_exit"] = daemon.wait(30)
        except subprocess.TimeoutExpired:
            daemon.kill()
            summary["daemon_exit"] = "killed"
        shutil.rmtree(state, ignore_errors=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
