"""Opening the outbox when the file on disk is damaged or empty, without dropping what it still holds.

A damaged file (a torn write, a bad sector, garbage where a page was) is moved aside so notifying can go
on in a fresh one, and every pending row that can still be read is copied into the fresh file with the
same ``webhook_id``: receivers de-duplicate on it, so a row sent before the damage and again now is one
notification, and a row never sent is not lost. What could not be read is logged, with how much.
A zero-length file (truncated by a crash or by hand) is said so too, never replaced silently.
"""

from __future__ import annotations

import logging
import sqlite3
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

from gpuwatch.notify.outbox import SCHEMA, Outbox, move_aside

log = logging.getLogger(__name__)

COLUMNS = "webhook_id, receiver, body, created, attempts, next_attempt"
#: Row ids scanned one range at a time when the table cannot be read in one go; past this many ids the
#: rest is given up (an outbox holds at most a week of finished rows).
MAX_SCAN_IDS = 1_000_000
CHUNK = 256

Row = tuple[str, str, bytes, float, int, float]


@dataclass
class Salvaged:
    rows: list[Row] = field(default_factory=list)
    #: Row ids (or whole reads) that failed: notifications in them, if pending, are lost.
    unreadable: int = 0
    problems: list[str] = field(default_factory=list)


def _valid(row: tuple[object, ...]) -> Row | None:
    wid, receiver, body, created, attempts, next_attempt = row
    if isinstance(body, str):
        body = body.encode("utf-8", "replace")
    if not (isinstance(wid, str) and wid and isinstance(receiver, str) and isinstance(body, bytes)
            and isinstance(created, (int, float)) and isinstance(attempts, int)
            and isinstance(next_attempt, (int, float))):
        return None
    return wid, receiver, body, float(created), attempts, float(next_attempt)


def _scan(conn: sqlite3.Connection, out: Salvaged) -> None:
    """Row id ranges, then single ids inside a range that fails: every readable pending row."""
    try:
        top = conn.execute("SELECT MAX(id) FROM outbox").fetchone()[0] or 0
    except sqlite3.DatabaseError:
        top = 0
    try:  # the sequence survives in its own page when the table's root is gone
        top = max(top, conn.execute("SELECT seq FROM sqlite_sequence WHERE name='outbox'").fetchone()[0] or 0)
    except (sqlite3.DatabaseError, TypeError):
        pass
    if top <= 0:
        out.unreadable += 1
        out.problems.append("the outbox table cannot be read at all")
        return
    query = f"SELECT {COLUMNS}, status FROM outbox WHERE id BETWEEN ? AND ?"
    for start in range(max(1, top - MAX_SCAN_IDS + 1), top + 1, CHUNK):
        try:
            rows = conn.execute(query, (start, start + CHUNK - 1)).fetchall()
        except sqlite3.DatabaseError:
            rows = []
            for one in range(start, start + CHUNK):
                try:
                    rows += conn.execute(query, (one, one)).fetchall()
                except sqlite3.DatabaseError:
                    out.unreadable += 1
        out.rows += [r for r in (_valid(tuple(x[:6])) for x in rows if x[6] == "pending") if r is not None]


def with_fresh_header(path: Path) -> Path | None:
    """A copy of ``path`` with its 100-byte header taken from a new outbox of the same page size, or None
    when the page size cannot be guessed: a header overwritten with garbage hides pages that are intact."""
    size = path.stat().st_size
    page = next((p for p in (4096, 1024, 2048, 8192, 16384, 32768, 65536, 512) if size >= 2 * p and size % p == 0),
                None)
    if page is None:
        return None
    fresh, copy = path.with_name(path.name + ".header"), path.with_name(path.name + ".repaired")
    with closing(sqlite3.connect(fresh)) as conn:
        conn.execute(f"PRAGMA page_size={page}")
        conn.executescript(SCHEMA)
    header = fresh.read_bytes()[:100]
    fresh.unlink()
    with path.open("rb") as src, copy.open("wb") as dst:
        src.seek(100)
        dst.write(header)
        while chunk := src.read(1 << 20):
            dst.write(chunk)
    return copy


def read_pending(path: Path) -> Salvaged:
    """Every pending row that can be read from the (moved-aside) file at ``path``, oldest first; a file
    whose header is garbage is read through a copy with a fresh header. Journal files SQLite creates to read
    it are removed again: the moved-aside file stays as it was found, for inspection."""
    before = {s for s in ("-wal", "-shm") if path.with_name(path.name + s).exists()}
    try:
        return _read_pending_or_repair(path)
    finally:
        for s in {"-wal", "-shm"} - before:
            path.with_name(path.name + s).unlink(missing_ok=True)


def _read_pending_or_repair(path: Path) -> Salvaged:
    out = _read_pending(path)
    if out.rows or "file is not a database" not in " ".join(out.problems):
        return out
    copy = None
    try:
        copy = with_fresh_header(path)
        if copy is not None:
            repaired = _read_pending(copy)
            if repaired.rows:
                return repaired
    except (OSError, sqlite3.Error) as exc:
        out.problems.append(f"repairing the header: {exc}")
    finally:
        if copy is not None:
            for s in ("", "-wal", "-shm"):
                copy.with_name(copy.name + s).unlink(missing_ok=True)
    return out


def _read_pending(path: Path) -> Salvaged:
    out = Salvaged()
    for uri in (f"file:{path}?mode=ro", f"file:{path}?immutable=1"):  # the second ignores a broken WAL
        try:
            with closing(sqlite3.connect(uri, uri=True, timeout=2.0)) as conn:
                try:
                    rows = conn.execute(f"SELECT {COLUMNS} FROM outbox NOT INDEXED WHERE status='pending' "
                                        f"ORDER BY id").fetchall()
                    out.rows = [r for r in map(_valid, rows) if r is not None]
                except sqlite3.DatabaseError as exc:
                    out.problems.append(str(exc))
                    _scan(conn, out)
                return out
        except sqlite3.Error as exc:
            out.problems.append(str(exc))
    out.unreadable += 1
    return out


def open_outbox(path: Path) -> Outbox:
    """The outbox at ``path``; a damaged one is moved aside, salvaged into a fresh one and logged.
    OperationalError (cannot open or write: permissions, a full disk) is not damage and is raised."""
    empty = path.is_file() and path.stat().st_size == 0
    try:
        outbox = Outbox(path)
    except sqlite3.DatabaseError as exc:
        if isinstance(exc, sqlite3.OperationalError):
            raise
        return _salvage(path, exc)
    if empty:
        pending = sum(n for (_, s), n in outbox.counts().items() if s == "pending")
        log.error("the outbox %s was an empty (zero-length) file, truncated by a crash or by hand: %s", path,
                  f"{pending} pending notification(s) recovered from its journal" if pending else
                  "started a fresh one; notifications that were pending in it, if any, are lost")
    return outbox


def _salvage(path: Path, exc: sqlite3.DatabaseError) -> Outbox:
    aside = move_aside(path)
    found = read_pending(aside)
    outbox = Outbox(path)
    with outbox.transaction() as conn:
        saved = sum(conn.execute(f"INSERT OR IGNORE INTO outbox ({COLUMNS}) VALUES (?,?,?,?,?,?)", row).rowcount
                    for row in found.rows)
    # A damaged page can also read as valid but different rows: never claim that nothing was lost.
    lost = (f"; {found.unreadable} part(s) could not be read ({'; '.join(found.problems)[:200]}): notifications "
            f"pending in them are lost" if found.unreadable else
            f"; rows in the damaged page(s) may be lost without an error: {aside.name} is kept for inspection")
    log.error("the outbox %s is damaged (%s): moved it to %s and started a fresh one; saved %d pending "
              "notification(s) into it with their ids%s", path, " ".join(str(exc).split()), aside.name, saved, lost)
    return outbox
