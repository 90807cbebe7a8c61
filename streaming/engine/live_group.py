"""Computed versus actual: a group the collector observes in a live cluster.

When the collector reports a group's actual assignment (events with ``source: "collector"``), the
engine keeps the newest observation and, once both sides are settled (no rebalance pending here,
and the coordinator reports the group stable), writes an ``assignment_checks`` row comparing its
own generation with it. Partitions are compared by owner: a partition differs when the member the
monitor gave it to is not the member that holds it in the cluster (either side may be nobody).
"""

from __future__ import annotations

import hashlib
import json
from typing import Mapping, Sequence

from assignors import TopicPartition
from schemas.rows import AssignmentCheckRow

from streaming.engine.batch import Batch
from streaming.engine.events import MembershipEvent

#: The coordinator's states in which an actual assignment is settled (AdminClient spells them in
#: upper case; the classic protocol's Stable and KIP-848's stable/empty both qualify).
SETTLED_GROUP_STATES = frozenset({"STABLE", "EMPTY"})


def owners(assignment: Mapping[str, Sequence[TopicPartition]]) -> dict[TopicPartition, str]:
    return {tp: member_id for member_id, tps in assignment.items() for tp in tps}


def differing_partitions(computed: Mapping[str, Sequence[TopicPartition]],
                         actual: Mapping[str, Sequence[TopicPartition]]) -> list[dict]:
    """Every partition whose owner differs, sorted by topic and partition."""
    by_monitor, by_cluster = owners(computed), owners(actual)
    out = []
    for tp in sorted(set(by_monitor) | set(by_cluster)):
        if by_monitor.get(tp) != by_cluster.get(tp):
            out.append({"topic": tp.topic, "partition": tp.partition,
                        "computed_member": by_monitor.get(tp), "actual_member": by_cluster.get(tp)})
    return out


def fingerprint(assignment: Mapping[str, Sequence[TopicPartition]]) -> str:
    """A stable digest of an assignment (Python's hash() differs between processes)."""
    canonical = sorted((m, sorted((tp.topic, tp.partition) for tp in tps)) for m, tps in assignment.items())
    return hashlib.sha1(json.dumps(canonical, separators=(",", ":")).encode()).hexdigest()[:16]


def is_settled(group_state: str | None) -> bool:
    """Only a settled group's assignment can be compared: mid-rebalance it is in flux."""
    return group_state is None or group_state.upper() in SETTLED_GROUP_STATES


def observe(batch: Batch, e: MembershipEvent, at: int) -> None:
    """Record what the collector saw of the live group, after the event itself was applied (so a
    rebalance the event opened starts from the observations before it)."""
    s = batch.state
    s.collector_fed = True
    if e.group_state:
        s.observed_group_state = e.group_state
    if e.partition_assignor:
        s.observed_assignor = e.partition_assignor
    if e.type == "leave":
        s.observed.pop(e.member_id, None)
    elif e.member_id:
        actual = e.held_partitions
        if actual is not None:
            s.observed[e.member_id] = list(actual)
    s.check_due_at = at


def check_agreement(batch: Batch) -> None:
    """Compare the computed generation with the observed assignment, once the group is settled on
    both sides: no rebalance pending here, and the coordinator reports it stable."""
    s = batch.state
    if s.check_due_at is None or s.pending is not None or s.generation == 0:
        return
    if not is_settled(s.observed_group_state):
        return
    at, s.check_due_at = s.check_due_at, None
    key = f"{s.generation}:{fingerprint(s.observed)}"
    if key == s.last_check:
        return
    s.last_check = key
    differing = differing_partitions(s.assignment, s.observed)
    unmatched = sorted(set(s.members) ^ set(s.observed))
    batch.emit(AssignmentCheckRow(
        group_id=s.group_id, generation=s.generation, event_time=at, agrees=not differing and not unmatched,
        members_compared=len(set(s.members) | set(s.observed)),
        partitions_compared=len(owners(s.assignment).keys() | owners(s.observed).keys()),
        differing=differing, unmatched_members=unmatched, computed_assignor=s.assignor_name(),
        reported_assignor=s.observed_assignor, group_state=s.observed_group_state))
    counts_differ = sum(1 for m in set(s.members) & set(s.observed)
                        if len(s.assignment.get(m, ())) != len(s.observed[m]))
    batch.alerts.on_check(at, len(differing) + len(unmatched), counts_differ + len(unmatched))
