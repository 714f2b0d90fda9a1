#!/usr/bin/env bash
# The H200 benchmark run, end to end, as one device command from the repository root:
#     bash benchmarks/gpu_run.sh            (carry: .whl; about 3 minutes; limit 600 s)
# Installs the carried wheels (benchmarks/WHEELS.txt) into /tmp/site, runs benchmarks/run.py and leaves
# under $OUT: run.log, results-h200.json, BENCHMARKS.md and profiles.txt (copied up from bench/: the device
# returns only the first few files of $OUT, top level first), and bench/ with the rest (procs.log, the pty
# streams, pyspy-*.raw). Copy results-h200.json to benchmarks/ and BENCHMARKS.md to the repository root.
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
  # Byte-compiled, as pip installs for a user: a program whose modules are compiled at its start holds the
  # compiler's garbage (the dashboard, the anchors and the daemon alike).
  python3 -m pip install -q --no-index --no-deps --no-cache-dir --upgrade --target /tmp/site \
    .whl/*.whl || { echo "wheel install failed"; exit 3; }
  python3 -m compileall -q -j 0 gpuwatch >/dev/null || { echo "byte-compiling gpuwatch failed"; exit 3; }
  echo "PYTHONDONTWRITEBYTECODE=${PYTHONDONTWRITEBYTECODE:-} pynvml: $(python3 -c 'import pynvml, os, importlib.util as u; c = u.cache_from_source(pynvml.__file__); print(pynvml.__file__, "cached" if os.path.exists(c) else "not cached")')"
  export PYTHONPATH="/tmp/site:$PWD" PATH="/tmp/site/bin:$PATH" PYTHONUNBUFFERED=1
  python3 -c "import torch, nvitop, gpustat, textual; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
  python3 benchmarks/run.py --out "$OUT/bench" "$@"
} 2>&1 | tee "$OUT/run.log"
status="${PIPESTATUS[0]}"
for f in results-h200.json BENCHMARKS.md profiles.txt; do
  [ -f "$OUT/bench/$f" ] && cp "$OUT/bench/$f" "$OUT/$f"
done
exit "$status"
