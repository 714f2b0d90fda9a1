"""Fault variants where the GPU process waits on another process over a socket, in a way no variant showed
before: a network round trip per request, a log collector that drains slowly, a CPU collective.

- network, request/response: every item's features fetched over HTTP from a feature store on the same host
  (a detached process, no child of this one) that answers after 20 ms, as a store on another host would.
- network, back-pressure: each batch's debug log written to a TCP log collector (a detached process) that
  forwards it slower than it arrives, so the GPU loop blocks in send once the socket's buffer is full.
- collective: ``torch.distributed`` over gloo between this process (rank 0) and a CPU-only child (rank 1):
  a CPU-resident embedding gradient all-reduced every step, or the parameters broadcast from the child.

No torch at import: the peers run ``python -m gpuwatch.workload.fault_hidden_peers --peer KIND ...``.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from gpuwatch.workload.fault_loop import Loop, Ready

_MODULE = "gpuwatch.workload.fault_hidden_peers"


def _start_peer(kind: str, seconds: float) -> int:
    """Starts a detached peer (it forks and leaves its session: a peer, not a child) and returns its port."""
    out = subprocess.run([sys.executable, "-m", _MODULE, "--peer", kind, f"{seconds:g}"], capture_output=True,
                         text=True, timeout=60, check=True)
    return int(out.stdout.split()[0])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- network: a round trip per request ---------------------------------------------------------------------

def fetch_features(port: int, item: int) -> list[float]:
    """One item's features from the feature store: a new HTTP connection and a 20 ms round trip."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/features?item={item}", timeout=30) as reply:
        return [float(v) for v in reply.read().split()]


def http_feature_lookup(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """Each batch of four items looks their features up one by one over HTTP, then a GPU layer."""
    port = _start_peer("http", duration + 30)
    w = torch.randn(256, 1024, device=dev)
    fetch_features(port, 0)
    loop = Loop(duration, on_ready)
    for n in loop:
        batch = [fetch_features(port, 4 * n + k) for k in range(4)]
        (torch.tensor(batch, device=dev) @ w).sum().item()
    return loop.count


class _FeatureStore(BaseHTTPRequestHandler):
    last = time.monotonic()  # the last request's time: the store exits once nobody has asked for a while

    def do_GET(self) -> None:
        _FeatureStore.last = time.monotonic()
        time.sleep(0.02)  # the store's latency: a remote host's lookup and the network between
        body = " ".join(str((hash(self.path) + k) % 97 / 97) for k in range(256)).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


# -- network: a log collector that drains slowly -----------------------------------------------------------

def log_batch(log: logging.Logger, stats: list[float]) -> None:
    """The batch's debug record (its 4096 statistics) logged synchronously to the collector's socket."""
    log.info("batch stats %s", " ".join(f"{v:.6f}" for v in stats))


def log_socket_backpressure(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """Each step logs 45 KB of statistics to a TCP log collector that forwards 400 KB/s (BF16 compute)."""
    port = _start_peer("collector", duration + 30)
    conn = socket.create_connection(("127.0.0.1", port))
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 << 10)
    log = logging.getLogger(f"{_MODULE}.batches")
    log.propagate, log.level = False, logging.INFO
    log.addHandler(logging.StreamHandler(conn.makefile("w", buffering=1 << 16)))
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    w = torch.randn(4096, 4096, device=dev, dtype=dtype)
    x = torch.randn(16 if dev.type == "cuda" else 1, 4096, device=dev, dtype=dtype)  # light on a CPU too
    loop = Loop(duration, on_ready)
    try:
        for _ in loop:
            log_batch(log, (x @ w).float().mean(dim=0).cpu().tolist())
    finally:
        log.handlers.clear()
        conn.close()
    return loop.count


def _collect(conn: socket.socket) -> None:
    """Reads 4 KiB every 10 ms: it forwards each piece to a slow sink before it reads the next."""
    while conn.recv(4096):
        time.sleep(0.01)


# -- a collective over gloo --------------------------------------------------------------------------------

def _rank_child(kind: str, port: int, seconds: float) -> subprocess.Popen[bytes]:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}  # rank 1 works on the CPU only
    return subprocess.Popen([sys.executable, "-m", _MODULE, "--rank", kind, str(port), f"{seconds:g}"], env=env)


def _init_group(dist: Any, port: int, rank: int) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)


def _leave_group(dist: Any, child: subprocess.Popen[bytes]) -> None:
    """Rank 1 stopped and the group left, so that a later group in this process can form."""
    child.kill()
    child.wait()
    if dist.is_initialized():
        dist.destroy_process_group()


def sync_gradients(dist: Any, grads: Any) -> Any:
    """The step's CPU-resident embedding gradient summed across the two ranks over gloo, then averaged."""
    dist.all_reduce(grads)
    return grads.div_(2)


def gloo_allreduce_grads(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """A dense layer on the GPU and a 64 MiB embedding gradient on the CPU, all-reduced with a second rank
    (a CPU-only child) every step."""
    import torch.distributed as dist

    port = _free_port()
    child = _rank_child("allreduce", port, duration + 60)
    try:
        _init_group(dist, port, 0)
        grads = torch.zeros(16 << 20)
        w = torch.randn(1024, 1024, device=dev)
        sync_gradients(dist, grads)
        loop = Loop(duration, on_ready)
        for n in loop:
            (w @ w).sum().item()
            grads[n % grads.numel()] += 1.0
            sync_gradients(dist, grads)
    finally:
        _leave_group(dist, child)
    return loop.count


def pull_parameters(dist: Any, params: Any) -> Any:
    """The step's parameters received from the parameter server (rank 1) by a gloo broadcast."""
    dist.broadcast(params, src=1)
    return params


def gloo_broadcast_params(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """A CPU parameter server (rank 1, a child) broadcasts 64 MiB of parameters every step; rank 0 copies
    them to the GPU and runs an FP16 layer."""
    import torch.distributed as dist

    port = _free_port()
    child = _rank_child("broadcast", port, duration + 60)
    dtype = torch.float16 if dev.type == "cuda" else torch.float32
    try:
        _init_group(dist, port, 0)
        params = torch.empty(4096, 4096)
        x = torch.randn(64, 4096, device=dev, dtype=dtype)
        pull_parameters(dist, params)
        loop = Loop(duration, on_ready)
        for _ in loop:
            (x @ pull_parameters(dist, params).to(dev, dtype)).sum().item()
    finally:
        _leave_group(dist, child)
    return loop.count


def _rank_main(kind: str, port: int, seconds: float) -> None:
    """Rank 1: the same collective as rank 0, on the CPU, until rank 0 is gone or ``seconds`` have passed."""
    import torch
    import torch.distributed as dist

    _init_group(dist, port, 1)
    end = time.monotonic() + seconds
    if kind == "allreduce":
        grads = torch.zeros(16 << 20)
        while time.monotonic() < end:
            sync_gradients(dist, grads)
    else:
        params = torch.randn(4096, 4096)
        while time.monotonic() < end:
            params.add_(1e-3)  # the server's update between pulls
            dist.broadcast(params, src=1)


BODIES: dict[str, Callable[[Any, Any, float, Ready], int]] = {
    "http_feature_lookup": http_feature_lookup, "log_socket_backpressure": log_socket_backpressure,
    "gloo_allreduce_grads": gloo_allreduce_grads, "gloo_broadcast_params": gloo_broadcast_params,
}


def _peer_main(kind: str, seconds: float) -> None:
    """Detaches, listens on a free port, prints it (the starter's ``subprocess.run`` returns then) and serves
    for ``seconds``."""
    if os.fork():
        os._exit(0)
    os.setsid()
    if kind == "http":
        server = ThreadingHTTPServer(("127.0.0.1", 0), _FeatureStore)
        server.daemon_threads = True
        port = server.server_address[1]
    else:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)  # a short backlog: the writer blocks
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
    print(port, flush=True)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    if kind == "http":
        server.timeout = 1.0
        end = time.monotonic() + seconds
        while time.monotonic() < min(end, _FeatureStore.last + 10):
            server.handle_request()
    else:
        listener.settimeout(60)
        conn, _ = listener.accept()
        conn.settimeout(seconds)
        _collect(conn)


if __name__ == "__main__" and sys.argv[1:2] == ["--peer"]:
    try:
        _peer_main(sys.argv[2], float(sys.argv[3]))
    except (OSError, KeyboardInterrupt):
        pass
elif __name__ == "__main__" and sys.argv[1:2] == ["--rank"]:
    try:
        _rank_main(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    except (RuntimeError, KeyboardInterrupt):
        pass
