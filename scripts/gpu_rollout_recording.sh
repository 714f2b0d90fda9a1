#!/usr/bin/env bash
# A rollout on a real GPU, recorded: from the repository root on a CUDA machine,
#     bash scripts/gpu_rollout_recording.sh        (about 6 minutes; one device call)
# `gpuwatch record` samples the GPU at 1 s while the reference workload runs healthy (the bf16 stage:
# batched, CUDA graphs, BF16 on the tensor cores) for HEALTHY_S seconds, and is then replaced, for the same
# user on the same GPU, by a slower version with another command line (the naive stage: Python
# preprocessing in the serving thread, one request at a time, FP32) for SLOW_S seconds. The rollout
# detector's tests replay the recording. Needs python3 with a CUDA torch and gpuwatch's dependencies (as
# gpu_validate.sh). Leaves under $OUT: rollout.ndjson.gz, workload-{healthy,slow}.json (req/s, p99),
# report.txt (gpuwatch report --replay on the recording, with its Rollouts section) and run.log.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/out}"
PY="${PYTHON:-python3}"
HEALTHY_S="${HEALTHY_S:-90}"
SLOW_S="${SLOW_S:-210}"  # past the daemon's 2 min settle time, and a minute and more after it
IDLE_S=5
mkdir -p "$OUT"
export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

run() {
  echo "== $(date -u '+%F %T') UTC on $(hostname)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  local total=$((IDLE_S + HEALTHY_S + 30 + SLOW_S + 20 + IDLE_S))
  "$PY" -m gpuwatch record -o "$OUT/rollout.ndjson.gz" --interval 1 --duration "$total" --description \
    "A rollout on one GPU: idle ${IDLE_S} s; the reference workload healthy (--stage bf16) for about ${HEALTHY_S} s; replaced by a slower version (--stage naive) for about ${SLOW_S} s; idle to the end" \
    2>"$OUT/record.err" &
  local rec=$!
  sleep "$IDLE_S"
  "$PY" -m gpuwatch workload --stage bf16 --duration "$HEALTHY_S" --json >"$OUT/workload-healthy.json" \
    2>"$OUT/workload-healthy.err"
  echo "healthy: exit $? $(cat "$OUT/workload-healthy.json")"
  "$PY" -m gpuwatch workload --stage naive --duration "$SLOW_S" --json >"$OUT/workload-slow.json" \
    2>"$OUT/workload-slow.err"
  echo "slow: exit $? $(cat "$OUT/workload-slow.json")"
  echo "waiting for the recording to end (pid $rec)"
  wait "$rec"; echo "record exit $?"
  "$PY" -c "import gzip,sys; n=sum(1 for _ in gzip.open(sys.argv[1])); print(n, 'lines')" "$OUT/rollout.ndjson.gz"
  "$PY" -m gpuwatch report --replay "$OUT/rollout.ndjson.gz" >"$OUT/report.txt" 2>&1; echo "report exit $?"
  cat "$OUT/report.txt"
}
run 2>&1 | tee "$OUT/run.log"
