#!/usr/bin/env bash
# `gpuwatch validate` on a CUDA machine, end to end, as one command from the repository root:
#     bash scripts/gpu_validate.sh            (about 4 minutes on an H200; limit 600 s)
# Needs python3 with a CUDA torch, and gpuwatch's dependencies importable: either already in /tmp/site
# (PYTHONPATH is extended with it) or as wheels in .whl/ (carried), which are then installed there.
# Leaves under $OUT: run.log and validate/{validation.json, VALIDATION.md, validation-details.json,
# validate-run.ndjson.gz, env.txt}. Commit validation.json as validation-h200.json and VALIDATION.md at the
# repository root. DURATION (default 20) sets the seconds sampled per stage; extra arguments go to validate.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/out}"
PY="${PYTHON:-python3}"
DURATION="${DURATION:-20}"
mkdir -p "$OUT/validate"
export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

run() {
  echo "== $(date -u '+%F %T') UTC on $(hostname), $(nproc) CPUs"
  if ! "$PY" -c "import textual, pynvml, psutil, rich" 2>/dev/null; then
    if ls .whl/*.whl >/dev/null 2>&1; then
      "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        .whl/*.whl || echo "wheel install failed"
    else
      echo "gpuwatch dependencies missing and no wheels in .whl/ (benchmarks/fetch_wheels.sh makes them)"
    fi
  fi
  {
    nvidia-smi || echo "nvidia-smi failed"
    "$PY" -c "import sys, torch; print(sys.version); print('torch', torch.__version__, 'cuda', torch.version.cuda,
'available', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')"
    lscpu | head -20
  } >"$OUT/validate/env.txt" 2>&1
  tail -n 4 "$OUT/validate/env.txt"

  echo "== smoke: every CUDA path once at tiny size (graphs, bf16 check)"
  for stage in naive batched bf16; do
    timeout 120 "$PY" -m gpuwatch workload --stage "$stage" --device cuda --size tiny --duration 2 --warmup 0.5 \
      --json || echo "smoke $stage failed (rc $?)"
  done

  echo "== validate: each stage ${DURATION} s under the sampler"
  "$PY" -m gpuwatch validate --device cuda --duration "$DURATION" --out "$OUT/validate" "$@"
  rc=$?
  if [ "$rc" -ne 0 ] || grep -q '"failed: ' "$OUT/validate/validation.json" 2>/dev/null; then
    echo "== validate rc=$rc or a stage failed: each stage alone, 5 s, for the error"
    for stage in naive workers batched compiled bf16; do
      timeout 150 "$PY" -m gpuwatch workload --stage "$stage" --device cuda --duration 5 --json \
        || echo "stage $stage failed (rc $?)"
    done
  fi
  echo "== VALIDATION.md"
  cat "$OUT/validate/VALIDATION.md" 2>/dev/null || echo "(not written)"
  return "$rc"
}

run "$@" 2>&1 | tee "$OUT/run.log"
exit "${PIPESTATUS[0]}"
