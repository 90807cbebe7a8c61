"""A member -> partitions map as columns of integers, for groups too big for one object per partition.

A 10,000-member group of 500,000 partitions holds 500,000 ``TopicPartition`` objects per map, and
every step of a rebalance that walks them (decoding the stored assignment, the sticky assignor's
claims, the metrics, revocations and storing it again) cost 0.1-0.4 s on its own. As columns the
same map is a handful of arrays: the members in order with their partition counts (each member's
partitions are one contiguous run, in its list order), the topic names, and per partition its
topic's number among those names and its partition number. The state codec stores exactly these
columns, and the sticky assignors read and answer them (:func:`assignors.sticky.assign_sticky_columns`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from .model import TopicPartition, TopicSpec

__all__ = ["AssignmentColumns", "ColumnsAnswer"]


@dataclass(frozen=True, slots=True, eq=False)
class AssignmentColumns:
    """``members[i]`` holds ``counts[i]`` partitions: the ``i``-th run of ``topic``/``partition``.

    ``topic`` numbers index ``topics``. Arrays are int64 and read-only by convention (a map is a
    value). Two maps are equal (:meth:`same_as`) when they list the same members with the same
    partitions in the same order, however their topics are numbered.
    """

    members: list[str]
    counts: np.ndarray
    topics: list[str]
    topic: np.ndarray
    partition: np.ndarray

    @classmethod
    def empty(cls) -> "AssignmentColumns":
        none = np.zeros(0, dtype=np.int64)
        return cls([], none, [], none, none)

    @classmethod
    def from_lists(cls, assignment: Mapping[str, Sequence[TopicPartition]]) -> "AssignmentColumns":
        """The columns of ``assignment``; topics numbered in the order they first appear."""
        return cls.from_pairs(list(assignment), list(assignment.values()))

    @classmethod
    def from_pairs(cls, members: list[str], lists: Sequence[Sequence[TopicPartition]]) -> "AssignmentColumns":
        """:meth:`from_lists` of ``zip(members, lists)``, where a member may be listed twice."""
        counts = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
        total = int(counts.sum())
        if total == 0:
            none = np.zeros(0, dtype=np.int64)
            return cls(members, counts, [], none, none)
        names, numbers = zip(*[tp for tps in lists for tp in tps])
        topic_number = dict.fromkeys(names)
        for i, name in enumerate(topic_number):
            topic_number[name] = i
        return cls(members, counts, list(topic_number),
                   np.fromiter(map(topic_number.__getitem__, names), dtype=np.int64, count=total),
                   np.fromiter(numbers, dtype=np.int64, count=total))

    @classmethod
    def from_runs(cls, members: list[str], owner: np.ndarray, topics: list[str], topic: np.ndarray,
                  partition: np.ndarray) -> "AssignmentColumns":
        """The map where ``members[owner[k]]`` holds partition ``k``, each member's partitions in
        array order (``owner`` indexes ``members``)."""
        # A stable sort of 16-bit keys is a radix sort: linear, and what a group of any real size uses.
        order = np.argsort(owner.astype(np.int16) if len(members) < 2**15 else owner, kind="stable")
        return cls(members, np.bincount(owner, minlength=len(members)).astype(np.int64), topics,
                   topic[order], partition[order])

    def __len__(self) -> int:
        """How many partitions the map lists (over all members)."""
        return len(self.topic)

    def runs(self) -> list[tuple[int, int]]:
        """Each member's run as (start, end) places in the partition columns."""
        ends = np.cumsum(self.counts).tolist()
        return list(zip([0, *ends[:-1]], ends))

    def select(self, members: Sequence[str]) -> "AssignmentColumns":
        """The runs of ``members``, in that order; a member the map does not list holds nothing."""
        if list(members) == self.members:
            return self
        run_of = dict(zip(self.members, self.runs()))
        picked = [run_of.get(member_id, (0, 0)) for member_id in members]
        new_counts = np.array([end - start for start, end in picked], dtype=np.int64)
        index = _runs_index([start for start, _ in picked], new_counts)
        return AssignmentColumns(list(members), new_counts, self.topics, self.topic[index], self.partition[index])

    def plus(self, other: "AssignmentColumns") -> "AssignmentColumns":
        """This map's runs, then ``other``'s (whose members this map must not list)."""
        if not other.members:
            return self
        if not self.members:
            return other
        names = dict.fromkeys(self.topics)
        names.update(dict.fromkeys(other.topics))
        number = {name: i for i, name in enumerate(names)}
        renumber = np.array([number[name] for name in other.topics], dtype=np.int64)
        return AssignmentColumns(self.members + other.members, np.concatenate([self.counts, other.counts]),
                                 list(names), np.concatenate([self.topic, renumber[other.topic]]),
                                 np.concatenate([self.partition, other.partition]))

    def keys(self, topic_number: Mapping[str, int]) -> np.ndarray:
        """Per listed partition, one integer naming it in a numbering shared with other maps:
        ``topic_number[name] << 32 | partition`` (-1 for a topic ``topic_number`` lacks)."""
        if len(self.topic) == 0:
            return np.zeros(0, dtype=np.int64)
        shared = np.array([topic_number.get(name, -1) for name in self.topics], dtype=np.int64)[self.topic]
        return np.where(shared >= 0, (shared << 32) | (self.partition & 0xFFFFFFFF), -1)

    def changed_runs(self, other: "AssignmentColumns", keys: np.ndarray, other_keys: np.ndarray
                     ) -> list[tuple[int, int]]:
        """Which of this map's members list something and do not list exactly that (the same
        partitions in the same order) in ``other`` (where a member it lacks holds nothing), as
        (index into :attr:`members`, index into ``other.members`` or -1 if it lacks the member;
        of a member it lists twice, the last); ``keys`` and ``other_keys`` are both maps'
        :meth:`keys` in one numbering. A sticky rebalance of a huge group changes a few of 10,000
        runs: compared as arrays, not run by run in Python."""
        place = {member_id: i for i, member_id in enumerate(other.members)}
        there = np.array([place.get(member_id, -1) for member_id in self.members], dtype=np.int64)
        other_starts = np.cumsum(other.counts) - other.counts
        starts = np.cumsum(self.counts) - self.counts
        listed = there >= 0
        same_size = np.zeros(len(self.members), dtype=bool)
        same_size[listed] = other.counts[there[listed]] == self.counts[listed]
        compared = np.flatnonzero(same_size & (self.counts > 0))
        sizes = self.counts[compared]
        differs = (keys[_runs_index(starts[compared], sizes)]
                   != other_keys[_runs_index(other_starts[there[compared]], sizes)])
        changed = np.zeros(len(self.members), dtype=bool)
        changed[~same_size & (self.counts > 0)] = True
        changed[compared[np.repeat(np.arange(len(compared)), sizes)[differs]]] = True
        changed_members = np.flatnonzero(changed)
        return list(zip(changed_members.tolist(), there[changed_members].tolist()))

    def holds(self, tps: Sequence[TopicPartition]) -> np.ndarray:
        """Per partition of ``tps``, whether some member of the map lists it."""
        numbering = {name: i for i, name in enumerate(self.topics)}
        wanted = np.array([(numbering[t] << 32) | (p & 0xFFFFFFFF) if t in numbering else -1 for t, p in tps],
                          dtype=np.int64)
        return (wanted >= 0) & np.isin(wanted, self.keys(numbering))

    def to_lists(self, topics: Mapping[str, TopicSpec] | None = None) -> dict[str, list[TopicPartition]]:
        """The map as lists of ``TopicPartition``. With the group's ``topics``, a partition of a
        topic it knows is that topic spec's own object (:attr:`TopicSpec.partition_objects`), so a
        huge group's 500,000 partitions are looked up, not built; any other partition (a deleted
        topic, a partition past the topic's count) is built. Equal either way: only identity
        differs."""
        pool, ids = self._partition_pool(topics or {})
        flat = list(map(pool.__getitem__, ids.tolist()))
        out, at = {}, 0
        for member_id, count in zip(self.members, self.counts.tolist()):
            out[member_id] = flat[at:at + count]
            at += count
        return out

    def same_as(self, other: "AssignmentColumns") -> bool:
        if self.members != other.members or not np.array_equal(self.counts, other.counts):
            return False
        names = {name: i for i, name in enumerate(self.topics)}
        # This map's keys are all >= 0, so equal keys also mean ``other`` names no other topic.
        return np.array_equal(self.keys(names), other.keys(names))

    def _partition_pool(self, topics: Mapping[str, TopicSpec]) -> tuple[list[TopicPartition], np.ndarray]:
        """Every listed partition as an index into a pool of partition objects: the known topics'
        own objects first, then one built object per partition that none of them holds."""
        pool: list[TopicPartition] = []
        names = self.topics
        offsets = np.full(len(names), -1, dtype=np.int64)
        counts = np.zeros(len(names), dtype=np.int64)
        for number, name in enumerate(names):
            spec = topics.get(name)
            if spec is not None and spec.partitions > 0:
                offsets[number], counts[number] = len(pool), spec.partitions
                pool.extend(spec.partition_objects)
        topic, partition = self.topic, self.partition
        known = (offsets[topic] >= 0) & (partition >= 0) & (partition < counts[topic])
        ids = offsets[topic] + partition
        if not known.all():
            unknown = np.flatnonzero(~known)
            ids[unknown] = len(pool) + np.arange(len(unknown))
            pool.extend(TopicPartition(names[t], p) for t, p in zip(topic[unknown].tolist(),
                                                                   partition[unknown].tolist()))
        return pool, ids


@dataclass(frozen=True, slots=True)
class ColumnsAnswer:
    """An assignor's answer (:class:`~assignors.model.GroupAssignment`) with the assignment as columns."""

    assignment: AssignmentColumns
    transferring: dict[TopicPartition, str]


def _runs_index(starts: Sequence[int], counts: Sequence[int]) -> np.ndarray:
    """The positions ``starts[i] .. starts[i] + counts[i] - 1`` of every run, runs in order."""
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(counts)
    # Within the concatenation, position k of run i is starts[i] + (k - (ends[i] - counts[i])).
    shift = np.asarray(starts, dtype=np.int64) - (ends - counts)
    return np.arange(total, dtype=np.int64) + np.repeat(shift, counts)
