"""Rack awareness for the sticky family (KIP-881, spec 3.3).

The decision is global: rack-aware iff some member has a rack, the member racks intersect the racks
hosting the partitions, and not every partition is hosted on every one of those racks (with
replicas on all racks, any placement is rack-aligned, so the ordinary algorithm runs; the JMH grid
is in that situation).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..model import GroupSpec, MemberSpec
from ._layout import Layout

_NO_RACKS: frozenset[str] = frozenset()
_NO_CONSUMERS = np.zeros(0, dtype=np.int64)
_NO_CONSUMERS.flags.writeable = False


@dataclass(frozen=True, slots=True)
class RackInfo:
    active: bool
    member_rack: list[str | None]  # by spec position; None = no rack (matches everything)
    partition_racks: list[frozenset[str]]  # by global index; empty unless active
    consumers_per_partition: np.ndarray  # members whose rack hosts a replica, by global index

    def mismatch(self, member: int, g: int) -> bool:
        rack = self.member_rack[member]
        return rack is not None and rack not in self.partition_racks[g]

    def matches(self, member: int, g: int) -> bool:
        """Kafka's ``nextRackConsumer`` test: the member has a rack and it hosts a replica."""
        rack = self.member_rack[member]
        return rack is not None and rack in self.partition_racks[g]


def rack_info(spec: GroupSpec, members: Sequence[MemberSpec], layout: Layout) -> RackInfo:
    # An empty rack id counts as no rack, as in Kafka.
    member_rack = [m.rack or None for m in members]
    if not any(member_rack):  # nobody has a rack
        return RackInfo(False, member_rack, [], _NO_CONSUMERS)
    consumer_racks = {r for r in member_rack if r is not None}
    inactive = RackInfo(False, member_rack, [], np.zeros(0, dtype=np.int64))
    if not consumer_racks or layout.total == 0:
        return inactive
    partition_racks: list[frozenset[str]] = []
    for name in layout.topics:
        topic = spec.topics[name]
        racks = topic.replica_racks
        if racks is None:
            partition_racks.extend([_NO_RACKS] * topic.partitions)
        else:
            partition_racks.extend(frozenset(r) for r in racks[: topic.partitions])
            partition_racks.extend([_NO_RACKS] * (topic.partitions - len(racks)))
    union = frozenset().union(*set(partition_racks))
    if union.isdisjoint(consumer_racks) or all(r == union for r in set(partition_racks)):
        return inactive
    per_rack: dict[str, int] = {}
    for r in member_rack:
        if r is not None:
            per_rack[r] = per_rack.get(r, 0) + 1
    weight = {racks: sum(per_rack.get(r, 0) for r in racks) for racks in set(partition_racks)}
    consumers = np.fromiter((weight[r] for r in partition_racks), dtype=np.int64, count=layout.total)
    return RackInfo(True, member_rack, partition_racks, consumers)
