"""Kafka 4.1's server-side (KIP-848) ``RangeAssignor`` (spec section 6.3), the KAFKA-16944 version.

Follows ``org.apache.kafka.coordinator.group.assignor.RangeAssignor`` of Kafka 4.1.1. Members are
sorted like the client assignors sort them: static members first by group instance id, then the
rest by member id, compared as Java strings (UTF-16 code units; Python's own string order differs
for characters beyond the Basic Multilingual Plane). Each topic is split over its subscribers in
that order: every subscriber gets ``P // C`` partitions as one contiguous range, and the first
``P % C`` one more. A subscription to a topic missing from the metadata is skipped, as the
coordinator resolves subscribed names to topic ids and drops the ones it cannot resolve.

Guarantees: per-topic balance and co-partitioning (topics with the same subscribers and partition
count are split identically). It is not sticky: a member's current assignment is ignored, except
that a static member that rejoins under a new member id keeps its place in the order, and so its
ranges. Example: A:[t1, t2], B:[t3], C:[t2, t3] over t1 (3), t2 (3), t3 (2) gives
A = t1-0..2, t2-0..1; B = t3-0; C = t2-2, t3-1.

Kafka keeps each member's assignment as unordered sets; here each list is sorted by
(topic, partition).
"""

from __future__ import annotations

from ._common import check_unique_member_ids, member_info_order, paused_gc, subscribers_per_topic
from .model import GroupAssignment, GroupSpec, TopicPartition

__all__ = ["assign_server_range"]


def assign_server_range(spec: GroupSpec) -> GroupAssignment:
    """Assign ``spec`` the way Kafka 4.1's server-side (KIP-848) range assignor does."""
    check_unique_member_ids(spec)
    with paused_gc():
        return _assign(spec)


def _assign(spec: GroupSpec) -> GroupAssignment:
    members = spec.members
    per_member: list[list[TopicPartition]] = [[] for _ in members]
    subscriber_arrays = subscribers_per_topic(spec, member_info_order(spec))
    as_lists: dict[int, list[int]] = {}
    for topic in sorted(subscriber_arrays):
        topic_spec = spec.topics.get(topic)
        if topic_spec is None or topic_spec.partitions <= 0:
            continue  # not in the metadata (the coordinator cannot resolve it), or nothing to split
        partitions = topic_spec.partitions
        array = subscriber_arrays[topic]
        subs = as_lists.get(id(array))
        if subs is None:
            subs = as_lists[id(array)] = array.tolist()
        floor, extras = divmod(partitions, len(subs))
        tps = topic_spec.partition_objects if topic_spec.name == topic else \
            [TopicPartition(topic, p) for p in range(partitions)]
        start = 0
        for k in range(min(len(subs), partitions)):
            end = start + floor + (1 if k < extras else 0)
            per_member[subs[k]].extend(tps[start:end])
            start = end
    return GroupAssignment({m.member_id: per_member[i] for i, m in enumerate(members)})
