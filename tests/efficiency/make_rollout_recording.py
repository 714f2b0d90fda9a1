"""Make ``fixtures/rollout-slower.ndjson.gz``: a serving process replaced by a slower one, from real H200 samples.

The bundled recording (``gpuwatch/data/h200-incident.ndjson.gz``) holds one H200 serving the reference
workload naively (FP32, Python preprocessing in the serving thread) and later in BF16 with batching,
beside a process holding 75 % of the memory. Here the BF16 minutes come first, as the service that ran
healthy, then the GPU is empty for a few seconds (the old process exited), then the naive samples come
as the new version of the service: a new pid and a new command line, same user, same GPU, same memory
holder. Times are made contiguous at the recording's interval; every GPU and process value is as the
H200 recorded it. Run from the repository root:

    python tests/efficiency/make_rollout_recording.py
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from gpuwatch.data import bundled_recording
from gpuwatch.model.recording import RecordingHeader, RecordingWriter, iter_snapshots, read_header
from gpuwatch.model.snapshot import Snapshot

OUT = Path(__file__).parent / "fixtures" / "rollout-slower.ndjson.gz"
SERVER, HOLDER, NEW_SERVER = 558, 603, 9558
BEFORE_CMD = "/usr/bin/python3 serve.py --precision bf16 --batched"
AFTER_CMD = "/usr/bin/python3 serve.py --precision fp32"
HOLDER_CMD = "/usr/bin/python3 hold_memory.py --share 0.75"
IDLE, GAP, SLOW = 5, 3, 150


def relabel(snap: Snapshot, server_pid: int, server_cmd: str) -> Snapshot:
    procs = []
    for p in snap.processes:
        if p.pid == SERVER:
            procs.append(dataclasses.replace(p, pid=server_pid, ppid=1, cmdline=server_cmd))
        elif p.pid == HOLDER:
            procs.append(dataclasses.replace(p, ppid=1, cmdline=HOLDER_CMD))
    return dataclasses.replace(snap, processes=tuple(procs), stacks=(), feeders=())


def idle(snap: Snapshot) -> Snapshot:
    """The GPU with nobody on it: the bundled recording's last (idle) sample without its processes."""
    return dataclasses.replace(snap, processes=(), stacks=(), feeders=())


def main() -> None:
    src = bundled_recording()
    snaps = list(iter_snapshots(src))
    bf16 = [s for s in snaps if (s.gpus[0].tensor_active or 0.0) > 20.0 and len(s.processes) == 2]
    naive = [s for s in snaps[:340] if (s.gpus[0].sm_active or 0.0) > 5.0 and len(s.processes) == 2][:SLOW]
    rest = idle(snaps[-1])
    seq = ([rest] * IDLE + [relabel(s, SERVER, BEFORE_CMD) for s in bf16] + [rest] * GAP
           + [relabel(s, NEW_SERVER, AFTER_CMD) for s in naive] + [rest] * IDLE)
    header = read_header(src)
    t0 = header.created
    out = RecordingHeader(created=t0, interval_s=header.interval_s, hostname=header.hostname, description=(
        f"A rollout on one H200 (samples from the bundled incident recording): idle {IDLE} s; "
        f"'serve.py --precision bf16 --batched' healthy for {len(bf16)} s; the GPU empty {GAP} s; replaced by "
        f"the slower 'serve.py --precision fp32' (naive) for {len(naive)} s; idle {IDLE} s"),
        meta={"made_by": "tests/efficiency/make_rollout_recording.py"})
    with RecordingWriter(OUT, out) as w:
        for i, s in enumerate(seq):
            w.write(dataclasses.replace(s, time=t0 + i * header.interval_s, seq=i))
    print(f"{OUT}: {len(seq)} samples ({len(bf16)} before, {len(naive)} after)")


if __name__ == "__main__":
    main()
