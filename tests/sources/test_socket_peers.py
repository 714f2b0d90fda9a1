"""A feeder outside the process tree, found at the other end of a loopback TCP connection, with real processes:
a detached feature service (not a child, not a sibling) streams records to the GPU process over 127.0.0.1 or
::1, whichever end listens, and an IPv4 client of a dual-stack server (its end in /proc/net/tcp, the server's
in /proc/net/tcp6 as ``::ffff:127.0.0.1``) is matched too."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from gpuwatch.sources import netfds
from gpuwatch.sources.host import HostSource
from gpuwatch.sources.procfs import read_children
from tests.sources.test_host_feeders import PIPELINE, SLEEP_CHILD, _kill_tree, watch

#: The GPU process starts the peer detached (its intermediate parent exits at once, as a daemonised service
#: does), then either accepts the peer's connection or connects to the peer's listening socket, and reads what
#: the peer, spinning on a core between records, sends. It prints the peer's pid.
GPU_AND_PEER = """
import os, socket, sys
listen_host, connect_host, mode = sys.argv[1:4]
family = socket.AF_INET6 if ':' in listen_host else socket.AF_INET
r, w = os.pipe()
if mode == 'accept':
    srv = socket.socket(family); srv.bind((listen_host, 0)); srv.listen()
def feed(conn):
    conn.sendall(b'%d\\n' % os.getpid())
    while True:
        sum(i * i for i in range(200000))
        conn.sendall(b'x' * 64)
if os.fork() == 0:
    if os.fork():
        os._exit(0)
    os.setsid()
    if mode == 'accept':
        feed(socket.create_connection((connect_host, srv.getsockname()[1])))
    lst = socket.socket(family); lst.bind((listen_host, 0)); lst.listen()
    os.write(w, b'%d' % lst.getsockname()[1])
    feed(lst.accept()[0])
os.wait()
conn = srv.accept()[0] if mode == 'accept' else socket.create_connection((connect_host, int(os.read(r, 16))))
stream = conn.makefile('rb')
peer = int(stream.readline())
print('ready', flush=True)
print(peer, flush=True)
while stream.read(4096):
    pass
"""


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


V6 = pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback on this host")


@pytest.fixture
def gpu_and_peer() -> Iterator[Any]:
    started: list[tuple[subprocess.Popen[str], int]] = []

    def run(listen_host: str, connect_host: str, mode: str) -> tuple[int, int]:
        proc = subprocess.Popen([sys.executable, "-c", GPU_AND_PEER, listen_host, connect_host, mode],
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        peer = int(proc.stdout.readline())
        started.append((proc, peer))
        return proc.pid, peer

    yield run
    for proc, peer in started:
        for pid in (peer, *read_children(proc.pid)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.kill()
        proc.wait()


@pytest.mark.parametrize(("listen_host", "connect_host"), [
    ("127.0.0.1", "127.0.0.1"),
    pytest.param("::1", "::1", marks=V6),
    pytest.param("::", "127.0.0.1", marks=V6),  # a dual-stack server: its accepted end is ::ffff:127.0.0.1
])
def test_a_detached_peer_that_connected_to_the_gpu_process_is_its_feeder(gpu_and_peer: Any, listen_host: str,
                                                                         connect_host: str) -> None:
    gpu, peer = gpu_and_peer(listen_host, connect_host, "accept")
    assert peer not in read_children(gpu)
    details, feeders = watch(gpu)
    (found,) = [f for f in feeders if f.pid == peer]
    assert found.relation == "peer" and found.feeds == gpu, found
    assert found.cpu_percent is not None and found.cpu_percent > 5, found  # a spinner, read like any feeder
    assert details["upstream"] == "external", details  # it listens: the work comes from outside its tree


@pytest.mark.parametrize("host", ["127.0.0.1", pytest.param("::1", marks=V6)])
def test_a_detached_service_the_gpu_process_connected_to_is_its_feeder(gpu_and_peer: Any, host: str) -> None:
    gpu, peer = gpu_and_peer(host, host, "connect")
    _, feeders = watch(gpu)
    assert [f.relation for f in feeders if f.pid == peer] == ["peer"], feeders


def test_both_ends_of_a_dual_stack_connection_read_alike() -> None:
    """The kernel writes an IPv4 client's end in /proc/net/tcp and a dual-stack server's accepted end in
    /proc/net/tcp6 as ::ffff:127.0.0.1; read_inet writes both as IPv4, so each end mirrors the other."""
    if not _ipv6_loopback():
        pytest.skip("no IPv6 loopback on this host")
    with socket.socket(socket.AF_INET6) as srv:
        srv.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        srv.bind(("::", 0))
        srv.listen()
        with socket.create_connection(("127.0.0.1", srv.getsockname()[1])) as client:
            accepted, _ = srv.accept()
            with accepted:
                inodes = {os.fstat(s.fileno()).st_ino for s in (client, accepted)}
                rows = [r for r in netfds.read_inet(os.getpid(), None) if r.inode in inodes]
    assert len(rows) == 2 and {r.state for r in rows} == {netfds.TCP_ESTABLISHED}, rows
    a, b = rows
    assert (a.local, a.remote) == (b.remote, b.local), rows
    assert all(len(r.local) == len("0100007F:1F90") for r in rows), rows


def _settled_fds(pid: int, timeout: float = 10.0) -> None:
    """Until ``pid``'s fd numbers read the same three times 50 ms apart."""
    deadline = time.monotonic() + timeout
    seen: list[list[str]] = []
    while time.monotonic() < deadline:
        seen = [*seen[-2:], sorted(os.listdir(f"/proc/{pid}/fd"))]
        if len(seen) == 3 and seen[0] == seen[1] == seen[2]:
            return
        time.sleep(0.05)
    raise AssertionError(f"pid {pid}'s fds kept changing: {seen}")


def test_an_unchanged_fd_table_of_a_feeder_is_not_read_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A scan lists each tree process's fd numbers and reads their targets (one readlink each) only when they
    changed; the GPU process's own table is read every scan (a new connection may reuse an fd number)."""
    import gpuwatch.sources.host_feeders as feeders_module

    parent = subprocess.Popen([sys.executable, "-c", PIPELINE.format(child=SLEEP_CHILD)], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert parent.stdout is not None and parent.stdout.readline().strip() == "ready"
        (child,) = read_children(parent.pid)
        _settled_fds(child)  # the forked child closes its copy of the pipe's read end after the parent's "ready"
        reads: list[int] = []
        real = netfds.read_table
        monkeypatch.setattr(netfds, "read_table",
                            lambda pid, names, stable=frozenset(): reads.append(pid) or real(pid, names, stable))
        monkeypatch.setattr(feeders_module, "FEEDERS_EVERY_S", 0.0)
        monkeypatch.setattr(feeders_module, "FEEDERS_QUIET_EVERY_S", 0.0)
        source = HostSource()
        for _ in range(4):
            assert [f.pid for f in source.poll(0.0, [parent.pid]).feeders] == [child]  # a scan on every tick
        assert reads.count(child) == 1 and reads.count(parent.pid) == 4, reads
    finally:
        _kill_tree(parent)


def test_one_search_for_socket_holders_at_a_time_and_a_put_off_one_is_made_later(
        gpu_and_peer: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Finding a peer outside the tree reads every process's fd table: two GPU processes with new peers in
    one tick get one search; the other's is made at a later scan, and then both peers are known."""
    import gpuwatch.sources.host_feeders as feeders_module
    import gpuwatch.sources.socket_links as links_module

    pairs = [gpu_and_peer("127.0.0.1", "127.0.0.1", "accept") for _ in range(2)]
    searches: list[frozenset[int]] = []
    real = netfds.find_holders
    monkeypatch.setattr(netfds, "find_holders", lambda inodes, *a: searches.append(inodes) or real(inodes, *a))
    monkeypatch.setattr(feeders_module, "FEEDERS_EVERY_S", 0.0)
    monkeypatch.setattr(feeders_module, "FEEDERS_QUIET_EVERY_S", 0.0)
    monkeypatch.setattr(links_module, "SEARCH_EVERY_S", 0.5)
    monkeypatch.setattr(links_module, "SOCKETS_CHANGED_EVERY_S", 0.5)
    source = HostSource()
    gpus = [gpu for gpu, _ in pairs]
    first = source.poll(0.0, gpus).feeders
    source.poll(0.0, gpus)
    assert len(searches) == 1 and len([f for f in first if f.relation == "peer"]) == 1, (searches, first)
    time.sleep(0.6)
    found = {(f.feeds, f.pid) for f in source.poll(0.0, gpus).feeders if f.relation == "peer"}
    assert found == set(pairs) and len(searches) == 2, (found, searches)


LISTENER = """
import os, socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.bind("\\0" + sys.argv[1].format(pid=os.getpid()))
s.listen(1)
print('ready', flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize(("name", "upstream"), [
    ("cuda-uvmfd-4026531836-{pid}", "tree"),  # libcuda's own, in every CUDA process: no front door
    ("tmp/nccl-socket-0-{pid}", "tree"),  # NCCL's bootstrap
    ("inference-frontend-{pid}", "external"),  # a unix server: work comes in through it
])
def test_a_unix_socket_a_gpu_library_listens_on_is_not_a_server(name: str, upstream: str) -> None:
    proc = subprocess.Popen([sys.executable, "-c", LISTENER, name], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        fds = netfds.read_fds(proc.pid)
        assert fds is not None and len(fds.sockets) == 1
        assert netfds.read_unix_listening(proc.pid, fds.sockets) == (upstream == "external")
        details, _ = watch(proc.pid)
        assert details["upstream"] == upstream, details
    finally:
        proc.kill()
        proc.wait()


REUSER = """
import os, socket, sys
devices = [os.open('/dev/null', os.O_RDONLY) for _ in range(3)]
first = socket.socket(socket.AF_UNIX)
print(first.fileno(), first.getsockname() or '', flush=True)
sys.stdin.readline()
number = first.fileno()
first.close()
second = socket.socket(socket.AF_UNIX)  # the lowest free number: the closed socket's
assert second.fileno() == number
print('reused', flush=True)
sys.stdin.readline()
"""


def test_a_gpu_process_s_own_table_sees_a_socket_that_reused_an_fd_number_while_devices_are_not_read_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A GPU process's own fd table is read every scan, but an fd still open that pointed at a device node
    (most of a CUDA process's fds) is not read again until FD_STABLE_MAX_AGE_S has passed."""
    from gpuwatch.sources.socket_links import FD_STABLE_MAX_AGE_S, SocketLinks

    proc = subprocess.Popen([sys.executable, "-c", REUSER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdin is not None
        number = proc.stdout.readline().split()[0]
        links = SocketLinks()
        first = links.fds(proc.pid, 0.0, own=True)
        assert first is not None and len(first.sockets) == 1
        read: list[str] = []
        real = os.readlink
        monkeypatch.setattr(os, "readlink", lambda path: read.append(path.rsplit("/", 1)[-1]) or real(path))
        proc.stdin.write("\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "reused"
        second = links.fds(proc.pid, 1.0, own=True)
        assert second is not None and len(second.sockets) == 1 and second.sockets != first.sockets
        assert number in read  # the fd number a socket held is read again
        devices = [n for n in os.listdir(f"/proc/{proc.pid}/fd") if real(f"/proc/{proc.pid}/fd/{n}") == "/dev/null"]
        assert len(devices) >= 3 and not set(devices) & set(read), (devices, read)
        read.clear()
        links.fds(proc.pid, 1.0 + FD_STABLE_MAX_AGE_S, own=True)
        assert set(devices) <= set(read)  # and every fd, now and then
    finally:
        proc.kill()
        proc.wait()


def test_a_feeder_table_read_at_this_tick_is_not_listed_again_for_the_next_gpu_process(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two GPU processes of one parent share their siblings: a sibling's table is listed once per tick."""
    from gpuwatch.sources.socket_links import SocketLinks

    listed: list[int] = []
    real = netfds.fd_names
    monkeypatch.setattr(netfds, "fd_names", lambda pid: listed.append(pid) or real(pid))
    links = SocketLinks()
    me = os.getpid()
    assert links.fds(me, 5.0) == links.fds(me, 5.0)
    assert listed == [me]
    links.fds(me, 6.0)
    assert listed == [me, me]
