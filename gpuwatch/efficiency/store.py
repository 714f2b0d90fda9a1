"""Hourly roll-ups of GPU-seconds in SQLite: what ``gpuwatch report`` reads without Prometheus.

Each attributed block is added in one transaction together with the high-water mark, the newest
snapshot time it covers (one mark per snapshot origin: ``live``, or the recording a daemon replays). After
a restart the ledger skips every interval up to the mark, so a crash (kill -9 included) between two
commits loses nothing that was committed and counts nothing twice. (A live host whose clock is set back
counts again only once the clock passes the mark: time it cannot tell apart is not counted twice.)

The file stays bounded: hours older than the retention are deleted, and each (hour, GPU) keeps at most
:data:`MAX_OWNERS` owners; more are added up under the owner ``(other)``.
"""

from __future__ import annotations

import dataclasses
import os
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuwatch.efficiency.account import OWNER_LABELS, Owner
from gpuwatch.efficiency.ledger import HOUR, Increment
from gpuwatch.model.causes import STATES

FILE = "efficiency.sqlite"
MAX_OWNERS = 64
HIST_COLUMNS = ("hour", "gpu", "bin", "seconds")
LOST_COLUMNS = ("hour", "gpu", "cause", *OWNER_LABELS, "seconds")
OTHER_OWNER: Owner = ("", "", "", "", "(other)")
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
"""


@dataclass(frozen=True)
class Rollup:
    """Hourly rows since some time: ``seconds`` rows are (hour, gpu, observed, allocated, busy,
    effective); ``lost`` rows (hour, gpu, cause, *owner, seconds); ``fixes`` by cause (title, fix);
    ``hist`` rows (hour, gpu, bin, allocated seconds) of SM activity in bins of ``BIN_PCT`` percent."""

    seconds: list[tuple[Any, ...]]
    lost: list[tuple[Any, ...]]
    fixes: dict[str, tuple[str, str]]
    hist: list[tuple[Any, ...]] = dataclasses.field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"seconds": [dict(zip(("hour", "gpu", *STATES), r, strict=True)) for r in self.seconds],
                "lost": [dict(zip(LOST_COLUMNS, r, strict=True)) for r in self.lost],
                "fixes": {k: {"title": t, "fix": f} for k, (t, f) in self.fixes.items()},
                "sm_hist": [dict(zip(HIST_COLUMNS, r, strict=True)) for r in self.hist]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Rollup:
        seconds = [tuple(r[k] for k in ("hour", "gpu", *STATES)) for r in data["seconds"]]
        lost = [tuple(r[k] for k in LOST_COLUMNS) for r in data["lost"]]
        fixes = {k: (str(v["title"]), str(v["fix"])) for k, v in data.get("fixes", {}).items()}
        hist = [tuple(r[k] for k in HIST_COLUMNS) for r in data.get("sm_hist", [])]
        return cls(seconds, lost, fixes, hist)


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
                for (hour, gpu), values in inc.seconds.items():
                    db.execute(f"INSERT INTO gpu_seconds VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (hour, gpu) DO UPDATE "
                               f"SET {', '.join(f'{s} = {s} + excluded.{s}' for s in STATES)}", (hour, gpu, *values))
                for (hour, gpu, cause, owner), seconds in inc.lost.items():
                    owner = self._capped(hour, gpu, owner)
                    db.execute(f"INSERT INTO lost_seconds VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT "
                               f"(hour, gpu, cause, {', '.join(OWNER_LABELS)}) DO UPDATE "
                               f"SET seconds = seconds + excluded.seconds", (hour, gpu, cause, *owner, seconds))
                for (hour, gpu, b), seconds in inc.hist.items():
                    db.execute("INSERT INTO sm_hist VALUES (?, ?, ?, ?) ON CONFLICT (hour, gpu, bin) DO UPDATE "
                               "SET seconds = seconds + excluded.seconds", (hour, gpu, b, seconds))
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

    def _capped(self, hour: int, gpu: int, owner: Owner) -> Owner:
        where = " AND ".join(f"{o} = ?" for o in OWNER_LABELS)
        if self._db.execute(f"SELECT 1 FROM lost_seconds WHERE hour = ? AND gpu = ? AND {where} LIMIT 1",
                            (hour, gpu, *owner)).fetchone():
            return owner
        owners = self._db.execute(f"SELECT COUNT(DISTINCT {' || char(0) || '.join(OWNER_LABELS)}) FROM lost_seconds "
                                  "WHERE hour = ? AND gpu = ?", (hour, gpu)).fetchone()[0]
        return owner if owners < MAX_OWNERS - 1 else OTHER_OWNER

    def _prune(self, now: float) -> None:
        hour = int(now // HOUR) * HOUR
        if hour <= self._pruned_hour:
            return
        cutoff = now - self.retention_s
        for table in ("gpu_seconds", "lost_seconds", "sm_hist"):
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
            fixes = {c: (t, f) for c, t, f in self._db.execute("SELECT cause, title, fix FROM fixes")}
        return Rollup([tuple(r) for r in seconds], [tuple(r) for r in lost], fixes, [tuple(r) for r in hist])

    def close(self) -> None:
        with self._lock:
            self._db.close()
