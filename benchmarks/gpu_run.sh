#!/usr/bin/env bash
# The H200 benchmark run, end to end, as one device command from the repository root:
#     bash benchmarks/gpu_run.sh            (carry: .whl; about 3 minutes; limit 600 s)
# Installs the carried wheels (benchmarks/WHEELS.txt) into /tmp/site, runs benchmarks/run.py and leaves
# under $OUT: run.log, bench/results-h200.json, bench/BENCHMARKS.md, bench/profiles.txt, bench/procs.log,
# bench/pyspy-*.raw. Copy results-h200.json to benchmarks/ and BENCHMARKS.md to the repository root.
# Extra arguments go to run.py (e.g. --window 30).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/out}"
mkdir -p "$OUT/bench"
{
  echo "== $(date -u '+%F %T') UTC on $(hostname), $(nproc) CPUs"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || echo "nvidia-smi failed"
  if ! ls .whl/*.whl >/dev/null 2>&1; then
    echo "no wheels in .whl/: run benchmarks/fetch_wheels.sh here and carry .whl"; exit 2
  fi
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/*.whl || { echo "wheel install failed"; exit 3; }
  export PYTHONPATH="/tmp/site:$PWD" PATH="/tmp/site/bin:$PATH" PYTHONUNBUFFERED=1
  python3 -c "import torch, nvitop, gpustat, textual; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
  python3 benchmarks/run.py --out "$OUT/bench" "$@"
} 2>&1 | tee "$OUT/run.log"
exit "${PIPESTATUS[0]}"
