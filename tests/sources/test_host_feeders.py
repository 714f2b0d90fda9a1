"""Follow the wait, with real processes: a GPU process (here: any process the host source is told is on a GPU)
that waits on a pipe or a socket has its feeders found and read, and where its work comes from is told."""

from __future__ import annotations

import itertools
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from gpuwatch.model.feeders import FeederSample
from gpuwatch.sources import netfds
from gpuwatch.sources.host import HostSource
from gpuwatch.sources.host_feeders import waiting
from gpuwatch.sources.procfs import read_children

#: The parent reads what its child writes into a pipe; the child's work is one of the bodies below.
PIPELINE = """
import os, sys, time
r, w = os.pipe()
if os.fork() == 0:
    os.close(r)
    {child}
    os._exit(0)
os.close(w)
print('ready', flush=True)
while os.read(r, 65536):
    pass
time.sleep(60)
"""
CPU_CHILD = """
    while True:
        s = sum(i * i for i in range(200000))
        os.write(w, b'x')"""
STORAGE_CHILD = """
    import tempfile
    fd, path = tempfile.mkstemp(dir=os.environ.get('FEED_DIR'))
    block = os.urandom(1 << 20)
    while True:
        os.pwrite(fd, block, 0)
        os.fsync(fd)
        os.write(w, b'x')"""
SLEEP_CHILD = """
    while True:
        time.sleep(0.5)
        os.write(w, b'x')"""


def _kill_tree(proc: subprocess.Popen[str]) -> None:
    for child in read_children(proc.pid):
        try:
            os.kill(child, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.kill()
    proc.wait()


@pytest.fixture
def start() -> Iterator[Any]:
    started: list[subprocess.Popen[str]] = []

    def run(code: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                                env={**os.environ, **(env or {})})
        started.append(proc)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        return proc

    yield run
    for proc in started:
        _kill_tree(proc)


def watch(pid: int, polls: int = 3) -> tuple[dict[str, Any], list[FeederSample]]:
    """Poll the host source as the sampler does, ``polls`` times 0.7 s apart; the last tick's reading."""
    source = HostSource()
    reading = source.poll(0.0, [pid])
    for _ in range(polls - 1):
        time.sleep(0.7)
        reading = source.poll(0.0, [pid])
    return reading.process_details[pid], list(reading.feeders)


def test_a_child_busy_on_a_core_is_found_at_the_other_end_of_the_pipe(start: Any) -> None:
    parent = start(PIPELINE.format(child=CPU_CHILD))
    details, feeders = watch(parent.pid)
    assert details["upstream"] == "tree", details
    (child,) = [f for f in feeders if f.relation == "child"]
    assert child.feeds == parent.pid
    assert child.relation == "child" and child.pid in read_children(parent.pid)
    # a spinner is always runnable; on a shared machine its share of a core is whatever it is given
    assert child.thread_waits == ("cpu",) and child.cpu_percent is not None and child.cpu_percent > 5, child
    assert child.cmdline and "-c" in child.cmdline and child.num_threads == 1


def test_a_child_writing_to_storage_shows_its_write_rate(start: Any, tmp_path: Any) -> None:
    parent = start(PIPELINE.format(child=STORAGE_CHILD), env={"FEED_DIR": str(tmp_path)})
    _, feeders = watch(parent.pid)
    (child,) = [f for f in feeders if f.relation == "child"]
    assert child.io_write_bytes_s is not None and child.io_write_bytes_s > 1e6, child  # ~1 MiB per fsync


def test_a_sleeping_child_is_read_as_asleep(start: Any) -> None:
    parent = start(PIPELINE.format(child=SLEEP_CHILD))
    _, feeders = watch(parent.pid)
    (child,) = [f for f in feeders if f.relation == "child"]
    assert child.cpu_percent is not None and child.cpu_percent < 10, child
    assert child.thread_waits == ("sleep",) or child.thread_waits == ("other",), child  # wchan may be hidden


TCP_SERVER = """
import socket, time
srv = socket.socket()
srv.bind(('127.0.0.1', 0))
srv.listen()
print('ready', flush=True)
print(srv.getsockname()[1], flush=True)
conn, _ = srv.accept()
while conn.recv(4096):
    pass
time.sleep(60)
"""
UDP_SERVER = """
import socket
srv = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
srv.bind(('127.0.0.1', 0))
print('ready', flush=True)
while True:
    srv.recv(4096)
"""
#: A launcher starts the server as its own child and waits: the test process, its client, is outside the
#: server's tree (neither its child, its sibling nor its parent).
LAUNCHER = """
import subprocess, sys
server = subprocess.Popen([sys.executable, '-c', {server!r}], stdout=subprocess.PIPE, text=True)
assert server.stdout.readline().strip() == 'ready'
print('ready', flush=True)
print(server.pid, flush=True)
print(server.stdout.readline().strip(), flush=True)
server.wait()
"""


TWO_PIPELINES = """
import subprocess, sys
procs = [subprocess.Popen([sys.executable, '-c', {pipeline!r}], stdout=subprocess.PIPE, text=True) for _ in range(2)]
for p in procs:
    assert p.stdout.readline().strip() == 'ready'
print('ready', flush=True)
for p in procs:
    print(p.pid, flush=True)
procs[0].wait()
"""


def test_a_tcp_server_with_a_client_outside_its_tree_has_external_work(start: Any) -> None:
    launcher = start(LAUNCHER.format(server=TCP_SERVER))
    assert launcher.stdout is not None
    server, port = int(launcher.stdout.readline()), int(launcher.stdout.readline())
    with socket.create_connection(("127.0.0.1", port)) as client:
        client.sendall(b"request")
        details, feeders = watch(server)
    assert details["upstream"] == "external", details
    assert all(f.pid != os.getpid() for f in feeders)  # the client is not a feeder of its tree


def test_a_udp_server_has_external_work(start: Any) -> None:
    parent = start(UDP_SERVER)
    details, _ = watch(parent.pid)
    assert details["upstream"] == "external", details


#: A TCP server whose one client is its own child: the requests come from inside its tree.
TCP_SERVER_OWN_CLIENT = """
import os, socket, time
srv = socket.socket()
srv.bind(('127.0.0.1', 0))
srv.listen()
port = srv.getsockname()[1]
if os.fork() == 0:
    srv.close()
    c = socket.create_connection(('127.0.0.1', port))
    while True:
        c.sendall(b'r')
        time.sleep(0.2)
conn, _ = srv.accept()
print('ready', flush=True)
while conn.recv(4096):
    pass
"""
#: A TCP server nobody has connected to yet: a front door, work may come from anywhere.
TCP_SERVER_NO_CLIENT = """
import socket
srv = socket.socket()
srv.bind(('127.0.0.1', 0))
srv.listen()
print('ready', flush=True)
srv.accept()
"""


def test_a_tcp_server_whose_only_client_is_its_own_child_is_fed_from_its_tree(start: Any) -> None:
    """Listening is no outside demand when every connection it accepted comes from its own descendant."""
    server = start(TCP_SERVER_OWN_CLIENT)
    details, feeders = watch(server.pid)
    assert details["upstream"] == "tree", details
    assert [f.relation for f in feeders] == ["child"], feeders


def test_a_tcp_server_with_no_client_yet_has_a_front_door(start: Any) -> None:
    details, feeders = watch(start(TCP_SERVER_NO_CLIENT).pid)
    assert details["upstream"] == "external", details
    assert feeders == []


#: A process that only sends datagrams (a metrics client): the kernel binds its socket on the first send.
UDP_SENDER = """
import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.sendto(b'metric:1|c', ('127.0.0.1', 9))
print('ready', flush=True)
while True:
    time.sleep(0.2)
    s.sendto(b'metric:1|c', ('127.0.0.1', 9))
"""


def test_a_udp_socket_that_only_sends_is_no_front_door(start: Any) -> None:
    details, _ = watch(start(UDP_SENDER).pid)
    assert details["upstream"] == "tree", details


def test_a_udp_socket_is_bound_to_receive_by_a_specific_address_or_a_port_outside_the_ephemeral_range() -> None:
    low, high = netfds.ephemeral_ports()
    assert netfds.bound_to_receive(f"0100007F:{low:04X}")  # 127.0.0.1, whatever the port
    assert netfds.bound_to_receive("00000000:1F90")  # 0.0.0.0:8080
    assert netfds.bound_to_receive("0" * 32 + ":0202")  # [::]:514
    assert not netfds.bound_to_receive(f"00000000:{high:04X}")  # what a first sendto gets
    assert not netfds.bound_to_receive("0" * 32 + f":{low:04X}")


def test_only_a_process_whose_busiest_thread_waits_is_followed() -> None:
    assert waiting({"top_thread_cpu_percent": 3.0}) and waiting({"cpu_percent": 10.0})
    assert not waiting({"top_thread_cpu_percent": 99.0}) and not waiting({})


#: A launcher starts a GPU process and three other programs: one writes into the pipe the GPU process reads,
#: one holds the same shared-memory segment, one shares nothing with it. Then it closes its own ends.
SIBLINGS = """
import os, subprocess, sys, time
shm = '/dev/shm/gpuwatch-test-' + str(os.getpid())
os.close(os.open(shm, os.O_CREAT | os.O_RDWR, 0o600))
r, w = os.pipe()
hold = "import os, sys, time\\nfd = os.open(sys.argv[1], os.O_RDWR) if sys.argv[1:] else None\\n" \\
       "print('ready', flush=True)\\ntime.sleep(60)"
wait = "import os, sys\\nfd = os.open(sys.argv[2], os.O_RDWR)\\nprint('ready', flush=True)\\n" \\
       "os.read(int(sys.argv[1]), 1)"
gpu = subprocess.Popen([sys.executable, '-c', wait, str(r), shm], pass_fds=(r,), stdout=subprocess.PIPE, text=True)
writer = subprocess.Popen([sys.executable, '-c', hold], pass_fds=(w,), stdout=subprocess.PIPE, text=True)
sharer = subprocess.Popen([sys.executable, '-c', hold, shm], stdout=subprocess.PIPE, text=True)
other = subprocess.Popen([sys.executable, '-c', hold], stdout=subprocess.PIPE, text=True)
os.close(r)
os.close(w)
for p in (gpu, writer, sharer, other):
    assert p.stdout.readline().strip() == 'ready'
os.unlink(shm)
print('ready', flush=True)
for p in (gpu, writer, sharer, other):
    print(p.pid, flush=True)
gpu.wait()
"""


def test_a_sibling_is_a_feeder_only_when_it_shares_a_pipe_or_shared_memory_with_the_gpu_process(start: Any) -> None:
    """A launcher's other programs are not the GPU process's feeders for being its siblings: the one writing
    into its pipe and the one holding its shared-memory segment are; the one sharing nothing is not (on a shared
    host or in a container, the launcher's other children are other tools)."""
    launcher = start(SIBLINGS)
    assert launcher.stdout is not None
    gpu, writer, sharer, other = (int(launcher.stdout.readline()) for _ in range(4))
    _, feeders = watch(gpu)
    # the launcher reads the GPU process's output: its parent, a peer
    assert {f.pid: f.relation for f in feeders} == {writer: "sibling", sharer: "sibling", launcher.pid: "peer"}, \
        feeders
    assert other not in {f.pid for f in feeders}


def test_a_shared_memory_segment_is_read_from_the_fd_table_and_links_like_a_pipe(tmp_path: Any) -> None:
    """An fd on /dev/shm is read at every whole read (it is under /dev/, where device nodes are read seldom)."""
    path = f"/dev/shm/gpuwatch-test-{os.getpid()}"
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        names = netfds.fd_names(os.getpid())
        assert names is not None
        fds, stable = netfds.read_table(os.getpid(), names)
        assert path in fds.shared and str(fd) not in stable
    finally:
        os.close(fd)
        os.unlink(path)


def test_gpuwatch_and_its_own_children_are_never_feeders_of_a_process_it_started() -> None:
    """``validate`` starts the workloads itself: their parent is gpuwatch, and its other children (py-spy,
    the next workload) are not their siblings."""
    first = subprocess.Popen([sys.executable, "-c", PIPELINE.format(child=SLEEP_CHILD)], stdout=subprocess.PIPE,
                             text=True)
    other = subprocess.Popen(["sleep", "30"])
    try:
        assert first.stdout is not None and first.stdout.readline().strip() == "ready"
        details, feeders = watch(first.pid)
        assert {f.pid for f in feeders} == set(read_children(first.pid)), feeders
        assert details["upstream"] == "tree"
    finally:
        other.kill()
        other.wait()
        _kill_tree(first)


#: A front end listens on TCP and hands requests to the GPU worker, its sibling, over a unix socket connected
#: by path (as ZeroMQ's ipc:// does): the worker's work comes from outside, through the front end.
FRONT_AND_WORKER = """
import os, socket, subprocess, sys, tempfile, time
path = os.path.join(tempfile.mkdtemp(), 'engine.sock')
worker = subprocess.Popen([sys.executable, '-c', '''
import socket, sys, time
srv = socket.socket(socket.AF_UNIX)
srv.bind(sys.argv[1]); srv.listen(); print('ready', flush=True)
conn, _ = srv.accept()
print('accepted', flush=True)
while conn.recv(4096): pass
time.sleep(60)
''', path], stdout=subprocess.PIPE, text=True)
assert worker.stdout.readline().strip() == 'ready'
front = subprocess.Popen([sys.executable, '-c', '''
import socket, sys, time
engine = socket.socket(socket.AF_UNIX); engine.connect(sys.argv[1])
api = socket.socket(); api.bind(("127.0.0.1", 0)); api.listen()
print('ready', flush=True)
time.sleep(60)
''', path], stdout=subprocess.PIPE, text=True)
assert front.stdout.readline().strip() == 'ready'
assert worker.stdout.readline().strip() == 'accepted'  # connected on both ends: not still in the backlog
print('ready', flush=True)
print(worker.pid, flush=True)
print(front.pid, flush=True)
worker.wait()
"""


def test_a_worker_fed_through_a_unix_socket_by_a_listening_front_end_has_external_work(start: Any) -> None:
    launcher = start(FRONT_AND_WORKER)
    assert launcher.stdout is not None
    worker, front = int(launcher.stdout.readline()), int(launcher.stdout.readline())
    details, feeders = watch(worker)
    assert details["upstream"] == "external", details
    assert [f.relation for f in feeders if f.pid == front] == ["sibling"], feeders


#: A launcher that listens (a rendezvous store, say) and reads its worker's output through a pipe.
LISTENING_LAUNCHER = """
import socket, subprocess, sys
keep = socket.socket(); keep.bind(('127.0.0.1', 0)); keep.listen()
worker = subprocess.Popen([sys.executable, '-c', {worker!r}], stdout=subprocess.PIPE, text=True)
assert worker.stdout.readline().strip() == 'ready'
print('ready', flush=True)
print(worker.pid, flush=True)
worker.wait()
"""


def test_a_launcher_that_only_reads_the_output_is_no_front_end(start: Any) -> None:
    launcher = start(LISTENING_LAUNCHER.format(worker=PIPELINE.format(child=SLEEP_CHILD)))
    assert launcher.stdout is not None
    worker = int(launcher.stdout.readline())
    details, feeders = watch(worker)
    assert details["upstream"] == "tree", details
    assert any(f.pid == launcher.pid and f.relation == "peer" for f in feeders), feeders  # linked by the pipe


def test_a_feeder_is_read_at_most_every_few_seconds_and_held_between(start: Any,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import gpuwatch.sources.host_feeders as feeders_module

    parent = start(PIPELINE.format(child=SLEEP_CHILD))
    (child,) = read_children(parent.pid)
    reads: list[int] = []
    real = feeders_module.read_process_stat
    monkeypatch.setattr(feeders_module, "read_process_stat", lambda pid: reads.append(pid) or real(pid))
    source = HostSource()
    samples = []
    for _ in range(8):
        samples += [f for f in source.poll(0.0, [parent.pid]).feeders if f.pid == child]
        time.sleep(0.25)
    assert len(samples) >= 6  # on every tick once found
    # the first read sets the baseline, the second gives rates; then one read per FEEDER_READ_EVERY_S
    assert reads.count(child) <= 2 + 8 * 0.25 / feeders_module.FEEDER_READ_EVERY_S + 1
    rated = [f for f in samples if f.cpu_percent is not None]
    assert any(a == b for a, b in itertools.pairwise(rated)), samples  # held between reads


@pytest.mark.parametrize(("wait", "fed"), [("sleep", False), ("gpu", False), ("cpu", False), ("input", True),
                                           ("lock", True)])
def test_the_feeders_of_a_gpu_process_that_waits_on_no_feeder_are_read_seldom_and_still_listed_every_tick(
        start: Any, monkeypatch: pytest.MonkeyPatch, wait: str, fed: bool) -> None:
    """A GPU process whose busiest thread sleeps in a timer, waits on the GPU or runs waits for no feeder:
    its feeders are read every FEEDER_QUIET_READ_EVERY_S; one waiting on input or a lock has them read every
    FEEDER_READ_EVERY_S. Both list the feeder on every tick."""
    import gpuwatch.sources.host_feeders as feeders_module

    parent = start(PIPELINE.format(child=SLEEP_CHILD))
    (child,) = read_children(parent.pid)
    reads: list[int] = []
    real = feeders_module.read_process_stat
    monkeypatch.setattr(feeders_module, "read_process_stat", lambda pid: reads.append(pid) or real(pid))
    tracker = feeders_module.FeederTracker()
    details = {parent.pid: {"top_thread_cpu_percent": 0.0, "thread_waits": (wait,), "ppid": os.getppid()}}
    span = 4 * feeders_module.FEEDER_QUIET_READ_EVERY_S
    ticks = [float(t) for t in range(int(span) + 1)]
    listed = [any(f.pid == child for f in tracker.poll(1000.0 + t, details)[0]) for t in ticks]
    assert all(listed[1:]), listed  # from the tick that gave it rates on
    every = feeders_module.FEEDER_READ_EVERY_S if fed else feeders_module.FEEDER_QUIET_READ_EVERY_S
    # the first read sets the baseline, the second gives rates; then one read per cadence
    assert 1 + span / every <= reads.count(child) <= 2 + span / every, (wait, reads.count(child))


def test_a_gpu_process_that_waited_on_input_a_moment_ago_keeps_its_feeders_read_at_the_fine_pace(
        start: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """One tick waiting on input holds the fine pace for FEEDER_QUIET_READ_EVERY_S, whatever the ticks after
    say (the busiest thread's wait sampled at one instant flickers between running and waiting)."""
    import gpuwatch.sources.host_feeders as feeders_module

    parent = start(PIPELINE.format(child=SLEEP_CHILD))
    (child,) = read_children(parent.pid)
    reads: list[float] = []
    real = feeders_module.read_process_stat
    tracker = feeders_module.FeederTracker()
    now = 1000.0

    def counting(pid: int) -> Any:
        if pid == child:
            reads.append(now)
        return real(pid)

    monkeypatch.setattr(feeders_module, "read_process_stat", counting)
    hold = feeders_module.FEEDER_QUIET_READ_EVERY_S
    for t in range(int(3 * hold) + 1):
        now = 1000.0 + t
        wait = "input" if t in (0, 2 * hold) else "cpu"
        tracker.poll(now, {parent.pid: {"top_thread_cpu_percent": 10.0, "thread_waits": (wait,),
                                        "ppid": os.getppid()}})
    fine = feeders_module.FEEDER_READ_EVERY_S
    early = [r for r in reads if r <= 1000.0 + hold]
    assert len(early) >= 4 and all(b - a == fine for a, b in itertools.pairwise(early[1:])), reads  # [0]: baseline
    assert any(b - a >= hold for a, b in itertools.pairwise(reads)), reads  # quiet in between: the slow pace
    assert any(1000.0 + 2 * hold < r <= 1000.0 + 2 * hold + fine for r in reads), reads  # fine again at once


@pytest.mark.parametrize(("wait", "fed"), [("cpu", False), ("sleep", False), ("input", True)])
def test_the_links_of_a_gpu_process_that_waits_on_no_feeder_are_scanned_seldom(
        start: Any, monkeypatch: pytest.MonkeyPatch, wait: str, fed: bool) -> None:
    """The scan (every sibling's fd table) comes every FEEDERS_QUIET_EVERY_S while its busiest thread runs or
    sleeps, and so it does while it waits on input as long as nothing it could be linked by changed (checked
    every FEEDERS_EVERY_S: the next test); its feeders stay listed between."""
    import gpuwatch.sources.host_feeders as feeders_module

    parent = start(PIPELINE.format(child=SLEEP_CHILD))
    (child,) = read_children(parent.pid)
    scans: list[int] = []
    real = feeders_module.links
    monkeypatch.setattr(feeders_module, "links", lambda pid, *a: scans.append(pid) or real(pid, *a))
    tracker = feeders_module.FeederTracker()
    details = {parent.pid: {"top_thread_cpu_percent": 10.0, "thread_waits": (wait,), "ppid": os.getppid()}}
    span = 2 * feeders_module.FEEDERS_QUIET_EVERY_S
    listed = [any(f.pid == child for f in tracker.poll(1000.0 + t, details)[0]) for t in range(int(span))]
    assert all(listed), listed
    assert len(scans) == span / feeders_module.FEEDERS_QUIET_EVERY_S, (wait, fed, len(scans))


GROWER = """
import subprocess, sys
kids = []
print('ready', flush=True)
for line in sys.stdin:
    kids.append(subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']))
    print(kids[-1].pid, flush=True)
"""


@pytest.fixture
def grower() -> Iterator[tuple[int, Callable[[], int]]]:
    """A GPU process stand-in, and a call that has it start one more child (the child's pid)."""
    proc = subprocess.Popen([sys.executable, "-c", GROWER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdin is not None and proc.stdout is not None and proc.stdout.readline().strip() == "ready"

    def spawn() -> int:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("\n")
        proc.stdin.flush()
        child = int(proc.stdout.readline())
        time.sleep(0.3)  # the child's exec done: it is in /proc as the stand-in's child
        return child

    yield proc.pid, spawn
    _kill_tree(proc)


def _whole_scans(monkeypatch: pytest.MonkeyPatch, clock: list[float]) -> list[float]:
    """The times (``clock[0]`` at each call) the feeder tracker reads a GPU process's links whole."""
    import gpuwatch.sources.host_feeders as feeders_module

    scans: list[float] = []
    real = feeders_module.links
    monkeypatch.setattr(feeders_module, "links", lambda pid, *a: scans.append(clock[0]) or real(pid, *a))
    return scans


def test_a_waiting_gpu_process_whose_family_changed_is_scanned_again_within_feeders_every_s(
        grower: tuple[int, Callable[[], int]], monkeypatch: pytest.MonkeyPatch) -> None:
    """While a GPU process waits on input, its family and its own pipes and sockets are looked at every
    FEEDERS_EVERY_S; a new child (or a new pipe or socket) has its links read whole at that look, and the new
    child is a feeder from then on. Unchanged, the links are read whole only every FEEDERS_QUIET_EVERY_S."""
    import gpuwatch.sources.host_feeders as feeders_module

    pid, spawn = grower
    clock = [1000.0]
    scans = _whole_scans(monkeypatch, clock)
    tracker = feeders_module.FeederTracker()
    details = {pid: {"top_thread_cpu_percent": 1.0, "thread_waits": ("input",), "ppid": os.getpid()}}
    every = feeders_module.FEEDERS_EVERY_S
    child, found = 0, set()
    for t in range(int(4 * every)):
        clock[0] = 1000.0 + t
        if t == int(2 * every) + 1:
            child = spawn()
        found = {f.pid for f in tracker.poll(clock[0], details)[0]}
    assert scans == [1000.0, 1000.0 + 3 * every], scans  # the first, then the look after the child came
    assert child in found


def test_a_quiet_gpu_process_that_starts_waiting_on_a_feeder_has_its_links_read_again_at_once(
        grower: tuple[int, Callable[[], int]], monkeypatch: pytest.MonkeyPatch) -> None:
    """The slow pace costs nothing in reaction: a child started while the GPU process slept in a timer (no
    scan then) is found on the first tick its busiest thread waits on input, by a scan at that tick."""
    import gpuwatch.sources.host_feeders as feeders_module

    pid, spawn = grower
    clock = [1000.0]
    scans = _whole_scans(monkeypatch, clock)
    tracker = feeders_module.FeederTracker()
    child = 0
    for t in range(20):
        clock[0] = 1000.0 + t
        if t == 6:
            child = spawn()
        wait = "sleep" if t < 12 else "input"
        found = {f.pid for f in tracker.poll(clock[0], {pid: {"top_thread_cpu_percent": 10.0,
                                                              "thread_waits": (wait,), "ppid": os.getpid()}})[0]}
        if t == 12:
            assert child in found, found
    assert scans[:2] == [1000.0, 1012.0], scans


#: Two pipelines of one launcher writing their errors into one pipe the launcher keeps (as a container
#: runtime's log pipe is shared by every process it starts).
TWO_PIPELINES_ONE_LOG = (
    TWO_PIPELINES.replace("import subprocess, sys\n", "import os, subprocess, sys\nr, w = os.pipe()\n")
    .replace("stdout=subprocess.PIPE, text=True)", "stdout=subprocess.PIPE, stderr=w, text=True)"))


def test_a_sibling_that_shares_only_the_log_pipe_is_no_feeder_while_a_linked_child_is_read_finely(
        start: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A GPU process waiting on a lock has its child at the other end of its pipe read every
    FEEDER_READ_EVERY_S; a sibling its launcher also started, sharing nothing with it but the pipe both write
    their errors into, is neither listed nor read (on a shared host or in a container the launcher's other
    children are other tools)."""
    import gpuwatch.sources.host_feeders as feeders_module

    launcher = start(TWO_PIPELINES_ONE_LOG.format(pipeline=PIPELINE.format(child=SLEEP_CHILD)))
    assert launcher.stdout is not None
    first, second = int(launcher.stdout.readline()), int(launcher.stdout.readline())
    (child,) = read_children(first)
    reads: list[int] = []
    real = feeders_module.read_process_stat
    monkeypatch.setattr(feeders_module, "read_process_stat", lambda pid: reads.append(pid) or real(pid))
    tracker = feeders_module.FeederTracker()
    details = {first: {"top_thread_cpu_percent": 0.0, "thread_waits": ("lock",), "ppid": launcher.pid}}
    span = 2 * feeders_module.FEEDER_QUIET_READ_EVERY_S
    listed = [{f.pid: f.relation for f in tracker.poll(1000.0 + t, details)[0]} for t in range(int(span) + 1)]
    assert all(found.get(child) == "child" and second not in found for found in listed[1:]), listed
    fine = feeders_module.FEEDER_READ_EVERY_S
    assert 1 + span / fine <= reads.count(child) <= 2 + span / fine, reads.count(child)
    assert second not in reads
