"""Who is at the other end of a GPU process's sockets, and where its work comes from, at a small cost.

Reading ``/proc/net/tcp`` makes the kernel walk its connection table, and reading an fd table is one readlink per
fd: done for every waiting GPU process at every scan, they were a quarter of the daemon's time. So the fd table
of a tree process whose fd numbers have not changed is not read again (for up to FD_TABLE_MAX_AGE_S; the GPU
process's own is read at every scan, a new connection may reuse an fd number), and an fd that pointed at a device
or an anonymous inode (most of a CUDA process's) is read again only every FD_STABLE_MAX_AGE_S; a process's
sockets are classified again only when its socket inodes (or those of its front ends) changed, at most every
SOCKETS_CHANGED_EVERY_S, and otherwise every SOCKETS_EVERY_S; the /proc/net tables are read once per network
namespace for every process classified within TABLES_TTL_S; and the process holding the other end of a loopback
connection outside the tree is looked for in /proc only for an inode not looked for in the last OWNERS_EVERY_S,
in one search every SEARCH_EVERY_S at most.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from gpuwatch.model.feeders import Upstream
from gpuwatch.sources import netfds

FD_TABLE_MAX_AGE_S = 60.0
#: An fd number that pointed at a device node or an anonymous inode (``netfds.STABLE_TARGETS``: most of a CUDA
#: process's fds) and is still open is not read again for this long: such fds are held for a process's life,
#: and one closed and its number reused for a socket is seen at the next whole read at the latest.
FD_STABLE_MAX_AGE_S = 300.0
#: Where work comes from follows from the socket inodes alone (an inode is one socket for its whole life):
#: sockets that did not change are classified again only this seldom (reading /proc/net is the cost, and a
#: host with many short connections has long tables).
SOCKETS_EVERY_S = 300.0
#: Changed sockets (a connection accepted, a peer connected) are classified again this soon at most.
SOCKETS_CHANGED_EVERY_S = 10.0
TABLES_TTL_S = 1.0
OWNERS_EVERY_S = 30.0
#: A search reads every process's fd table: at most one this often, whatever the number of new connections
#: (a server accepting local clients all the time must not search every scan).
SEARCH_EVERY_S = 10.0
#: At most this many processes are read looking for the holder of a socket.
MAX_OWNER_PROCS = 8192
#: Socket holders remembered (a long-lived peer is not searched for again).
MAX_REMEMBERED = 1024


@dataclass(frozen=True)
class _Table:
    tag: int  # the hash of the fd numbers listed
    read_at: float
    whole_at: float  # when every fd was last read
    fds: netfds.Fds
    stable: frozenset[str]  # fd numbers that pointed at a STABLE_TARGETS file


@dataclass
class _Classified:
    key: frozenset[int]
    at: float
    upstream: Upstream
    peers: list[int]


class SocketLinks:
    """Caches between scans: fd tables, each GPU process's classification, the /proc/net tables of a
    namespace, and which process holds a socket inode."""

    def __init__(self) -> None:
        self._fds: dict[int, _Table] = {}
        self._classified: dict[int, _Classified] = {}
        self._tables: dict[str, tuple[float, list[netfds.InetSocket]]] = {}
        self._owners: dict[int, int] = {}
        self._looked: dict[int, float] = {}
        self._searched_at = float("-inf")
        self._deferred = False

    def fds(self, pid: int, now: float, own: bool = False) -> netfds.Fds | None:
        """``netfds.read_fds``, without the readlinks when the fd numbers are those of the last read (not for a
        GPU process's ``own`` table: a new connection may reuse a closed one's fd number), and without those of
        fds known to point at a device or an anonymous inode (FD_STABLE_MAX_AGE_S). A table read at this same
        ``now`` is given again unlisted: the GPU processes of one parent share their siblings."""
        known = self._fds.get(pid)
        if not own and known is not None and known.read_at == now:
            return known.fds
        names = netfds.fd_names(pid)
        if names is None:
            self._fds.pop(pid, None)
            return None
        tag = hash(tuple(names))
        if not own and known is not None and known.tag == tag and now - known.read_at < FD_TABLE_MAX_AGE_S:
            return known.fds
        if known is None or now - known.whole_at >= FD_STABLE_MAX_AGE_S:
            stable, whole_at = frozenset[str](), now
        else:
            stable, whole_at = known.stable, known.whole_at
        fds, kept = netfds.read_table(pid, names, stable)
        self._fds[pid] = _Table(tag, now, whole_at, fds, kept)
        return fds

    def prune(self, now: float, gpu_pids: set[int]) -> None:
        """Forget fd tables too old to be used again and the classifications of processes not in ``gpu_pids``."""
        for pid in [pid for pid, table in self._fds.items() if now - table.read_at >= FD_STABLE_MAX_AGE_S]:
            del self._fds[pid]
        for pid in set(self._classified) - gpu_pids:
            del self._classified[pid]

    def classify(self, pid: int, own: netfds.Fds, held: dict[int, int], linked: list[int], exclude: set[int],
                 now: float) -> tuple[Upstream, list[int]]:
        """Where ``pid``'s work comes from and who is at the other end of its sockets (see ``_classify``; a
        process in ``exclude``, a GPU process, is never a peer), from the last classification while its
        sockets are unchanged and it is recent enough."""
        key = own.sockets | frozenset(inode for inode, m in held.items() if m in linked)
        last = self._classified.get(pid)
        if last is not None:
            age = now - last.at
            if age < (SOCKETS_EVERY_S if last.key == key else SOCKETS_CHANGED_EVERY_S):
                return last.upstream, list(last.peers)
        self._deferred = False
        upstream, peers = self._classify(pid, own, held, linked, exclude, now)
        # a search put off (another ran moments ago) is made at the next scan after SOCKETS_CHANGED_EVERY_S
        self._classified[pid] = _Classified(frozenset({-1}) if self._deferred else key, now, upstream, peers)
        return upstream, list(peers)

    def _classify(self, pid: int, own: netfds.Fds, held: dict[int, int], linked: list[int], exclude: set[int],
                  now: float) -> tuple[Upstream, list[int]]:
        """The processes at the other end of ``pid``'s connected unix sockets and loopback TCP connections
        (tree members from ``held``, others looked for in /proc), and where its work comes from: ``external``
        when it, or a tree process at the other end of one of its sockets (``linked`` share one with it),
        listens (TCP, bound UDP, a unix server socket) or holds an accepted connection from outside the tree;
        else ``tree``. A TCP listener whose accepted connections all come from tree processes is fed from the
        tree: a client the server started is no outside demand. A parent that only reads its output through a
        pipe (a launcher) is not a front end."""
        peers = [m for inode, peer in netfds.unix_peers(own.sockets).items() if (m := held.get(peer)) is not None]
        front = {pid, *linked, *peers}
        sockets = own.sockets | frozenset(inode for inode, m in held.items() if m in front)
        if not sockets:
            return "tree", peers
        rows = [r for r in self._inet(pid, now) if r.inode in sockets or r.state == netfds.TCP_ESTABLISHED]
        mine = [r for r in rows if r.inode in sockets]
        listening = {r.local_port for r in mine if not r.udp and r.state == netfds.TCP_LISTEN}
        external = netfds.read_unix_listening(pid, sockets) > 0
        external |= any(r.udp and r.state == netfds.UDP_BOUND and netfds.is_unspecified(r.remote)
                        and netfds.bound_to_receive(r.local) for r in mine)
        mirror = {(r.local, r.remote): r.inode for r in rows if not r.udp and r.state == netfds.TCP_ESTABLISHED}
        outside: list[int] = []  # the other ends of its loopback connections that no tree process holds
        from_tree = 0  # connections accepted on its TCP front doors from processes of its own tree
        for r in mine:
            if r.udp or r.state != netfds.TCP_ESTABLISHED:
                continue
            other = mirror.get((r.remote, r.local))
            holder = held.get(other) if other is not None else None
            accepted = r.local_port in listening and other not in own.sockets
            if holder is not None:
                if r.inode in own.sockets:
                    peers.append(holder)
                from_tree += accepted
            elif accepted:
                external = True  # an accepted connection from outside the tree
            if holder is None and other is not None and other not in own.sockets and r.inode in own.sockets:
                outside.append(other)
        # a TCP front door nobody is connected to may take work from anywhere; one whose clients are all its own
        # descendants or siblings is fed from inside the tree
        external |= bool(listening) and not from_tree
        peers += [p for p in self._holders(outside, exclude, now).values() if p not in exclude]
        return ("external" if external else "tree"), list(dict.fromkeys(peers))

    def _inet(self, pid: int, now: float) -> list[netfds.InetSocket]:
        """Every row of ``pid``'s namespace's TCP and UDP tables, read once per namespace per TABLES_TTL_S."""
        try:
            space = os.readlink(f"/proc/{pid}/ns/net")
        except OSError:
            space = f"pid:{pid}"
        known = self._tables.get(space)
        if known is not None and now - known[0] < TABLES_TTL_S:
            return known[1]
        rows = netfds.read_inet(pid, None)
        self._tables = {k: v for k, v in self._tables.items() if now - v[0] < TABLES_TTL_S}
        self._tables[space] = (now, rows)
        return rows

    def _holders(self, inodes: list[int], exclude: set[int], now: float) -> dict[int, int]:
        """The process holding each of ``inodes`` (sockets of this host outside the tree): remembered from an
        earlier search while that process still holds it, else searched in /proc at most every
        OWNERS_EVERY_S per inode and SEARCH_EVERY_S in all. gpuwatch itself and the processes in ``exclude``
        are not searched."""
        found: dict[int, int] = {}
        wanted: set[int] = set()
        for inode in inodes:
            pid = self._owners.get(inode)
            if pid is not None and (fds := self.fds(pid, now)) is not None and inode in fds.sockets:
                found[inode] = pid
            elif now - self._looked.get(inode, float("-inf")) >= OWNERS_EVERY_S:
                wanted.add(inode)
        self._deferred = bool(wanted) and now - self._searched_at < SEARCH_EVERY_S
        if wanted and not self._deferred:
            self._searched_at = now
            for inode in wanted:
                self._looked[inode] = now
            found.update(netfds.find_holders(frozenset(wanted), {os.getpid(), *exclude}, MAX_OWNER_PROCS))
        if len(self._owners) + len(found) > MAX_REMEMBERED:
            self._owners.clear()
        self._owners.update(found)
        self._looked = {i: t for i, t in self._looked.items() if now - t < OWNERS_EVERY_S}
        return {i: p for i, p in found.items() if p != os.getpid()}
