"""The durable side of notifying: one SQLite database (WAL) holding the notifier's view of alert state,
per-group bookkeeping and the outbox of requests to send.

Alert state and the outbox rows it causes are written in one transaction, so after a crash either both
happened or neither did: a notification is never lost, and never queued twice for one state change.
Rows keep their ``webhook_id`` forever, so every retry (also after a restart) carries the same id.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from gpuwatch.model import files

SCHEMA = """
CREATE TABLE IF NOT EXISTS alert_state (
    fingerprint TEXT PRIMARY KEY, state TEXT NOT NULL, data TEXT NOT NULL, updated REAL NOT NULL);
CREATE TABLE IF NOT EXISTS groups (
    receiver TEXT NOT NULL, group_key TEXT NOT NULL, last_sent REAL NOT NULL,
    PRIMARY KEY (receiver, group_key));
CREATE TABLE IF NOT EXISTS outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT, webhook_id TEXT NOT NULL UNIQUE, receiver TEXT NOT NULL,
    body BLOB NOT NULL, created REAL NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt REAL NOT NULL, status TEXT NOT NULL DEFAULT 'pending', last_error TEXT,
    finished REAL);
CREATE INDEX IF NOT EXISTS outbox_due ON outbox (status, receiver, id);
CREATE TABLE IF NOT EXISTS write_probe (id INTEGER PRIMARY KEY, at REAL NOT NULL, pad BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS digest_sent (name TEXT PRIMARY KEY, slot REAL NOT NULL);
"""
#: Bytes a write probe stores: a few pages, so a disk that cannot take them does not pass for healthy.
PROBE_BYTES = 16 * 1024

#: Delivered and dead-lettered rows are kept this long for inspection, then deleted (the file stays small).
KEEP_FINISHED_S = 7 * 86400.0


@dataclass(frozen=True)
class OutboxRow:
    id: int
    webhook_id: str
    receiver: str
    body: bytes
    created: float
    attempts: int
    next_attempt: float


class CorruptOutbox(sqlite3.DatabaseError):
    """The outbox file fails SQLite's integrity check."""


def connect(path: Path) -> sqlite3.Connection:
    """A connection in WAL mode with a busy timeout (the alert worker and the deliverer share the file).
    The file is private to its owner: it holds alert labels and receiver names."""
    if path.parent.exists() and not path.parent.is_dir():  # mkdir would say "File exists"
        raise NotADirectoryError(errno.ENOTDIR, "the state directory is not a directory", str(path.parent))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK, 0o600)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):  # SQLite would say only "disk I/O error"
            raise files.NotARegularFile(errno.EINVAL, f"{files.kind(mode)}, not a regular file", str(path))
        os.fchmod(fd, 0o600)  # also a file created earlier with the umask's 0644
    finally:
        os.close(fd)
    conn = sqlite3.connect(str(path), timeout=10.0, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        problems = [row[0] for row in conn.execute("PRAGMA quick_check(5)").fetchall()]
        if problems != ["ok"]:
            raise CorruptOutbox("; ".join(problems)[:300])
        conn.executescript(SCHEMA)
    except BaseException:
        conn.close()
        raise
    return conn


def move_aside(path: Path, now: float | None = None) -> Path:
    """Rename a damaged outbox (and its WAL files) to ``<name>.corrupt-<time>`` so a fresh one can start."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(time.time() if now is None else now))
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    for suffix in ("", "-wal", "-shm"):
        part = path.with_name(path.name + suffix)
        if part.exists():
            part.rename(target.with_name(target.name + suffix))
    return target


class Outbox:
    """Row-level operations; each method is one short transaction unless run inside :meth:`transaction`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn = connect(path)
        self._lock = threading.RLock()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
                self.conn.execute("COMMIT")  # may fail too (disk full): then roll back as well
            except BaseException:
                if self.conn.in_transaction:
                    with suppress(sqlite3.Error):
                        self.conn.execute("ROLLBACK")
                raise

    def enqueue(self, conn: sqlite3.Connection, webhook_id: str, receiver: str, body: bytes, now: float) -> None:
        conn.execute("INSERT INTO outbox (webhook_id, receiver, body, created, next_attempt) VALUES (?,?,?,?,?)",
                     (webhook_id, receiver, body, now, now))

    def probe(self, conn: sqlite3.Connection, now: float) -> None:
        """Store a row that needs new pages, inside the caller's transaction: after write failures, only a
        write that stored something shows the disk takes writes again (an empty COMMIT succeeds when full)."""
        conn.execute("INSERT OR REPLACE INTO write_probe VALUES (1, ?, randomblob(?))", (now, PROBE_BYTES))

    def heads(self) -> list[OutboxRow]:
        """The oldest pending row of each receiver: one receiver's order is kept (firing before resolved)."""
        with self._lock:
            rows = self.conn.execute(
                "SELECT id, webhook_id, receiver, body, created, attempts, next_attempt FROM outbox "
                "WHERE id IN (SELECT MIN(id) FROM outbox WHERE status='pending' GROUP BY receiver)").fetchall()
        return [OutboxRow(*r) for r in rows]

    def mark_delivered(self, row_id: int, now: float) -> None:
        with self._lock:
            self.conn.execute("UPDATE outbox SET status='delivered', attempts=attempts+1, finished=?, "
                              "last_error=NULL WHERE id=?", (now, row_id))

    def mark_retry(self, row_id: int, next_attempt: float, error: str) -> None:
        with self._lock:
            self.conn.execute("UPDATE outbox SET attempts=attempts+1, next_attempt=?, last_error=? WHERE id=?",
                              (next_attempt, error[:500], row_id))

    def mark_dead(self, row_id: int, now: float, error: str) -> None:
        with self._lock:
            self.conn.execute("UPDATE outbox SET status='dead', finished=?, last_error=? WHERE id=?",
                              (now, error[:500], row_id))

    def oldest_pending(self) -> dict[str, float]:
        """receiver -> creation time (wall clock) of its oldest pending row, for /healthz."""
        with self._lock:
            rows = self.conn.execute("SELECT receiver, MIN(created) FROM outbox WHERE status='pending' "
                                     "GROUP BY receiver").fetchall()
        return {r: c for r, c in rows}

    def counts(self) -> dict[tuple[str, str], int]:
        """(receiver, status) -> rows, for /metrics."""
        with self._lock:
            rows = self.conn.execute("SELECT receiver, status, COUNT(*) FROM outbox GROUP BY receiver, status")
            return {(r, s): n for r, s, n in rows.fetchall()}

    def prune(self, now: float | None = None) -> None:
        cutoff = (time.time() if now is None else now) - KEEP_FINISHED_S
        with self._lock:
            self.conn.execute("DELETE FROM outbox WHERE status != 'pending' AND finished < ?", (cutoff,))

    def close(self) -> None:
        with self._lock:
            self.conn.close()
