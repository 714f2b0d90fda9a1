"""A process's pipes, sockets and shared memory, read from /proc: what the host source follows to find who feeds a
GPU process.

Both ends of a pipe show the same ``pipe:[inode]`` in ``/proc/PID/fd``, so two processes sharing one are
talking (as are two holding the same ``/dev/shm`` segment). A TCP connection is two sockets whose addresses
mirror each other in ``/proc/PID/net/tcp`` (the table of the process's network namespace); a listening socket
(state LISTEN) or a UDP socket bound to receive (not one the kernel bound on a first send) means work may come
from anywhere. Plain ``os`` calls, one read per file, as in :mod:`procfs`.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from functools import lru_cache

TCP_ESTABLISHED = "01"
TCP_LISTEN = "0A"
UDP_BOUND = "07"
#: A unix socket accepting connections (``__SO_ACCEPTCON`` in the Flags column of /proc/net/unix).
UNIX_ACCEPTCON = 0x10000
#: Unix sockets a GPU library listens on for itself, not a front door for work: libcuda's abstract
#: ``@cuda-uvmfd-NS-PID`` (it hands its UVM descriptor to CUDA IPC peers; every CUDA process has one) and
#: NCCL's bootstrap sockets (``@tmp/nccl-socket-RANK-HASH``).
LIBRARY_LISTENERS = ("@cuda-uvmfd-", "@tmp/nccl-")
#: At most this many fds of one process are read (a server with 100 000 sockets is not read whole).
MAX_FDS = 4096


@dataclass(frozen=True)
class Fds:
    """The inodes of one process's pipes and sockets, and the shared-memory files it holds open."""

    pipes: frozenset[int]
    sockets: frozenset[int]
    #: Paths under SHARED_MEMORY (``multiprocessing.shared_memory`` keeps its segment's fd open): two processes
    #: holding the same one exchange data through it, with no pipe or socket between them.
    shared: frozenset[str] = frozenset()


@dataclass(frozen=True)
class InetSocket:
    """One row of /proc/PID/net/{tcp,tcp6,udp,udp6}: addresses as the kernel writes them (hex ``ADDR:PORT``)."""

    local: str
    remote: str
    state: str
    inode: int
    udp: bool = False

    @property
    def local_port(self) -> str:
        return self.local.rsplit(":", 1)[-1]


def fd_names(pid: int) -> list[str] | None:
    """The fd numbers of ``pid`` (at most MAX_FDS), as ``/proc/PID/fd`` lists them (None: not readable)."""
    try:
        return os.listdir(f"/proc/{pid}/fd/")[:MAX_FDS]
    except OSError:
        return None


def read_fds(pid: int, names: list[str] | None = None) -> Fds | None:
    """Pipe and socket inodes and shared-memory paths of ``pid`` from ``/proc/PID/fd`` (None: not readable, or
    gone); ``names``: its fd numbers when already listed."""
    if names is None:
        names = fd_names(pid)
        if names is None:
            return None
    return read_table(pid, names)[0]


#: What an fd held for a process's life points at: a device node (``/dev/nvidia0``, ``/dev/null``) or an
#: anonymous inode (``anon_inode:[eventfd]``, an epoll set). A CUDA process holds dozens of these; they are
#: never a pipe or a socket, so an fd number that pointed at one and is still open is not read again.
STABLE_TARGETS = ("/dev/", "anon_inode:")
#: POSIX shared memory (``shm_open``): under /dev/ but a link between the processes holding it, so always read.
SHARED_MEMORY = "/dev/shm/"


def read_table(pid: int, names: list[str], stable: frozenset[str] = frozenset()) -> tuple[Fds, frozenset[str]]:
    """Pipe and socket inodes and shared-memory paths of ``pid``'s fds ``names``, without a readlink for those in
    ``stable`` (fd numbers known to point at a STABLE_TARGETS file), and the fd numbers among ``names`` that do."""
    base = f"/proc/{pid}/fd/"
    pipes: set[int] = set()
    sockets: set[int] = set()
    shared: set[str] = set()
    kept: list[str] = []
    for name in names:
        if name in stable:
            kept.append(name)
            continue
        try:
            target = os.readlink(base + name)
        except OSError:
            continue
        if target.endswith("]"):
            if target.startswith("pipe:["):
                pipes.add(int(target[6:-1]))
                continue
            if target.startswith("socket:["):
                sockets.add(int(target[8:-1]))
                continue
        if target.startswith(SHARED_MEMORY):
            shared.add(target)
        elif target.startswith(STABLE_TARGETS):
            kept.append(name)
    return Fds(frozenset(pipes), frozenset(sockets), frozenset(shared)), frozenset(kept)


def output_pipes(pid: int) -> frozenset[int]:
    """The pipes ``pid``'s standard output and error write into (fds 1 and 2). Every process a launcher or a
    container runtime starts inherits the same ones: sharing them is writing to one log, not feeding."""
    out: set[int] = set()
    for fd in ("1", "2"):
        try:
            st = os.stat(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if stat.S_ISFIFO(st.st_mode):
            out.add(st.st_ino)
    return frozenset(out)


def find_holders(inodes: frozenset[int], skip: set[int], max_procs: int) -> dict[int, int]:
    """For each of the socket ``inodes``, a process of this host that holds it (not one in ``skip``): reads
    the fd tables of up to ``max_procs`` processes, stopping once every inode is found."""
    found: dict[int, int] = {}
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return found
    for pid in pids[:max_procs]:
        if pid in skip:
            continue
        fds = read_fds(pid)
        if fds is None:
            continue
        for inode in fds.sockets & inodes:
            found.setdefault(inode, pid)
        if len(found) == len(inodes):
            break
    return found


def read_inet(pid: int, inodes: frozenset[int] | None) -> list[InetSocket]:
    """The TCP and UDP sockets (IPv4 and IPv6) of ``pid``'s network namespace whose inode is in ``inodes``
    (every one when None), plus every established TCP socket of that namespace (a loopback connection's other
    end is among them). An IPv4 address mapped into IPv6 (``::ffff:127.0.0.1``, an IPv4 client of a
    dual-stack server) is written as IPv4, so the two ends of one connection mirror each other."""
    out: list[InetSocket] = []
    for table in ("tcp", "tcp6", "udp", "udp6"):
        try:
            with open(f"/proc/{pid}/net/{table}", "rb") as f:
                lines = f.read().decode("ascii", "replace").splitlines()[1:]
        except OSError:
            continue
        udp, v6 = table.startswith("udp"), table.endswith("6")
        for line in lines:
            cols = line.split()
            if len(cols) < 10 or not cols[9].isdigit():
                continue
            inode = int(cols[9])
            if inodes is None or inode in inodes or (not udp and cols[3] == TCP_ESTABLISHED):
                local, remote = (_unmap(cols[1]), _unmap(cols[2])) if v6 else (cols[1], cols[2])
                out.append(InetSocket(local, remote, cols[3], inode, udp))
    return out


#: How /proc/net/tcp6 writes ``::ffff:a.b.c.d``: four 32-bit words in host order, the last one the IPv4 address.
_MAPPED = "0" * 16 + "FFFF0000"


def _unmap(address: str) -> str:
    """``ADDR:PORT`` of /proc/net/*6, with an IPv4-mapped address written as /proc/net/tcp writes IPv4."""
    return address[len(_MAPPED):] if address.upper().startswith(_MAPPED) and len(address) == 37 else address


def read_unix_listening(pid: int, inodes: frozenset[int]) -> int:
    """How many of ``inodes`` are unix sockets accepting connections (a local server's front door), not
    counting those a GPU library listens on for itself (:data:`LIBRARY_LISTENERS`)."""
    if not inodes:
        return 0
    try:
        with open(f"/proc/{pid}/net/unix", "rb") as f:
            lines = f.read().decode("ascii", "replace").splitlines()[1:]
    except OSError:
        return 0
    found = 0
    for line in lines:
        cols = line.split()
        try:
            if len(cols) >= 7 and int(cols[6]) in inodes and int(cols[3], 16) & UNIX_ACCEPTCON:
                found += not (len(cols) > 7 and cols[7].startswith(LIBRARY_LISTENERS))
        except ValueError:
            continue
    return found


def is_loopback(address: str) -> bool:
    """Whether a /proc/net ``ADDR:PORT`` names this host (127/8, ::1, ::ffff:127/8)."""
    host = address.rsplit(":", 1)[0].upper()
    if len(host) == 8:
        return host.endswith("7F")  # the first octet is the last byte in the kernel's little-endian hex
    return host == "0" * 24 + "01000000" or (host.startswith("0" * 16 + "FFFF0000") and host.endswith("7F"))


def is_unspecified(address: str) -> bool:
    return set(address.rsplit(":", 1)[0]) <= {"0"}


#: The kernel's default range of ephemeral ports (``net.ipv4.ip_local_port_range``), where it cannot be read.
EPHEMERAL_PORTS = (32768, 60999)


@lru_cache(maxsize=1)
def ephemeral_ports() -> tuple[int, int]:
    """The ports the kernel gives a socket that was not bound to one (read once)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", "rb") as f:
            low, high = (int(v) for v in f.read().split()[:2])
    except (OSError, ValueError):
        return EPHEMERAL_PORTS
    return low, high


def bound_to_receive(local: str) -> bool:
    """Whether an unconnected UDP socket's local ``ADDR:PORT`` says a server bound it to receive: a specific
    address, or a port outside the ephemeral range. A socket that only sends (a metrics client's ``sendto``) is
    bound by the kernel on its first datagram to the wildcard address and an ephemeral port: no front door."""
    low, high = ephemeral_ports()
    try:
        port = int(local.rsplit(":", 1)[-1], 16)
    except ValueError:
        return True
    return not is_unspecified(local) or not low <= port <= high


def read_comm(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/comm", "rb") as f:
            return f.read().decode("utf-8", "replace").strip() or None
    except OSError:
        return None


def read_cmdline(pid: int, limit: int = 1024) -> str | None:
    """The command line, arguments joined by spaces, at most ``limit`` characters."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read(limit * 4)
    except OSError:
        return None
    text = raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()
    return text[:limit] or None


def read_ppid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read(4096)
        return int(raw[raw.rfind(b")") + 2:].split()[1])
    except (OSError, ValueError, IndexError):
        return None


# -- unix socket peers (sock_diag) ----------------------------------------------------------------------------
# /proc/net/unix does not say which socket is at the other end of a connected unix socket; the kernel's
# sock_diag netlink interface does (what ``ss -xp`` reads): one dump request, one answer per socket.
NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
UDIAG_SHOW_PEER = 0x4
UNIX_DIAG_PEER = 2
_NLMSG_DONE, _NLMSG_ERROR = 3, 2
#: At most this many bytes of answers are read (a host with a million unix sockets is not read whole).
MAX_DIAG_BYTES = 8 << 20


def unix_peers(inodes: frozenset[int]) -> dict[int, int]:
    """For each of ``inodes`` that is a connected unix socket (of gpuwatch's network namespace), the inode
    of the socket at its other end; {} where sock_diag is not available."""
    import socket
    import struct

    if not inodes or not hasattr(socket, "AF_NETLINK"):
        return {}
    try:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG)
    except OSError:
        return {}
    found: dict[int, int] = {}
    try:
        sock.settimeout(1.0)
        # struct unix_diag_req: family, protocol, pad, states, ino, show, cookie[2]
        req = struct.pack("=BBHIIIII", socket.AF_UNIX, 0, 0, 0xFFFFFFFF, 0, UDIAG_SHOW_PEER, 0xFFFFFFFF, 0xFFFFFFFF)
        header = struct.pack("=IHHII", 16 + len(req), SOCK_DIAG_BY_FAMILY, 0x1 | 0x300, 1, 0)  # REQUEST|DUMP
        sock.sendall(header + req)
        read = 0
        while read < MAX_DIAG_BYTES:
            data = sock.recv(1 << 16)
            read += len(data)
            if not data or _parse_diag(data, inodes, found):
                break
    except OSError:
        return found
    finally:
        sock.close()
    return found


def _parse_diag(data: bytes, inodes: frozenset[int], found: dict[int, int]) -> bool:
    """Take in one recv of sock_diag answers; True at the end of the dump."""
    import struct

    offset = 0
    while offset + 16 <= len(data):
        length, kind = struct.unpack_from("=IH", data, offset)
        if length < 16 or kind in (_NLMSG_DONE, _NLMSG_ERROR):
            return True
        body = offset + 16
        if body + 16 <= len(data):
            inode = struct.unpack_from("=I", data, body + 4)[0]  # unix_diag_msg: family,type,state,pad,ino,...
            if inode in inodes:
                at = body + 16
                while at + 4 <= offset + length:
                    size, attr = struct.unpack_from("=HH", data, at)
                    if size < 4:
                        break
                    if attr == UNIX_DIAG_PEER and size >= 8:
                        found[inode] = struct.unpack_from("=I", data, at + 4)[0]
                    at += (size + 3) & ~3
        offset += (length + 3) & ~3
    return False
