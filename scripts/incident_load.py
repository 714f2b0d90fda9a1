"""The "GPU at 12 %" incident as a load, for making the bundled recording on a real GPU.

Two processes, like the incident's service: a *holder* that reserves most of the GPU memory up front
(a KV cache / allocator pool, ~75 % of the card) and a *server* that goes through the phases
  idle -> naive (Python preprocessing in the serving thread, one request at a time, FP32, eager)
       -> batched FP32 -> bf16 -> idle.
Run with: python3 scripts/incident_load.py --naive 345 --batched 45 --bf16 45 --idle 15
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import time


def holder(fraction: float, seconds: float) -> None:
    import torch

    free, total = torch.cuda.mem_get_info()
    n = int(total * fraction) - (total - free)
    block = torch.empty(max(n, 0), dtype=torch.uint8, device="cuda")
    block.fill_(1)
    torch.cuda.synchronize()
    time.sleep(seconds)
    del block


def _tokenize(text: str, vocab: int = 32000) -> list[int]:
    # Deliberately slow, pure-Python preprocessing held under the GIL, as in the incident.
    out = []
    for word in text.split():
        h = 0
        for ch in word:
            h = (h * 131 + ord(ch)) % 1_000_003
        out.append(h % vocab)
    return out


def server(idle: float, naive: float, batched: float, bf16: float) -> None:
    import torch
    import torch.nn as nn

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    d = 1024
    layer = nn.TransformerEncoderLayer(d, 16, 4 * d, batch_first=True)
    model = nn.TransformerEncoder(layer, 6).cuda().eval()
    emb = nn.Embedding(32000, d).cuda()
    words = ["lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit", "sed", "do"]
    time.sleep(idle)

    end = time.monotonic() + naive
    with torch.no_grad():
        while time.monotonic() < end:  # one request at a time, dynamic shape, a copy per request
            text = " ".join(random.choice(words) * random.randint(1, 40) for _ in range(random.randint(200, 600)))
            ids = _tokenize(text)[:192]
            x = torch.tensor(ids).unsqueeze(0).cuda()
            model(emb(x))
            torch.cuda.synchronize()

        end = time.monotonic() + batched
        xb = torch.randint(0, 32000, (64, 256), device="cuda")
        while time.monotonic() < end:  # batched FP32: busy GPU-Util, tensor cores idle
            model(emb(xb))
            torch.cuda.synchronize()

        end = time.monotonic() + bf16
        while time.monotonic() < end:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                model(emb(xb))
            torch.cuda.synchronize()
    time.sleep(idle)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--idle", type=float, default=15)
    ap.add_argument("--naive", type=float, default=345)
    ap.add_argument("--batched", type=float, default=45)
    ap.add_argument("--bf16", type=float, default=45)
    ap.add_argument("--hold", type=float, default=0.75, help="fraction of GPU memory the holder reserves")
    ap.add_argument("--role", choices=["server", "holder"], help=argparse.SUPPRESS)
    ap.add_argument("--seconds", type=float, default=0.0, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.role == "server":
        server(a.idle, a.naive, a.batched, a.bf16)
        return
    if a.role == "holder":
        holder(a.hold, a.seconds)
        return
    total = 2 * a.idle + a.naive + a.batched + a.bf16
    # Separate processes with readable command lines, as a real service's would be.
    me = [sys.executable, __file__]
    srv = subprocess.Popen([*me, "--role", "server", "--idle", str(a.idle), "--naive", str(a.naive),
                            "--batched", str(a.batched), "--bf16", str(a.bf16)])
    time.sleep(a.idle)
    # The holder starts with the naive phase and leaves with the server, as a real memory pool does.
    hold = subprocess.Popen([*me, "--role", "holder", "--hold", str(a.hold), "--seconds", str(total - 2 * a.idle)])
    print(f"phases: idle 0-{a.idle:g}s, naive {a.idle:g}-{a.idle + a.naive:g}s, batched fp32 "
          f"-{a.idle + a.naive + a.batched:g}s, bf16 -{total - a.idle:g}s, idle -{total:g}s", flush=True)
    srv.wait()
    hold.wait()


if __name__ == "__main__":
    main()
