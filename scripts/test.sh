#!/usr/bin/env bash
# Set up everything the test suite needs and run all of it: ruff, mypy, pytest.
# Safe to re-run; installs only what is missing. Python >= 3.10.
set -euo pipefail
cd "$(dirname "$0")/.."

# System tools the tests drive for real: promtool/Prometheus/Alertmanager, tmux, systemd-analyze.
need=()
command -v promtool >/dev/null || need+=(prometheus)
command -v prometheus-alertmanager >/dev/null || command -v alertmanager >/dev/null || need+=(prometheus-alertmanager)
command -v tmux >/dev/null || need+=(tmux)
command -v systemd-analyze >/dev/null || need+=(systemd)
if ((${#need[@]})); then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== installing Debian packages: ${need[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  else
    echo "!! missing ${need[*]}: tests that need them will be skipped (install them, or run as root)" >&2
  fi
fi

PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# The workload's tests run on the CPU: take the CPU build of torch (a bare 'torch' pulls a multi-GB CUDA build).
.venv/bin/python -c 'import torch' 2>/dev/null || .venv/bin/python -m pip install -q torch==2.13.0 \
  || echo "!! torch==2.13.0 not installable here: the workload tests will be skipped" >&2
.venv/bin/python -m pip install -q -e '.[test]'

echo "== ruff";  .venv/bin/ruff check gpuwatch tests benchmarks scripts
echo "== mypy";  .venv/bin/mypy
echo "== pytest"; .venv/bin/python -m pytest -q "$@"
