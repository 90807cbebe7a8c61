"""A consumer group's generation: Kafka's assignor over the members' subscriptions.

The members' subscriptions, racks and owned partitions become a :class:`~assignors.GroupSpec` and
the group's assignor (as its members name it) computes the assignment. What a member owns going
in is the monitor's previous generation, or for a live cluster's group the actual assignment the
collector observed before the change (the real assignor's input, so a divergence is never carried
from one generation to the next).

The sticky assignors take the owned partitions and answer as integer columns
(:class:`~assignors.columns.AssignmentColumns`), the form the state stores the assignment in, so a
huge group's rebalance builds no object per partition; the metrics, revocations and rows are
computed from columns for every assignor.

Eager groups get everything at once. Cooperative groups, and KIP-848 groups whose coordinator
revokes before it assigns, withhold the partitions that change owner: this generation revokes
them and a follow-up generation assigns them.
"""

from __future__ import annotations

import functools
from typing import Iterable, Mapping

import numpy as np

from assignors import COOPERATIVE_ASSIGNORS, GroupSpec, MemberSpec, TopicPartition, assign
from assignors.columns import AssignmentColumns
from assignors.errors import RebalanceMonitorError
from assignors.metrics import balance_metrics_of_columns
from assignors.sticky import assign_sticky_columns
from assignors.timeline_order import MemberTable, next_target
from schemas.partition_list import PartitionList

from streaming.engine.batch import Batch
from streaming.engine.generation import (
    COOPERATIVE_FOLLOWUP,
    Generation,
    partition_balance,
    record_failure,
    record_generation,
)
from streaming.engine.codec import packed_assignment
from streaming.engine.state import GroupState, Member, PendingRebalance, assignment_columns

#: The coordinator's own (KIP-848) assignors.
SERVER_ASSIGNORS = frozenset({"uniform", "server-range"})
#: Server-side (KIP-848) assignors revoke before they assign, like a cooperative rebalance.
TWO_PHASE_ASSIGNORS = COOPERATIVE_ASSIGNORS | SERVER_ASSIGNORS


def rebalance(batch: Batch, at: int, pending: PendingRebalance | None) -> None:
    s = batch.state
    assignor = s.assignor_name()
    two_phase = s.protocol == "cooperative" or assignor in TWO_PHASE_ASSIGNORS

    if pending is not None and pending.owned_snapshot is not None and s.generation > 0:
        held = AssignmentColumns.from_lists(pending.owned_snapshot)
    else:
        held = assignment_columns(s)
    # As lists only where an assignor or a check needs them: a huge group's are 500,000 objects.
    held_lists = functools.cache(lambda: held.to_lists(s.topics))
    # Only where the answer needs nothing withheld here: the cooperative assignor withholds for
    # itself, and the eager one in an eager group gives everything at once.
    by_columns = assignor in COOPERATIVE_ASSIGNORS or (assignor == "sticky" and not two_phase)
    known = set(held.members)
    members = []
    # What each member the monitor has not assigned yet says it owns.
    claims: dict[str, tuple[TopicPartition, ...]] = {}
    for m in _in_assignor_order(s, assignor, pending):
        is_known = m.member_id in known
        if not is_known and m.reported_owned:
            claims[m.member_id] = m.reported_owned
        owned = () if by_columns else tuple(held_lists()[m.member_id]) if is_known else m.reported_owned
        members.append(MemberSpec(
            member_id=m.member_id, topics=m.topics, owned_partitions=owned,
            generation=s.generation if is_known else m.reported_generation,
            group_instance_id=m.group_instance_id, rack=m.rack))
    spec = GroupSpec(members=tuple(members), topics=dict(s.topics), group_id=s.group_id)
    previous = held.plus(AssignmentColumns.from_lists(claims)) if claims else held

    # Per partition, its first holder, built on first use: only claims to check and partitions a
    # server-side assignor's round withholds look it up; a huge group's generation needs none of it.
    first_holders = functools.cache(lambda: _previous_owners(held_lists(), claims))
    started = batch.start_stopwatch()
    try:
        if by_columns:
            answer = assign_sticky_columns(spec, previous, cooperative=assignor in COOPERATIVE_ASSIGNORS)
            assignor_ms = batch.elapsed_ms(started)
            assigned, transferring = answer.assignment, dict(answer.transferring)
        else:
            result = assign(spec, assignor)
            assignor_ms = batch.elapsed_ms(started)
            new_assignment = {mid: list(tps) for mid, tps in result.assignment.items()}
            transferring = dict(result.transferring)
            if not two_phase:  # an eager group gets everything at once
                for tp, mid in transferring.items():
                    new_assignment.setdefault(mid, []).append(tp)
                transferring = {}
            elif assignor not in COOPERATIVE_ASSIGNORS:
                transferring = _withhold_moving_partitions(new_assignment, first_holders()[0], s.members)
            assigned = AssignmentColumns.from_lists(new_assignment)
    except RebalanceMonitorError as exc:
        record_failure(batch, at, exc)
        return

    duplicates = first_holders()[1] if claims else set()
    metrics = balance_metrics_of_columns(spec, assigned, previous)
    in_transit = int(np.count_nonzero(previous.holds(list(transferring)))) if transferring else 0
    record_generation(batch, at, pending, Generation(
        assignor=assignor, protocol=s.protocol, holdings=partition_holdings(s.members, assigned),
        revocations=revocations(s.members, held, assigned, transferring, duplicates, s.topics),
        balance=partition_balance(metrics, in_transit), assignor_ms=assignor_ms,
        needs_followup=bool(transferring), exact_mean=metrics.mean,
        group_instance_ids={mid: m.group_instance_id for mid, m in s.members.items()}))
    s.assignment = packed_assignment(assigned.select(list(s.members)), s.topics)
    if s.collector_fed:
        s.check_due_at = at


def _previous_owners(held: Mapping[str, list[TopicPartition]], claims: Mapping[str, tuple[TopicPartition, ...]]
                     ) -> tuple[dict[TopicPartition, str], set[TopicPartition]]:
    """Per partition, the first member that held it (``held``) or, failing that, claims it
    (``claims``, the members the monitor has not assigned yet, in assignor order); and the claimed
    partitions somebody else held or claimed first."""
    previous_owner: dict[TopicPartition, str] = {}
    for mid, tps in held.items():
        for tp in tps:
            previous_owner.setdefault(tp, mid)
    duplicates: set[TopicPartition] = set()
    for mid, tps in claims.items():
        for tp in tps:
            if previous_owner.setdefault(tp, mid) != mid:
                duplicates.add(tp)
    return previous_owner, duplicates


def _in_assignor_order(s: GroupState, assignor: str, pending: PendingRebalance | None) -> list[Member]:
    """The members in the order the group's assignor receives them: join order, except for the
    coordinator's own assignors, which see its member map's order (:mod:`assignors.timeline_order`;
    the coordinator computes a target once, so a follow-up round keeps the order of its first)."""
    if assignor not in SERVER_ASSIGNORS:
        return list(s.members.values())
    if pending is not None and pending.trigger == COOPERATIVE_FOLLOWUP and s.member_order:
        earlier = set(s.member_order)
        order = [m for m in s.member_order if m in s.members] + [m for m in s.members if m not in earlier]
    else:
        order, s.member_table = next_target(s.member_table or MemberTable(), list(s.members))
        s.member_order = tuple(order)
    return [s.members[m] for m in order]


def revocations(members: Mapping[str, Member], held: AssignmentColumns, assigned: AssignmentColumns,
                transferring: Mapping[TopicPartition, str], duplicates: set[TopicPartition], topics: Mapping) -> list[dict]:
    """Every partition a member held (``held``) and no longer holds (``assigned``): to whom it goes,
    and why."""
    numbering = {name: i for i, name in enumerate(dict.fromkeys(held.topics + assigned.topics))}
    # Partitions as one integer each; only the members whose list changed are walked (a sticky
    # rebalance of a huge group: the 50 partitions of the one member that left, of 500,000).
    held_keys, assigned_keys = held.keys(numbering), assigned.keys(numbering)
    held_starts = np.cumsum(held.counts) - held.counts
    assigned_starts = np.cumsum(assigned.counts) - assigned.counts
    revoked: list[tuple[str, int]] = []  # (member, place in held)
    for i, j in held.changed_runs(assigned, held_keys, assigned_keys):
        member_id, start = held.members[i], int(held_starts[i])
        begin = int(assigned_starts[j]) if j >= 0 else 0
        kept = set(assigned_keys[begin:begin + int(assigned.counts[j])].tolist()) if j >= 0 else set()
        before = held_keys[start:start + int(held.counts[i])].tolist()
        revoked.extend((member_id, start + k) for k, key in enumerate(before) if key not in kept)
    if not revoked:
        return []
    # New owners of the revoked partitions only. The last member listing one is its owner.
    places_in_held = np.array([j for _, j in revoked], dtype=np.int64)
    revoked_keys = held_keys[places_in_held]
    places = np.flatnonzero(np.isin(assigned_keys, revoked_keys))
    owners = np.searchsorted(np.cumsum(assigned.counts), places, side="right").tolist()
    new_owner = dict(zip(assigned_keys[places].tolist(), [assigned.members[i] for i in owners]))
    names = held.topics
    topic_numbers, partitions = held.topic[places_in_held].tolist(), held.partition[places_in_held].tolist()
    out = []
    for (mid, _), topic_number, partition, key in zip(revoked, topic_numbers, partitions, revoked_keys.tolist()):
        tp = TopicPartition(names[topic_number], partition)
        member = members.get(mid)
        if member is None:
            reason = "member_left"
        elif tp in duplicates:
            reason = "duplicate"
        elif tp.topic not in topics or tp.partition >= topics[tp.topic].partitions:
            reason = "deleted"
        elif tp.topic not in member.topics:
            reason = "unsubscribed"
        else:
            reason = "moved"
        out.append({"member_id": mid, "topic": tp.topic, "partition": tp.partition,
                    "to_member": new_owner.get(key) or transferring.get(tp), "reason": reason,
                    "unit": "partition", "unit_id": f"{tp.topic}-{tp.partition}"})
    return out


def partition_holdings(members: Iterable[str], assigned: AssignmentColumns) -> list[dict]:
    """The ``assignments`` columns of each of ``members`` (a member ``assigned`` does not list
    holds nothing): its id and its partitions in its list order, as a :class:`PartitionList` over
    ``assigned``'s columns (every member's list shares its topic names, so the generation's block
    names each topic once: :func:`schemas.partition_list.partitions_array`)."""
    topics, topic, partition = assigned.topics, assigned.topic, assigned.partition
    lists = {member_id: PartitionList(topics, topic[start:end], partition[start:end])
             for member_id, (start, end) in zip(assigned.members, assigned.runs())}
    empty = PartitionList(topics, topic[:0], partition[:0])
    return [{"member_id": member_id, "partitions": lists.get(member_id, empty)} for member_id in members]


def _withhold_moving_partitions(assignment: dict[str, list[TopicPartition]], previous_owner: Mapping,
                                members: Mapping[str, Member]) -> dict[TopicPartition, str]:
    """Revoke before assign, for assignors that do not compute it themselves (KIP-848's server-side
    assignors): a partition a live member still holds is taken from it in this generation and
    given to its new owner in the follow-up, as the coordinator's epochs do.
    """
    transferring: dict[TopicPartition, str] = {}
    for member_id, tps in assignment.items():
        kept = []
        for tp in tps:
            owner = previous_owner.get(tp)
            if owner is not None and owner != member_id and owner in members:
                transferring[tp] = member_id
            else:
                kept.append(tp)
        assignment[member_id] = kept
    return transferring
