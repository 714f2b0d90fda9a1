#!/usr/bin/env bash
# The doctor's accuracy run on a GPU machine, end to end, from the repository root:
#     bash scripts/gpu_doctor_run.sh [PART]      (carry .whl with a py-spy wheel for stacks)
# PART 1 or 2 runs every other variant of the catalogue (earlier classes and mechanism variants alike, about
# 8 minutes each: one device call each); all (the default) runs every variant in one go. Leaves under $OUT:
# doctor-PART.tgz (doctor-accuracy.md/.json and one recording per fault; join both parts' faults/ folders and
# run `gpuwatch validate --doctor --from-recordings DIR` for the whole table), live-*.json (gpuwatch doctor
# run live beside a fault, as a user would) and run-PART.log. BUDGET caps the accuracy run's seconds
# (default 490; the mechanism variants run first): faults not reached are left for a later call, and the
# recordings made are kept.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/out}"
PART="${1:-all}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
    && export PYTHONPATH="$PYTHONPATH:/tmp/site" PATH="/tmp/site/bin:$PATH"
fi
case "$PART" in
  1) live=(python_preprocess) ;;
  2) live=(feeder_python_pipe) ;;
  all) live=(python_preprocess launch_bound feeder_python_pipe) ;;
  *) echo "gpu_doctor_run.sh: PART must be 1, 2 or all, not '$PART'" >&2; exit 2 ;;
esac
faults=$(python3 -c "import sys; from gpuwatch.workload.faults_catalogue import part
print(','.join(part(1, 1) if sys.argv[1] == 'all' else part(int(sys.argv[1]), 2)))" "$PART") || exit 1
{
  echo "== $(date -u '+%F %T') UTC on $(hostname), $(nproc) CPUs, part $PART: $faults"
  nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv,noheader
  timeout --signal=INT "${BUDGET:-490}" python3 -m gpuwatch validate --doctor --faults "$faults" \
    --duration "${DURATION:-8}" --out "$OUT/doctor"
  for fault in "${live[@]}"; do
    python3 -m gpuwatch workload --fault "$fault" --duration 21 2>"$OUT/workload-$fault.err" &
    sleep 7
    python3 -m gpuwatch doctor --stacks --json --duration 12 > "$OUT/live-$fault.json"
    wait
    python3 -c "import json,sys; f=json.load(open(sys.argv[1]))['findings'][0]; print(sys.argv[2], '->', f['code'], f.get('mechanism'), f.get('locations'), f['evidence'][-1])" "$OUT/live-$fault.json" "$fault"
  done
} 2>&1 | tee "$OUT/run-$PART.log"
tar czf "$OUT/doctor-$PART.tgz" -C "$OUT" doctor && rm -rf "$OUT/doctor"
