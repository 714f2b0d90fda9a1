"""What serving HTTP costs a resting daemon: RSS and CPU of a real ``gpuwatch daemon`` replaying the bundled
recording at 1 s, scraped on /metrics every 15 s as Prometheus does, and the modules the process imported.

    PYTHONPATH=. .venv/bin/python benchmarks/daemon_http_cost.py [--seconds 60]

Prints one JSON document: RSS (MiB) at the end of the window, CPU seconds per wall second over it, and
whether aiohttp, requests or ssl were imported (the module list comes from the same daemon run in a
harness that prints ``sys.modules`` after every endpoint answered: ``tests/daemon/imports_probe.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from daemon.imports_probe import daemon_modules


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> int:
    with urllib.request.urlopen(url, timeout=10) as r:
        r.read()
        return int(r.status)


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("VmRSS:")[1].split()[0]) / 1024


def measure(seconds: float = 60.0, scrape_every: float = 15.0) -> dict[str, Any]:
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "HOME": tmp, "XDG_CONFIG_HOME": tmp, "XDG_STATE_HOME": tmp, "XDG_CACHE_HOME": tmp}
        proc = subprocess.Popen([sys.executable, "-m", "gpuwatch", "daemon", "--replay", "bundled", "--loop",
                                 "--speed", "1", "--interval", "1", "--listen", f"127.0.0.1:{port}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if _get(url + "/healthz") == 200:
                        break
                except OSError:
                    pass
                assert proc.poll() is None and time.monotonic() < deadline, "the daemon did not start"
                time.sleep(0.2)
            start, cpu0, scrapes = time.monotonic(), _cpu_s(proc.pid), 0
            while (now := time.monotonic()) < start + seconds:
                if now >= start + scrapes * scrape_every:
                    _get(url + "/metrics")
                    scrapes += 1
                time.sleep(0.2)
            wall = time.monotonic() - start
            cpu, rss = _cpu_s(proc.pid) - cpu0, _rss_mib(proc.pid)
        finally:
            proc.terminate()
            proc.wait(20)
    modules = daemon_modules()
    return {"seconds": round(wall, 1), "scrapes": scrapes, "rss_mib": round(rss, 1),
            "cpu_s_per_s": round(cpu / wall, 4), "modules": len(modules),
            **{f"imports_{m}": m in modules for m in ("aiohttp", "requests", "ssl", "urllib3", "http.server")}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    print(json.dumps(measure(args.seconds), indent=1))


if __name__ == "__main__":
    main()
