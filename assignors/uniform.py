"""Kafka 4.1's server-side ``UniformAssignor`` (KIP-848; spec sections 6.1 and 6.2).

Follows ``org.apache.kafka.coordinator.group.assignor`` of Kafka 4.1.1: ``UniformAssignor``,
``UniformHomogeneousAssignmentBuilder`` (with KAFKA-18688, new in 4.1) and
``UniformHeterogeneousAssignmentBuilder`` (the KAFKA-17710 rewrite). Kafka 4.0 and earlier gave
the extra partitions of a homogeneous group to the first members in order, whatever they owned;
that rule is not kept (4.1 gives them to members that already own that many).

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

from bisect import bisect_right

import numpy as np

from ._common import paused_gc, split_by_owner
from .errors import AssignmentError, InvalidGroupSpecError
from .model import GroupAssignment, GroupSpec, TopicPartition
from .server_group import ServerGroup, server_group

__all__ = ["assign_uniform", "assign_uniform_heterogeneous", "assign_uniform_homogeneous", "homogeneous_quotas"]

#: Kafka's cap on balancing sweeps over the topics (``MAX_ITERATION_COUNT``): each sweep roughly
#: halves the imbalance of overlapping subscriptions, and identical ones settle in one.
MAX_BALANCE_SWEEPS = 16


def assign_uniform(spec: GroupSpec) -> GroupAssignment:
    """Assign ``spec`` the way Kafka 4.1's server-side ``UniformAssignor`` does."""
    with paused_gc():
        group = server_group(spec)
        if group.homogeneous:
            return _answer(group, _homogeneous(group))
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
        return _answer(group, _homogeneous(group))


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


def _answer(group: ServerGroup, answers: list[list[TopicPartition]]) -> GroupAssignment:
    """The builders' answers (in Kafka's member order) keyed by member id, members in spec order."""
    return GroupAssignment(dict(zip(group.spec_member_ids, map(answers.__getitem__, group.index_of_spec_member))))


# --- homogeneous (spec 6.1) ----------------------------------------------------------------------


def homogeneous_quotas(owned: np.ndarray, min_quota: int, extra: int) -> np.ndarray:
    """Each member's quota in the homogeneous builder, given how many partitions each member (in
    Kafka's order) owned of the subscribed topics.

    Kafka walks the members once: while ``extra`` slots are left a member may take ``min_quota + 1``;
    it keeps the extra slot if it owned that many, and otherwise gives it up, unless the members left
    (itself included) are no more than the slots left, which they then must all take. Until that
    point only members that owned more than ``min_quota`` use up slots, so the slots left before
    member ``i`` are ``extra`` minus the earlier such members, and everything follows from that
    count (computed for all members at once).
    """
    n = len(owned)
    quotas = np.full(n, min_quota, dtype=np.int64)
    if extra == 0:
        return quotas
    over = owned > min_quota
    over_before = np.cumsum(over) - over
    slots_left = np.maximum(extra - over_before, 0)
    quotas[(slots_left > 0) & over] = min_quota + 1
    must_take = np.flatnonzero(n - np.arange(n) <= slots_left)
    if len(must_take):
        quotas[must_take[0]:] = min_quota + 1
    return quotas


def _homogeneous(group: ServerGroup) -> list[list[TopicPartition]]:
    """``UniformHomogeneousAssignmentBuilder.build``: each member's partitions, sorted."""
    n_members = len(group.members)
    walk = group.walk_layout
    if not walk.total:
        return [[] for _ in range(n_members)]
    subscribed = group.subscriptions[0]
    min_quota, extra = divmod(walk.total, n_members)
    owned = group.kept_counts
    quotas = homogeneous_quotas(owned, min_quota, extra)
    # Copies: the view is kept for later calls. (With no previous assignment, every list is empty.)
    answers = list(map(list, group.previous_lists)) if group.any_previous else None

    # maybeRevokePartitions: a member over its quota keeps what comes first in Kafka's walk of its
    # previous assignment and gives up the rest, appended to the unassigned list in member order.
    unowned, descents = group.unowned()
    given_up: list[TopicPartition] = []
    for index in np.flatnonzero(owned > quotas).tolist():
        quota = int(quotas[index])
        kept: list[TopicPartition] = []
        for topic, parts in group.previous_in_java_order(index):
            if topic not in subscribed:
                continue
            objects = group.partition_objects(topic)
            if quota >= len(parts):
                kept.extend(map(objects.__getitem__, parts))
                quota -= len(parts)
            else:
                kept.extend(map(objects.__getitem__, parts[:quota]))
                given_up.extend(map(objects.__getitem__, parts[quota:]))
                quota = 0
        kept.sort()
        answers[index] = kept

    # assignRemainingPartitions: members below their quota, in order, take consecutive shares of
    # the unassigned list.
    wanting = np.maximum(quotas - owned, 0)
    ends = np.cumsum(wanting)
    pool = unowned + given_up if given_up else unowned
    if int(ends[-1]) != len(pool):
        raise AssignmentError(f"group {group.spec.group_id!r}: {len(pool)} partitions to hand out for"
                              f" {int(ends[-1])} free slots; this is a bug in the assignor")
    receivers = np.flatnonzero(wanting)
    ends = ends[receivers]
    starts = ends - wanting[receivers]
    # A share is sorted already unless it spans the start of a topic that sorts before the one
    # before it, or reaches into the given-up partitions; a receiver that kept some needs a merge.
    unsorted = (np.searchsorted(descents, starts, side="right") < np.searchsorted(descents, ends, side="left")) \
        | (ends > len(unowned)) | (owned[receivers] > 0)
    if np.count_nonzero(unsorted) > _MANY_SORTS:
        return _homogeneous_in_bulk(group, receivers, wanting[receivers], given_up)
    if answers is None and len(receivers) == n_members:
        shares = _fresh_shares(group.walk_layout.objects, starts, wanting)
    else:
        shares = list(map(pool.__getitem__, map(slice, starts.tolist(), ends.tolist())))
    receivers = receivers.tolist()
    for k in np.flatnonzero(unsorted).tolist():
        share = shares[k]
        if answers is not None:
            share += answers[receivers[k]]
        share.sort()
    if answers is None:
        if len(receivers) == n_members:
            return shares
        answers = [[] for _ in range(n_members)]
    for index, share in zip(receivers, shares):
        answers[index] = share
    return answers


def _fresh_shares(objects: np.ndarray, starts: np.ndarray, wanting: np.ndarray) -> list[list[TopicPartition]]:
    """Every member's share of a group with no previous assignment, gathered from the walk's
    object array in one take per share size (there are at most two) rather than one slice each."""
    sizes = wanting  # every member receives (the caller checked), in member order
    if sizes[0] == sizes[-1]:
        return objects[starts[:, None] + np.arange(sizes[0])].tolist()
    shares: list = [None] * len(sizes)
    for size in np.unique(sizes).tolist():
        rows = np.flatnonzero(sizes == size)
        for row, share in zip(rows.tolist(), objects[starts[rows][:, None] + np.arange(size)].tolist()):
            shares[row] = share
    return shares


#: Above this many shares to sort (one per topic boundary they span, when the topic-id order is
#: not the name order), every member's list is rebuilt in one stable split by owner instead.
_MANY_SORTS = 32


def _homogeneous_in_bulk(group: ServerGroup, receivers: np.ndarray, wanting: np.ndarray,
                         given_up: list[TopicPartition]) -> list[list[TopicPartition]]:
    """The receivers' shares placed on a flat owner array in name order (see
    :class:`~assignors.server_group.WalkLayout`), each member's list then split off it sorted."""
    walk = group.walk_layout
    owners = group.previous_owners.copy()
    pool = walk.in_name_order[~walk.held] if group.any_previous else walk.in_name_order
    if given_up:
        offsets, number = group.offsets, group.topic_number
        pool = np.concatenate((pool, np.array([offsets[number[t]] + p for t, p in given_up], dtype=np.int64)))
    owners[pool] = np.repeat(receivers, wanting)
    return split_by_owner(len(group.members), owners, group.partition_layout[2])


# --- heterogeneous (spec 6.2) --------------------------------------------------------------------


class _Heterogeneous:
    """Single-use builder over the group's :class:`~assignors.server_group.TopicLayout`: topics are
    numbers (name order), members are indices in ``memberIds()`` order, and the owner of every
    partition sits in one flat list (-1 = unassigned), topic after topic."""

    def __init__(self, group: ServerGroup) -> None:
        self.group = group
        self.layout = group.topic_layout
        self.owners: list[int] = self.layout.previous_owners.tolist()
        # Every member keeps everything it owned of the topics it still subscribes to.
        self.sizes: list[int] = group.kept_counts.tolist()

    def _topics_in_kafka_order(self, topics: np.ndarray) -> list[int]:
        """``topicComparator``: partitions per subscriber descending (as doubles), then fewer
        subscribers, then topic id."""
        layout = self.layout
        subscribers = layout.subscriber_counts[topics]
        per_subscriber = layout.counts[topics] / subscribers
        return topics[np.lexsort((layout.rank[topics], subscribers, -per_subscriber))].tolist()

    def build(self) -> list[list[TopicPartition]]:
        n_members = len(self.group.members)
        if not self.layout.topics:
            return [[] for _ in range(n_members)]
        self._assign_unowned()
        self._balance()
        # Positions run topic by topic in name order, partitions ascending: a stable split by owner
        # lists each member's partitions sorted.
        return split_by_owner(n_members, np.array(self.owners, dtype=np.int64), self.layout.partitions)

    def _assign_unowned(self) -> None:
        """``assignRemainingPartitions``: topic by topic, each unassigned partition (ascending) to the
        topic's least loaded subscriber.

        Kafka's balancer sorts the subscribers by (size, index) and deals in rounds: round ``r``
        gives one partition to each subscriber whose size was at most the smallest plus ``r``, in
        that sorted order. The rounds are dealt whole here rather than partition by partition.
        """
        layout, owners, sizes = self.layout, self.owners, self.sizes
        free = layout.previous_owners < 0
        free_before = np.concatenate(([0], np.cumsum(free)))
        pending = (free_before[layout.offsets[1:]] - free_before[layout.offsets[:-1]]).tolist()
        offsets = layout.offsets.tolist()
        subscribers_of = layout.subscriber_lists
        for t in self._topics_in_kafka_order(np.flatnonzero(pending)):
            count, start, end = pending[t], offsets[t], offsets[t + 1]
            subscribers = subscribers_of[t]
            held = list(map(sizes.__getitem__, subscribers))
            lowest = min(held)
            # Round 0 alone often covers the topic: the least loaded subscribers, by index.
            dealt = [m for m, h in zip(subscribers, held) if h == lowest] if lowest < max(held) else list(subscribers)
            if len(dealt) < count:
                in_order = sorted(subscribers, key=sizes.__getitem__)  # stable: ties by index
                held = sorted(held)
                level = lowest + 1
                while len(dealt) < count:
                    dealt += in_order[:bisect_right(held, level)]
                    level += 1
            del dealt[count:]
            for member in dealt:
                sizes[member] += 1
            if count == end - start:
                owners[start:end] = dealt
            else:
                for position, member in zip((p for p in range(start, end) if owners[p] < 0), dealt):
                    owners[position] = member

    def _balance(self) -> None:
        """``balanceTopics``: sweeps over the topics with two or more subscribers until a whole
        sweep moves nothing (or :data:`MAX_BALANCE_SWEEPS`)."""
        layout = self.layout
        topics = self._topics_in_kafka_order(np.flatnonzero(layout.subscriber_counts >= 2))
        if not topics:
            return
        levels = _Levels(self.sizes)
        # Whether a topic's subscribers are balanced depends only on their sizes: topics with the
        # same subscribers need one look until a move changes some size.
        balanced_at: dict[int, int] = {}
        moves = 0
        last_changed = -1
        for _ in range(MAX_BALANCE_SWEEPS):
            for i, t in enumerate(topics):
                # Back at the last topic that changed anything: a whole sweep went by without a move.
                if i == last_changed:
                    return
                subscriber_set = layout.subscriber_set[t]
                moved = 0
                if balanced_at.get(subscriber_set) != moves:
                    if levels.reset(layout.subscriber_lists[t]) <= 1:
                        balanced_at[subscriber_set] = moves
                    else:
                        moved = self._balance_topic(t, levels)
                        moves += moved
                if moved > 0 or last_changed == -1:
                    last_changed = i

    def _balance_topic(self, t: int, levels: _Levels) -> int:
        """``balanceTopic`` past its first check (``levels`` reset to the topic's subscribers, which
        differ by more than one): moves partitions of topic ``t`` from its most to its least loaded
        subscribers; the number moved."""
        start = int(self.layout.offsets[t])
        end = int(self.layout.offsets[t + 1])
        owners = self.owners
        owner_of = owners[start:end]
        # Each owner's partitions of this topic as one ascending run, so "its highest remaining
        # partition" is the run's end; moved partitions fall outside every run and stay put.
        in_runs = np.argsort(np.array(owner_of, dtype=np.int64), kind="stable")
        run_owners = np.asarray(owner_of, dtype=np.int64)[in_runs]
        first = np.flatnonzero(np.concatenate(([True], run_owners[1:] != run_owners[:-1]))[:len(run_owners)])
        by_owner = in_runs.tolist()
        heads = run_owners[first].tolist()
        run_start = dict(zip(heads, first.tolist()))
        run_end = dict(zip(heads, np.append(first[1:], len(owner_of)).tolist()))

        sizes = self.sizes
        moved = 0
        while not levels.balanced():
            donor = levels.next_most_loaded()
            while donor >= 0 and run_end.get(donor, 0) - run_start.get(donor, 0) <= 0:
                levels.exclude_last_most_loaded()
                donor = levels.next_most_loaded()
            if donor < 0:
                break
            run_end[donor] -= 1
            p = by_owner[run_end[donor]]
            receiver = levels.next_least_loaded()
            if levels.balanced():
                break
            sizes[owner_of[p]] -= 1
            sizes[receiver] += 1
            owners[start + p] = receiver
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
        # Members come ascending, and the sort is stable: ties stay in index order.
        self.members = sorted(members, key=sizes.__getitem__)
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
