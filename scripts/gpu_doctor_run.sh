#!/usr/bin/env bash
# The doctor's accuracy run on a GPU machine, end to end, from the repository root:
#     bash scripts/gpu_doctor_run.sh        (carry .whl with a py-spy wheel for --stacks; ~8 minutes)
# Leaves under $OUT: doctor.tgz (doctor-accuracy.md/.json and one recording per fault), live-*.json
# (gpuwatch doctor --stacks run live beside a fault, as a user would) and run.log.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/out}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
    && export PYTHONPATH="$PYTHONPATH:/tmp/site" PATH="/tmp/site/bin:$PATH"
fi
{
  echo "== $(date -u '+%F %T') UTC on $(hostname), $(nproc) CPUs"
  nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv,noheader
  python3 -m gpuwatch validate --doctor --duration "${DURATION:-24}" --out "$OUT/doctor"
  for fault in python_preprocess launch_bound; do
    python3 -m gpuwatch workload --fault "$fault" --duration 30 2>"$OUT/workload-$fault.err" &
    sleep 8
    python3 -m gpuwatch doctor --stacks --json --duration 12 > "$OUT/live-$fault.json"
    wait
    python3 -c "import json,sys; f=json.load(open(sys.argv[1]))['findings'][0]; print(sys.argv[2], '->', f['code'], f['evidence'][-1])" "$OUT/live-$fault.json" "$fault"
  done
} 2>&1 | tee "$OUT/run.log"
tar czf "$OUT/doctor.tgz" -C "$OUT" doctor && rm -rf "$OUT/doctor"
