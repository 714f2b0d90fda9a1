"""Fault variants about where a GPU process's threads spend their time: Python threads sharing the GIL,
an oversubscribed host, a server that simply has no work, and the GPU loop on a thread that is not main.
The server's requests come from a load generator outside its process tree (``loadgen``), as a client's do in
production: a client it started, or a thread of its own making up requests, would be work from its own tree.

Each is structurally different from its siblings (threads vs a pool vs processes; the GPU loop on the main
thread or another; FP32 or BF16), so that the doctor is judged on the mechanism, not on one script.
"""

from __future__ import annotations

import json
import os
import queue
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from gpuwatch.workload import loadgen
from gpuwatch.workload.fault_loop import Loop, Ready, sync

TEXT = "the quick brown fox jumps over the lazy dog " * 120


def tokenise(text: str, rounds: int = 6) -> list[int]:
    """Python work that holds the GIL: a few milliseconds per call, like a real tokenizer's pre-pass."""
    return [hash(tok) % 4096 for tok in text.split() for _ in range(rounds)][:4096]


def _batch(torch: Any, dev: Any, ids: list[int], dtype: Any) -> Any:
    return torch.tensor(ids + [0] * (4096 - len(ids)), device=dev, dtype=dtype).reshape(64, 64).repeat(1, 64)


# -- GIL contention -------------------------------------------------------------------------------------

def gil_threads(torch: Any, dev: Any, duration: float, on_ready: Ready, threads: int = 4) -> int:
    """``threads`` Python threads tokenise into a queue; the main thread only batches and launches."""
    w = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    items: queue.Queue[list[int]] = queue.Queue(maxsize=4)
    stop = threading.Event()

    def produce() -> None:
        while not stop.is_set():
            ids = tokenise(TEXT * 3)
            while not stop.is_set():
                try:
                    items.put(ids, timeout=0.1)
                    break
                except queue.Full:
                    continue

    workers = [threading.Thread(target=produce, daemon=True) for _ in range(threads)]
    for t in workers:
        t.start()
    loop = Loop(duration, on_ready)
    for _ in loop:
        (_batch(torch, dev, items.get(), torch.bfloat16) @ w).sum().item()
    stop.set()
    return loop.count


def gil_pool(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """Each batch is tokenised by a pool of 8 threads (``ThreadPoolExecutor.map``), FP32 compute."""
    w = torch.randn(4096, 4096, device=dev)
    chunks = [TEXT] * 16
    loop = Loop(duration, on_ready)
    with ThreadPoolExecutor(8) as pool:
        for _ in loop:
            ids = [i for part in pool.map(tokenise, chunks) for i in part][:4096]
            (_batch(torch, dev, ids, torch.float32) @ w).sum().item()
    return loop.count


def gil_json_thread(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """Two threads parse JSON requests (C code that holds the GIL) for a GPU loop that runs on a third
    thread; the main thread only waits for it."""
    w = torch.randn(2048, 2048, device=dev, dtype=torch.bfloat16)
    body = json.dumps([{"id": i, "text": TEXT[:200], "ids": list(range(64))} for i in range(400)])
    items: queue.Queue[int] = queue.Queue(maxsize=4)
    stop = threading.Event()
    count = [0]

    def parse() -> None:
        while not stop.is_set():
            n = len(json.loads(body)) + sum(len(json.loads(body)) for _ in range(2))
            try:
                items.put(n, timeout=0.1)
            except queue.Full:
                continue

    def gpu_loop() -> None:
        loop = Loop(duration, on_ready)
        for _ in loop:
            n = items.get()
            (torch.full((2048, 2048), float(n % 7), device=dev, dtype=torch.bfloat16) @ w).sum().item()
        count[0] = loop.count
        stop.set()

    threads = [threading.Thread(target=parse, daemon=True) for _ in range(2)]
    for t in threads:
        t.start()
    gpu = threading.Thread(target=gpu_loop)
    gpu.start()
    gpu.join()
    return count[0]


# -- the GPU loop on another thread, pegged -----------------------------------------------------------------

def input_cpu_thread(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """The serving loop runs on a worker thread that tokenises and launches; the main thread waits."""
    count = [0]

    def serve() -> None:
        w = torch.randn(4096, 4096, device=dev)
        loop = Loop(duration, on_ready)
        for _ in loop:
            (_batch(torch, dev, tokenise(TEXT * 4), torch.float32) @ w).sum().item()
        count[0] = loop.count

    t = threading.Thread(target=serve)
    t.start()
    t.join()
    return count[0]


def input_cpu_json(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """The main thread decodes JSON and builds features in Python per batch; FP16 compute."""
    w = torch.randn(1024, 1024, device=dev, dtype=torch.float16)
    body = json.dumps([{"id": i, "v": [i * 0.5] * 32} for i in range(2000)])
    loop = Loop(duration, on_ready)
    for _ in loop:
        rows = json.loads(body)
        feats = [sum(r["v"]) / (1 + r["id"]) for r in rows][:1024]
        x = torch.tensor(feats, device=dev, dtype=torch.float16).repeat(1024, 1)
        (x @ w).sum().item()
    return loop.count


# -- host CPU contention -----------------------------------------------------------------------------------

@contextmanager
def _neighbours(argv: list[str], count: int) -> Iterator[None]:
    """``count`` noisy neighbour processes for the duration of the block (killed after it)."""
    procs = [subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(count)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


BURN = [sys.executable, "-c", "while True: pass"]


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def host_burners(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """Two busy-looping processes per core beside a feeding loop that needs only part of a core."""
    w = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    with _neighbours(BURN, 2 * _cores()):
        loop = Loop(duration, on_ready)
        for _ in loop:
            ids = tokenise(TEXT, rounds=2)
            (_batch(torch, dev, ids, torch.bfloat16) @ w).sum().item()
            time.sleep(0.002)
    return loop.count


#: The neighbour: many Python threads, each running single-threaded CPU matmuls in a loop. A torch op releases
#: the GIL while it runs, so every thread is runnable in native code nearly all the time; one process with
#: ``torch.set_num_threads(3 * cores)`` did not oversubscribe the host (one matmul's OpenMP team finishes and
#: waits for the next: the H200 host read 68 % CPU and no run delay).
NATIVE_NEIGHBOUR = ("import sys, threading, torch\n"
                    "torch.set_num_threads(1)\n"
                    "def burn():\n"
                    "    a = torch.randn(512, 512)\n"
                    "    while True:\n"
                    "        a @ a\n"
                    "for _ in range(int(sys.argv[1])):\n"
                    "    threading.Thread(target=burn, daemon=True).start()\n"
                    "print('up', flush=True)\n"
                    "threading.Event().wait()\n")


def host_native_neighbour(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """A neighbour process keeping three runnable threads per core in native code (CPU matmuls, each thread
    single-threaded, the GIL released while they run), beside an FP32 feeding loop."""
    argv = [sys.executable, "-c", NATIVE_NEIGHBOUR, str(3 * _cores())]
    w = torch.randn(4096, 4096, device=dev)
    with _neighbours(argv, 1):
        time.sleep(2.0)  # torch imported and its threads up
        loop = Loop(duration, on_ready)
        for _ in loop:
            ids = tokenise(TEXT, rounds=2)
            (_batch(torch, dev, ids, torch.float32) @ w).sum().item()
    return loop.count


def host_worker_storm(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """The feeding process's own worker pool at three processes per core (num_workers set far past the
    cores), each busy, while its main thread batches for the GPU."""
    import multiprocessing as mp

    w = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    ctx = mp.get_context("spawn")
    with ctx.Pool(3 * _cores()) as pool:
        results = pool.imap(_heavy_item, range(1 << 30), chunksize=1)
        next(results)
        loop = Loop(duration, on_ready)
        for _ in loop:
            ids = [next(results) for _ in range(4)]
            (_batch(torch, dev, tokenise(TEXT, rounds=1)[:2048] + ids, torch.bfloat16) @ w).sum().item()
        pool.terminate()
    return loop.count


def _heavy_item(i: int) -> int:
    acc = 0
    for k in range(400_000):
        acc += (k * i) % 7
    return acc % 4096


# -- demand-bound: a server with no work ------------------------------------------------------------------

def _serve_step(torch: Any, x: Any, w: Any, steps: int) -> None:
    for _ in range(steps):
        x = torch.nn.functional.normalize(x @ w, dim=1)
    x.sum().item()


def demand_socket(torch: Any, dev: Any, duration: float, on_ready: Ready, size: int = 8192) -> int:
    """A server blocked in ``recv`` on a UDP socket; a load generator outside its process tree (detached, no
    child of it) sends ~60 requests a second (Poisson), each a few milliseconds of BF16 work."""
    w = torch.randn(size, size, device=dev, dtype=torch.bfloat16)
    x = torch.randn(size, size, device=dev, dtype=torch.bfloat16)
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server.bind(("127.0.0.1", 0))
    client = loadgen.start("udp", server.getsockname()[1], "poisson:60", duration + 60)
    try:
        server.settimeout(1.0)
        loop = Loop(duration, on_ready)
        for _ in loop:
            try:
                server.recv(64)
            except TimeoutError:
                continue
            _serve_step(torch, x, w, 4)
    finally:
        server.close()
        loadgen.finish(client)
    return loop.count


def demand_queue(torch: Any, dev: Any, duration: float, on_ready: Ready, size: int = 8192) -> int:
    """The classic web thread -> GPU worker handoff: a listener thread reads requests (~15 a second, Poisson)
    from a TCP connection that a load generator outside the process tree opened, and puts each into a queue;
    the GPU loop waits on that queue (a futex); FP16 work."""
    w = torch.randn(size, size, device=dev, dtype=torch.float16)
    x = torch.randn(size, size, device=dev, dtype=torch.float16)
    requests: queue.Queue[int] = queue.Queue()
    with loadgen.front_door() as listener:
        client = loadgen.start("tcp", listener.getsockname()[1], "poisson:15", duration + 60)
        conn, _ = listener.accept()

        def listen() -> None:
            while True:
                try:
                    data = conn.recv(4096)
                except OSError:
                    return
                if not data:
                    return
                for _ in data:
                    requests.put(1)

        threading.Thread(target=listen, daemon=True).start()
        try:
            loop = Loop(duration, on_ready)
            for _ in loop:
                try:
                    requests.get(timeout=1.0)
                except queue.Empty:
                    continue
                _serve_step(torch, x, w, 6)
        finally:
            loadgen.hang_up(conn)
            loadgen.finish(client)
    return loop.count


def demand_bursty(torch: Any, dev: Any, duration: float, on_ready: Ready, size: int = 8192) -> int:
    """Traffic in bursts: a load generator outside the process tree sends a burst of 40 requests every 1.5 s
    on a TCP connection the server accepted; they are served back to back, then the server waits in
    ``select`` until the next one."""
    w = torch.randn(size, size, device=dev, dtype=torch.bfloat16)
    x = torch.randn(size, size, device=dev, dtype=torch.bfloat16)
    with loadgen.front_door() as listener:
        client = loadgen.start("tcp", listener.getsockname()[1], "bursts:40:1.5", duration + 60)
        conn, _ = listener.accept()
        try:
            loop = Loop(duration, on_ready)
            for _ in loop:
                ready, _, _ = select.select([conn], [], [], 1.0)
                if not ready:
                    continue
                data = conn.recv(4096)
                if not data:
                    break  # the generator is gone
                for _ in data:
                    _serve_step(torch, x, w, 4)
        finally:
            loadgen.hang_up(conn)
            loadgen.finish(client)
    return loop.count


BODIES: dict[str, Callable[[Any, Any, float, Ready], int]] = {
    "gil_threads": gil_threads, "gil_pool": gil_pool, "gil_json_thread": gil_json_thread,
    "input_cpu_thread": input_cpu_thread, "input_cpu_json": input_cpu_json,
    "host_burners": host_burners, "host_native_neighbour": host_native_neighbour,
    "host_worker_storm": host_worker_storm,
    "demand_socket": demand_socket, "demand_queue": demand_queue, "demand_bursty": demand_bursty,
}

__all__ = ["BODIES", "sync"]
