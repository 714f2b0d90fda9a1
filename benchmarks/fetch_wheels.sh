#!/usr/bin/env bash
# Re-creates .whl/: the wheels gpuwatch and its benchmarks need on the H200 machine that its image lacks
# (textual stack, nvitop, nvitop-exporter, gpustat, blessed, py-spy ...). The image has python3.12, torch,
# nvidia-ml-py, psutil, prometheus-client, requests, aiohttp, rich, pyyaml. One version of each; the list
# with versions is benchmarks/WHEELS.txt. Run from anywhere; needs pip and PyPI.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DEST="$ROOT/.whl"
PY="${PYTHON:-python3}"
mkdir -p "$DEST"
grep -qx '/.whl/' "$ROOT/.git/info/exclude" 2>/dev/null || echo '/.whl/' >>"$ROOT/.git/info/exclude"
PLAT=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
      --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform manylinux_2_5_x86_64)
mapfile -t WANT < <(grep -v '^#' "$ROOT/benchmarks/WHEELS.txt" | awk 'NF {print $1}')
for spec in "${WANT[@]}"; do
  name="${spec%%==*}"
  if [ "$name" = gpustat ]; then
    # gpustat is published as an sdist only: build its (pure-Python) wheel here.
    tmp="$(mktemp -d)"
    "$PY" -m pip download -q --no-deps --no-binary=:all: -d "$tmp" "$spec"
    "$PY" -m pip wheel -q --no-deps -w "$DEST" "$tmp"/gpustat-*.tar.gz
    rm -rf "$tmp"
  else
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      "${PLAT[@]}" -d "$DEST" "$spec"
  fi
done
echo "$(ls "$DEST"/*.whl | wc -l) wheels, $(du -sh "$DEST" | cut -f1) in $DEST"
