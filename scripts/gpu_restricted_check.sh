#!/usr/bin/env bash
# What the Kubernetes "restricted" overlay keeps, measured on a GPU machine without a cluster, from the repo root:
#     sudo bash scripts/gpu_restricted_check.sh        (~1 minute; needs torch for the workload)
# The restricted pod runs as uid 65534 in its own PID namespace with no kubelet socket. This runs one daemon
# like that (setpriv + unshare --pid --mount-proc) and one like the full pod (root, the host's PID namespace),
# beside a GPU workload in the host's PID namespace, and prints which series each serves. Leaves
# $OUT/restricted.txt and $OUT/full.txt (their /metrics) and $OUT/run.log.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/out}"
mkdir -p "$OUT"
# uid 65534 must be able to read the code: a world-readable copy
SRC=/tmp/gpuwatch-src
rm -rf "$SRC" && mkdir -p "$SRC" && cp -r gpuwatch "$SRC/" && chmod -R a+rX "$SRC"
PY="${PY:-$(command -v python3)}"
export PYTHONUNBUFFERED=1
if ! setpriv --reuid=65534 --regid=65534 --clear-groups env PYTHONPATH="$SRC" HOME=/tmp "$PY" -c 'import gpuwatch.cli, pynvml' \
    2>"$OUT/preflight.err"; then
  echo "uid 65534 cannot run $PY with gpuwatch's dependencies ($(tail -1 "$OUT/preflight.err")):" >&2
  echo "point PY= at a Python that user can read (a venv outside /root, chmod a+rX)" >&2
  exit 2
fi
{
  echo "== $(date -u '+%F %T') UTC on $(hostname); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
  grep -H . /proc/driver/nvidia/params 2>/dev/null | grep -i RestrictProfiling || echo "RestrictProfilingToAdminUsers: not shown"
  # Every background process writes to files, never to the pipe into tee (which would wait for them), and
  # the scrape comes once the workload is past the daemon's process_series_min_age (30 s).
  PYTHONPATH="$PWD" "$PY" -m gpuwatch workload --fault python_preprocess --duration 60 >"$OUT/workload.out" \
    2>"$OUT/workload.err" &
  work=$!
  sleep 8
  PYTHONPATH="$SRC" "$PY" -m gpuwatch daemon --listen 127.0.0.1:19471 --state-dir /tmp/gw-full >/dev/null \
    2>"$OUT/full.err" &
  full=$!
  mkdir -p /tmp/gw-restricted && chmod 777 /tmp/gw-restricted
  unshare --pid --fork --kill-child --mount-proc setpriv --reuid=65534 --regid=65534 --clear-groups \
    env PYTHONPATH="$SRC" HOME=/tmp "$PY" -m gpuwatch daemon --listen 127.0.0.1:19472 --state-dir /tmp/gw-restricted \
    >/dev/null 2>"$OUT/restricted.err" &
  restricted=$!
  sleep 30
  curl -s 127.0.0.1:19471/metrics > "$OUT/full.txt"
  curl -s 127.0.0.1:19472/metrics > "$OUT/restricted.txt"
  for pod in full restricted; do
    f="$OUT/$pod.txt"
    echo "-- $pod pod: $(grep -c '^gpuwatch_' "$f") gpuwatch samples"
    for s in gpuwatch_gpu_utilization_ratio gpuwatch_gpu_sm_active_ratio gpuwatch_gpu_tensor_active_ratio \
             gpuwatch_gpu_memory_used_bytes gpuwatch_process_gpu_memory_bytes gpuwatch_process_cpu_usage_ratio \
             gpuwatch_process_top_thread_cpu_usage_ratio gpuwatch_diagnosis_finding; do
      echo "   $s: $(grep -c "^$s{" "$f") series"
    done
    echo "   process commands: $(grep -o '^gpuwatch_process_gpu_memory_bytes{[^}]*' "$f" | grep -o 'command="[^"]*"' | sort -u | tr '\n' ' ')"
    echo "   sources: $(grep '^gpuwatch_source_up' "$f" | tr '\n' ' ')"
  done
  echo "-- restricted daemon's log (last lines):"; tail -5 "$OUT/restricted.err"
  kill "$full" "$restricted" 2>/dev/null
  wait "$work"
} 2>&1 | tee "$OUT/run.log"
