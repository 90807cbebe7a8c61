"""Integer encoding of a group's partitions and of the members' claims.

Every assignable partition gets a global index ``g``: topics sorted by name, partitions ascending
inside a topic. That is exactly the order in which Kafka's sticky assignor lists unassigned
partitions, so "sorted by (topic, partition)" becomes "sorted by g" and set operations become
boolean masks. Claims (owned partitions reported by members) become parallel arrays.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import accumulate, chain, repeat
from operator import itemgetter
from typing import Mapping, Sequence

import numpy as np

from .._common import distinct_subscriptions, partitions_of
from ..java_order import string_hash_array, table_capacity
from ..columns import AssignmentColumns
from ..model import GroupSpec, MemberSpec, TopicPartition


@dataclass(frozen=True, slots=True)
class Layout:
    """The assignable partitions: topics subscribed by some member that exist with >= 1 partition."""

    topics: list[str]  # sorted by name; topic index = position
    topic_index: dict[str, int]
    counts: np.ndarray  # partitions per topic
    offsets: np.ndarray  # offsets[t] = first global index of topic t; offsets[T] = total
    total: int
    #: The members' distinct subscription lists (see :func:`distinct_subscriptions`).
    subscriptions: tuple[tuple[str, ...], ...] = ()
    #: The spec the layout was built from, for :attr:`objects`.
    spec: GroupSpec | None = None
    _objects: tuple[Sequence[TopicPartition], ...] | None = field(default=None, repr=False, compare=False)

    @property
    def objects(self) -> tuple[Sequence[TopicPartition], ...]:
        """Per topic (same order as ``topics``), its partitions as the topic spec's kept
        ``TopicPartition`` objects (:func:`assignors._common.partitions_of`). Built on first use:
        an answer given as columns needs none (a huge group's are 500,000 objects, 0.1 s)."""
        if self._objects is None:
            object.__setattr__(self, "_objects", tuple([partitions_of(self.spec, t) for t in self.topics]))
        return self._objects

    def topic_of(self, g: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.offsets, g, side="right") - 1


def build_layout(spec: GroupSpec) -> Layout:
    subscriptions = tuple(distinct_subscriptions(spec.members))
    names: set[str] = set()
    for subscription in subscriptions:
        names.update(subscription)
    topic_specs = spec.topics
    topics = sorted([t for t in names if t in topic_specs and topic_specs[t].partitions > 0])
    counts = [topic_specs[t].partitions for t in topics]
    offsets = [0, *accumulate(counts)]  # summed in Python: NumPy's call costs more on a few topics
    return Layout(
        topics=topics,
        topic_index={t: i for i, t in enumerate(topics)},
        counts=np.array(counts, dtype=np.int64),
        offsets=np.array(offsets, dtype=np.int64),
        total=offsets[-1],
        subscriptions=subscriptions,
        spec=spec,
    )


@dataclass(slots=True)
class Claims:
    """Every member's claimed (owned) partitions that name an assignable partition, in claim order.

    ``member`` is the claimant's position in the spec (ascending: members in spec order, each
    member's claims in its own order), ``g`` the global index and ``partition`` the partition
    number. ``held`` is filled in by owned-partition resolution.
    """

    member: np.ndarray
    g: np.ndarray
    held: np.ndarray
    doubly: np.ndarray  # over global indices: claimed twice within one generation
    #: The partition number of each claim (``g`` minus its topic's offset); None when the claims
    #: were built without it (tests), and then derived from ``g`` where needed.
    partition: np.ndarray | None = None


def collect_claims(members: Sequence[MemberSpec], layout: Layout) -> Claims:
    owned = [m.owned_partitions for m in members]  # a comprehension reads slots faster than attrgetter
    lengths = list(map(len, owned))
    n = sum(lengths)
    if n == 0 or layout.total == 0:
        empty = np.zeros(0, dtype=np.int64)
        return Claims(empty, empty, np.zeros(0, dtype=bool), np.zeros(layout.total, dtype=bool), empty)
    flat = list(chain.from_iterable(owned))
    member = np.arange(len(members), dtype=np.int64).repeat(lengths)
    # Both columns in one pass in C; a claim is a (topic, partition) pair.
    topics, numbers = zip(*flat)
    partition = _int_column(numbers)
    try:
        topic = _int_column(_look_up(layout.topic_index, topics))
    except KeyError:  # a claim of a topic nobody subscribes to, or that no longer exists
        topic = np.fromiter(map(layout.topic_index.get, topics, repeat(-1)), dtype=np.int64, count=n)
    else:
        # Every claim names an assignable partition (the usual case): nothing to filter. (A negative
        # partition number is a huge unsigned one.)
        if (partition.view(np.uint64) < layout.counts[topic].view(np.uint64)).all():
            return Claims(
                member=member,
                g=layout.offsets[topic] + partition,
                held=np.zeros(n, dtype=bool),
                doubly=np.zeros(layout.total, dtype=bool),
                partition=partition,
            )
    known = topic >= 0
    # A claim of a partition number the topic does not have (deleted and re-created smaller) is
    # treated like a claim of a deleted topic: dropped. Kafka would keep it and hand it out.
    valid = known & (partition >= 0)
    valid[known] &= partition[known] < layout.counts[topic[known]]
    keep = np.flatnonzero(valid)
    g = layout.offsets[topic[keep]] + partition[keep]
    return Claims(
        member=member[keep],
        g=g,
        held=np.zeros(len(keep), dtype=bool),
        doubly=np.zeros(layout.total, dtype=bool),
        partition=partition[keep],
    )


def claims_of_columns(members: Sequence[MemberSpec], layout: Layout, owned: AssignmentColumns) -> Claims:
    """:func:`collect_claims` of members whose owned partitions are ``owned`` (a member it does not
    list owns nothing; a run of someone who is not a member is no claim)."""
    position = {m.member_id: i for i, m in enumerate(members)}
    member = np.repeat(np.array([position.get(member_id, -1) for member_id in owned.members], dtype=np.int64),
                       owned.counts)
    topic = np.array([layout.topic_index.get(name, -1) for name in owned.topics], dtype=np.int64)[owned.topic] \
        if len(owned) else np.zeros(0, dtype=np.int64)
    partition = owned.partition
    # As in collect_claims: a claim of a topic nobody subscribes to, or that no longer exists, or
    # of a partition number the topic does not have, is dropped.
    # Topic -1 (not in the layout) reads the extra last slot: no partitions, so no valid claim.
    valid = (member >= 0) & (partition >= 0) & (partition < np.append(layout.counts, 0)[topic])
    if not valid.all():
        member, topic, partition = member[valid], topic[valid], partition[valid]
    if len(member) > 1 and (member[1:] < member[:-1]).any():  # claims go in spec order, as members' are
        order = np.argsort(member, kind="stable")
        member, topic, partition = member[order], topic[order], partition[order]
    return Claims(member=member, g=layout.offsets[topic] + partition, held=np.zeros(len(member), dtype=bool),
                  doubly=np.zeros(layout.total, dtype=bool), partition=partition)


def _look_up(mapping: Mapping[str, int], keys: tuple[str, ...]) -> tuple[int, ...]:
    """``mapping[k]`` for every key, in one C call (``itemgetter`` of many keys returns a tuple)."""
    if len(keys) == 1:
        return (mapping[keys[0]],)
    return itemgetter(*keys)(mapping)


def _int_column(values: tuple[int, ...]) -> np.ndarray:
    """``values`` as an int64 array. ``bytes()`` reads a tuple of ints below 256 (topic indices,
    partition numbers of small topics) in C about twice as fast as ``np.fromiter``; it refuses
    anything else, which then takes the general way."""
    try:
        return np.frombuffer(bytes(values), dtype=np.uint8).astype(np.int64)
    except (ValueError, TypeError):
        return np.fromiter(values, dtype=np.int64, count=len(values))


def partition_objects(layout: Layout, claims: Claims | None = None) -> np.ndarray:
    """Global index -> ``TopicPartition``, as an object array (the topic specs' kept objects;
    ``claims`` is accepted for callers of the former signature and not needed)."""
    # fromiter keeps each TopicPartition whole; np.array would read a list of pairs as rows
    return np.fromiter(chain.from_iterable(layout.objects), dtype=object, count=layout.total)


def hashmap_visit_order(member_ids: Sequence[str]) -> np.ndarray:
    """Positions of ``member_ids`` in the iteration order of a fresh Java ``HashMap`` filled in order.

    Same answer as :func:`assignors.java_order.hashmap_order` (tests check it) for distinct ids,
    as positions, with the bucket sort done by NumPy.
    """
    n = len(member_ids)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    h = string_hash_array(member_ids)  # 32-bit values in uint64
    bucket = (h ^ (h >> np.uint64(16))) & np.uint64(table_capacity(n) - 1)
    # A stable sort keeps insertion order inside a bucket, as Java's bucket lists do.
    return np.argsort(bucket, kind="stable")


def member_id_ranks(members: Sequence[MemberSpec]) -> np.ndarray:
    """Each member's position in member-id order: the tie-break of Kafka's (size, member id) sets."""
    ids = [m.member_id for m in members]
    ranks = np.empty(len(ids), dtype=np.int64)
    ranks[sorted(range(len(ids)), key=ids.__getitem__)] = np.arange(len(ids), dtype=np.int64)
    return ranks
