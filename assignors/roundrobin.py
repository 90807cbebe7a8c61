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

import numpy as np

from ._common import (
    check_unique_member_ids,
    member_info_order,
    partitions_per_topic,
    paused_gc,
    split_by_owner,
    subscribers_per_topic,
    subscription_classes,
    topic_partitions,
)
from .model import GroupAssignment, GroupSpec, TopicPartition

__all__ = ["assign_roundrobin"]


def assign_roundrobin(spec: GroupSpec) -> GroupAssignment:
    """Assign ``spec`` the way Kafka's client ``RoundRobinAssignor`` does (Kafka-exact, ordered)."""
    with paused_gc():
        check_unique_member_ids(spec)
        return _assign(spec)


def _assign(spec: GroupSpec) -> GroupAssignment:
    members = spec.members
    classes = subscription_classes(members)
    counts = partitions_per_topic(spec, classes[0])
    order = member_info_order(spec)
    position_of = [0] * len(members)
    for position, index in enumerate(order):
        position_of[index] = position
    subscriber_arrays = subscribers_per_topic(spec, order, classes)

    # Within one topic the skipping deals partitions round the topic's subscribers only, starting
    # with the first subscriber at or after the circle position: partition p of the topic goes to
    # subscriber (first + p) mod n. Only the starting points need a walk over the topics; the
    # owners of all partitions then follow in a few array operations.
    names = sorted(counts)
    arrays: dict[int, tuple[int, list[int]]] = {}  # id(subscriber array) -> (offset in `pooled`, positions)
    pooled: list[np.ndarray] = []
    base, size, first_of, partitions_of = [], [], [], []
    pooled_length = 0
    cursor = 0
    for topic in names:
        array = subscriber_arrays[topic]
        known = arrays.get(id(array))
        if known is None:
            known = arrays[id(array)] = (pooled_length, [position_of[i] for i in array.tolist()])
            pooled.append(array)
            pooled_length += len(array)
        offset, positions = known
        n, partitions = len(positions), counts[topic]
        first = bisect_left(positions, cursor)
        if first == n:
            first = 0
        base.append(offset)
        size.append(n)
        first_of.append(first)
        partitions_of.append(partitions)
        cursor = (positions[(first + partitions - 1) % n] + 1) % len(members)

    partitions_in_order: list[TopicPartition] = []
    for topic in names:
        partitions_in_order += topic_partitions(topic, range(counts[topic]))
    per_topic = np.array(partitions_of, dtype=np.int64)
    total = int(per_topic.sum())
    owners = np.zeros(0, dtype=np.int64)
    if total:
        starts = np.cumsum(per_topic) - per_topic
        partition = np.arange(total, dtype=np.int64) - np.repeat(starts, per_topic)
        step = (np.repeat(np.array(first_of, dtype=np.int64), per_topic) + partition) % np.repeat(
            np.array(size, dtype=np.int64), per_topic
        )
        owners = np.concatenate(pooled)[np.repeat(np.array(base, dtype=np.int64), per_topic) + step]
    per_member = split_by_owner(len(members), owners, partitions_in_order)
    return GroupAssignment(dict(zip([m.member_id for m in members], per_member)))
