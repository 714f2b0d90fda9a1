"""Hourly roll-ups of GPU-seconds in SQLite: what ``gpuwatch report`` reads without Prometheus.

Each attributed block is added in one transaction together with the high-water mark, the newest
snapshot time it covers (one mark per snapshot origin: ``live``, or the recording a daemon replays). After
a restart the ledger skips every interval up to the mark, so a crash (kill -9 included) between two
commits loses nothing that was committed and counts nothing twice. (A live host whose clock is set back
counts again only once the clock passes the mark: time it cannot tell apart is not counted twice.)

The file stays bounded: hours older than the retention are deleted, and the owners come capped from the
ledger (:class:`~gpuwatch.efficiency.rows.OwnerCap`: past the cap, under the owner ``(other)``). Rows go
in and come out as the named tuples of :mod:`gpuwatch.efficiency.rows`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuwatch.efficiency.ledger import HOUR, Increment
from gpuwatch.efficiency.rows import (
    GpuHour,
    HistKey,
    HistRow,
    LostKey,
    LostRow,
    Owner,
    OwnerKey,
    OwnerRow,
    OwnerUse,
    SecondsRow,
    States,
)
from gpuwatch.model.causes import OWNER_LABELS, STATES
from gpuwatch.model.rollout import Rollout

FILE = "efficiency.sqlite"
SCHEMA = f"""
CREATE TABLE IF NOT EXISTS gpu_seconds (
    hour INTEGER NOT NULL, gpu INTEGER NOT NULL, {", ".join(f"{s} REAL NOT NULL" for s in STATES)},
    PRIMARY KEY (hour, gpu));
CREATE TABLE IF NOT EXISTS lost_seconds (
    hour INTEGER NOT NULL, gpu INTEGER NOT NULL, cause TEXT NOT NULL,
    {", ".join(f"{o} TEXT NOT NULL" for o in OWNER_LABELS)}, seconds REAL NOT NULL,
    PRIMARY KEY (hour, gpu, cause, {", ".join(OWNER_LABELS)}));
CREATE TABLE IF NOT EXISTS sm_hist (
    hour INTEGER NOT NULL, gpu INTEGER NOT NULL, bin INTEGER NOT NULL, seconds REAL NOT NULL,
    PRIMARY KEY (hour, gpu, bin));
CREATE TABLE IF NOT EXISTS fixes (cause TEXT PRIMARY KEY, title TEXT NOT NULL, fix TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS marks (origin TEXT PRIMARY KEY, until REAL NOT NULL);
CREATE TABLE IF NOT EXISTS rollouts (
    gpu TEXT NOT NULL, changed_at REAL NOT NULL, judged_at REAL NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (gpu, changed_at));
CREATE TABLE IF NOT EXISTS owner_use (
    hour INTEGER NOT NULL, gpu INTEGER NOT NULL, {", ".join(f"{o} TEXT NOT NULL" for o in OWNER_LABELS)},
    {", ".join(f"{u} REAL NOT NULL" for u in OwnerUse._fields)},
    PRIMARY KEY (hour, gpu, {", ".join(OWNER_LABELS)}));
"""
#: ``PRAGMA user_version`` of the schema above. Files from before it was set (version 0) have no
#: ``owner_use``: opening one adds the table, and its old hours simply have no owner rows.
SCHEMA_VERSION = 1
_OWNER_SUMS = ("allocated", "effective", "underused")


@dataclass(frozen=True)
class Rollup:
    """Hourly rows since some time: GPU-seconds by state, lost seconds by cause and owner, the fixes by cause
    (title, fix), and the SM-activity histogram in bins of ``BIN_PCT`` percent."""

    seconds: list[SecondsRow]
    lost: list[LostRow]
    fixes: dict[str, tuple[str, str]]
    hist: list[HistRow] = dataclasses.field(default_factory=list)
    #: Each owner's use of each GPU per hour (empty for hours from before the store kept it).
    owners: list[OwnerRow] = dataclasses.field(default_factory=list)

    def since(self, since: float) -> Rollup:
        """The hours that end after ``since``."""
        return self.between(since, float("inf"))

    def between(self, since: float, until: float) -> Rollup:
        """The hours that end after ``since`` and no later than ``until`` (``until`` inf: all of them)."""
        def keep(hour: int) -> bool:
            return since < hour + HOUR <= until

        return Rollup([r for r in self.seconds if keep(r.key.hour)], [r for r in self.lost if keep(r.key.hour)],
                      self.fixes, [r for r in self.hist if keep(r.key.hour)],
                      [r for r in self.owners if keep(r.key.hour)])

    def to_dict(self) -> dict[str, Any]:
        return {"seconds": [r.to_dict() for r in self.seconds], "lost": [r.to_dict() for r in self.lost],
                "fixes": {k: {"title": t, "fix": f} for k, (t, f) in self.fixes.items()},
                "sm_hist": [r.to_dict() for r in self.hist], "owner_use": [r.to_dict() for r in self.owners]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Rollup:
        fixes = {k: (str(v["title"]), str(v["fix"])) for k, v in data.get("fixes", {}).items()}
        return cls([SecondsRow.from_dict(r) for r in data["seconds"]], [LostRow.from_dict(r) for r in data["lost"]],
                   fixes, [HistRow.from_dict(r) for r in data.get("sm_hist", [])],
                   [OwnerRow.from_dict(r) for r in data.get("owner_use", [])])


class Store:
    """One roll-up database; ``path`` None keeps it in memory (a report over a recording)."""

    def __init__(self, path: Path | None, retention_s: float) -> None:
        self.path = path
        self.retention_s = retention_s
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
        self._db = sqlite3.connect(":memory:" if path is None else str(path), check_same_thread=False,
                                   isolation_level=None, timeout=10.0)
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(SCHEMA)
            self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        self._pruned_hour = 0

    def mark(self, origin: str) -> float:
        """The newest snapshot time committed for ``origin`` (-inf: none)."""
        with self._lock:
            row = self._db.execute("SELECT until FROM marks WHERE origin = ?", (origin,)).fetchone()
        return float("-inf") if row is None else float(row[0])

    def commit(self, inc: Increment, origin: str) -> None:
        """Add ``inc`` and move the mark, all or nothing."""
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                for at, states in inc.seconds.items():
                    db.execute(f"INSERT INTO gpu_seconds VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (hour, gpu) DO UPDATE "
                               f"SET {', '.join(f'{s} = {s} + excluded.{s}' for s in STATES)}", (*at, *states))
                for k, seconds in inc.lost.items():
                    db.execute(f"INSERT INTO lost_seconds VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT "
                               f"(hour, gpu, cause, {', '.join(OWNER_LABELS)}) DO UPDATE "
                               f"SET seconds = seconds + excluded.seconds", (k.hour, k.gpu, k.cause, *k.owner, seconds))
                for hk, seconds in inc.hist.items():
                    db.execute("INSERT INTO sm_hist VALUES (?, ?, ?, ?) ON CONFLICT (hour, gpu, bin) DO UPDATE "
                               "SET seconds = seconds + excluded.seconds", (*hk, seconds))
                for ok, use in inc.owners.items():
                    db.execute(f"INSERT INTO owner_use VALUES ({', '.join('?' * 13)}) ON CONFLICT "
                               f"(hour, gpu, {', '.join(OWNER_LABELS)}) DO UPDATE SET "
                               f"{', '.join(f'{u} = {u} + excluded.{u}' for u in _OWNER_SUMS)}, "
                               f"{', '.join(f'{u} = max({u}, excluded.{u})' for u in OwnerUse._fields[3:])}",
                               (ok.hour, ok.gpu, *ok.owner, *use))
                for cause, (title, fix) in inc.fixes.items():
                    db.execute("INSERT OR REPLACE INTO fixes VALUES (?, ?, ?)", (cause, title, fix))
                db.execute("INSERT INTO marks VALUES (?, ?) ON CONFLICT (origin) DO UPDATE SET until = "
                           "max(until, excluded.until)", (origin, inc.until))
                self._prune(inc.until)
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:  # SQLite already rolled back after SQLITE_FULL: keep the real error
                    db.execute("ROLLBACK")
                raise

    def _prune(self, now: float) -> None:
        hour = int(now // HOUR) * HOUR
        if hour <= self._pruned_hour:
            return
        cutoff = now - self.retention_s
        for table in ("gpu_seconds", "lost_seconds", "sm_hist", "owner_use"):
            self._db.execute(f"DELETE FROM {table} WHERE hour + {HOUR} <= ?", (cutoff,))
        self._pruned_hour = hour

    def rollup(self, since: float = -1e18, until: float = 1e18) -> Rollup:
        """The hours that overlap [since, until]."""
        lo, hi = since - HOUR, until
        with self._lock:
            seconds = self._db.execute("SELECT * FROM gpu_seconds WHERE hour > ? AND hour <= ? ORDER BY hour, gpu",
                                       (lo, hi)).fetchall()
            lost = self._db.execute("SELECT * FROM lost_seconds WHERE hour > ? AND hour <= ? "
                                    "ORDER BY hour, gpu, cause", (lo, hi)).fetchall()
            hist = self._db.execute("SELECT * FROM sm_hist WHERE hour > ? AND hour <= ? ORDER BY hour, gpu, bin",
                                    (lo, hi)).fetchall()
            owners = self._db.execute("SELECT * FROM owner_use WHERE hour > ? AND hour <= ? ORDER BY hour, gpu, "
                                      f"{', '.join(OWNER_LABELS)}", (lo, hi)).fetchall()
            fixes = {c: (t, f) for c, t, f in self._db.execute("SELECT cause, title, fix FROM fixes")}
        n = len(OWNER_LABELS)
        return Rollup([SecondsRow(GpuHour(h, g), States(*v)) for h, g, *v in seconds],
                      [LostRow(LostKey(h, g, c, Owner(*o)), sec) for h, g, c, *o, sec in lost], fixes,
                      [HistRow(HistKey(h, g, b), sec) for h, g, b, sec in hist],
                      [OwnerRow(OwnerKey(h, g, Owner(*rest[:n])), OwnerUse(*rest[n:])) for h, g, *rest in owners])

    def add_rollout(self, rollout: Rollout) -> bool:
        """Keep a judged rollout and drop those older than the retention; False when this GPU's change was
        kept before (a replay run again judges it again: it is neither kept nor sent twice)."""
        with self._lock:
            added = self._db.execute("INSERT INTO rollouts VALUES (?, ?, ?, ?) ON CONFLICT (gpu, changed_at) DO "
                                     "NOTHING", (rollout.gpu, rollout.changed_at, rollout.judged_at,
                                                 json.dumps(rollout.to_dict()))).rowcount
            self._db.execute("DELETE FROM rollouts WHERE judged_at < ?", (rollout.judged_at - self.retention_s,))
        return added > 0

    def rollouts(self, since: float = -1e18, until: float = 1e18) -> list[Rollout]:
        """The rollouts judged in [since, until], oldest first."""
        with self._lock:
            rows = self._db.execute("SELECT data FROM rollouts WHERE judged_at >= ? AND judged_at <= ? "
                                    "ORDER BY judged_at, gpu", (since, until)).fetchall()
        return [Rollout.from_dict(json.loads(data)) for (data,) in rows]

    def close(self) -> None:
        with self._lock:
            self._db.close()


def load_rollouts(store_or_path: Store | str | os.PathLike[str], since: float = -1e18,
                  until: float = 1e18) -> list[Rollout]:
    """The rollouts judged in [since, until] from a store, or from the store file at a path (a daemon's
    ``efficiency.sqlite``, read while the daemon writes it; a missing file holds none)."""
    if isinstance(store_or_path, Store):
        return store_or_path.rollouts(since, until)
    path = Path(store_or_path)
    if not path.exists():
        return []
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10.0)
    try:
        rows = db.execute("SELECT data FROM rollouts WHERE judged_at >= ? AND judged_at <= ? ORDER BY judged_at, gpu",
                          (since, until)).fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return []
        raise
    finally:
        db.close()
    return [Rollout.from_dict(json.loads(data)) for (data,) in rows]
