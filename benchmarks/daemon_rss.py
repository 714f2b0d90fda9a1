"""Does the daemon's memory stay flat over a long run? Replays a looping incident at full speed through
a real ``gpuwatch daemon`` process (alert rules firing and resolving every cycle, signed webhooks to a
local receiver, /metrics scraped and /api/v1/stream read meanwhile) and samples its RSS against ticks.

    .venv/bin/python benchmarks/daemon_rss.py --ticks 10000 [--out results.json]

Prints one JSON document: RSS (MiB) at each sample, and the growth between the end of warm-up (the
history ring buffer filling) and the end of the run.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from daemon.incident import write_recording, write_rules
from healthz import wait_healthy
from notify.receiver import Receiver

from gpuwatch.notify import new_secret

MIB = 1024 * 1024


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stream_reader(url: str, stop: threading.Event) -> None:
    try:
        with requests.get(url + "/api/v1/stream", stream=True, timeout=30) as r:
            for _ in r.iter_lines():
                if stop.is_set():
                    return
    except requests.RequestException:
        pass


def measure(ticks: int, cycle: int, workdir: Path, warmup: int, min_evaluated: int = 0,
            timeout_s: float = 300.0) -> dict[str, Any]:
    """Runs until ``ticks`` snapshots and ``min_evaluated`` alert evaluations (the alert worker skips the
    oldest snapshots when a full-speed replay outruns it: on a busy machine it evaluates fewer per tick),
    or until ``timeout_s``."""
    receiver = Receiver()
    (workdir / "secret").write_text(new_secret())
    port = free_port()
    (workdir / "config.toml").write_text(
        f'[alerts]\nrule_paths = ["{write_rules(workdir / "rules.yml")}"]\n'
        f'[daemon]\nlisten = "127.0.0.1:{port}"\nstate_dir = "{workdir / "state"}"\n'
        f'[[receivers]]\nname = "bench"\nkind = "alertmanager"\nurl = "{receiver.url}"\n'
        f'secret_file = "{workdir / "secret"}"\nrepeat_interval = "1m"\n')
    recording = write_recording(workdir / "incident.ndjson.gz", n=cycle, gpus=2, processes=8)
    proc = subprocess.Popen([sys.executable, "-m", "gpuwatch", "daemon", "--config", str(workdir / "config.toml"),
                             "--replay", str(recording), "--speed", "0", "--loop"],
                            stdout=subprocess.DEVNULL, stderr=(workdir / "daemon.log").open("wb"))
    url = f"http://127.0.0.1:{port}"
    stop = threading.Event()
    samples: list[dict[str, float]] = []
    scrape_bytes = 0
    try:
        ps = psutil.Process(proc.pid)
        wait_healthy(url, proc, 30, any_answer=True)
        reader = threading.Thread(target=_stream_reader, args=(url, stop), daemon=True)
        reader.start()
        start = time.monotonic()
        last_scrape = 0.0
        while True:
            health = requests.get(url + "/healthz", timeout=5).json()
            if time.monotonic() - last_scrape > 1.0:
                scrape_bytes = len(requests.get(url + "/metrics", timeout=10).content)
                last_scrape = time.monotonic()
            samples.append({"ticks": health["ticks"], "evaluated": health["evaluated"],
                            "efficiency_backlog": health.get("efficiency_backlog", 0),
                            "rss_mib": round(ps.memory_info().rss / MIB, 2), "t_s": round(time.monotonic() - start, 2)})
            if health["ticks"] >= ticks and health["evaluated"] >= min_evaluated:
                break
            if time.monotonic() - start > timeout_s:
                break
            time.sleep(0.2)
        metrics = requests.get(url + "/metrics", timeout=10).text
    finally:
        stop.set()
        proc.terminate()
        proc.wait(30)
        receiver.close()
    after = [s for s in samples if s["ticks"] >= warmup]
    base = after[0] if after else samples[0]
    end = samples[-1]
    notifications = sum(float(line.split()[-1]) for line in metrics.splitlines()
                        if line.startswith("gpuwatch_notifications{"))
    return {
        "ticks": end["ticks"], "evaluated": end["evaluated"], "seconds": end["t_s"],
        "ticks_per_s": round(end["ticks"] / max(end["t_s"], 1e-9)),
        "rss_mib_after_warmup": base["rss_mib"], "rss_mib_end": end["rss_mib"],
        "rss_mib_max": max(s["rss_mib"] for s in samples),
        "growth_mib_after_warmup": round(end["rss_mib"] - base["rss_mib"], 2),
        "growth_mib_per_1000_ticks": round((end["rss_mib"] - base["rss_mib"]) * 1000
                                           / max(1, end["ticks"] - base["ticks"]), 3),
        "efficiency_backlog_end": end["efficiency_backlog"],
        "metrics_scrape_bytes": scrape_bytes, "notifications_queued": notifications,
        "webhooks_received": len(receiver.requests), "samples": samples[:: max(1, len(samples) // 40)],
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ticks", type=int, default=10_000)
    p.add_argument("--cycle", type=int, default=200, help="ticks per incident cycle in the looping recording")
    p.add_argument("--warmup", type=int, default=1500, help="ticks before RSS is taken as the baseline")
    p.add_argument("--out", type=Path, help="also write the JSON here (default: $OUT/daemon_rss.json if $OUT)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpuwatch-rss-") as tmp:
        result = measure(args.ticks, args.cycle, Path(tmp), args.warmup)
    text = json.dumps(result, indent=1)
    print(text)
    out = args.out or (Path(os.environ["OUT"]) / "daemon_rss.json" if os.environ.get("OUT") else None)
    if out is not None:
        out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
