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
  homogeneous builder trims a member over its quota in that order),
  :meth:`ServerGroup.previous_in_java_order` reproduces it: partitions in ``HashSet<Integer>``
  order, and topics in ``HashMap<Uuid>`` order when the topics have ids
  (:attr:`~assignors.model.TopicSpec.topic_id`), else in name order.

Inputs a coordinator never produces are normalised: a claim on a partition the topic does not
have, or on a partition an earlier member (in spec order) already claims, is dropped. A claim on a
topic missing from the metadata is a deleted topic's: dropped too (Kafka drops it because the
member's subscription no longer resolves to that id), though it still counts towards the size of
the member's map. A topic with a negative partition count is treated as missing.

The view is built once per spec and kept with it (:attr:`GroupSpec.views
<assignors.model.GroupSpec>`). It holds what the coordinator holds between assignments and hands
the assignor ready-made: the member map, the resolved subscriptions, each member's target
assignment (with its size, and as the sorted list a kept assignment is answered with), who holds
what, and the iteration orders of these hash structures. Everything Kafka's assignors compute from
them (the unassigned partitions, quotas, who keeps and who gets what) is computed by each call.
Nothing in the view changes once built; the builders copy what they change.
"""

from __future__ import annotations

from functools import cached_property
from itertools import chain

import numpy as np

from ._common import check_unique_member_ids, subscription_classes
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
from .model import GroupSpec, MemberSpec, TopicPartition

__all__ = ["ServerGroup", "partition_set_order", "server_group"]

_VIEW_KEY = "server_group"


def server_group(spec: GroupSpec) -> ServerGroup:
    """The coordinator's view of ``spec`` (see the module doc), built on first use and kept."""
    view = spec.views.get(_VIEW_KEY)
    if view is None:
        view = spec.views[_VIEW_KEY] = ServerGroup(spec)
    return view


class ServerGroup:
    """The coordinator's view of a group; members are indices in ``GroupSpec.memberIds()`` order."""

    def __init__(self, spec: GroupSpec) -> None:
        ids = check_unique_member_ids(spec)
        position = {member_id: i for i, member_id in enumerate(ids)}
        in_kafka_order = hashmap_order(ids)
        self.spec = spec
        self.spec_member_ids = ids
        #: Members in Kafka's ``memberIds()`` order.
        self.members: list[MemberSpec] = [spec.members[position[m]] for m in in_kafka_order]
        #: For each member in spec order, its index in Kafka's order.
        self.index_of_spec_member: list[int] = [0] * len(ids)
        for index, member_id in enumerate(in_kafka_order):
            self.index_of_spec_member[position[member_id]] = index

        counts = {name: topic.partitions for name, topic in spec.topics.items() if topic.partitions >= 0}
        name_sets: dict[tuple[str, ...], frozenset[str]] = {}
        existing_sets: dict[frozenset[str], frozenset[str]] = {}
        subscriptions: list[frozenset[str]] = []
        for member in self.members:
            names = name_sets.get(member.topics)
            if names is None:
                names = name_sets[member.topics] = frozenset(member.topics)
            existing = existing_sets.get(names)
            if existing is None:
                existing = existing_sets[names] = frozenset(t for t in names if t in counts)
            subscriptions.append(existing)
        #: ``SubscriptionType.HOMOGENEOUS``: every member lists the same topic names.
        self.homogeneous = len(set(name_sets.values())) <= 1
        #: Per member, the subscribed topics that exist (what ``subscribedTopicIds()`` yields).
        self.subscriptions = subscriptions
        #: Partition count of every topic some member subscribes to that exists, in name order.
        self.partitions = {t: counts[t] for t in sorted(frozenset().union(*existing_sets.values()))}
        #: Every topic in the metadata has a topic id, so hash orders of topic ids can be reproduced.
        self.with_topic_ids = bool(spec.topics) and all(t.topic_id is not None for t in spec.topics.values())

        #: Partitions some member's previous assignment holds, per topic (``isPartitionAssigned``).
        self.assigned: dict[str, bytearray] = {}
        previous_by_id: dict[str, tuple[dict[str, list[int]], int]] = {}
        for member in spec.members:  # claims are settled in spec order: the first claimant keeps one
            if member.owned_partitions:
                previous_by_id[member.member_id] = self._claims(member.owned_partitions, counts)
        #: Some member has a previous assignment.
        self.any_previous = bool(previous_by_id)
        empty: tuple[dict[str, list[int]], int] = ({}, 0)
        #: Per member, its previous target assignment: topic -> partitions as listed (normalised).
        self.previous: list[dict[str, list[int]]] = []
        #: Per member, how many distinct topics its target-assignment record names (deleted ones too).
        self.previous_topic_count: list[int] = []
        for member in self.members:
            by_topic, named = previous_by_id.get(member.member_id, empty)
            self.previous.append(by_topic)
            self.previous_topic_count.append(named)
        self._java_previous: dict[int, list[tuple[str, list[int]]]] = {}

    def _claims(self, owned: tuple[TopicPartition, ...], counts: dict[str, int]) -> tuple[dict[str, list[int]], int]:
        by_topic: dict[str, list[int]] = {}
        named: set[str] = set()
        for topic, p in owned:
            named.add(topic)
            count = counts.get(topic)
            if count is None or not 0 <= p < count:
                continue
            flags = self.assigned.get(topic)
            if flags is None:
                flags = self.assigned[topic] = bytearray(count)
            if flags[p]:
                continue
            flags[p] = 1
            parts = by_topic.get(topic)
            if parts is None:
                by_topic[topic] = [p]
            else:
                parts.append(p)
        return by_topic, len(named)

    # --- what both builders read ----------------------------------------------------------------

    def topic_order_key(self, topic: str):
        """Kafka orders topic ids with ``Uuid.compareTo``; without ids, by name."""
        if self.with_topic_ids:
            return uuid_compare_key(self.spec.topics[topic].topic_id)
        return topic

    def partition_objects(self, topic: str) -> tuple[TopicPartition, ...] | list[TopicPartition]:
        """``TopicPartition(topic, p)`` for every partition, the topic spec's kept objects if it has them."""
        topic_spec = self.spec.topics[topic]
        if topic_spec.name == topic:
            return topic_spec.partition_objects
        return [TopicPartition(topic, p) for p in range(topic_spec.partitions)]

    @cached_property
    def subscription_classes(self) -> tuple[dict[tuple[str, ...], int], list[int]]:
        """:func:`~assignors._common.subscription_classes` of the members (in spec order)."""
        return subscription_classes(self.spec.members)

    @cached_property
    def kept_counts(self) -> np.ndarray:
        """Per member, how many partitions of its previous assignment are of topics it subscribes to."""
        counts = [sum(len(parts) for topic, parts in previous.items() if topic in subscribed) if previous else 0
                  for previous, subscribed in zip(self.previous, self.subscriptions)]
        return np.array(counts, dtype=np.int64)

    @cached_property
    def previous_lists(self) -> list[list[TopicPartition]]:
        """Per member, its previous partitions of the topics it subscribes to, sorted by (topic,
        partition): its answer when it keeps all of them."""
        lists = []
        for previous, subscribed in zip(self.previous, self.subscriptions):
            tps: list[TopicPartition] = []
            for topic in sorted(t for t in previous if t in subscribed):
                objects = self.partition_objects(topic)
                tps.extend(map(objects.__getitem__, sorted(previous[topic])))
            lists.append(tps)
        return lists

    def previous_in_java_order(self, member: int) -> list[tuple[str, list[int]]]:
        """A member's previous assignment as Kafka iterates it: topics in ``HashMap`` order (by
        name without topic ids), each topic's partitions in ``HashSet`` order."""
        walk = self._java_previous.get(member)
        if walk is None:
            by_topic = self.previous[member]
            topics = list(by_topic)
            if len(topics) > 1:
                if self.with_topic_ids:
                    ids = [self.spec.topics[t].topic_id for t in topics]
                    # Collectors.toMap fills a default HashMap; deleted topics count towards its size.
                    capacity = table_capacity(self.previous_topic_count[member])
                    order = java_hash_order([uuid_hash(u) for u in ids], capacity=capacity,
                                            compare_keys=lambda: [uuid_compare_key(u) for u in ids])
                    topics = [topics[i] for i in order]
                else:
                    topics.sort()
            walk = self._java_previous[member] = [(t, partition_set_order(by_topic[t])) for t in topics]
        return walk

    @cached_property
    def partition_layout(self) -> tuple[list[str], list[int], np.ndarray]:
        """The subscribed topics that exist, in name order; where each starts in a flat layout of
        their partitions (one more entry: the total); and that layout, an object array of every
        partition (``TopicPartition``), topic after topic, partitions ascending."""
        topics = list(self.partitions)
        offsets = [0]
        for topic in topics:
            offsets.append(offsets[-1] + self.partitions[topic])
        flat = np.empty(offsets[-1], dtype=object)
        for t, topic in enumerate(topics):
            flat[offsets[t]:offsets[t + 1]] = self.partition_objects(topic)
        return topics, offsets, flat

    # --- what the heterogeneous builder reads ----------------------------------------------------

    @cached_property
    def topic_layout(self) -> TopicLayout:
        """The subscribed topics in name order, laid out for the heterogeneous builder."""
        return TopicLayout(self)

    # --- what the homogeneous builder reads ------------------------------------------------------

    @cached_property
    def homogeneous_topics(self) -> list[str]:
        """The first member's existing topics as ``new HashSet<>(subscribedTopicIds())`` iterates
        them (the homogeneous builder's topic order); name order without topic ids."""
        if not self.members:
            return []
        subscribed = self.subscriptions[0]
        if not self.with_topic_ids:
            return sorted(subscribed)
        names = list(self.members[0].topics)
        # The member's names: new HashSet<>(list) in the order the member listed them ...
        names = [names[i] for i in java_hash_order(string_hashes(names), capacity=copy_capacity(len(names)),
                                                     compare_keys=lambda: [java_string_key(t) for t in names])]
        # ... resolved to ids (missing names skipped) and copied into a HashSet sized for every name.
        existing = [t for t in names if t in subscribed]
        ids = [self.spec.topics[t].topic_id for t in existing]
        order = java_hash_order([uuid_hash(u) for u in ids], capacity=copy_capacity(len(names)),
                                compare_keys=lambda: [uuid_compare_key(u) for u in ids])
        return [existing[i] for i in order]

    @cached_property
    def walk_layout(self) -> WalkLayout:
        """The partitions of :attr:`homogeneous_topics` laid out in that order."""
        return WalkLayout(self)

    def unowned(self) -> tuple[list[TopicPartition], np.ndarray]:
        """The partitions no previous assignment holds (``!isPartitionAssigned``) in the homogeneous
        builder's order (:class:`WalkLayout`), and where in that list a topic that sorts before
        the previous one by name starts: a member's share that spans one must be sorted."""
        walk = self.walk_layout
        if not self.any_previous:
            return list(walk.partitions), walk.descents
        free = np.flatnonzero(~walk.held)
        return list(map(walk.partitions.__getitem__, free.tolist())), np.searchsorted(free, walk.descents)


class WalkLayout:
    """Every partition of the homogeneous builder's topics (:attr:`ServerGroup.homogeneous_topics`),
    topic by topic in that order, each topic's ascending: ``partitions`` (``TopicPartition``),
    ``held`` (whether a previous assignment holds it: the inverted index laid out the same way),
    ``in_name_order`` (its position in :attr:`ServerGroup.partition_layout`), ``descents`` (the
    positions where a topic that sorts before the previous one by name starts) and ``total``."""

    def __init__(self, group: ServerGroup) -> None:
        names, offsets, _ = group.partition_layout
        offset_of = dict(zip(names, offsets))
        runs, held, positions, descents = [], [], [], []
        total = 0
        previous_topic = None
        for topic in group.homogeneous_topics:
            objects = group.partition_objects(topic)
            if not objects:
                continue
            flags = group.assigned.get(topic)
            held.append(np.zeros(len(objects), dtype=bool) if flags is None else
                        np.frombuffer(flags, dtype=np.uint8).astype(bool))
            positions.append(np.arange(offset_of[topic], offset_of[topic] + len(objects), dtype=np.int64))
            if previous_topic is not None and topic < previous_topic:
                descents.append(total)
            runs.append(objects)
            total += len(objects)
            previous_topic = topic
        self.partitions: list[TopicPartition] = list(chain.from_iterable(runs))
        self.held = np.concatenate(held) if held else np.zeros(0, dtype=bool)
        self.in_name_order = np.concatenate(positions) if positions else np.zeros(0, dtype=np.int64)
        self.descents = np.array(descents, dtype=np.int64)
        self.total = total
        #: Where each topic starts in the name-ordered layout (for given-up partitions).
        self.name_offsets = offset_of


def partition_set_order(partitions: list[int]) -> list[int]:
    """``new HashSet<>(partitions)`` iterated (Java 17)."""
    if len(partitions) <= 1:
        return partitions
    capacity = copy_capacity(len(partitions))
    if max(partitions) < capacity:
        return sorted(partitions)  # every partition in its own bucket, buckets ascending
    order = java_hash_order(list(map(integer_hash, partitions)), capacity=capacity, compare_keys=partitions)
    return [partitions[i] for i in order]


class TopicLayout:
    """The subscribed topics (in name order, numbered) and their partitions laid out flat
    (:attr:`ServerGroup.partition_layout`): topic ``t`` holds positions ``offsets[t]`` to
    ``offsets[t + 1]``. ``previous_owners`` says, per position, which member's previous assignment
    holds the partition (-1: none, or a member that no longer subscribes to the topic);
    ``subscriber_lists[t]`` are the topic's subscribers, ascending."""

    def __init__(self, group: ServerGroup) -> None:
        self.topics, starts, self.partitions = group.partition_layout
        number = {topic: t for t, topic in enumerate(self.topics)}
        self.counts = np.array([group.partitions[t] for t in self.topics], dtype=np.int64)
        self.offsets = np.array(starts, dtype=np.int64)
        self.previous_owners = np.full(int(self.offsets[-1]), -1, dtype=np.int64)
        subscribers: list[list[int]] = [[] for _ in self.topics]
        for index, (previous, subscribed) in enumerate(zip(group.previous, group.subscriptions)):
            for topic in subscribed:
                subscribers[number[topic]].append(index)
            for topic, parts in previous.items():
                if topic in subscribed:
                    self.previous_owners[starts[number[topic]] + np.asarray(parts, dtype=np.int64)] = index
        self.subscriber_lists = subscribers
        #: Topics with the same subscribers share a number (their balance is judged the same way).
        numbers: dict[tuple[int, ...], int] = {}
        self.subscriber_set = [numbers.setdefault(tuple(s), len(numbers)) for s in subscribers]
        self.subscriber_counts = np.array([len(s) for s in subscribers], dtype=np.int64)
        #: Kafka's last tie-break between topics: topic id (``Uuid.compareTo``), else name.
        ranks = sorted(range(len(self.topics)), key=lambda t: group.topic_order_key(self.topics[t]))
        self.rank = np.empty(len(self.topics), dtype=np.int64)
        self.rank[ranks] = np.arange(len(self.topics))
