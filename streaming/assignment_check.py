"""Computed versus actual: does the monitor's assignment match what the real group holds?

When the collector reports a group's actual assignment (``source: "collector"``), the job records
its own computed generation beside it. Partitions are compared by owner: a partition differs when
the member the monitor gave it to is not the member that holds it in the cluster (either side may
be nobody). Pure functions; the engine decides *when* a comparison is meaningful.
"""

from __future__ import annotations

import hashlib
import json
from typing import Mapping, Sequence

from assignors import TopicPartition

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
