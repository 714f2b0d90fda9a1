#!/usr/bin/env bash
# `gpuwatch validate` on a CUDA machine, end to end, as ONE command from the repository root:
#     bash scripts/gpu_validate.sh            (at most about 8 minutes on an H200; it prints its own estimate)
# Capacity view: each of the 5 stages closed loop for CAPACITY s (naive REPEATS times: the baseline every
# ratio rests on). Traffic view (--traffic all): one process per stage runs, for each shape (steady, longtail,
# bursty, mixed), PHASE s at the shared rate (80 % of naive's median capacity) and then a ladder of up to 7
# rising rates PHASE s each, stopping at the first it cannot sustain. VALIDATE_LIMIT caps the whole validate
# (the report is rewritten after every run, so a run cut short still leaves every row measured so far).
# Needs python3 with a CUDA torch, and gpuwatch's dependencies importable: either already in /tmp/site
# (PYTHONPATH is extended with it) or as wheels in .whl/ (carried), which are then installed there.
# Leaves under $OUT: run.log, validate/{validation.json, VALIDATION.md, validation-details.json,
# validate-run.ndjson.gz, env.txt}, and the files to commit under their committed names: VALIDATION.md and
# validation-h200.json (repository root), validation-details-h200.json and validate-h200.ndjson.gz
# (docs/gpu-runs/). Extra arguments go to `gpuwatch validate`.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/out}"
PY="${PYTHON:-python3}"
CAPACITY="${CAPACITY:-5}"
PHASE="${PHASE:-2}"
REPEATS="${REPEATS:-2}"
VALIDATE_LIMIT="${VALIDATE_LIMIT:-510}"
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

  # 5 stages + (REPEATS - 1) naive repeats for capacity; 5 traffic runs of at most 4 x 8 phases
  local estimate=$(((5 + REPEATS - 1) * CAPACITY + 5 * 32 * PHASE + (10 + REPEATS) * 10))
  echo "== validate: capacity ${CAPACITY} s x $((5 + REPEATS - 1)) runs, traffic at most 32 phases of" \
       "${PHASE} s x 5 stages: at most about $((estimate / 60)) min $((estimate % 60)) s (limit ${VALIDATE_LIMIT} s)"
  SECONDS=0
  timeout -s INT "$VALIDATE_LIMIT" "$PY" -m gpuwatch validate --device cuda --duration "$CAPACITY" \
    --phase-duration "$PHASE" --traffic all --repeats "$REPEATS" --warmup 1 --out "$OUT/validate" "$@"
  rc=$?
  echo "== validate rc=$rc after ${SECONDS} s"
  cp "$OUT/validate/VALIDATION.md" "$OUT/VALIDATION.md" 2>/dev/null
  cp "$OUT/validate/validation.json" "$OUT/validation-h200.json" 2>/dev/null
  cp "$OUT/validate/validation-details.json" "$OUT/validation-details-h200.json" 2>/dev/null
  cp "$OUT/validate/validate-run.ndjson.gz" "$OUT/validate-h200.ndjson.gz" 2>/dev/null
  echo "== VALIDATION.md"
  cat "$OUT/VALIDATION.md" 2>/dev/null || echo "(not written)"
  return "$rc"
}

run "$@" 2>&1 | tee "$OUT/run.log"
exit "${PIPESTATUS[0]}"
