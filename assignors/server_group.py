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

Both builders keep only the previous partitions of topics the member still subscribes to. A claim a
coordinator never produces is dropped: on a partition the topic does not have, or on one an earlier
member (in spec order) subscribed to the topic already claims. A claim on a topic missing from the
metadata (deleted) is dropped too, as Kafka drops it because no subscription resolves to that id;
it still counts towards the size of the member's map. A topic with a negative partition count is
treated as missing.

The view is built once per spec and kept with it (:attr:`GroupSpec.views
<assignors.model.GroupSpec>`), mostly in bulk (NumPy over all claims at once). It holds what the
coordinator holds between assignments and hands the assignor ready-made: the member map, the
resolved subscriptions, each member's target assignment (as owner per partition, and as the sorted
list a kept assignment is answered with), and the iteration orders of these hash structures. What
Kafka's assignors compute from them (the unassigned partitions, quotas, who keeps and who gets
what) is computed by each call. Nothing in the view changes once built; the builders copy what they
change.
"""

from __future__ import annotations

from functools import cached_property
from itertools import chain, repeat

import numpy as np

from ._common import check_unique_member_ids, split_by_owner, subscribers_per_topic, subscription_classes
from .java_order import (
    copy_capacity,
    hashmap_order,
    integer_hash,
    java_hash_order,
    java_string_key,
    string_hashes,
    table_capacity,
    uuid_compare_key,
)
from .model import GroupSpec, MemberSpec, TopicPartition

__all__ = ["ServerGroup", "partition_set_order", "server_group", "uuid_hashes"]

_VIEW_KEY = "server_group"

#: Up to this many (distinct subscription, topic) pairs, which topics each claimant subscribes to is
#: looked up in a table; beyond, claim by claim.
_SUBSCRIPTION_TABLE_LIMIT = 1 << 18


def server_group(spec: GroupSpec) -> ServerGroup:
    """The coordinator's view of ``spec`` (see the module doc), built on first use and kept."""
    view = spec.views.get(_VIEW_KEY)
    if view is None:
        view = spec.views[_VIEW_KEY] = ServerGroup(spec)
    return view


class ServerGroup:
    """The coordinator's view of a group; members are indices in ``GroupSpec.memberIds()`` order.

    The subscribed topics that exist are numbered in name order and their partitions laid out flat,
    topic after topic, partitions ascending (:attr:`partition_layout`); a partition is known by its
    position there.
    """

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
        # Members usually share a few subscription tuples (the codec makes equal ones one object);
        # a tuple's hash is not cached, so they are told apart by identity first.
        by_tuple: dict[int, tuple[frozenset[str], frozenset[str]]] = {}
        name_sets: dict[frozenset[str], frozenset[str]] = {}
        subscriptions: list[frozenset[str]] = []
        for member in self.members:
            known = by_tuple.get(id(member.topics))
            if known is None:
                names = frozenset(member.topics)
                existing = name_sets.get(names)
                if existing is None:
                    existing = name_sets[names] = frozenset(t for t in names if t in counts)
                known = by_tuple[id(member.topics)] = (names, existing)
            subscriptions.append(known[1])
        existing_sets = name_sets
        #: ``SubscriptionType.HOMOGENEOUS``: every member lists the same topic names.
        self.homogeneous = len(name_sets) <= 1
        #: Per member, the subscribed topics that exist (what ``subscribedTopicIds()`` yields).
        self.subscriptions = subscriptions
        #: Partition count of every topic some member subscribes to that exists, in name order.
        self.partitions = {t: counts[t] for t in sorted(frozenset().union(*existing_sets.values()))}
        #: Every topic in the metadata has a topic id, so hash orders of topic ids can be reproduced.
        self.with_topic_ids = bool(spec.topics) and all(t.topic_id is not None for t in spec.topics.values())

        topics = list(self.partitions)
        #: The number of each subscribed topic (name order).
        self.topic_number = {topic: t for t, topic in enumerate(topics)}
        self.offsets = np.zeros(len(topics) + 1, dtype=np.int64)
        np.cumsum([self.partitions[t] for t in topics], out=self.offsets[1:])
        #: Per position, the member whose previous assignment holds the partition (-1: none).
        self.previous_owners = self._previous_owners(existing_sets)
        #: Some member's previous assignment holds a partition of a topic it subscribes to.
        self.any_previous = bool((self.previous_owners >= 0).any())
        self._java_previous: dict[int, list[tuple[str, list[int]]]] = {}

    def _previous_owners(self, existing_sets: dict[frozenset[str], frozenset[str]]) -> np.ndarray:
        """Every member's claims read at once: which are a coordinator's (a partition of a topic the
        member subscribes to, that exists, claimed by no earlier member), and whose they are."""
        owners = np.full(int(self.offsets[-1]), -1, dtype=np.int64)
        lengths = [len(m.owned_partitions) for m in self.spec.members]
        if not any(lengths):
            return owners
        topic_col, partition_col = zip(*chain.from_iterable(m.owned_partitions for m in self.spec.members))
        number = np.fromiter(map(self.topic_number.get, topic_col, repeat(-1)), dtype=np.int64, count=len(topic_col))
        partition = np.fromiter(partition_col, dtype=np.int64, count=len(partition_col))
        claimant = np.repeat(np.array(self.index_of_spec_member, dtype=np.int64), lengths)
        # Whether the claimant subscribes to the topic: a table of the distinct subscriptions (a
        # large group has few), or set by set when there are too many for a table.
        distinct = list(existing_sets.values())
        topics = list(self.partitions)
        if len(distinct) * len(topics) <= _SUBSCRIPTION_TABLE_LIMIT:
            set_number = {id(s): k for k, s in enumerate(distinct)}
            set_of_member = np.array([set_number[id(s)] for s in self.subscriptions], dtype=np.int64)
            # One more column, False, for the claims on topics that are not subscribed (number -1).
            table = np.array([[t in s for t in topics] + [False] for s in distinct], dtype=bool)
            subscribed = table[set_of_member[claimant], number]
        else:
            subscriptions = self.subscriptions
            subscribed = np.fromiter(map(frozenset.__contains__, map(subscriptions.__getitem__, claimant.tolist()),
                                         topic_col), dtype=bool, count=len(topic_col))
        counts = np.append(np.diff(self.offsets), 0)
        valid = subscribed & (number >= 0) & (partition >= 0) & (partition < counts[number])
        position = self.offsets[number[valid]] + partition[valid]
        # The first claimant (in spec order) of a partition keeps it.
        position, first = np.unique(position, return_index=True)
        owners[position] = claimant[valid][first]
        return owners

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
    def partition_layout(self) -> tuple[list[str], list[int], np.ndarray]:
        """The subscribed topics that exist, in name order; where each starts in the flat layout
        (one more entry: the total); and the layout itself, an object array of every partition
        (``TopicPartition``)."""
        topics = list(self.partitions)
        offsets = self.offsets.tolist()
        # fromiter keeps each TopicPartition whole (np.array would read the tuples as rows).
        flat = np.fromiter(chain.from_iterable(map(self.partition_objects, topics)), dtype=object, count=offsets[-1])
        return topics, offsets, flat

    @cached_property
    def subscription_classes(self) -> tuple[dict[tuple[str, ...], int], list[int]]:
        """:func:`~assignors._common.subscription_classes` of the members (in spec order)."""
        return subscription_classes(self.spec.members)

    @cached_property
    def kept_counts(self) -> np.ndarray:
        """Per member, how many partitions of its previous assignment it may keep (of topics it
        subscribes to)."""
        held = self.previous_owners[self.previous_owners >= 0]
        return np.bincount(held, minlength=len(self.members)).astype(np.int64)

    @cached_property
    def previous_lists(self) -> list[list[TopicPartition]]:
        """Per member, those partitions sorted by (topic, partition): its answer when it keeps all."""
        n = len(self.members)
        owners = np.where(self.previous_owners >= 0, self.previous_owners, n)
        return split_by_owner(n + 1, owners, self.partition_layout[2])[:n]

    def previous_in_java_order(self, member: int) -> list[tuple[str, list[int]]]:
        """A member's previous assignment of the topics it subscribes to, as Kafka iterates it:
        topics in ``HashMap`` order (by name without topic ids), each topic's partitions in
        ``HashSet`` order (in the order they were listed, as ``Assignment.fromRecord`` adds them).
        Kept: it is the order of the coordinator's own structures."""
        walk = self._java_previous.get(member)
        if walk is None:
            walk = self._java_previous[member] = self._previous_in_java_order(member)
        return walk

    def _previous_in_java_order(self, member: int) -> list[tuple[str, list[int]]]:
        owners, offsets, number = self.previous_owners, self.offsets, self.topic_number
        by_topic: dict[str, list[int]] = {}
        named: set[str] = set()
        for topic, p in self.members[member].owned_partitions:
            named.add(topic)
            t = number.get(topic)
            if t is not None and 0 <= p < offsets[t + 1] - offsets[t] and owners[offsets[t] + p] == member:
                by_topic.setdefault(topic, []).append(p)
        topics = list(by_topic)
        if len(topics) > 1:
            if self.with_topic_ids:
                ids = [self.spec.topics[t].topic_id for t in topics]
                # Collectors.toMap fills a default HashMap; deleted topics count towards its size.
                order = java_hash_order(uuid_hashes(ids).tolist(), capacity=table_capacity(len(named)),
                                        compare_keys=lambda: [uuid_compare_key(u) for u in ids])
                topics = [topics[i] for i in order]
            else:
                topics.sort()
        return [(t, partition_set_order(by_topic[t])) for t in topics]

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
        order = java_hash_order(uuid_hashes(ids).tolist(), capacity=copy_capacity(len(names)),
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
            return walk.partitions, walk.descents  # read only: the builder slices it
        free = np.flatnonzero(~walk.held)
        return list(map(walk.partitions.__getitem__, free.tolist())), np.searchsorted(free, walk.descents)


class WalkLayout:
    """Every partition of the homogeneous builder's topics (:attr:`ServerGroup.homogeneous_topics`),
    topic by topic in that order, each topic's ascending: ``partitions`` (``TopicPartition``),
    ``held`` (whether a previous assignment holds it: the inverted index laid out the same way),
    ``in_name_order`` (its position in :attr:`ServerGroup.partition_layout`), ``descents`` (the
    positions where a topic that sorts before the previous one by name starts) and ``total``."""

    def __init__(self, group: ServerGroup) -> None:
        walk = np.array([group.topic_number[t] for t in group.homogeneous_topics], dtype=np.int64)
        starts = group.offsets[walk]
        lengths = group.offsets[walk + 1] - starts
        self.total = int(lengths.sum())
        first = np.cumsum(lengths) - lengths  # where each topic starts in the walk
        self.in_name_order = np.repeat(starts - first, lengths) + np.arange(self.total, dtype=np.int64)
        #: The same as an object array, to gather from.
        self.objects: np.ndarray = group.partition_layout[2][self.in_name_order]
        self.partitions: list[TopicPartition] = self.objects.tolist()
        self.held = group.previous_owners[self.in_name_order] >= 0
        # Topic numbers follow the names, so a smaller number than the previous topic's is a descent.
        shown = lengths > 0
        walk, first = walk[shown], first[shown]
        self.descents = first[1:][walk[1:] < walk[:-1]]


def partition_set_order(partitions: list[int]) -> list[int]:
    """``new HashSet<>(partitions)`` iterated (Java 17)."""
    if len(partitions) <= 1:
        return partitions
    capacity = copy_capacity(len(partitions))
    if max(partitions) < capacity:
        return sorted(partitions)  # every partition in its own bucket, buckets ascending
    order = java_hash_order(list(map(integer_hash, partitions)), capacity=capacity, compare_keys=partitions)
    return [partitions[i] for i in order]


def uuid_hashes(ids: list) -> np.ndarray:
    """Kafka ``Uuid.hashCode`` of each ``uuid.UUID``, unsigned 32-bit (see :func:`~assignors.java_order.uuid_hash`)."""
    if not ids:
        return np.zeros(0, dtype=np.int64)
    halves = np.frombuffer(b"".join(u.bytes for u in ids), dtype=">u8").reshape(-1, 2).astype(np.uint64)
    x = halves[:, 0] ^ halves[:, 1]
    return ((x >> np.uint64(32)) ^ (x & np.uint64(0xFFFFFFFF))).astype(np.int64)


class TopicLayout:
    """The subscribed topics (numbered in name order) as the heterogeneous builder reads them:
    ``counts``, ``offsets`` and ``partitions`` (:attr:`ServerGroup.partition_layout`), ``previous_owners``
    (:attr:`ServerGroup.previous_owners`), ``subscriber_lists[t]`` (the topic's subscribers, ascending),
    ``subscriber_set[t]`` (topics with the same subscribers share a number), ``subscriber_counts`` and
    ``rank`` (Kafka's last tie-break between topics: topic id, ``Uuid.compareTo``, else name)."""

    def __init__(self, group: ServerGroup) -> None:
        self.topics, _, self.partitions = group.partition_layout
        self.offsets = group.offsets
        self.counts = np.diff(group.offsets)
        self.previous_owners = group.previous_owners
        # Subscribers per topic, grouped by subscription (topics with the same subscribers share one
        # array), listed in Kafka's member order and then numbered in it.
        spec_in_kafka_order = [0] * len(group.members)
        for spec_index, index in enumerate(group.index_of_spec_member):
            spec_in_kafka_order[index] = spec_index
        arrays = subscribers_per_topic(group.spec, spec_in_kafka_order, group.subscription_classes)
        kafka_index = np.array(group.index_of_spec_member, dtype=np.int64)
        as_lists: dict[int, tuple[int, list[int]]] = {}
        self.subscriber_lists: list[list[int]] = []
        self.subscriber_set: list[int] = []
        for topic in self.topics:
            array = arrays[topic]
            shared = as_lists.get(id(array))
            if shared is None:
                shared = as_lists[id(array)] = (len(as_lists), kafka_index[array].tolist())
            self.subscriber_set.append(shared[0])
            self.subscriber_lists.append(shared[1])
        self.subscriber_counts = np.array([len(s) for s in self.subscriber_lists], dtype=np.int64)
        self.rank = np.empty(len(self.topics), dtype=np.int64)
        if group.with_topic_ids:
            halves = np.frombuffer(b"".join(group.spec.topics[t].topic_id.bytes for t in self.topics),
                                   dtype=">i8").reshape(-1, 2) if self.topics else np.zeros((0, 2), dtype=np.int64)
            order = np.lexsort((halves[:, 1], halves[:, 0]))  # signed halves: Uuid.compareTo
        else:
            order = np.arange(len(self.topics))  # already in name order
        self.rank[order] = np.arange(len(self.topics))
