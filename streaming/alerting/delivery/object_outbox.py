"""The outbox on object storage: the same contract as the SQLite outbox, made of small objects.

A driver restarted on another host (Kubernetes reschedules it, YARN retries the application
master) must find the alerts the previous driver had not delivered, as it finds the checkpoint.
So when the checkpoint is on object storage, the outbox lives beside it there, where a SQLite file
cannot: object storage has whole-object writes and listings, no file locks, no partial updates.

One object per transition, written in one PUT before ``add`` returns (so a transition the stream
handed over survives any crash), and one marker object when it is delivered::

    t-<seq>-<episode>-<status>.json   the transition (AlertTransition JSON)
    d-<seq>.json                      delivered (or superseded), with the time

``seq`` orders delivery as the SQLite outbox's ``seq`` does; ``episode`` is a hash of (alert_id,
fired_at). The names alone say which transitions exist, which are delivered and which firing has a
delivered resolution, so a restart lists the directory and reads only what is undelivered. A
transition already stored (a replayed micro-batch) is recognised by its name and not stored again.
The transitions of one ``add`` are written in order, so a crash in the middle leaves a prefix, and
the replay writes the rest after it: a firing is never ordered after its own resolution.

One writer: the driver's dispatcher is the only one adding (the single-driver rule of Delta on
object storage, docs/deploy.md), so ``seq`` is the highest stored plus one. Attempts and the last
error of a failed POST are kept in memory only: they are diagnostics, and the log has them.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from typing import Iterable, Sequence

from streaming.alerting.delivery.payload import AlertTransition
from streaming.errors import OutboxError, StorageError
from streaming.storage import Location

_TRANSITION = re.compile(r"^t-(?P<seq>\d{12})-(?P<episode>[0-9a-f]{16})-(?P<status>firing|resolved)\.json$")
_DELIVERED = re.compile(r"^d-(?P<seq>\d{12})\.json$")


def episode_of(transition: AlertTransition) -> str:
    return hashlib.sha256(f"{transition.alert_id}\x00{transition.fired_at}".encode()).hexdigest()[:16]


class _Listing:
    """What the outbox holds, from one listing."""

    def __init__(self, names: Iterable[tuple[str, float]]):
        self.transitions: dict[int, tuple[str, str, str]] = {}  # seq -> (object name, episode, status)
        self.delivered_at: dict[int, float] = {}  # seq -> when the marker was written (s)
        for name, mtime in names:
            if m := _TRANSITION.match(name):
                self.transitions[int(m["seq"])] = (name, m["episode"], m["status"])
            elif m := _DELIVERED.match(name):
                self.delivered_at[int(m["seq"])] = mtime

    @property
    def keys(self) -> set[tuple[str, str]]:
        return {(episode, status) for _, episode, status in self.transitions.values()}

    def undelivered(self) -> list[int]:
        return sorted(seq for seq in self.transitions if seq not in self.delivered_at)


class ObjectOutbox:
    """The :class:`~streaming.alerting.delivery.outbox.Outbox` interface on a :class:`Location`."""

    def __init__(self, location: Location):
        self.location = location
        self.path = location.location
        self._failures: dict[int, tuple[int, str]] = {}  # seq -> (attempts, last error), this run only
        self._list()  # an unreachable or forbidden bucket fails here, at start, not at the first alert

    def close(self) -> None:
        pass

    def _list(self) -> _Listing:
        try:
            return _Listing(self.location.list())
        except StorageError as exc:
            raise OutboxError(f"alert outbox {self.path}: {exc}") from None

    def _put(self, name: str, data: dict) -> None:
        try:
            self.location.write_bytes(name, json.dumps(data, separators=(",", ":")).encode())
        except StorageError as exc:
            raise OutboxError(f"alert outbox {self.path}: write failed: {exc}") from None

    def add(self, transitions: Sequence[AlertTransition]) -> list[tuple[int, AlertTransition]]:
        """Store the transitions durably; returns ``(seq, transition)`` of those not already stored."""
        if not transitions:
            return []
        listing = self._list()
        keys = listing.keys
        # Above every marker too: a marker left by a crash in prune_delivered must not mark a new one.
        seq = max([0, *listing.transitions, *listing.delivered_at])
        added = []
        for transition in transitions:
            key = (episode_of(transition), transition.status)
            if key in keys:
                continue
            keys.add(key)
            seq += 1
            self._put(f"t-{seq:012d}-{key[0]}-{key[1]}.json", json.loads(transition.to_json()))
            added.append((seq, transition))
        return added

    def undelivered_after(self, seq: int, limit: int) -> list[tuple[int, AlertTransition]]:
        listing = self._list()
        out = []
        for s in [s for s in listing.undelivered() if s > seq][:limit]:
            data = self.location.read_bytes(listing.transitions[s][0])
            if data is None:  # pruned meanwhile: only delivered ones are, so there is nothing to send
                continue
            out.append((s, AlertTransition.from_json(data.decode())))
        return out

    def count_undelivered(self) -> int:
        return len(self._list().undelivered())

    def mark_delivered(self, seqs: Sequence[int], note: str | None = None) -> None:
        now = time.time_ns() // 1_000_000
        for s in seqs:
            attempts, _ = self._failures.pop(s, (0, ""))
            self._put(f"d-{s:012d}.json", {"delivered_at_ms": now, "attempts": attempts + 1, "note": note})

    def record_failure(self, seqs: Sequence[int], error: str) -> None:
        for s in seqs:
            attempts, _ = self._failures.get(s, (0, ""))
            self._failures[s] = (attempts + 1, error)

    def supersede_delivered_resolutions(self) -> int:
        """Mark undelivered firings whose resolution was delivered as done (see the SQLite outbox)."""
        listing = self._list()
        resolved = {episode for s, (_, episode, status) in listing.transitions.items()
                    if status == "resolved" and s in listing.delivered_at}
        done = [s for s in listing.undelivered()
                if listing.transitions[s][2] == "firing" and listing.transitions[s][1] in resolved]
        self.mark_delivered(done, note="superseded: its resolution was delivered")
        return len(done)

    def prune_delivered(self, retention_ms: int) -> int:
        """Forget transitions delivered longer ago than ``retention_ms``; returns how many."""
        listing = self._list()
        cutoff = time.time() - retention_ms / 1000
        old = [s for s, at in listing.delivered_at.items() if at < cutoff and s in listing.transitions]
        orphans = [s for s in listing.delivered_at if s not in listing.transitions]
        try:
            for s in old:
                self.location.delete(listing.transitions[s][0])  # the transition first: never one
                self.location.delete(f"d-{s:012d}.json")         # left undelivered by a crash here
            for s in orphans:  # a crash between the two deletes above
                self.location.delete(f"d-{s:012d}.json")
        except StorageError as exc:
            raise OutboxError(f"alert outbox {self.path}: {exc}") from None
        return len(old)
