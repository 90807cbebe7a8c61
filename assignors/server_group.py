"""A group as Kafka 4.1's group coordinator hands it to its server-side (KIP-848) assignors.

Kafka's assignors read a ``GroupSpec`` and a ``SubscribedTopicDescriber`` that the coordinator's
``TargetAssignmentBuilder`` builds from its state. :func:`server_group` builds the same view from a
:class:`~assignors.model.GroupSpec`, including the iteration orders Kafka's answers depend on:

* Members: ``GroupSpec.memberIds()`` is the key set of a fresh ``HashMap`` filled member by member,
  so members are visited in Java ``HashMap`` order of their ids, the spec's member order being the
  insertion order (as for every consumer assignor here, see :mod:`assignors.model`).
* Subscriptions: a member subscribes by topic name; the coordinator resolves names to topic ids
  through its metadata and silently skips a name the metadata does not have (``TopicIds``), so a
  member subscribed to a missing topic gets the rest. Whether the group is HOMOGENEOUS is decided
  on the names, missing ones included (``ModernGroup.subscriptionType``).
* Previous assignment: a member's ``owned_partitions`` are its current target assignment, listed as
  the coordinator's target-assignment record lists them; Kafka keeps it as a ``HashMap`` of topic
  id to a ``HashSet`` of partitions (``Assignment.fromRecord``). Where the order matters (the
  homogeneous builder trims a member over its quota in that order), :meth:`ServerGroup.previous_in_java_order`
  reproduces it: partitions in ``HashSet<Integer>`` order, and topics in ``HashMap<Uuid>`` order when
  the topics have ids (:attr:`~assignors.model.TopicSpec.topic_id`), else in name order.

Inputs a coordinator never produces are normalised: a claim on a partition the topic does not
have, or on a partition an earlier member (in spec order) already claims, is dropped. A claim on a
topic missing from the metadata is a deleted topic's: dropped too (Kafka drops it because the
member's subscription no longer resolves to that id), though it still counts towards the size of
the member's map. A topic with a negative partition count is treated as missing.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._common import check_unique_member_ids
from .java_order import (
    copy_capacity,
    hashmap_order,
    integer_hash,
    java_hash_order,
    java_string_key,
    string_hashes,
    table_capacity,
    uuid_compare_key,
    uuid_hash,
)
from .model import GroupSpec, MemberSpec

__all__ = ["ServerGroup", "server_group"]


@dataclass(slots=True)
class ServerGroup:
    """The coordinator's view of a group; members are indices in ``GroupSpec.memberIds()`` order."""

    spec: GroupSpec
    #: Members in Kafka's ``memberIds()`` order.
    members: list[MemberSpec]
    #: ``SubscriptionType.HOMOGENEOUS``: every member lists the same topic names.
    homogeneous: bool
    #: Per member, the subscribed topics that exist (what ``subscribedTopicIds()`` yields).
    subscriptions: list[frozenset[str]]
    #: Partition count of every topic some member subscribes to that exists, in name order.
    partitions: dict[str, int]
    #: Per member, its previous target assignment: topic -> partitions as listed (normalised).
    previous: list[dict[str, list[int]]]
    #: Per member, how many distinct topics its target-assignment record names (deleted ones too).
    previous_topic_count: list[int]
    #: Partitions some member's previous assignment holds, per topic (``isPartitionAssigned``).
    assigned: dict[str, bytearray]
    #: Every topic in the metadata has a topic id, so hash orders of topic ids can be reproduced.
    with_topic_ids: bool

    def topic_order_key(self, topic: str):
        """Kafka orders topic ids with ``Uuid.compareTo``; without ids, by name."""
        if self.with_topic_ids:
            return uuid_compare_key(self.spec.topics[topic].topic_id)
        return topic

    def subscription_in_java_order(self, member: int) -> list[str]:
        """The existing topics a member subscribes to, as ``new HashSet<>(subscribedTopicIds())``
        iterates them (the homogeneous builder's topic order); name order without topic ids."""
        subscribed = self.subscriptions[member]
        if not self.with_topic_ids:
            return sorted(subscribed)
        names = list(self.members[member].topics)
        # The member's names: new HashSet<>(list) in the order the member listed them ...
        names = [names[i] for i in java_hash_order(string_hashes(names), capacity=copy_capacity(len(names)),
                                                     compare_keys=[java_string_key(t) for t in names])]
        # ... resolved to ids (missing names skipped) and copied into a HashSet sized for every name.
        existing = [t for t in names if t in subscribed]
        ids = [self.spec.topics[t].topic_id for t in existing]
        order = java_hash_order([uuid_hash(u) for u in ids], capacity=copy_capacity(len(names)),
                                compare_keys=[uuid_compare_key(u) for u in ids])
        return [existing[i] for i in order]

    def previous_in_java_order(self, member: int) -> list[tuple[str, list[int]]]:
        """A member's previous assignment as Kafka iterates it: topics in ``HashMap`` order (by
        name without topic ids), each topic's partitions in ``HashSet`` order."""
        by_topic = self.previous[member]
        topics = list(by_topic)
        if len(topics) > 1:
            if self.with_topic_ids:
                ids = [self.spec.topics[t].topic_id for t in topics]
                # Collectors.toMap fills a default HashMap; deleted topics count towards its size.
                capacity = table_capacity(self.previous_topic_count[member])
                order = java_hash_order([uuid_hash(u) for u in ids], capacity=capacity,
                                        compare_keys=[uuid_compare_key(u) for u in ids])
                topics = [topics[i] for i in order]
            else:
                topics.sort()
        return [(topic, partition_set_order(by_topic[topic])) for topic in topics]


def partition_set_order(partitions: list[int]) -> list[int]:
    """``new HashSet<>(partitions)`` iterated (Java 17)."""
    if len(partitions) <= 1:
        return partitions
    capacity = copy_capacity(len(partitions))
    if max(partitions) < capacity:
        return sorted(partitions)  # every partition in its own bucket, buckets ascending
    order = java_hash_order(list(map(integer_hash, partitions)), capacity=capacity, compare_keys=partitions)
    return [partitions[i] for i in order]


def server_group(spec: GroupSpec) -> ServerGroup:
    """The coordinator's view of ``spec`` (see the module doc)."""
    ids = check_unique_member_ids(spec)
    by_id = dict(zip(ids, spec.members))
    members = [by_id[member_id] for member_id in hashmap_order(ids)]

    counts = {name: topic.partitions for name, topic in spec.topics.items() if topic.partitions >= 0}
    name_sets: dict[tuple[str, ...], frozenset[str]] = {}
    existing_sets: dict[frozenset[str], frozenset[str]] = {}
    subscriptions: list[frozenset[str]] = []
    for member in members:
        names = name_sets.get(member.topics)
        if names is None:
            names = name_sets[member.topics] = frozenset(member.topics)
        existing = existing_sets.get(names)
        if existing is None:
            existing = existing_sets[names] = frozenset(t for t in names if t in counts)
        subscriptions.append(existing)
    homogeneous = len(set(name_sets.values())) <= 1
    partitions = {topic: counts[topic] for topic in sorted(frozenset().union(*existing_sets.values()))}

    assigned: dict[str, bytearray] = {}
    previous_by_id: dict[str, tuple[dict[str, list[int]], int]] = {}
    for member in spec.members:  # claims are settled in spec order: the first claimant keeps a partition
        by_topic: dict[str, list[int]] = {}
        named: set[str] = set()
        for topic, p in member.owned_partitions:
            named.add(topic)
            count = counts.get(topic)
            if count is None or not 0 <= p < count:
                continue
            flags = assigned.get(topic)
            if flags is None:
                flags = assigned[topic] = bytearray(count)
            if flags[p]:
                continue
            flags[p] = 1
            by_topic.setdefault(topic, []).append(p)
        previous_by_id[member.member_id] = (by_topic, len(named))
    previous = [previous_by_id[m.member_id][0] for m in members]
    topic_counts = [previous_by_id[m.member_id][1] for m in members]
    with_ids = bool(spec.topics) and all(t.topic_id is not None for t in spec.topics.values())
    return ServerGroup(spec, members, homogeneous, subscriptions, partitions, previous, topic_counts, assigned,
                       with_ids)
