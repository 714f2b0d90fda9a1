"""One GPU load process for the tick benchmark: holds GPU memory and launches kernels, lightly on the CPU.

Run as ``python3 load_worker.py SECONDS [MIB]``. It keeps ``MIB`` of device memory, runs a burst of bf16
matrix products, waits for them, then sleeps a little, so NVML sees a busy compute process while the
host CPU stays mostly free for the processes being measured. Exits after SECONDS or on SIGTERM.
"""

from __future__ import annotations

import signal
import sys
import time


def main(argv: list[str]) -> int:
    import torch

    seconds = float(argv[1]) if len(argv) > 1 else 600.0
    mib = int(argv[2]) if len(argv) > 2 else 1024
    stop = False

    def on_term(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    dev = torch.device("cuda")
    hold = torch.empty(mib * 2**20, dtype=torch.uint8, device=dev)  # noqa: F841 - held on purpose
    a = torch.randn(2048, 2048, dtype=torch.bfloat16, device=dev)
    b = torch.randn(2048, 2048, dtype=torch.bfloat16, device=dev)
    done = torch.cuda.Event(blocking=True)  # a blocking event sleeps in the driver instead of spinning a core
    print("ready", flush=True)
    end = time.monotonic() + seconds
    while not stop and time.monotonic() < end:
        for _ in range(20):
            a = (a @ b).clamp_(-1, 1)
        done.record()
        done.synchronize()
        time.sleep(0.01)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
