#!/usr/bin/env bash
# The NVML source's real-GPU checks, end to end, on the GPU machine. Run from the repository root:
#   bash tests/gpu/run_nvml_checks.sh
# Writes under $OUT (default ./out/nvml): env.txt, nvml-gpu-tests.txt (pytest -m gpu tests/gpu -v -s),
# nvml-tick-timing.json, nvml-health.json (health fields as the GPU answers them, XID worker timings, tick cost
# with and without the health worker), nvml-direct-calls.json (the process calls made directly, against
# pynvml's), snapshot-idle.json, snapshot.err. Installs nothing from the network: where
# pytest is missing it installs from wheels in .whl/ when that folder was carried along.
set -u
OUT=${OUT:-$PWD/out/nvml}
mkdir -p "$OUT"
export OUT
PY=${PYTHON:-python3}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

{ nvidia-smi; "$PY" -c "import sys, pynvml; print(sys.version); print(pynvml.__file__)"; } >"$OUT/env.txt" 2>&1
if ! "$PY" -c "import pytest" 2>/dev/null && [ -d .whl ]; then
    "$PY" -m pip install -q --no-index --find-links .whl pytest pytest-timeout >>"$OUT/env.txt" 2>&1
fi
"$PY" -m pip list 2>/dev/null | grep -iE "pytest|nvidia-ml|torch|textual|psutil" >>"$OUT/env.txt"

"$PY" -m pytest -m gpu tests/gpu -v -s -p no:cacheprovider -o addopts="" 2>&1 | tee "$OUT/nvml-gpu-tests.txt"
status=${PIPESTATUS[0]}
"$PY" -m gpuwatch snapshot --json --interval 0.5 >"$OUT/snapshot-idle.json" 2>"$OUT/snapshot.err"
echo "pytest exit status: $status" | tee -a "$OUT/nvml-gpu-tests.txt"
exit "$status"
