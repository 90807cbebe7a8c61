"""A consumer group's generation: Kafka's assignor over the members' subscriptions.

The members' subscriptions, racks and owned partitions become a :class:`~assignors.GroupSpec` and
the group's assignor (as its members name it) computes the assignment. What a member owns going
in is the monitor's previous generation, or for a live cluster's group the actual assignment the
collector observed before the change (the real assignor's input, so a divergence is never carried
from one generation to the next).

Eager groups get everything at once. Cooperative groups, and KIP-848 groups whose coordinator
revokes before it assigns, withhold the partitions that change owner: this generation revokes
them and a follow-up generation assigns them.
"""

from __future__ import annotations

import functools
from typing import Mapping

from assignors import COOPERATIVE_ASSIGNORS, GroupSpec, MemberSpec, TopicPartition, assign
from assignors.errors import RebalanceMonitorError
from assignors.metrics import balance_metrics
from assignors.timeline_order import MemberTable, next_target

from streaming.engine.batch import Batch
from streaming.engine.generation import (
    COOPERATIVE_FOLLOWUP,
    Generation,
    partition_balance,
    record_failure,
    record_generation,
)
from streaming.engine.state import GroupState, Member, PendingRebalance

#: The coordinator's own (KIP-848) assignors.
SERVER_ASSIGNORS = frozenset({"uniform", "server-range"})
#: Server-side (KIP-848) assignors revoke before they assign, like a cooperative rebalance.
TWO_PHASE_ASSIGNORS = COOPERATIVE_ASSIGNORS | SERVER_ASSIGNORS


def rebalance(batch: Batch, at: int, pending: PendingRebalance | None) -> None:
    s = batch.state
    assignor = s.assignor_name()
    two_phase = s.protocol == "cooperative" or assignor in TWO_PHASE_ASSIGNORS

    held = s.assignment
    if pending is not None and pending.owned_snapshot is not None and s.generation > 0:
        held = pending.owned_snapshot
    members = []
    # What each member the monitor has not assigned yet says it owns.
    claims: dict[str, tuple[TopicPartition, ...]] = {}
    for m in _in_assignor_order(s, assignor, pending):
        known = m.member_id in held
        owned = tuple(held[m.member_id]) if known else m.reported_owned
        if not known and m.reported_owned:
            claims[m.member_id] = m.reported_owned
        members.append(MemberSpec(
            member_id=m.member_id, topics=m.topics, owned_partitions=owned,
            generation=s.generation if known else m.reported_generation,
            group_instance_id=m.group_instance_id, rack=m.rack))
    spec = GroupSpec(members=tuple(members), topics=dict(s.topics), group_id=s.group_id)

    started = batch.start_stopwatch()
    try:
        result = assign(spec, assignor)
    except RebalanceMonitorError as exc:
        record_failure(batch, at, exc)
        return
    assignor_ms = batch.elapsed_ms(started)

    # Per partition, its first holder, built on first use: only claims to check, partitions to
    # withhold and partitions in transit look it up; a huge group's generation needs none of it,
    # and it cost 0.5 s for 500,000 partitions.
    first_holders = functools.cache(lambda: _previous_owners(held, claims))
    duplicates = first_holders()[1] if claims else set()
    new_assignment = {mid: list(tps) for mid, tps in result.assignment.items()}
    transferring = dict(result.transferring)
    if not two_phase:  # an eager group gets everything at once
        for tp, mid in transferring.items():
            new_assignment.setdefault(mid, []).append(tp)
        transferring = {}
    elif assignor not in COOPERATIVE_ASSIGNORS:
        transferring = _withhold_moving_partitions(new_assignment, first_holders()[0], s.members)

    metrics = balance_metrics(spec, new_assignment, previous={**held, **claims})
    in_transit = sum(1 for tp in transferring if tp in first_holders()[0]) if transferring else 0
    record_generation(batch, at, pending, Generation(
        assignor=assignor, protocol=s.protocol,
        holdings=[{"member_id": mid, "partitions": [{"topic": tp.topic, "partition": tp.partition}
                                                     for tp in new_assignment.get(mid, ())]}
                  for mid in s.members],
        revocations=revocations(s.members, held, new_assignment, transferring, duplicates, s.topics),
        balance=partition_balance(metrics, in_transit), assignor_ms=assignor_ms,
        needs_followup=bool(transferring), exact_mean=metrics.mean,
        group_instance_ids={mid: m.group_instance_id for mid, m in s.members.items()}))
    s.assignment = {mid: new_assignment.get(mid, []) for mid in s.members}
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


def revocations(members: Mapping[str, Member], held: Mapping[str, list[TopicPartition]],
                 new_assignment: Mapping[str, list[TopicPartition]], transferring: Mapping[TopicPartition, str],
                 duplicates: set[TopicPartition], topics: Mapping) -> list[dict]:
    """Every partition a member held and no longer holds: to whom it goes, and why."""
    revoked = []
    for mid, tps in held.items():
        now = new_assignment.get(mid, ())
        if now == tps:  # most members of a sticky rebalance: compared without building a set
            continue
        kept = set(now)
        revoked.extend((mid, tp) for tp in tps if tp not in kept)
    if not revoked:
        return []
    # New owners of the revoked partitions only: a huge group's first generation revokes nothing,
    # and a member leaving it revokes 50 of 500,000.
    wanted = {tp for _, tp in revoked}
    new_owner = {tp: mid for mid, tps in new_assignment.items() for tp in tps if tp in wanted}
    out = []
    for mid, tp in revoked:
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
                    "to_member": new_owner.get(tp) or transferring.get(tp), "reason": reason,
                    "unit": "partition", "unit_id": f"{tp.topic}-{tp.partition}"})
    return out


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
