"""Kafka's client-side ``RangeAssignor`` (spec section 1), including the KIP-881 rack-aware variant.

Guarantees, in priority order:

1. Per-topic balance: a topic's subscribers, in ``MemberInfo`` order (static members by group
   instance id first, then the rest by member id), get ``P // C`` partitions each and the first
   ``P % C`` of them one more. Topics are split independently, which is why range can pile the
   extras of many topics on the same first members.
2. Co-partitioning: topics with the same subscribers and the same partition count are split
   identically, so a member gets the same partition numbers of each (joins stay local).
3. Rack alignment (only when some topic needs it): a member prefers partitions with a replica in
   its rack, without giving up 1 or 2.

Worked example: members C0, C1 and topics t0, t1 with three partitions each give
C0 = t0-0, t0-1, t1-0, t1-1 and C1 = t0-2, t1-2.

There is no stickiness beyond static membership: a static member keeps its place in the order, and
so its ranges, when it rejoins with a new member id.

List order follows Kafka: without rack logic a member's partitions come topic by topic in the
iteration order of Kafka's ``partitionsPerTopic`` ``HashMap`` (reproduced with
:mod:`assignors.java_order`); once rack logic has run, each list is sorted by (topic, partition).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter

import numpy as np

from ._common import (
    check_unique_member_ids,
    member_info_order,
    partitions_per_topic,
    partitions_of,
    paused_gc,
    split_by_owner,
    subscribers_per_topic,
    subscription_classes,
)
from .errors import InvalidGroupSpecError
from .java_order import hashmap_order, string_hashes, table_capacity
from .model import GroupAssignment, GroupSpec, TopicPartition

__all__ = ["assign_range"]


def assign_range(spec: GroupSpec) -> GroupAssignment:
    """Assign ``spec`` the way Kafka's client ``RangeAssignor`` does (Kafka-exact)."""
    with paused_gc():
        check_unique_member_ids(spec)
        return _assign(spec)


def _assign(spec: GroupSpec) -> GroupAssignment:
    members = spec.members
    topics = _topics_in_java_order(spec)
    states = _rack_states(spec, topics) if any(map(attrgetter("rack"), members)) else []
    if any(state.needs_rack_aware for state in states):
        per_member: list[list[TopicPartition]] = [[] for _ in members]
        _assign_with_racks(spec, states, per_member)
    else:
        per_member = _plain_ranges(spec, topics, len(members))
    return GroupAssignment(dict(zip([m.member_id for m in members], per_member)))


def _topics_in_java_order(spec: GroupSpec) -> list[tuple[str, int, np.ndarray, list[int]]]:
    """(topic, partitions, subscribers as an array, the same as a list) in Kafka's topic order."""
    members = spec.members
    classes = subscription_classes(members)
    counts = partitions_per_topic(spec, classes[0])
    if not counts:
        # Nothing subscribed has a partition: no member order or topic order is needed.
        return []
    subscriber_arrays = subscribers_per_topic(spec, member_info_order(spec), classes)
    # Topics with the same subscribers share one array; convert each distinct one once.
    as_lists: dict[int, list[int]] = {}
    topics: list[tuple[str, int, np.ndarray, list[int]]] = []
    for topic in _java_topic_order(spec, counts, list(subscriber_arrays)):
        array = subscriber_arrays[topic]
        subs = as_lists.get(id(array))
        if subs is None:
            subs = as_lists[id(array)] = array.tolist()
        topics.append((topic, counts[topic], array, subs))
    return topics


def _plain_ranges(
    spec: GroupSpec, topics: list[tuple[str, int, np.ndarray, list[int]]], n_members: int
) -> list[list[TopicPartition]]:
    # Without rack logic each subscriber's share of a topic is a contiguous block whose bounds are
    # plain arithmetic. When blocks are tiny (many members, few partitions each) a stable split of
    # all partitions by owner costs less than one Python step per block.
    blocks = sum(min(len(subs), partitions) for _, partitions, _, subs in topics)
    total = sum(partitions for _, partitions, _, _ in topics)
    if blocks * 4 > total and blocks > 2_000:
        return _split_ranges(spec, topics, n_members)
    return _block_ranges(spec, topics, n_members)


def _block_ranges(
    spec: GroupSpec, topics: list[tuple[str, int, np.ndarray, list[int]]], n_members: int
) -> list[list[TopicPartition]]:
    # Each member's list is built from slices of the topic's partitions, topic by topic in Kafka's
    # order: one C-level ``extend`` per (topic, receiving member) instead of per-partition
    # bookkeeping. Topics with the same subscribers and partition count share the bounds.
    per_member: list[list[TopicPartition]] = [[] for _ in range(n_members)]
    bounds_of: dict[tuple[int, int], list[tuple[list[TopicPartition], int, int]]] = {}
    for topic, partitions, array, subs in topics:
        bounds = bounds_of.get((id(array), partitions))
        if bounds is None:
            floor, extras = divmod(partitions, len(subs))
            bounds = []
            lo = 0
            for k, member in enumerate(subs[: min(len(subs), partitions)]):
                hi = lo + floor + (k < extras)
                bounds.append((per_member[member], lo, hi))
                lo = hi
            bounds_of[(id(array), partitions)] = bounds
        tps = partitions_of(spec, topic)
        for target, lo, hi in bounds:
            target += tps[lo:hi]
    return per_member


def _split_ranges(
    spec: GroupSpec, topics: list[tuple[str, int, np.ndarray, list[int]]], n_members: int
) -> list[list[TopicPartition]]:
    # Laid out topic by topic (in Kafka's order), partitions ascending, the owners of a topic follow
    # one pattern that all topics with the same subscribers and partition count share; a stable
    # split by owner then lists every member's partitions in Kafka's order.
    patterns: dict[tuple[int, int], np.ndarray] = {}
    owners: list[np.ndarray] = []
    partitions_in_order: list[TopicPartition] = []
    for topic, partitions, array, _ in topics:
        pattern = patterns.get((id(array), partitions))
        if pattern is None:
            floor, extras = divmod(partitions, len(array))
            receivers = min(len(array), partitions)
            sizes = np.full(receivers, floor, dtype=np.int64)
            sizes[:extras] += 1
            pattern = patterns[(id(array), partitions)] = np.repeat(array[:receivers], sizes)
        owners.append(pattern)
        partitions_in_order += partitions_of(spec, topic)
    if not owners:
        return [[] for _ in range(n_members)]
    return split_by_owner(n_members, np.concatenate(owners), partitions_in_order)


def _rack_states(spec: GroupSpec, topics: list[tuple[str, int, np.ndarray, list[int]]]) -> list[_TopicState]:
    shared: dict[int, tuple[bytes, list[str | None]]] = {}
    states = []
    for topic, partitions, array, subs in topics:
        key_and_racks = shared.get(id(array))
        if key_and_racks is None:
            racks = [spec.members[i].rack or None for i in subs]
            key_and_racks = shared[id(array)] = (array.tobytes(), racks)
        key, racks = key_and_racks
        states.append(_TopicState.build(spec, topic, partitions, key, subs, racks))
    return states


def _assign_with_racks(spec: GroupSpec, states: list[_TopicState], per_member: list[list[TopicPartition]]) -> None:
    # Phase A (rack matching) only ever touches topics whose subscribers have racks: Kafka groups
    # topics by their (member -> rack) map and then by the size of their partition -> racks map,
    # which is empty when no subscriber has a rack, so those groups do nothing.
    groups: dict[tuple[bytes, int], list[_TopicState]] = {}
    for state in states:
        if state.has_member_racks:
            groups.setdefault((state.subscribers_key, state.partitions), []).append(state)
    for group in groups.values():
        if len(group) > 1:
            _match_co_partitioned(group)
        elif group[0].needs_rack_aware:
            group[0].take_ranges(rack_aware=True)

    # Phase B: the plain walk places whatever rack matching left, possibly misaligned.
    for state in states:
        state.take_ranges(rack_aware=False)

    for state in states:
        tps = partitions_of(spec, state.topic)
        for p, pos in enumerate(state.owner):
            per_member[state.subscribers[pos]].append(tps[p])
    for partitions in per_member:
        partitions.sort()


def _match_co_partitioned(group: list[_TopicState]) -> None:
    """Give partition p of every topic in ``group`` to the first member (in order) that rack-matches
    p in all of them and still has room.

    The topics share subscribers and partition count and are only ever assigned together here, so
    their bookkeeping stays identical; the first topic's counters stand for all. Room only ever
    shrinks, so one forward-moving cursor per rack finds the first member with room in amortised
    constant time instead of rescanning the member list for every partition.
    """
    lead = group[0]
    cursors = {rack: _RoomCursor(positions) for rack, positions in lead.positions_by_rack.items()}
    rackless = _RoomCursor(lead.rackless_positions)
    for p in range(lead.partitions):
        shared_racks = lead.partition_racks[p]
        for other in group[1:]:
            shared_racks = shared_racks & other.partition_racks[p]
        best = rackless.first_with_room(lead)
        for rack in shared_racks:
            cursor = cursors.get(rack)
            if cursor is not None:
                candidate = cursor.first_with_room(lead)
                if candidate >= 0 and (best < 0 or candidate < best):
                    best = candidate
        if best >= 0:
            for state in group:
                state.give(best, [p])


@dataclass(slots=True)
class _RoomCursor:
    positions: list[int]
    next: int = 0

    def first_with_room(self, state: _TopicState) -> int:
        while self.next < len(self.positions) and state.room(self.positions[self.next]) == 0:
            self.next += 1
        return self.positions[self.next] if self.next < len(self.positions) else -1


@dataclass(slots=True)
class _TopicState:
    """One topic's range bookkeeping; members are positions in the topic's ordered subscriber list."""

    topic: str
    partitions: int
    subscribers: list[int]
    subscribers_key: bytes
    member_racks: list[str | None]
    partition_racks: list[frozenset[str]]
    needs_rack_aware: bool
    floor: int
    extras: int
    assigned_count: list[int] = field(default_factory=list)
    owner: list[int] = field(default_factory=list)
    unassigned: int = 0
    _next_free: int = 0

    @staticmethod
    def build(
        spec: GroupSpec,
        topic: str,
        partitions: int,
        subscribers_key: bytes,
        subs: list[int],
        racks: list[str | None],
    ) -> _TopicState:
        member_rack_set = {r for r in racks if r is not None}
        partition_racks = _partition_racks(spec, topic, partitions) if member_rack_set else []
        floor, extras = divmod(partitions, len(subs))
        return _TopicState(
            topic=topic,
            partitions=partitions,
            subscribers=subs,
            subscribers_key=subscribers_key,
            member_racks=racks,
            partition_racks=partition_racks,
            needs_rack_aware=_needs_rack_aware(member_rack_set, partition_racks),
            floor=floor,
            extras=extras,
            assigned_count=[0] * len(subs),
            owner=[-1] * partitions,
            unassigned=partitions,
        )

    @property
    def has_member_racks(self) -> bool:
        return bool(self.partition_racks)

    @property
    def positions_by_rack(self) -> dict[str, list[int]]:
        by_rack: dict[str, list[int]] = {}
        for pos, rack in enumerate(self.member_racks):
            if rack is not None:
                by_rack.setdefault(rack, []).append(pos)
        return by_rack

    @property
    def rackless_positions(self) -> list[int]:
        return [pos for pos, rack in enumerate(self.member_racks) if rack is None]

    def room(self, pos: int) -> int:
        return max(0, self.floor + (1 if self.extras > 0 else 0) - self.assigned_count[pos])

    def give(self, pos: int, partitions: list[int]) -> None:
        for p in partitions:
            self.owner[p] = pos
        self.unassigned -= len(partitions)
        self.assigned_count[pos] += len(partitions)
        # Whoever passes the floor uses up one of the extras, so during rack matching any member,
        # not only the first ones, may end up with the extra partition.
        if self.assigned_count[pos] > self.floor:
            self.extras -= 1

    def take_ranges(self, *, rack_aware: bool) -> None:
        """The range walk: each subscriber in order takes, up to its room, the lowest-numbered
        unassigned partitions (only those with a replica in its rack when ``rack_aware``)."""
        by_rack: dict[str | None, list[int]] = {}
        cursor_of: dict[str | None, int] = {}
        if rack_aware:
            for p, racks in enumerate(self.partition_racks):
                for rack in racks:
                    by_rack.setdefault(rack, []).append(p)
        for pos in range(len(self.subscribers)):
            if self.unassigned == 0:
                break
            room = self.room(pos)
            if room == 0:
                continue
            rack = self.member_racks[pos] if rack_aware else None
            if rack is None:
                taken = self._take_lowest_free(room)
            else:
                candidates = by_rack.get(rack, [])
                i = cursor_of.get(rack, 0)
                taken = []
                while i < len(candidates) and len(taken) < room:
                    if self.owner[candidates[i]] < 0:
                        taken.append(candidates[i])
                    i += 1
                cursor_of[rack] = i
            if taken:
                self.give(pos, taken)

    def _take_lowest_free(self, room: int) -> list[int]:
        # Partitions are only ever taken, never returned, so everything below the cursor is owned.
        taken: list[int] = []
        p = self._next_free
        while p < self.partitions and len(taken) < room:
            if self.owner[p] < 0:
                taken.append(p)
            p += 1
        while p < self.partitions and self.owner[p] >= 0:
            p += 1
        self._next_free = p
        return taken


def _partition_racks(spec: GroupSpec, topic: str, partitions: int) -> list[frozenset[str]]:
    racks = spec.topics[topic].replica_racks
    if racks is None:
        return [frozenset()] * partitions
    if len(racks) != partitions:
        raise InvalidGroupSpecError(
            f"group {spec.group_id!r}: topic {topic!r} has {partitions} partitions but replica racks "
            f"for {len(racks)}; give one rack set per partition"
        )
    return list(racks)


def _needs_rack_aware(member_racks: set[str], partition_racks: list[frozenset[str]]) -> bool:
    """KIP-881: worth it only if some subscriber's rack hosts replicas of the topic and some
    partition is missing a replica on some rack (otherwise every member is local to everything)."""
    if not member_racks:
        return False
    all_racks = frozenset().union(*partition_racks)
    if member_racks.isdisjoint(all_racks):
        return False
    return any(racks != all_racks for racks in partition_racks)


def _java_topic_order(spec: GroupSpec, counts: dict[str, int], union: list[str]) -> list[str]:
    """Iteration order of Kafka's ``partitionsPerTopic``: a ``HashMap`` filled from the ``HashSet`` of
    all subscribed topics, itself filled member by member in subscription-map iteration order.

    Insertion order only breaks ties between topics sharing a bucket, so the costlier orders (the
    set's, then the member map's, a string hash per member) are computed only when a tie needs them.
    Each topic name is hashed once.
    """
    hash_of = dict(zip(union, string_hashes(union))).__getitem__
    present = list(counts)
    if _distinct_buckets(present, hash_of):
        return hashmap_order(present, hash_of)
    if _distinct_buckets(union, hash_of):
        insertion = union
    else:
        by_id = {m.member_id: m for m in spec.members}
        remaining = set(union)
        insertion = []
        for member_id in hashmap_order([m.member_id for m in spec.members]):
            for topic in by_id[member_id].topics:
                if topic in remaining:
                    remaining.discard(topic)
                    insertion.append(topic)
            if not remaining:
                break
    in_set_order = hashmap_order(insertion, hash_of)
    present_in_set_order = [t for t in in_set_order if t in counts]
    if len(present_in_set_order) == len(in_set_order):
        # The same keys put into a table of the same capacity in the set's own iteration order
        # come out in that order (bucket by bucket, insertion order within one): nothing to redo.
        return present_in_set_order
    return hashmap_order(present_in_set_order, hash_of)


def _distinct_buckets(keys: list[str], hash_of) -> bool:
    mask = table_capacity(len(keys)) - 1
    return len({(h ^ (h >> 16)) & mask for h in map(hash_of, keys)}) == len(keys)



