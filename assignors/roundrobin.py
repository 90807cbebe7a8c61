"""Kafka's client-side ``RoundRobinAssignor`` (spec section 2).

All partitions are laid out topic by topic in topic-name order (partitions ascending within a
topic) and dealt one by one to the members in ``MemberInfo`` order (static members by group
instance id first, then the rest by member id), going round in a circle. A member that does not
subscribe to a partition's topic is skipped, and the circle position carries over from one topic to
the next. Racks are ignored.

Guarantees: with identical subscriptions every member ends within one partition of every other.
With different subscriptions the skipping alone is all the balancing there is, which can leave
members far apart: topics t0 (1 partition), t1 (2), t2 (3) and C0:[t0], C1:[t0, t1],
C2:[t0, t1, t2] give C0 = t0-0, C1 = t1-0, C2 = t1-1, t2-0, t2-1, t2-2.

Kafka's tests assert list order, so each member's list is in dealing order.
"""

from __future__ import annotations

from bisect import bisect_left
from itertools import repeat

from ._common import (
    check_unique_member_ids,
    member_info_order,
    partitions_per_topic,
    paused_gc,
    subscribers_per_topic,
)
from .model import GroupAssignment, GroupSpec, TopicPartition

__all__ = ["assign_roundrobin"]


def assign_roundrobin(spec: GroupSpec) -> GroupAssignment:
    """Assign ``spec`` the way Kafka's client ``RoundRobinAssignor`` does (Kafka-exact, ordered)."""
    check_unique_member_ids(spec)
    with paused_gc():
        return _assign(spec)


def _assign(spec: GroupSpec) -> GroupAssignment:
    members = spec.members
    per_member: list[list[TopicPartition]] = [[] for _ in members]
    counts = partitions_per_topic(spec)
    order = member_info_order(spec)
    position_of = [0] * len(members)
    for position, index in enumerate(order):
        position_of[index] = position
    subscriber_arrays = subscribers_per_topic(spec, order)

    # Within one topic the skipping deals partitions round the topic's subscribers only, starting
    # with the first subscriber at or after the circle position; so each subscriber's share of the
    # topic is one strided slice, and only the starting point needs a search.
    positions_cache: dict[int, list[int]] = {}
    cursor = 0
    for topic in sorted(counts):
        partitions = counts[topic]
        array = subscriber_arrays[topic]
        positions = positions_cache.get(id(array))
        if positions is None:
            positions = positions_cache[id(array)] = [position_of[i] for i in array.tolist()]
        n = len(positions)
        first = bisect_left(positions, cursor)
        if first == n:
            first = 0
        tps = list(map(TopicPartition, repeat(topic, partitions), range(partitions)))
        for k in range(min(n, partitions)):
            per_member[order[positions[(first + k) % n]]].extend(tps[k::n])
        last = positions[(first + partitions - 1) % n]
        cursor = (last + 1) % len(members)
    return GroupAssignment({m.member_id: per_member[i] for i, m in enumerate(members)})
