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
    partitions_of,
    paused_gc,
    split_by_owner,
    subscribers_per_topic,
    subscription_classes,
)
from .model import GroupAssignment, GroupSpec, TopicPartition

__all__ = ["assign_roundrobin"]

#: Tests set this to check the array path against the per-topic slices on small groups.
FORCE_SPLIT = False


def assign_roundrobin(spec: GroupSpec) -> GroupAssignment:
    """Assign ``spec`` the way Kafka's client ``RoundRobinAssignor`` does (Kafka-exact, ordered)."""
    with paused_gc():
        check_unique_member_ids(spec)
        return _assign(spec)


def _assign(spec: GroupSpec) -> GroupAssignment:
    members = spec.members
    classes = subscription_classes(members)
    counts = partitions_per_topic(spec, classes[0])
    if not counts:
        # Nothing subscribed has a partition: no member order is needed.
        return GroupAssignment({m.member_id: [] for m in members})
    order = member_info_order(spec)
    if len(classes[0]) == 1 and not FORCE_SPLIT:
        # One subscription list shared by every member: nobody is ever skipped (see _deal).
        return GroupAssignment(dict(zip([m.member_id for m in members], _everyone_everything(spec, counts, order))))
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
    base, size, first_of, partition_counts = [], [], [], []
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
        partition_counts.append(partitions)
        cursor = (positions[(first + partitions - 1) % n] + 1) % len(members)

    per_member = _deal(spec, names, counts, len(members), pooled, base, size, first_of, partition_counts, arrays)
    return GroupAssignment(dict(zip([m.member_id for m in members], per_member)))


def _everyone_everything(spec: GroupSpec, counts: dict[str, int], order: list[int]) -> list[list[TopicPartition]]:
    """Every member subscribes to every topic: the circle never skips, so the k-th partition of the
    whole layout (topics by name) goes to the (k mod n)-th member in MemberInfo order, and each
    member's list is one strided slice of the layout."""
    layout: list[TopicPartition] = []
    for topic in sorted(counts):
        layout += partitions_of(spec, topic)
    n = len(order)
    per_member: list[list[TopicPartition]] = [None] * n  # type: ignore[list-item]
    for position, index in enumerate(order):
        per_member[index] = layout[position::n]
    return per_member


def _deal(spec, names, counts, n_members, pooled, base, size, first_of, partition_counts, arrays) -> list[list[TopicPartition]]:
    """Every member's partitions, in dealing order, from each topic's subscribers and start."""
    total = sum(partition_counts)
    if FORCE_SPLIT is False and len(arrays) == 1 and size and size[0] == n_members:
        # Everyone subscribes to every topic (in differently ordered lists).
        return _everyone_everything(spec, counts, pooled[0].tolist())
    blocks = sum(min(n, p) for n, p in zip(size, partition_counts))
    if FORCE_SPLIT is False and (blocks * 4 <= total or blocks <= 2_000):
        # Within a topic, subscriber j (counted from the topic's start) gets partitions j, j + n,
        # ...: one strided slice per (topic, receiving member), appended topic by topic in name order.
        per_member = [[] for _ in range(n_members)]
        subscriber_lists = {offset: array.tolist() for (offset, _), array in zip(arrays.values(), pooled)}
        for topic, offset, n, first, partitions in zip(names, base, size, first_of, partition_counts):
            subs = subscriber_lists[offset]
            tps = partitions_of(spec, topic)
            for j in range(min(n, partitions)):
                per_member[subs[(first + j) % n]] += tps[j::n]
        return per_member
    # Many tiny blocks: compute every owner with array operations and split once.
    partitions_in_order: list[TopicPartition] = []
    for topic in names:
        partitions_in_order += partitions_of(spec, topic)
    per_topic = np.array(partition_counts, dtype=np.int64)
    owners = np.zeros(0, dtype=np.int64)
    if total:
        starts = np.cumsum(per_topic) - per_topic
        partition = np.arange(total, dtype=np.int64) - np.repeat(starts, per_topic)
        step = (np.repeat(np.array(first_of, dtype=np.int64), per_topic) + partition) % np.repeat(
            np.array(size, dtype=np.int64), per_topic
        )
        owners = np.concatenate(pooled)[np.repeat(np.array(base, dtype=np.int64), per_topic) + step]
    return split_by_owner(n_members, owners, partitions_in_order)
