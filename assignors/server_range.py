"""Kafka 4.1's server-side (KIP-848) ``RangeAssignor`` (spec section 6.3), the KAFKA-16944 version.

Follows ``org.apache.kafka.coordinator.group.assignor.RangeAssignor`` of Kafka 4.1.1. Members are
sorted like the client assignors sort them: static members first by group instance id, then the
rest by member id, compared as Java strings (UTF-16 code units; Python's own string order differs
for characters beyond the Basic Multilingual Plane). Each topic is split over its subscribers in
that order: every subscriber gets ``P // C`` partitions as one contiguous range, and the first
``P % C`` one more. A subscription to a topic missing from the metadata is skipped, as the
coordinator resolves subscribed names to topic ids and drops the ones it cannot resolve
(:mod:`assignors.server_group`).

Guarantees: per-topic balance and co-partitioning (topics with the same subscribers and partition
count are split identically). It is not sticky: a member's current assignment is ignored, except
that a static member that rejoins under a new member id keeps its place in the order, and so its
ranges. Example: A:[t1, t2], B:[t3], C:[t2, t3] over t1 (3), t2 (3), t3 (2) gives
A = t1-0..2, t2-0..1; B = t3-0; C = t2-2, t3-1.

Kafka keeps each member's assignment as unordered sets; here each list is sorted by
(topic, partition).
"""

from __future__ import annotations

import numpy as np

from ._common import member_info_order, paused_gc, split_by_owner, subscribers_per_topic
from .model import GroupAssignment, GroupSpec
from .server_group import server_group

__all__ = ["assign_server_range"]


def assign_server_range(spec: GroupSpec) -> GroupAssignment:
    """Assign ``spec`` the way Kafka 4.1's server-side (KIP-848) range assignor does."""
    with paused_gc():
        group = server_group(spec)
        topics, offsets, partitions = group.partition_layout
        order = member_info_order(spec)
        if group.homogeneous:
            # Everyone subscribes to every topic: one subscriber list, the members in order.
            everyone = np.array(order, dtype=np.int64)
            subscribers = dict.fromkeys(topics, everyone)
        else:
            subscribers = subscribers_per_topic(spec, order, group.subscription_classes)
        # Each topic is split over its subscribers in order; topics with the same subscribers and
        # partition count are split alike, so each such split is computed once.
        splits: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
        split_of = []
        for t, topic in enumerate(topics):
            count = offsets[t + 1] - offsets[t]
            subs = subscribers[topic]
            key = (id(subs), count)
            if key not in splits:
                floor, extras = divmod(count, len(subs))
                takers = subs[:min(len(subs), count)]
                splits[key] = (takers, floor + (np.arange(len(takers)) < extras))
            split_of.append(key)
        n_members = len(spec.members)
        if len(splits) == 1:
            lists = _same_split_everywhere(n_members, *splits[split_of[0]], np.array(offsets[:-1]), partitions)
        else:
            # Every partition's owner, topic after topic in name order: a stable split by owner
            # lists each member's partitions sorted.
            repeated = {key: np.repeat(*split) for key, split in splits.items()}
            owner_of = np.concatenate([repeated[key] for key in split_of]) if split_of else np.zeros(0, dtype=np.int64)
            lists = split_by_owner(n_members, owner_of, partitions)
        return GroupAssignment(dict(zip(group.spec_member_ids, lists)))


def _same_split_everywhere(n_members: int, takers: np.ndarray, sizes: np.ndarray, starts: np.ndarray,
                           partitions: np.ndarray) -> list[list]:
    """Every topic split the same way (one subscriber list, one partition count; the usual
    homogeneous group): a taker's partitions are the same range of every topic, so the answer is
    gathered in one take, one row per taker, each row topic by topic in name order."""
    first = np.cumsum(sizes) - sizes
    if len(takers) == n_members and sizes[0] == sizes[-1]:
        # Everyone takes the same number from every topic: one row per member, rows in spec order.
        in_spec_order = np.empty(n_members, dtype=np.int64)
        in_spec_order[takers] = first
        positions = starts[None, :, None] + in_spec_order[:, None, None] + np.arange(sizes[0])[None, None, :]
        return partitions[positions.reshape(n_members, -1)].tolist()
    lists: list[list] = [[] for _ in range(n_members)]
    for size in np.unique(sizes).tolist():
        if size == 0:
            continue
        rows = np.flatnonzero(sizes == size)
        # positions[row, topic, i] = start of the topic + the row's first partition + i
        positions = starts[None, :, None] + first[rows][:, None, None] + np.arange(size)[None, None, :]
        for member, row in zip(takers[rows].tolist(), partitions[positions.reshape(len(rows), -1)].tolist()):
            lists[member] = row
    return lists
