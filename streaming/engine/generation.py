"""One writer of generation rows for every group type.

A consumer group, a Kafka Streams application and a Kafka Connect cluster each compute their
generation their own way (:mod:`.consumer`, :mod:`.streams`, :mod:`.connect`) and describe it as a
:class:`Generation`; :func:`record_generation` then does what is common: counts the generation,
writes its ``revocations``, ``assignments`` and ``balance_metrics`` rows, tells the alert rules,
and schedules the follow-up round or the rebalance the assignor asked for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from assignors.metrics import BalanceMetrics, balance_score
from schemas.rows import AssignmentRow, BalanceMetricsRow, RevocationRow

from streaming.engine.batch import Batch
from streaming.engine.state import PendingRebalance

HOUR_MS = 3_600_000
COOPERATIVE_FOLLOWUP = "cooperative_followup"


@dataclass
class Generation:
    """A computed generation, in the columns that differ between group types."""

    assignor: str
    protocol: str
    #: Per member, in member order: ``member_id`` and what it holds, as ``assignments`` columns.
    holdings: list[dict[str, Any]]
    #: What left a member, as ``revocations`` columns (``member_id``, ``reason``, ``unit``, ...).
    revocations: list[dict[str, Any]]
    #: The ``balance_metrics`` columns of this group type's unit (:func:`partition_balance`,
    #: :func:`unit_balance`) and its own columns (Streams clients, Connect connectors, ...).
    balance: dict[str, Any]
    assignor_ms: float
    #: Work withheld in this round (cooperative revocation): a follow-up generation assigns it.
    needs_followup: bool = False
    #: (event time, trigger) of a later rebalance the assignor asked for.
    scheduled: tuple[int, str] | None = None
    #: Member id -> static id, for the assignments rows.
    group_instance_ids: Mapping[str, str | None] = field(default_factory=dict)
    #: The mean per member before rounding, for the alert rules (the table keeps 6 decimals).
    exact_mean: float | None = None
    #: The coordinator's own generation number and phase, for a generation it recorded (the group
    #: coordinator's log); None: the monitor counts and derives them.
    number: int | None = None
    phase: str | None = None


def record_generation(batch: Batch, at: int, pending: PendingRebalance | None, gen: Generation) -> None:
    """Count ``gen`` as the group's next generation and write its rows."""
    s = batch.state
    s.generation = gen.number if gen.number is not None else s.generation + 1
    s.recent_rebalances = [t for t in s.recent_rebalances if t > at - HOUR_MS] + [at]
    trigger = pending.trigger if pending else "unknown"
    phase = gen.phase or ("revocation" if gen.needs_followup else
                          ("followup" if trigger == COOPERATIVE_FOLLOWUP else "complete"))
    base = {"group_id": s.group_id, "generation": s.generation, "event_time": at}
    for revocation in gen.revocations:
        batch.emit(RevocationRow(**base, **revocation))
    # The columns every member's row shares, merged once: a huge generation has 10,000 rows.
    shared = {**base, "assignor": gen.assignor, "protocol": gen.protocol, "trigger": trigger, "phase": phase,
              "group_type": s.group_type}
    instance_ids = gen.group_instance_ids
    for holding in gen.holdings:
        batch.emit(AssignmentRow(**shared, **holding, group_instance_id=instance_ids.get(holding["member_id"])))
    b = gen.balance
    batch.emit(BalanceMetricsRow(
        **base, trigger=trigger, trigger_member=pending.trigger_member if pending else None, assignor=gen.assignor,
        protocol=gen.protocol, group_type=s.group_type, phase=phase, **b, assignor_ms=round(gen.assignor_ms, 3),
        rebalances_last_hour=len(s.recent_rebalances), rebalance_started_at=pending.start if pending else at))
    mean = gen.exact_mean if gen.exact_mean is not None else b["mean_per_member"]
    batch.alerts.on_generation(at, phase, b["members"], b["imbalance"], b["max_per_member"], mean, b["unassigned"])
    if gen.needs_followup:
        s.pending = PendingRebalance(at, at + batch.settings.cooperative_followup_ms, COOPERATIVE_FOLLOWUP, None)
    if gen.scheduled is not None:
        when, why = gen.scheduled
        s.scheduled = PendingRebalance(when, when, why, None)


def record_failure(batch: Batch, at: int, exc: Exception) -> None:
    """The assignor refused the group as it is: no generation, a rejected_events row with why."""
    batch.state.failed_rebalances += 1
    batch.reject(f"rebalance at {at} failed: {exc}", at)


def partition_balance(metrics: BalanceMetrics, in_transit: int) -> dict[str, Any]:
    """The balance columns of a consumer group's generation (unit: partition).

    ``in_transit``: partitions withheld on their way to another member (a revocation round); they
    move in this generation, though nobody holds them until the follow-up.
    """
    return {
        "members": metrics.members, "partitions": metrics.partitions, "min_per_member": metrics.min,
        "max_per_member": metrics.max, "mean_per_member": round(metrics.mean, 6),
        "stddev_per_member": round(metrics.stddev, 6), "imbalance": metrics.imbalance,
        "balance_score": metrics.balance_score, "moved": metrics.moved + in_transit,
        "stickiness": round(metrics.stickiness, 6), "unassigned": metrics.unassigned, "unit": "partition",
    }


def unit_balance(unit: str, counts: list[int], previous_owner: Mapping[str, str], new_owner: Mapping[str, str],
                 members: Iterable[str]) -> dict[str, Any]:
    """The balance columns over a Streams or Connect group's unit (active tasks, connector tasks):
    the same definitions as :mod:`assignors.metrics` gives partitions."""
    members = set(members)
    n = len(counts)
    mean = sum(counts) / n if n else 0.0
    moved = sum(1 for u, mid in previous_owner.items() if u in new_owner and new_owner[u] != mid)
    retainable = [u for u, mid in previous_owner.items() if mid in members and u in new_owner]
    retained = sum(1 for u in retainable if new_owner[u] == previous_owner[u])
    return {
        "unit": unit, "members": n, "partitions": None,
        "min_per_member": min(counts) if n else 0, "max_per_member": max(counts) if n else 0,
        "mean_per_member": round(mean, 6),
        "stddev_per_member": round(math.sqrt(sum((c - mean) ** 2 for c in counts) / n), 6) if n else 0.0,
        "imbalance": (max(counts) - min(counts)) if n else 0, "balance_score": balance_score(counts), "moved": moved,
        "stickiness": round(retained / len(retainable), 6) if retainable else 1.0, "unassigned": 0,
    }


def rounded(x: float | None) -> float | None:
    return None if x is None else round(x, 6)
