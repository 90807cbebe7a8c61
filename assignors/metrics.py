"""Balance and movement metrics of one assignment, and a validity check (spec section 7.1).

Pure functions of a group spec and an assignment, cheap enough to run on every generation of a
10,000-member, 500,000-partition group: partitions are encoded as integers (topic offset +
partition number) and compared in NumPy arrays instead of sets of tuples.

Definitions (a "partition" is a (topic, partition) pair):

* ``per_member``: partitions assigned to each member of the spec (0 for a member the assignment
  leaves out); ``partitions`` is their sum. ``mean`` and ``stddev`` are over members (population
  standard deviation); all are 0 for a group without members.
* ``imbalance``: ``max - min``. ``balance_score``: Kafka's test score, the sum over unordered
  member pairs of ``|size_i - size_j|`` (0 = perfectly even).
* previous owners: by default each member's ``owned_partitions`` (a partition claimed by several
  members counts for the first of them in spec order); pass ``previous`` instead (per member,
  members that have left included, what it held; again the first holder listed counts) when the
  members report nothing, as under the eager protocol, where they revoke everything before
  rejoining.
* ``moved``: partitions that had a previous owner and are now assigned to a different member
  (including partitions of members that left).
* ``retainable``: previously owned partitions whose owner is still in the group, still subscribes
  to the topic, and whose partition still exists; ``retained``: those of them now assigned to the
  same owner. ``stickiness = retained / retainable``, and 1.0 when nothing was retainable (a first
  assignment, or every owner left: nothing could have stayed, so nothing was lost);
  ``retainable`` tells that case apart.
* ``unassigned``: partitions of existing topics some member subscribes to that no member is
  assigned, e.g. withheld during a cooperative round.

Partitions of unknown topics or beyond a topic's partition count are left out of every count;
:func:`validate` reports them.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat
from typing import Mapping, Sequence, Union

import numpy as np

from .columns import AssignmentColumns
from .model import GroupAssignment, GroupSpec, TopicPartition

__all__ = [
    "AssignmentLike", "BalanceMetrics", "balance_metrics", "balance_metrics_of_columns", "balance_score", "validate",
]

#: An assignor's answer, or any member id -> partitions mapping (e.g. a stored generation).
AssignmentLike = Union[GroupAssignment, Mapping[str, Sequence[TopicPartition]]]

#: How many offending partitions one violation message lists before summarising the rest.
_LISTED = 10


@dataclass(frozen=True, slots=True)
class BalanceMetrics:
    members: int
    partitions: int
    per_member: Mapping[str, int]
    min: int
    max: int
    mean: float
    stddev: float
    imbalance: int
    balance_score: int
    moved: int
    retainable: int
    retained: int
    stickiness: float
    unassigned: int


def balance_score(sizes: Sequence[int] | np.ndarray) -> int:
    """Sum over unordered pairs of ``|a - b|``, in O(n log n).

    Sorted ascending, the i-th smallest value is larger than the i values before it and smaller
    than the n - 1 - i after it, so it contributes ``value * (2i - (n - 1))``.
    """
    values = np.sort(np.asarray(sizes, dtype=np.int64))
    n = len(values)
    if n < 2:
        return 0
    weights = 2 * np.arange(n, dtype=np.int64) - (n - 1)
    return int(np.dot(values, weights))


def balance_metrics(
    spec: GroupSpec,
    assignment: AssignmentLike,
    previous: Mapping[str, Sequence[TopicPartition]] | None = None,
) -> BalanceMetrics:
    """Balance, movement and stickiness of ``assignment`` relative to the previous owners."""
    if previous is None:
        before = AssignmentColumns.from_pairs([m.member_id for m in spec.members],
                                              [m.owned_partitions for m in spec.members])
    else:
        before = AssignmentColumns.from_lists(previous)
    return balance_metrics_of_columns(spec, AssignmentColumns.from_lists(_as_mapping(assignment)), before)


def balance_metrics_of_columns(spec: GroupSpec, assignment: AssignmentColumns,
                               previous: AssignmentColumns) -> BalanceMetrics:
    """:func:`balance_metrics` of maps held as columns: per member, what it holds now and what it
    held before (both may name members outside the spec)."""
    index = _PartitionIndex(spec)
    member_ids = [m.member_id for m in spec.members]
    member_index = {member_id: i for i, member_id in enumerate(member_ids)}

    held_now = dict(zip(assignment.members, assignment.counts.tolist()))
    sizes = np.array([held_now.get(member_id, 0) for member_id in member_ids], dtype=np.int64)
    # Current owner per partition id; -1 = nobody, -2 = someone outside the spec.
    current = index.owners(assignment, member_index, first_wins=False)
    # An owner that has left the group (-2) still counts as the one a partition moved away from.
    previous_owner = index.owners(previous, member_index, first_wins=True)

    had_owner = previous_owner != -1
    assigned = current != -1
    moved = int(np.count_nonzero(had_owner & (current != -1) & (current != previous_owner)))

    # Retainable: the previous owner is in the group and subscribes to the partition's topic.
    subscription_of, subscribes = index.subscriptions(spec)
    in_group = previous_owner >= 0
    retainable_mask = np.zeros(index.total, dtype=bool)
    retainable_mask[in_group] = subscribes[subscription_of[previous_owner[in_group]], index.topic_of[in_group]]
    retainable = int(np.count_nonzero(retainable_mask))
    retained = int(np.count_nonzero(retainable_mask & (current == previous_owner)))

    subscribed_topic = subscribes.any(axis=0)
    unassigned = int(np.count_nonzero(subscribed_topic[index.topic_of] & ~assigned))

    n = len(member_ids)
    return BalanceMetrics(
        members=n,
        partitions=int(sizes.sum()),
        per_member=dict(zip(member_ids, sizes.tolist())),
        min=int(sizes.min()) if n else 0,
        max=int(sizes.max()) if n else 0,
        mean=float(sizes.mean()) if n else 0.0,
        stddev=float(sizes.std()) if n else 0.0,
        imbalance=int(sizes.max() - sizes.min()) if n else 0,
        balance_score=balance_score(sizes),
        moved=moved,
        retainable=retainable,
        retained=retained,
        stickiness=retained / retainable if retainable else 1.0,
        unassigned=unassigned,
    )


def validate(spec: GroupSpec, assignment: AssignmentLike, *, complete: bool = True) -> list[str]:
    """Human-readable violations of Kafka's validity rules; an empty list means valid.

    Checked: every member of the spec appears and no one else does; members get only existing
    partitions of topics they subscribe to; no partition is assigned twice; and, with
    ``complete``, every partition of every subscribed existing topic is assigned. A cooperative
    round withholds partitions on purpose: those listed in ``GroupAssignment.transferring`` count
    as accounted for, or pass ``complete=False``.
    """
    by_member = _as_mapping(assignment)
    group = f"group {spec.group_id!r}"
    problems: list[str] = []
    member_index = {m.member_id: i for i, m in enumerate(spec.members)}
    for member in spec.members:
        if member.member_id not in by_member:
            problems.append(f"{group}: member {member.member_id!r} is missing from the assignment")
    for member_id in by_member:
        if member_id not in member_index:
            problems.append(f"{group}: the assignment names {member_id!r}, which is not a member")

    index = _PartitionIndex(spec)
    subscription_of, subscribes = index.subscriptions(spec)
    all_ids: list[np.ndarray] = []
    for member_id, tps in by_member.items():
        ids, exists = index.encode_checked(tps)
        if not exists.all():
            problems.append(
                f"{group}: member {member_id!r} got partitions that do not exist: "
                + _listed([tps[i] for i in np.flatnonzero(~exists)])
            )
        i = member_index.get(member_id)
        if i is not None and len(ids):
            allowed = subscribes[subscription_of[i], index.topic_of[ids]]
            if not allowed.all():
                positions = np.flatnonzero(exists)[~allowed]
                problems.append(
                    f"{group}: member {member_id!r} got partitions of topics it does not subscribe to: "
                    + _listed([tps[k] for k in positions])
                )
        all_ids.append(ids)

    times_assigned = np.bincount(
        np.concatenate(all_ids) if all_ids else np.zeros(0, dtype=np.int64), minlength=index.total
    )
    doubled = np.flatnonzero(times_assigned > 1)
    if len(doubled):
        wanted = {index.decode(int(i)) for i in doubled[:_LISTED]}
        holders: dict[TopicPartition, list[str]] = {tp: [] for tp in sorted(wanted)}
        for member_id, tps in by_member.items():
            for tp in tps:
                if tp in wanted:
                    holders[tp].append(member_id)
        for tp, owners in holders.items():
            problems.append(
                f"{group}: {tp.topic}-{tp.partition} is assigned more than once: "
                f"to {', '.join(map(repr, owners))}"
            )
        if len(doubled) > _LISTED:
            problems.append(f"{group}: ... and {len(doubled) - _LISTED} more partitions assigned more than once")

    if complete and index.total:
        accounted = times_assigned > 0
        if isinstance(assignment, GroupAssignment) and assignment.transferring:
            accounted[index.encode(list(assignment.transferring))] = True
        missing = np.flatnonzero(subscribes.any(axis=0)[index.topic_of] & ~accounted)
        missing_topics = index.topic_of[missing]
        for t in np.unique(missing_topics).tolist():
            parts = (missing[missing_topics == t] - index.offsets[t]).tolist()
            shown = ", ".join(map(str, parts[:_LISTED])) + (", ..." if len(parts) > _LISTED else "")
            problems.append(
                f"{group}: {len(parts)} subscribed partition(s) of topic {index.topics[t]!r} "
                f"are not assigned: {shown}"
            )
    return problems


def _listed(tps: list[TopicPartition]) -> str:
    shown = ", ".join(f"{t}-{p}" for t, p in tps[:_LISTED])
    return shown + (f" and {len(tps) - _LISTED} more" if len(tps) > _LISTED else "")


def _as_mapping(assignment: AssignmentLike) -> Mapping[str, Sequence[TopicPartition]]:
    return assignment.assignment if isinstance(assignment, GroupAssignment) else assignment


class _PartitionIndex:
    """Numbers every partition of ``spec.topics`` 0..total-1, topic by topic."""

    def __init__(self, spec: GroupSpec) -> None:
        self.topics = list(spec.topics)
        self.topic_number = {topic: i for i, topic in enumerate(self.topics)}
        counts = np.array([max(spec.topics[t].partitions, 0) for t in self.topics], dtype=np.int64)
        self.counts = counts
        self.offsets = np.concatenate(([0], np.cumsum(counts)))[:-1] if len(counts) else counts
        self.total = int(counts.sum())
        self.topic_of = np.repeat(np.arange(len(self.topics), dtype=np.int64), counts)
        # Counts and offsets with an extra empty slot, which topic number -1 (unknown) reads.
        self._counts_or_none = np.append(counts, 0)
        self._offsets_or_none = np.append(self.offsets, 0)

    def owners(self, holdings: AssignmentColumns, member_index: Mapping[str, int], *, first_wins: bool) -> np.ndarray:
        """Owner per partition id (-1: nobody; -2: a member ``member_index`` lacks) in ``holdings``;
        where two hold one partition, the first or the last of them is its owner."""
        out = np.full(self.total, -1, dtype=np.int64)
        flat = self.encode_columns(holdings)
        numbers = np.array([member_index.get(member_id, -2) for member_id in holdings.members], dtype=np.int64)
        claimants = np.repeat(numbers, holdings.counts)
        exists = flat >= 0
        if not exists.all():
            claimants, flat = claimants[exists], flat[exists]
        if len(flat) == 0 or np.bincount(flat, minlength=self.total).max() <= 1:
            # Nobody shares a partition (every valid assignment): one scatter, linear, where the
            # sort below costs 0.05 s for a huge group's 500,000 partitions.
            out[flat] = claimants
            return out
        # np.unique gives each id's first position; over the reversed ids, its last one.
        kept = (np.unique(flat, return_index=True)[1] if first_wins
                else len(flat) - 1 - np.unique(flat[::-1], return_index=True)[1])
        out[flat[kept]] = claimants[kept]
        return out

    def encode_columns(self, holdings: AssignmentColumns) -> np.ndarray:
        """Per partition ``holdings`` lists, its id (-1: it does not exist)."""
        if len(holdings) == 0:
            return np.zeros(0, dtype=np.int64)
        # A topic the index lacks is number -1, which reads the extra last slot: no partitions.
        numbers = np.array([self.topic_number.get(name, -1) for name in holdings.topics], dtype=np.int64)
        topics, parts = numbers[holdings.topic], holdings.partition
        exists = (parts >= 0) & (parts < self._counts_or_none[topics])
        return np.where(exists, self._offsets_or_none[topics] + parts, -1)

    def encode(self, tps: Sequence[TopicPartition]) -> np.ndarray:
        """Ids of the partitions in ``tps`` that exist (others are skipped)."""
        return self.encode_checked(tps)[0]

    def encode_checked(self, tps: Sequence[TopicPartition]) -> tuple[np.ndarray, np.ndarray]:
        """Ids of the partitions in ``tps`` that exist, and per entry of ``tps`` whether it does."""
        if not tps:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
        names, numbers = zip(*tps)
        topics = np.fromiter(map(self.topic_number.get, names, repeat(-1)), dtype=np.int64, count=len(tps))
        parts = np.array(numbers, dtype=np.int64)
        exists = topics >= 0
        exists[exists] &= (parts[exists] >= 0) & (parts[exists] < self.counts[topics[exists]])
        return self.offsets[topics[exists]] + parts[exists], exists

    def decode(self, partition_id: int) -> TopicPartition:
        t = int(np.searchsorted(self.offsets, partition_id, side="right")) - 1
        while self.counts[t] == 0:  # empty topics share their offset with the next one
            t += 1
        return TopicPartition(self.topics[t], partition_id - int(self.offsets[t]))

    def subscriptions(self, spec: GroupSpec) -> tuple[np.ndarray, np.ndarray]:
        """Per member, the row of its subscription; per distinct subscription, a row of booleans
        over the spec's topics. Distinct rows keep memory at subscriptions x topics, not
        members x topics."""
        row_of_tuple: dict[tuple[str, ...], int] = {}
        rows: list[np.ndarray] = []
        row_of_member: list[int] = []
        last, row = None, -1
        for member in spec.members:
            # Members that share a subscription mostly share its tuple (the engine's stored state
            # does): an identity check, where hashing 100 topic names per member cost 0.02 s.
            if member.topics is not last:
                last = member.topics
                row = row_of_tuple.get(last, -1)
                if row < 0:
                    flags = np.zeros(len(self.topics), dtype=bool)
                    flags[[self.topic_number[t] for t in last if t in self.topic_number]] = True
                    row = row_of_tuple[last] = len(rows)
                    rows.append(flags)
            row_of_member.append(row)
        matrix = np.array(rows, dtype=bool) if rows else np.zeros((0, len(self.topics)), dtype=bool)
        return np.array(row_of_member, dtype=np.int64), matrix
