#!/usr/bin/env bash
# The efficiency accounting live on a CUDA machine, as ONE command from the repository root:
#     bash scripts/gpu_efficiency_run.sh        (about 3 minutes)
# A real daemon samples the GPU while two injected faults run one after the other with idle gaps: the
# feeding thread busy in Python (python_preprocess, expected cause input_cpu_bound), nobody on the GPU
# (no_process), memory held by a process doing nothing (idle_memory, expected memory_idle). Then
# `gpuwatch report` reads the daemon's roll-ups, /metrics is scraped, and the daemon is restarted to show
# the roll-ups survive it. Needs python3 with a CUDA torch and gpuwatch's dependencies (as gpu_validate.sh).
# Leaves under $OUT/efficiency: report.txt, report.json, report-after-restart.json, metrics.txt, daemon*.log.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/out}/efficiency"
PY="${PYTHON:-python3}"
PORT="${PORT:-19480}"
FAULT_S="${FAULT_S:-45}"
mkdir -p "$OUT"
export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
URL="http://127.0.0.1:$PORT"

daemon() {  # $1: log name
  "$PY" -m gpuwatch daemon --listen "127.0.0.1:$PORT" --state-dir "$OUT/state" 2>"$OUT/$1.log" &
  DAEMON=$!
  for _ in $(seq 50); do curl -sf "$URL/healthz" >/dev/null && return 0; sleep 0.2; done
  echo "the daemon did not start:"; cat "$OUT/$1.log"; return 1
}

run() {
  echo "== $(date -u '+%F %T') UTC on $(hostname)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  daemon daemon || return 1
  sleep 10
  "$PY" -m gpuwatch workload --fault python_preprocess --duration "$FAULT_S" 2>"$OUT/workload-python_preprocess.err"
  sleep 20
  "$PY" -m gpuwatch workload --fault idle_memory --duration "$FAULT_S" 2>"$OUT/workload-idle_memory.err"
  sleep 15  # the last block commits 10 s of samples later
  "$PY" -m gpuwatch report --connect "$URL" --since 1h | tee "$OUT/report.txt"
  "$PY" -m gpuwatch report --connect "$URL" --since 1h --json >"$OUT/report.json"
  curl -s "$URL/metrics" | grep -E '^gpuwatch_gpu_(lost_)?seconds_total' | tee "$OUT/metrics.txt"
  kill -TERM "$DAEMON"; wait "$DAEMON"
  daemon daemon-restarted || return 1
  sleep 3
  "$PY" -m gpuwatch report --connect "$URL" --since 1h --json >"$OUT/report-after-restart.json"
  kill -TERM "$DAEMON"; wait "$DAEMON"
  "$PY" - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
before, after = (json.load(open(f"{out}/{n}.json")) for n in ("report", "report-after-restart"))
causes = {r["cause"]: round(r["gpu_hours"] * 3600) for r in before["lost_gpu_hours"]["cause"]}
print("lost seconds by cause:", causes)
print("allocated s before/after restart:", round(before["gpu_hours"]["allocated"] * 3600, 1),
      round(after["gpu_hours"]["allocated"] * 3600, 1))
PY
}

run "$@" 2>&1 | tee "$OUT/run.log"
exit "${PIPESTATUS[0]}"
