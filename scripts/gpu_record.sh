#!/usr/bin/env bash
# Make the bundled H200 recording and, beside it, run the live daemon and scrape it.
# On the GPU machine, from the repository root, with gpuwatch's dependencies on PYTHONPATH:
#     bash scripts/gpu_record.sh      (about 7 minutes; writes under $OUT)
set -u
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
IDLE=8 NAIVE=320 BATCHED=30 BF16=30
TOTAL=$((2 * IDLE + NAIVE + BATCHED + BF16))
python3 scripts/incident_load.py --idle $IDLE --naive $NAIVE --batched $BATCHED --bf16 $BF16 &
python3 -m gpuwatch daemon --state-dir /tmp/gpuwatch-state --interval 1 >"$OUT/daemon.log" 2>&1 &
DAEMON=$!
(
  sleep $((IDLE + NAIVE - 10)); curl -s 127.0.0.1:19464/metrics >"$OUT/metrics-naive.prom"
  curl -s 127.0.0.1:19464/api/v1/alerts >"$OUT/alerts-naive.json"
  sleep $((BATCHED + BF16 - 5)); curl -s 127.0.0.1:19464/metrics >"$OUT/metrics-bf16.prom"
  python3 - "$DAEMON" >"$OUT/daemon-cost.txt" <<'PY'
import sys, time, psutil
p = psutil.Process(int(sys.argv[1])); t = p.cpu_times(); a = time.time() - p.create_time()
print(f"daemon pid {p.pid}: {100 * (t.user + t.system) / a:.2f}% of a core over {a:.0f} s, rss {p.memory_info().rss / 2**20:.1f} MiB")
PY
) &
python3 -m gpuwatch record -o "$OUT/h200-incident.ndjson.gz" --duration $((TOTAL + 2)) --interval 1 --description \
  "H200 incident: idle 0-${IDLE}s; naive serving (Python preprocessing in the serving thread, one request at a time, FP32, a copy per request) beside a process holding 75% of GPU memory ${IDLE}-$((IDLE + NAIVE))s; batched FP32 -$((IDLE + NAIVE + BATCHED))s; bf16 -$((TOTAL - IDLE))s; idle to ${TOTAL}s"
wait %3 2>/dev/null; sleep 1
kill -TERM $DAEMON; wait $DAEMON; echo "daemon exit $?"
cat "$OUT/daemon-cost.txt"; grep -c '^gpuwatch_' "$OUT/metrics-naive.prom"; head -c 800 "$OUT/alerts-naive.json"; echo
