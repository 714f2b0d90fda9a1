"""Fault variants where the GPU process waits on processes that feed it: children through a queue or a pipe,
or a peer on a local socket. Waiting is all the feeding thread shows; the cause is found by following the
wait to what it waits for (a lock held by another thread and a subprocess per batch: ``fault_waits``).

- feeder, storage: multiprocessing children that write and fsync every record, or a child reading a file at
  random offsets with its pages dropped, both feeding a GPU loop that waits for them.
- feeder, python: a child process spinning in Python behind a pipe, or a peer (not a descendant) computing in
  Python behind a TCP connection on 127.0.0.1.

No torch at import: the children run ``python -m gpuwatch.workload.fault_feeders --feeder KIND ...``.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

from gpuwatch.workload.fault_loop import Loop, Ready

CHUNK = 1 << 20


def _fault_dir() -> str | None:
    return os.environ.get("GPUWATCH_FAULT_DIR")


def consume(torch: Any, dev: Any, w: Any, values: list[float]) -> float:
    """The GPU's share of a batch: a few microseconds of work on what the feeder sent."""
    x = torch.tensor(values[:256] + [0.0] * (256 - len(values[:256])), device=dev)
    return float((x @ w).sum().item())


# -- feeders bound on storage ------------------------------------------------------------------------------

def write_through_storage(folder: str, out: Any, seed: int) -> None:
    """A child's loop: every record written and fsynced before it is read back and queued (a write-ahead log)."""
    record = bytearray(random.Random(seed).randbytes(4 * CHUNK))
    with tempfile.TemporaryFile(dir=folder) as f:
        for n in range(1 << 62):
            record[n % len(record)] = n & 255
            f.seek(0)
            f.write(record)
            f.flush()
            os.fsync(f.fileno())
            data = os.pread(f.fileno(), 4096, 0)
            out.put([b / 255 for b in data[:256]])


def feeder_fsync_procs(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """Three multiprocessing children fsync 4 MiB records into a queue the GPU loop reads."""
    ctx = mp.get_context("spawn")
    queue: Any = ctx.Queue(maxsize=64)
    procs = [ctx.Process(target=write_through_storage, args=(_fault_dir(), queue, k), daemon=True) for k in range(3)]
    w = torch.randn(256, 256, device=dev)
    with ExitStack() as stack:
        for p in procs:
            p.start()
            stack.callback(p.kill)
        queue.get(timeout=60)  # a child that cannot start fails the fault instead of hanging it
        loop = Loop(duration, on_ready)
        for _ in loop:
            consume(torch, dev, w, queue.get())
    return loop.count


def random_reads(path: str, out: Any) -> None:
    """A child's loop: 64 reads of 4 KiB at random offsets per record, each after the file's pages are dropped."""
    rng = random.Random(0)
    fd = os.open(path, os.O_RDONLY)
    size = os.fstat(fd).st_size
    while True:
        total = 0
        for _ in range(64):
            if hasattr(os, "posix_fadvise"):
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            total += sum(os.pread(fd, 4096, rng.randrange(0, size - 4096) & ~4095)[:8])
        out.write(f"{total}\n")
        out.flush()


def _child(kind: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "gpuwatch.workload.fault_feeders", "--feeder", kind, *args],
                            stdout=subprocess.PIPE, text=True)


def _lines(proc: subprocess.Popen[str]) -> Iterator[str]:
    assert proc.stdout is not None
    while line := proc.stdout.readline():
        yield line


def feeder_random_reads(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """A child process reads a 256 MiB file at random offsets, uncached, and sends one line per record."""
    dtype = torch.float16 if dev.type == "cuda" else torch.float32
    w = torch.randn(256, 256, device=dev, dtype=dtype)
    with tempfile.NamedTemporaryFile(dir=_fault_dir()) as f:
        for _ in range(256):
            f.write(os.urandom(CHUNK))
        f.flush()
        os.fsync(f.fileno())
        proc = _child("reads", f.name)
        try:
            lines = _lines(proc)
            next(lines)
            loop = Loop(duration, on_ready)
            for _ in loop:
                # a record's checksum reaches 130 560, past FP16's largest value: fold it into range
                x = torch.full((256,), float(int(next(lines)) % 1024), device=dev, dtype=dtype)
                (x @ w).sum().item()
        finally:
            proc.kill()
    return loop.count


# -- feeders bound on Python -------------------------------------------------------------------------------

def tokenise_records(n: int) -> list[float]:
    """Pure-Python work for one record: words hashed and counted into 256 buckets."""
    buckets = [0.0] * 256
    for k in range(n):
        word = f"token{k * 7919 % 10007}"
        buckets[hash(word) & 255] += 1.0
    return buckets


def _write_records(out: Any, size: int) -> None:
    while True:
        out.write(" ".join(f"{v:g}" for v in tokenise_records(size)) + "\n")
        out.flush()


def feeder_python_pipe(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """A child process tokenises in Python and writes each record to its stdout; the GPU loop reads the pipe."""
    w = torch.randn(256, 256, device=dev)
    proc = _child("tokens")
    try:
        lines = _lines(proc)
        next(lines)
        loop = Loop(duration, on_ready)
        for _ in loop:
            consume(torch, dev, w, [float(v) for v in next(lines).split()])
    finally:
        proc.kill()
    return loop.count


def featurize_in_python(conn: socket.socket, seconds: float) -> None:
    """The peer's loop: one record of Python feature work per line sent, until the connection closes."""
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            conn.sendall((" ".join(f"{v:g}" for v in tokenise_records(120_000)) + "\n").encode())
    except OSError:
        pass


def _peer(port: str, seconds: str) -> None:
    """Detach (the GPU process's peer, not its child), connect, and feed."""
    if os.fork():
        os._exit(0)
    os.setsid()
    featurize_in_python(socket.create_connection(("127.0.0.1", int(port))), float(seconds))


def feeder_socket_peer(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """A feature service on the same host (a detached process, no child of this one) computes in Python and
    streams records over a TCP connection this process accepted."""
    w = torch.randn(256, 256, device=dev)
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(60)  # a peer that never connects fails the fault instead of hanging it
        port = server.getsockname()[1]
        subprocess.run([sys.executable, "-m", "gpuwatch.workload.fault_feeders", "--feeder", "peer", str(port),
                        f"{duration + 10:g}"], check=True)
        conn, _ = server.accept()
        with conn, conn.makefile("r") as stream:
            stream.readline()
            loop = Loop(duration, on_ready)
            for _ in loop:
                consume(torch, dev, w, [float(v) for v in stream.readline().split()])
    return loop.count


BODIES: dict[str, Callable[[Any, Any, float, Ready], int]] = {
    "feeder_fsync_procs": feeder_fsync_procs, "feeder_random_reads": feeder_random_reads,
    "feeder_python_pipe": feeder_python_pipe, "feeder_socket_peer": feeder_socket_peer,
}


def _feeder_main(kind: str, args: list[str]) -> None:
    if kind == "reads":
        random_reads(args[0], sys.stdout)
    elif kind == "tokens":
        _write_records(sys.stdout, 150_000)
    elif kind == "peer":
        _peer(args[0], args[1])


if __name__ == "__main__" and sys.argv[1:2] == ["--feeder"]:
    try:
        _feeder_main(sys.argv[2], sys.argv[3:])
    except (BrokenPipeError, KeyboardInterrupt):
        pass
