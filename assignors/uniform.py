"""Kafka 4.1's server-side ``UniformAssignor`` (KIP-848; spec sections 6.1 and 6.2).

Follows ``org.apache.kafka.coordinator.group.assignor`` of Kafka 4.1.1: ``UniformAssignor``,
``UniformHomogeneousAssignmentBuilder`` (with KAFKA-18688, new in 4.1) and
``UniformHeterogeneousAssignmentBuilder`` (the KAFKA-17710 rewrite).

Guarantees, in priority order: **balance over stickiness**.

* Balance: with identical subscriptions every member ends within one partition of every other.
  With different subscriptions the result is close to that but not always exact (Kafka accepts,
  e.g., 9/10/11 for overlapping, non-identical subscriptions).
* Stickiness: a member keeps what its current target assignment (``owned_partitions``) holds as far
  as balance allows; an assignment that is already balanced is kept whole.

Worked example (identical subscriptions): A owns t1-0, t1-1, t2-0, t2-1 and B owns t1-2, t2-2.
Six partitions over two members is three each: A keeps three of its four and gives up the fourth,
which goes to B. Which of its four A keeps is the order in which Kafka's hash sets list them.

:func:`assign_uniform` dispatches like Kafka's facade: the homogeneous builder when every member
subscribes to the same topic names, the heterogeneous one otherwise. Both builders are public so
that either can be run on any group (Kafka's own tests do that).

The group is seen as Kafka's coordinator shows it to the assignor (:mod:`assignors.server_group`):
members in Java ``HashMap`` order of their ids, subscriptions to topics missing from the metadata
skipped, the previous assignment walked in Java's hash-set order. Topic order: where Kafka walks a
hash set of topic ids (the homogeneous builder) or breaks ties by topic id (the heterogeneous
one), the port follows the topic ids when every topic in the spec has one, and topic-name order
otherwise, which then decides ties differently from a broker (whose ids the spec does not give).

A member's assignment is listed sorted by (topic, partition); Kafka keeps unordered sets.
"""

from __future__ import annotations

from itertools import repeat

from ._common import paused_gc
from .errors import AssignmentError, InvalidGroupSpecError
from .model import GroupAssignment, GroupSpec, TopicPartition
from .server_group import ServerGroup, server_group

__all__ = ["assign_uniform", "assign_uniform_heterogeneous", "assign_uniform_homogeneous"]

#: Kafka's cap on balancing sweeps over the topics (``MAX_ITERATION_COUNT``): each sweep roughly
#: halves the imbalance of overlapping subscriptions, and identical ones settle in one.
MAX_BALANCE_SWEEPS = 16


def assign_uniform(spec: GroupSpec) -> GroupAssignment:
    """Assign ``spec`` the way Kafka 4.1's server-side ``UniformAssignor`` does."""
    with paused_gc():
        group = server_group(spec)
        if group.homogeneous:
            return _answer(group, _Homogeneous(group).build())
        return _answer(group, _Heterogeneous(group).build())


def assign_uniform_homogeneous(spec: GroupSpec) -> GroupAssignment:
    """Kafka's ``UniformHomogeneousAssignmentBuilder``: for groups whose members all subscribe to the
    same topics (raises :class:`InvalidGroupSpecError` otherwise).

    Members in order get a quota of ``total // M``, or one more while fewer than ``total % M`` extra
    slots are taken; each keeps what it owned up to its quota and gives up the rest. A member that
    cannot fill its extra slot from what it owned gives the slot up for a later member to claim
    (KAFKA-18688), unless it is one of the last members that must take the remaining extra slots.
    The members below quota are then filled, in order, from the unowned and given-up partitions.
    """
    with paused_gc():
        group = server_group(spec)
        if not group.homogeneous:
            raise InvalidGroupSpecError(
                f"group {spec.group_id!r}: members subscribe to different topics; "
                "use assign_uniform or assign_uniform_heterogeneous"
            )
        return _answer(group, _Homogeneous(group).build())


def assign_uniform_heterogeneous(spec: GroupSpec) -> GroupAssignment:
    """Kafka's ``UniformHeterogeneousAssignmentBuilder`` (the KAFKA-17710 rewrite): works for any
    subscriptions.

    1. Every member keeps everything it owned of the topics it still subscribes to.
    2. Topics are taken most partitions per subscriber first (then fewer subscribers, then topic
       id); each unowned partition goes to the topic's least loaded subscriber.
    3. Balancing sweeps over the topics with two or more subscribers move a topic's partitions from
       its most loaded subscribers (their highest-numbered partition of that topic first) to its
       least loaded, until the two differ by at most one, the sweep changes nothing, or
       :data:`MAX_BALANCE_SWEEPS` is reached.
    """
    with paused_gc():
        group = server_group(spec)
        return _answer(group, _Heterogeneous(group).build())


def _answer(group: ServerGroup, assignment: list[dict[str, list[int]]]) -> GroupAssignment:
    """Each member's partitions sorted by (topic, partition), members in spec order."""
    result: dict[str, list[TopicPartition]] = {}
    for member, by_topic in zip(group.members, assignment):
        tps: list[TopicPartition] = []
        for topic in sorted(by_topic):
            parts = sorted(by_topic[topic])
            tps.extend(map(TopicPartition, repeat(topic, len(parts)), parts))
        result[member.member_id] = tps
    return GroupAssignment({m.member_id: result[m.member_id] for m in group.spec.members})


class _Homogeneous:
    """Single-use builder; members are indices in ``memberIds()`` order."""

    def __init__(self, group: ServerGroup) -> None:
        self.group = group

    def build(self) -> list[dict[str, list[int]]]:
        group = self.group
        n_members = len(group.members)
        if n_members == 0 or not group.subscriptions[0]:
            return [{} for _ in range(n_members)]
        topics = group.subscription_in_java_order(0)
        subscribed = group.subscriptions[0]

        # Everything no member's previous assignment holds, topic by topic; what members give up
        # is appended after it.
        unassigned: list[tuple[str, list[int]]] = []
        for topic in topics:
            flags = group.assigned.get(topic)
            count = group.partitions[topic]
            free = list(range(count)) if flags is None else [p for p in range(count) if not flags[p]]
            if free:
                unassigned.append((topic, free))

        total = sum(group.partitions[t] for t in topics)
        min_quota, extra_left = divmod(total, n_members)
        assignment: list[dict[str, list[int]]] = []
        unfilled: list[tuple[int, int]] = []
        for index in range(n_members):
            quota = min_quota
            has_extra = extra_left > 0
            if has_extra:
                quota += 1
            kept: dict[str, list[int]] = {}
            previous = group.previous[index]
            if sum(len(parts) for topic, parts in previous.items() if topic in subscribed) <= quota:
                # Everything fits: the walk order does not matter.
                for topic, parts in previous.items():
                    if topic in subscribed:
                        kept[topic] = parts
                        quota -= len(parts)
            else:
                for topic, parts in group.previous_in_java_order(index):
                    if topic not in subscribed:
                        continue
                    if len(parts) <= quota:
                        kept[topic] = parts
                        quota -= len(parts)
                        continue
                    if quota > 0:
                        kept[topic] = parts[:quota]
                    unassigned.append((topic, parts[quota:]))
                    quota = 0
            # KAFKA-18688: a member that cannot fill its extra slot gives it up, unless it is one
            # of the last extra_left members, which must take the remaining extra slots.
            if quota > 0 and has_extra and n_members - index > extra_left:
                quota -= 1
                has_extra = False
            if quota > 0:
                unfilled.append((index, quota))
            if has_extra:
                extra_left -= 1
            assignment.append(kept)

        segment, offset = 0, 0
        for index, wanted in unfilled:
            kept = assignment[index]
            while wanted > 0 and segment < len(unassigned):
                topic, parts = unassigned[segment]
                taken = parts[offset:offset + wanted]
                kept[topic] = kept[topic] + taken if topic in kept else taken
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
    """Single-use builder; members are indices in ``memberIds()`` order, owners per topic are member
    indices (-1 = unassigned) in plain lists, so the hot loops touch only integers."""

    def __init__(self, group: ServerGroup) -> None:
        self.group = group
        self.sizes = [0] * len(group.members)
        self.subscribers: dict[str, list[int]] = {topic: [] for topic in group.partitions}
        for index, subscribed in enumerate(group.subscriptions):
            for topic in subscribed:
                self.subscribers[topic].append(index)
        self.owners = {topic: [-1] * count for topic, count in group.partitions.items()}

    def _topic_order_key(self, topic: str):
        # Most partitions per subscriber first (compared as doubles, like Kafka), then fewer
        # subscribers, then topic id.
        subscribers = len(self.subscribers[topic])
        return (-(self.group.partitions[topic] / subscribers), subscribers, self.group.topic_order_key(topic))

    def build(self) -> list[dict[str, list[int]]]:
        n_members = len(self.sizes)
        if not self.group.partitions:
            return [{} for _ in range(n_members)]
        for index, previous in enumerate(self.group.previous):
            subscribed = self.group.subscriptions[index]
            for topic, parts in previous.items():
                if topic not in subscribed:
                    continue
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
