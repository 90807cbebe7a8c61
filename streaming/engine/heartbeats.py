"""A batch's heartbeats per member, and the session expiries they decide.

Heartbeats are the bulk of the traffic, so they never go through the per-event loop: a batch's
heartbeats are indexed once per member, and the engine asks two questions of the index: when was
a member last seen as of an event time, and when does it expire (the first gap between its
heartbeats longer than its session timeout). Only members whose expiry falls inside the batch go
into the :class:`ExpiryQueue`.
"""

from __future__ import annotations

import bisect
import heapq
import math
from typing import Iterable, Sequence

import numpy as np

from streaming.engine.state import Member


def plain_list(values: Sequence, convert=None) -> list:
    """``values`` (a list, a tuple or a NumPy array) as a list of plain Python values (``convert=int``:
    of ints). The engine works on plain lists: a group's batch holds tens of heartbeats, where
    NumPy's per-call cost was most of the heartbeat bookkeeping."""
    if isinstance(values, np.ndarray):
        return values.astype(np.int64, copy=False).tolist() if convert is int else values.tolist()
    return list(map(convert, values)) if convert is not None else list(values)


class HeartbeatIndex:
    """Each member's heartbeat times of the batch, sorted, as a plain list.

    Plain lists, not arrays: a member has a handful of heartbeats per batch, and at that size the
    lookups cost about a tenth with lists and ``bisect`` of what NumPy's per-call overhead costs
    (they run for every member of every group in every batch)."""

    def __init__(self) -> None:
        self.by_member: dict[str, list[int]] = {}
        #: Heartbeat records per member: more than its times when the job dropped some (weights).
        self.records_by_member: dict[str, int] = {}

    def load(self, beats: Iterable[tuple[str, int, int]]) -> None:
        """Index heartbeats given as (member id, time, records it stands for).

        A plain loop, not NumPy: a group's batch holds tens of heartbeats, where a lexsort, its
        boundaries and their conversions cost more than the loop (profiled per group of 10 members,
        70 beats); a huge group's 100,000 take about 50 ms."""
        by_member, records = self.by_member, self.records_by_member
        for member_id, t, n in beats:
            times = by_member.get(member_id)
            if times is None:
                by_member[member_id] = [t]
                records[member_id] = n
            else:
                times.append(t)
                records[member_id] += n
        for times in by_member.values():
            if len(times) > 1:
                times.sort()

    def last_seen_at(self, member: Member, at: int) -> int:
        """The member's newest sign of life at or before ``at``."""
        beats = self.by_member.get(member.member_id)
        if not beats:
            return member.last_seen
        i = bisect.bisect_right(beats, at)
        return max(member.last_seen, beats[i - 1]) if i else member.last_seen

    def expiry_of(self, member: Member) -> float:
        """When the member expires given its heartbeats in this batch: the first gap too long."""
        if not member.expires:
            return math.inf
        timeout = member.session_timeout_ms
        beats = self.by_member.get(member.member_id)
        if not beats:
            return member.deadline()
        previous = member.last_seen
        later = beats[bisect.bisect_right(beats, previous):]
        if not later:
            return member.deadline()
        for t in later:
            if t - previous > timeout:
                return previous + timeout
            previous = t
        return previous + timeout

    def beats_of_members_outside(self, known: set[str]) -> int:
        """Heartbeat records of members not in ``known`` (members the group never had)."""
        return sum(n for member_id, n in self.records_by_member.items() if member_id not in known)


class ExpiryQueue:
    """Members by expiry time; rescheduling a member makes its older entry stale."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, str, int]] = []
        self._versions: dict[str, int] = {}

    def schedule(self, member_id: str, at: float) -> None:
        version = self._versions.get(member_id, 0) + 1
        self._versions[member_id] = version
        heapq.heappush(self._heap, (at, member_id, version))

    def next(self, members: dict[str, Member]) -> tuple[float, str] | None:
        """The earliest current entry of a member still in ``members``."""
        while self._heap:
            at, member_id, version = self._heap[0]
            if self._versions.get(member_id) == version and member_id in members:
                return at, member_id
            heapq.heappop(self._heap)
        return None
