"""The outbox: alert transitions on local disk until the webhook has acknowledged them.

A SQLite file (standard library) whose primary concern is durability: ``add`` commits with
``synchronous=FULL`` before it returns, so a transition the stream handed over survives a crash of
the job or of the machine. ``UNIQUE(alert_id, fired_at, status)`` with ``INSERT OR IGNORE`` makes a
replayed micro-batch a no-op. Rows are delivered in ``seq`` order (insertion order), so a firing
transition is never sent after its own resolution.

Each :class:`Outbox` is one SQLite connection; the dispatcher opens one for the stream's side and
one for its sender thread, and WAL mode lets the sender read while the stream writes.
"""

from __future__ import annotations

import fcntl
import sqlite3
import time
from pathlib import Path
from typing import Iterable, Sequence

from streaming.alerting.delivery.payload import AlertTransition
from streaming.errors import OutboxError, StorageError

OUTBOX_FILE = "alert-outbox.sqlite3"
LOCK_FILE = "alert-outbox.lock"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS outbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    alert_id TEXT NOT NULL,
    fired_at INTEGER NOT NULL,
    status TEXT NOT NULL,
    group_id TEXT NOT NULL,
    transition TEXT NOT NULL,
    submitted_at_ms INTEGER NOT NULL,
    delivered_at_ms INTEGER,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    UNIQUE (alert_id, fired_at, status)
);
CREATE INDEX IF NOT EXISTS outbox_undelivered ON outbox (seq) WHERE delivered_at_ms IS NULL;
"""


class OutboxLock:
    """Exclusive use of an outbox directory by one dispatcher.

    Two dispatchers on one outbox would both send every alert. ``flock`` is released by the kernel
    when the process dies, so a crashed job never leaves a stale lock behind.
    """

    def __init__(self, directory: str | Path):
        path = Path(directory) / LOCK_FILE
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(path, "a+")
        except OSError as exc:
            raise OutboxError(f"alert outbox {path}: cannot open the lock file: {exc}") from exc
        try:
            fcntl.flock(self._file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._file.close()
            raise OutboxError(f"alert outbox {path.parent}: another dispatcher (this process or another "
                              f"job) is using it; close that one first or give each job its own directory") \
                from None

    def release(self) -> None:
        if not self._file.closed:
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def open_outbox(directory: str | Path, storage=None, credentials=None):
    """The outbox at ``directory``: a SQLite file on a local disk, or objects on object storage
    (:mod:`~streaming.alerting.delivery.object_outbox`), beside a checkpoint that is there."""
    from streaming.storage import Location, is_object_store

    if is_object_store(str(directory)):
        from streaming.alerting.delivery.object_outbox import ObjectOutbox

        try:
            return ObjectOutbox(Location(str(directory), storage, credentials))
        except StorageError as exc:
            raise OutboxError(f"alert outbox {directory}: {exc}") from None
    return Outbox(directory)


def lock_outbox(directory: str | Path):
    """Exclusive use of the outbox by this dispatcher. Object storage has no lock to take: there the
    driver is the single writer of the checkpoint, the tables and the outbox (docs/deploy.md)."""
    from streaming.storage import is_object_store

    return _NoLock() if is_object_store(str(directory)) else OutboxLock(directory)


class _NoLock:
    def release(self) -> None:
        pass


class Outbox:
    def __init__(self, directory: str | Path):
        if "://" in str(directory):
            raise OutboxError(f"alert outbox: {directory} is not a local directory; the outbox is a SQLite "
                              f"file and needs one (e.g. a local checkpoint directory)")
        self.path = Path(directory) / OUTBOX_FILE
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE), so a write never
            # upgrades a read lock halfway and deadlocks with the other connection.
            self._db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise OutboxError(f"alert outbox {self.path}: cannot open: {exc}") from exc

    def close(self) -> None:
        self._db.close()

    def _write(self, sql: str, params: Iterable[Sequence]) -> list[sqlite3.Cursor]:
        try:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                cursors = [self._db.execute(sql, p) for p in params]
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            return cursors
        except sqlite3.Error as exc:
            raise OutboxError(f"alert outbox {self.path}: write failed: {exc}") from exc

    def add(self, transitions: Sequence[AlertTransition]) -> list[tuple[int, AlertTransition]]:
        """Store the transitions durably; returns ``(seq, transition)`` of those not already stored."""
        if not transitions:
            return []
        now = _now_ms()
        cursors = self._write(
            "INSERT OR IGNORE INTO outbox (alert_id, fired_at, status, group_id, transition, submitted_at_ms) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [(t.alert_id, t.fired_at, t.status, t.group_id, t.to_json(), now) for t in transitions])
        return [(c.lastrowid, t) for c, t in zip(cursors, transitions) if c.rowcount == 1]

    def undelivered_after(self, seq: int, limit: int) -> list[tuple[int, AlertTransition]]:
        rows = self._db.execute(
            "SELECT seq, transition FROM outbox WHERE delivered_at_ms IS NULL AND seq > ? ORDER BY seq LIMIT ?",
            (seq, limit)).fetchall()
        return [(s, AlertTransition.from_json(text)) for s, text in rows]

    def count_undelivered(self) -> int:
        return self._db.execute("SELECT count(*) FROM outbox WHERE delivered_at_ms IS NULL").fetchone()[0]

    def mark_delivered(self, seqs: Sequence[int]) -> None:
        now = _now_ms()
        self._write("UPDATE outbox SET delivered_at_ms = ?, attempts = attempts + 1, last_error = NULL "
                    "WHERE seq = ?", [(now, s) for s in seqs])

    def record_failure(self, seqs: Sequence[int], error: str) -> None:
        self._write("UPDATE outbox SET attempts = attempts + 1, last_error = ? WHERE seq = ?",
                    [(error, s) for s in seqs])

    def supersede_delivered_resolutions(self) -> int:
        """Mark undelivered firing transitions whose resolution was delivered as done; returns how many.

        Only a refused POST leaves such a pair (the firing set aside, its resolution accepted later).
        Sending the firing now would leave the receiver with an alert that fires forever.
        """
        (cursor,) = self._write(
            "UPDATE outbox SET delivered_at_ms = ?, last_error = 'superseded: its resolution was delivered' "
            "WHERE delivered_at_ms IS NULL AND status = 'firing' AND EXISTS ("
            " SELECT 1 FROM outbox AS r WHERE r.alert_id = outbox.alert_id AND r.fired_at = outbox.fired_at"
            " AND r.status = 'resolved' AND r.delivered_at_ms IS NOT NULL)", [(_now_ms(),)])
        return cursor.rowcount

    def prune_delivered(self, retention_ms: int) -> int:
        """Forget transitions delivered longer ago than ``retention_ms``; returns how many."""
        (cursor,) = self._write("DELETE FROM outbox WHERE delivered_at_ms < ?", [(_now_ms() - retention_ms,)])
        return cursor.rowcount
