"""KIP-848's server-side ``UniformAssignor`` (spec sections 6.1 and 6.2).

Guarantees, in priority order: **balance over stickiness**.

* Balance: with identical subscriptions every member ends within one partition of every other.
  With different subscriptions the result is close to that but not always exact (Kafka accepts,
  e.g., 9/10/11 for overlapping, non-identical subscriptions).
* Stickiness: a member keeps what it owned (its ``owned_partitions``, which play the part of
  Kafka's current target assignment) as far as balance allows.

Worked example (identical subscriptions): A owns t1-0, t1-1, t2-0, t2-1 and B owns t1-2, t2-2.
Each member's quota is 3, so A keeps t1-0, t1-1, t2-0 and gives up t2-1, which goes to B.

:func:`assign_uniform` dispatches like Kafka's facade: the homogeneous builder when every member
subscribes to the same set of topics, the heterogeneous one otherwise. Both builders are public so
that either can be run on any group (Kafka's own tests do that).

Where this port has to pick an order Kafka leaves to Java hash structures:

* Members: spec order. Kafka iterates ``GroupSpec.memberIds()``, a ``HashMap`` key set in
  production and a ``TreeMap`` in Kafka's tests; spec order lets a caller reproduce either.
* Topics: our specs name topics, they carry no topic ids. Where Kafka walks a ``HashSet<Uuid>``
  (the homogeneous builder's list of unassigned partitions, a member's current assignment) or
  breaks ties by ``Uuid`` order (the heterogeneous builder's topic sort), this port uses topic
  name order instead, which is deterministic. Results can therefore differ from a Kafka run whose
  topic ids happen to hash in another order (spec scenario 46 is such a case).
* Partitions of one topic in a member's current assignment are walked in ascending order (what a
  Java ``HashSet<Integer>`` of small partition numbers does).

Inputs Kafka never sees are normalised first: an owned partition of a topic the member no longer
subscribes to, or that no longer exists, is dropped; a partition claimed by several members stays
with the first of them in spec order. A member's assignment is listed sorted by
(topic, partition); Kafka keeps unordered sets.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat

import numpy as np

from ._common import check_unique_member_ids, paused_gc, subscribers_per_topic
from .errors import AssignmentError, InvalidGroupSpecError
from .model import GroupAssignment, GroupSpec, TopicPartition
from .server_range import unknown_topic_error

__all__ = ["assign_uniform", "assign_uniform_heterogeneous", "assign_uniform_homogeneous"]

#: Kafka's cap on balancing sweeps over the topics (``MAX_ITERATION_COUNT``): each sweep roughly
#: halves the imbalance of overlapping subscriptions, and identical ones settle in one.
MAX_BALANCE_SWEEPS = 16


def assign_uniform(spec: GroupSpec) -> GroupAssignment:
    """Assign ``spec`` the way Kafka's server-side ``UniformAssignor`` does.

    Raises :class:`AssignmentError` if a member subscribes to a topic missing from ``spec.topics``.
    """
    if _same_subscriptions(spec):
        return assign_uniform_homogeneous(spec)
    return assign_uniform_heterogeneous(spec)


def assign_uniform_homogeneous(spec: GroupSpec) -> GroupAssignment:
    """Kafka's ``UniformHomogeneousAssignmentBuilder``: for groups whose members all subscribe to the
    same topics (raises :class:`InvalidGroupSpecError` otherwise).

    Each member in order gets a quota (``total // M``, plus one for the first ``total % M``
    members), keeps what it owned up to that quota, and gives up the rest; the members below
    quota are then filled, in order, from the unowned and given-up partitions.
    """
    check_unique_member_ids(spec)
    if not _same_subscriptions(spec):
        raise InvalidGroupSpecError(
            f"group {spec.group_id!r}: members subscribe to different topics; "
            "use assign_uniform or assign_uniform_heterogeneous"
        )
    with paused_gc():
        group = _Group.load(spec)
        return group.answer(_homogeneous(group))


def assign_uniform_heterogeneous(spec: GroupSpec) -> GroupAssignment:
    """Kafka's ``UniformHeterogeneousAssignmentBuilder`` (the KAFKA-17710 rewrite): works for any
    subscriptions.

    1. Every member keeps everything it owned of the topics it still subscribes to.
    2. Topics are taken most partitions per subscriber first (then fewer subscribers, then name);
       each unowned partition goes to the topic's least loaded subscriber.
    3. Balancing sweeps over the topics with two or more subscribers move a topic's partitions from
       its most loaded subscribers (their highest-numbered partition of that topic first) to its
       least loaded, until the two differ by at most one, the sweep changes nothing, or
       :data:`MAX_BALANCE_SWEEPS` is reached.
    """
    check_unique_member_ids(spec)
    with paused_gc():
        group = _Group.load(spec)
        # The builder collects owners topic by topic (name order), partitions ascending.
        return group.answer(_Heterogeneous(group).build(), in_order=True)


def _same_subscriptions(spec: GroupSpec) -> bool:
    distinct = {m.topics for m in spec.members}  # tuples first: members often share one
    return len({frozenset(topics) for topics in distinct}) <= 1


@dataclass(slots=True)
class _Group:
    """The spec reduced to what both builders read: members by index (spec order), their
    subscriptions, the partition counts, and the normalised current assignment."""

    spec: GroupSpec
    subscriptions: list[frozenset[str]]
    partitions: dict[str, int]  # every subscribed topic, name order
    owned: list[dict[str, list[int]]]  # per member: topic (name order) -> ascending partitions
    claimed: dict[str, bytearray]  # per topic: 1 where some member owns the partition

    @staticmethod
    def load(spec: GroupSpec) -> _Group:
        by_tuple: dict[tuple[str, ...], frozenset[str]] = {}
        subscriptions = []
        for member in spec.members:
            subscribed = by_tuple.get(member.topics)
            if subscribed is None:
                subscribed = by_tuple[member.topics] = frozenset(member.topics)
            subscriptions.append(subscribed)

        partitions: dict[str, int] = {}
        for topic in sorted(frozenset().union(*by_tuple.values())):
            topic_spec = spec.topics.get(topic)
            if topic_spec is None or topic_spec.partitions < 0:
                raise unknown_topic_error(spec, topic)
            partitions[topic] = topic_spec.partitions

        claimed = {topic: bytearray(count) for topic, count in partitions.items()}
        owned: list[dict[str, list[int]]] = []
        for member, subscribed in zip(spec.members, subscriptions):
            by_topic: dict[str, list[int]] = {}
            for topic, p in member.owned_partitions:
                flags = claimed.get(topic)
                if flags is None or topic not in subscribed or not 0 <= p < len(flags) or flags[p]:
                    continue
                flags[p] = 1
                by_topic.setdefault(topic, []).append(p)
            owned.append({topic: sorted(by_topic[topic]) for topic in sorted(by_topic)})
        return _Group(spec, subscriptions, partitions, owned, claimed)

    def answer(self, assignment: list[dict[str, list[int]]], *, in_order: bool = False) -> GroupAssignment:
        """Lists sorted by (topic, partition); ``in_order`` says the builder already produced them so."""
        result: dict[str, list[TopicPartition]] = {}
        for member, by_topic in zip(self.spec.members, assignment):
            tps: list[TopicPartition] = []
            for topic in by_topic if in_order else sorted(by_topic):
                parts = by_topic[topic] if in_order else sorted(by_topic[topic])
                tps.extend(map(TopicPartition, repeat(topic, len(parts)), parts))
            result[member.member_id] = tps
        return GroupAssignment(result)


def _homogeneous(group: _Group) -> list[dict[str, list[int]]]:
    n_members = len(group.owned)
    if n_members == 0 or not group.partitions:
        return [{} for _ in range(n_members)]

    # Everything no member owns, topic by topic; what members give up is appended after it.
    unassigned: list[tuple[str, list[int]]] = []
    for topic in group.partitions:
        free = np.flatnonzero(np.frombuffer(group.claimed[topic], dtype=np.uint8) == 0).tolist()
        if free:
            unassigned.append((topic, free))

    min_quota, extra = divmod(sum(group.partitions.values()), n_members)
    assignment: list[dict[str, list[int]]] = []
    unfilled: list[tuple[int, int]] = []
    for index, owned in enumerate(group.owned):
        # The extra slots go to the first members in order, whatever they own (KAFKA-18688 later
        # let any member keep one; this is the behaviour before that fix).
        quota = min_quota + (1 if index < extra else 0)
        kept: dict[str, list[int]] = {}
        for topic, parts in owned.items():
            if len(parts) <= quota:
                kept[topic] = parts
                quota -= len(parts)
            else:
                if quota > 0:
                    kept[topic] = parts[:quota]
                unassigned.append((topic, parts[quota:]))
                quota = 0
        assignment.append(kept)
        if quota > 0:
            unfilled.append((index, quota))

    segment, offset = 0, 0
    for index, wanted in unfilled:
        kept = assignment[index]
        while wanted > 0 and segment < len(unassigned):
            topic, parts = unassigned[segment]
            taken = parts[offset : offset + wanted]
            if topic in kept:
                kept[topic] = kept[topic] + taken
            else:
                kept[topic] = taken
            wanted -= len(taken)
            offset += len(taken)
            if offset == len(parts):
                segment, offset = segment + 1, 0
    if segment < len(unassigned):
        raise AssignmentError(
            f"group {group.spec.group_id!r}: partitions were left unassigned "
            f"(first: {unassigned[segment][0]!r} partition {unassigned[segment][1][offset]})"
        )
    return assignment


class _Heterogeneous:
    """Single-use builder; members are indices in spec order, owners per topic are member indices
    (-1 = unassigned) in plain lists, so the hot loops touch only integers."""

    def __init__(self, group: _Group) -> None:
        self.group = group
        self.sizes = [0] * len(group.owned)
        arrays = subscribers_per_topic(group.spec, range(len(group.owned)))
        as_lists: dict[int, list[int]] = {}
        self.subscribers: dict[str, list[int]] = {}
        for topic in group.partitions:
            array = arrays[topic]
            if id(array) not in as_lists:
                as_lists[id(array)] = array.tolist()
            self.subscribers[topic] = as_lists[id(array)]
        self.owners = {topic: [-1] * count for topic, count in group.partitions.items()}

    def _topic_order_key(self, topic: str) -> tuple[float, int, str]:
        # Most partitions per subscriber first, then fewer subscribers; topic name stands in for
        # Kafka's topic-id tie-break.
        subscribers = len(self.subscribers[topic])
        return (-(self.group.partitions[topic] / subscribers), subscribers, topic)

    def build(self) -> list[dict[str, list[int]]]:
        n_members = len(self.sizes)
        if not self.group.partitions:
            return [{} for _ in range(n_members)]
        for index, owned in enumerate(self.group.owned):
            for topic, parts in owned.items():
                owners = self.owners[topic]
                for p in parts:
                    owners[p] = index
                self.sizes[index] += len(parts)

        self._assign_unowned()
        self._balance()

        assignment: list[dict[str, list[int]]] = [{} for _ in range(n_members)]
        for topic, owners in self.owners.items():
            for p, owner in enumerate(owners):
                assignment[owner].setdefault(topic, []).append(p)
        return assignment

    def _move(self, topic: str, p: int, to: int) -> None:
        owners = self.owners[topic]
        if owners[p] >= 0:
            self.sizes[owners[p]] -= 1
        owners[p] = to
        self.sizes[to] += 1

    def _assign_unowned(self) -> None:
        levels = _Levels(self.sizes)
        pending = {t: [p for p, o in enumerate(owners) if o < 0] for t, owners in self.owners.items()}
        for topic in sorted((t for t in pending if pending[t]), key=self._topic_order_key):
            levels.reset(self.subscribers[topic])
            for p in pending[topic]:
                self._move(topic, p, levels.next_least_loaded())

    def _balance(self) -> None:
        topics = sorted(
            (t for t, subs in self.subscribers.items() if len(subs) >= 2), key=self._topic_order_key
        )
        if not topics:
            return
        levels = _Levels(self.sizes)
        last_changed = -1
        for _ in range(MAX_BALANCE_SWEEPS):
            for i, topic in enumerate(topics):
                # Back at the last topic that changed anything: a whole sweep went by without a move.
                if i == last_changed:
                    return
                if self._balance_topic(topic, levels) > 0 or last_changed == -1:
                    last_changed = i

    def _balance_topic(self, topic: str, levels: _Levels) -> int:
        if levels.reset(self.subscribers[topic]) <= 1:
            return 0
        owners = self.owners[topic]
        # Each owner's partitions of this topic as one ascending run, so "its highest remaining
        # partition" is the run's end; moved partitions fall outside every run and stay put.
        by_owner = sorted(range(len(owners)), key=owners.__getitem__)
        start: dict[int, int] = {}
        end: dict[int, int] = {}
        for i, p in enumerate(by_owner):
            start.setdefault(owners[p], i)
            end[owners[p]] = i + 1

        moved = 0
        while not levels.balanced():
            donor = levels.next_most_loaded()
            while donor >= 0 and end.get(donor, 0) - start.get(donor, 0) <= 0:
                levels.exclude_last_most_loaded()
                donor = levels.next_most_loaded()
            if donor < 0:
                break
            end[donor] -= 1
            p = by_owner[end[donor]]
            receiver = levels.next_least_loaded()
            if levels.balanced():
                break
            self._move(topic, p, receiver)
            moved += 1
        return moved


class _Levels:
    """Kafka's ``MemberAssignmentBalancer``: a topic's subscribers sorted by load, with a "least
    loaded" range growing from the left and a "most loaded" range growing from the right.

    Handing out partitions round-robin over the least loaded range keeps every member of the range
    within one of each other; when each has had one, the range's level rises and it absorbs the
    members already at that level. The most loaded range shrinks the same way from the other end.
    The two levels (counts before this round of giving and taking) decide when to stop.
    """

    __slots__ = (
        "sizes", "members", "low_end", "low_level", "low_next", "high_start", "high_end",
        "high_level", "high_next",
    )

    def __init__(self, sizes: list[int]) -> None:
        self.sizes = sizes
        self.members: list[int] = []

    def reset(self, members: list[int]) -> int:
        sizes = self.sizes
        self.members = sorted(members, key=lambda m: (sizes[m], m))
        n = len(self.members)
        self.low_end, self.low_level, self.low_next = 0, sizes[self.members[0]] - 1, 0
        self.high_start, self.high_end = n, n
        self.high_level, self.high_next = sizes[self.members[-1]] + 1, n - 1
        return sizes[self.members[-1]] - sizes[self.members[0]]

    def next_least_loaded(self) -> int:
        if self.low_next >= self.low_end:
            self.low_level += 1
            while (
                self.low_end < len(self.members)
                and self.sizes[self.members[self.low_end]] == self.low_level
            ):
                self.low_end += 1
            self.low_next = 0
        member = self.members[self.low_next]
        self.low_next += 1
        return member

    def next_most_loaded(self) -> int:
        """The next member to give up a partition, or -1 when none is left."""
        if self.high_next < self.high_start:
            if self.high_end <= self.high_start and self.high_start > 0:
                # Exclusions emptied the range; restart it at the next member down so that it
                # always grows here.
                self.high_level = self.sizes[self.members[self.high_start - 1]]
            else:
                self.high_level -= 1
            while (
                self.high_start > 0
                and self.sizes[self.members[self.high_start - 1]] == self.high_level
            ):
                self.high_start -= 1
            self.high_next = self.high_end - 1
        if self.high_next < 0:
            return -1
        member = self.members[self.high_next]
        self.high_next -= 1
        return member

    def exclude_last_most_loaded(self) -> None:
        """Drop the member ``next_most_loaded`` just returned (it has nothing left to give)."""
        i, last = self.high_next + 1, self.high_end - 1
        self.members[i], self.members[last] = self.members[last], self.members[i]
        self.high_end -= 1

    def balanced(self) -> bool:
        return self.high_level - self.low_level <= 1
