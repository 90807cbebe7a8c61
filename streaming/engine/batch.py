"""One call of :func:`streaming.engine.advance`: the group being changed and what the call writes.

The engine's steps (membership, generations, checks against a live group) share this context:
the group's state, the settings, the batch's heartbeats and expiries, the rows written so far and
the counts for ``ingest_metrics``. It lives for one call; only :class:`GroupState` outlives it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from schemas.rows import RejectedEventRow, TableRow

from streaming.alerting.evaluator import AlertEvaluator
from streaming.engine.heartbeats import ExpiryQueue, HeartbeatIndex
from streaming.engine.settings import EngineSettings
from streaming.engine.state import GroupState, Member, PendingRebalance

#: A stopwatch in seconds (``time.perf_counter``): the job passes one to time the assignors for
#: ``assignor_ms``, the only measured value in the tables; without one it is 0.
Stopwatch = Callable[[], float]


@dataclass
class BatchStats:
    """Counts of one batch: accepted events are applied now or wait (in the state) for their time."""

    membership_accepted: int = 0
    heartbeats_accepted: int = 0
    late: int = 0
    rejected: int = 0
    unknown_member_heartbeats: int = 0


def alert_evaluator(state: GroupState, settings: EngineSettings,
                    emit: Callable[[TableRow], None]) -> AlertEvaluator:
    return AlertEvaluator(state.alerts, state.group_id, settings.alert_rules.for_group(state.group_id),
                          emit, lambda: state.generation)


class Batch:
    def __init__(self, state: GroupState, settings: EngineSettings, stopwatch: Stopwatch | None):
        self.state = state
        self.settings = settings
        self._stopwatch = stopwatch
        self.rows: list[TableRow] = []
        self.stats = BatchStats()
        self.heartbeats = HeartbeatIndex()
        self.expiries = ExpiryQueue()
        #: Members that left or expired in this batch (their late heartbeats are not "unknown").
        self.left_or_expired: set[str] = set()
        # The rows list's own append, not self.emit: a bound method of the batch would make a cycle
        # (batch -> evaluator -> batch) that only Python's collector frees, and with it the group's
        # whole state; for a huge group that is 600,000 objects and a 0.3 s collection per batch.
        self.alerts = alert_evaluator(state, settings, self.rows.append)

    def emit(self, row: TableRow) -> None:
        self.rows.append(row)

    def reject(self, reason: str, event_time: int | None, event_id: str | None = None) -> None:
        """Something the engine could not apply: a row in rejected_events, counted."""
        self.emit(RejectedEventRow(group_id=self.state.group_id, event_time=event_time, event_id=event_id,
                                   reason=reason))
        self.stats.rejected += 1

    def open_rebalance(self, at: int, trigger: str, member_id: str | None) -> None:
        """A change at ``at``: it opens a rebalance, or joins the one already open."""
        s = self.state
        if s.pending is None:
            snapshot = {m: list(tps) for m, tps in s.observed.items()} if s.collector_fed else None
            s.pending = PendingRebalance(at, at + self.settings.coalesce_ms, trigger, member_id, snapshot)

    def schedule_expiry(self, member: Member) -> None:
        self.expiries.schedule(member.member_id, self.heartbeats.expiry_of(member))

    def elapsed_ms(self, since: float) -> float:
        return (self._stopwatch() - since) * 1000.0 if self._stopwatch else 0.0

    def start_stopwatch(self) -> float:
        return self._stopwatch() if self._stopwatch else 0.0
