"""Generations the group coordinator wrote (``__consumer_offsets``), recorded as they happened.

Here the coordinator decides what a generation is: each ``GroupMetadata`` record of a completed
generation becomes one generation of the tables, under the coordinator's own number, with the
members it had, the assignment the leader really gave each of them, what moved since the previous
generation (and why), and the balance over the subscribed topics' partitions. No coalescing window
and no assignor decide anything: a cooperative group's revocation round and its follow-up are the
two generations the coordinator wrote, however short the first one was.

Then the project's own assignor runs on the exact inputs the coordinator recorded (each member's
subscription, owned partitions, member generation, static id and rack; the group's protocol names
the assignor) and ``assignment_checks`` says whether it gives the assignment the group got.

A Kafka Connect cluster (protocol type ``connect``) shares the membership part (members joining and
leaving, the cause); its workers run connectors and tasks, which :mod:`.connect_recorded` records
and checks.

Records arrive in the log's order and wait in the group's backlog until the topic catalog
(:mod:`.topic_catalog`) covers their time, because partition counts are part of what is measured.
A record the group has already applied (a replay) is skipped by its offset.
"""

from __future__ import annotations

from typing import Iterable

from assignors import COOPERATIVE_ASSIGNORS, GroupSpec, MemberSpec, TopicPartition, TopicSpec, assign
from assignors.errors import RebalanceMonitorError
from assignors.columns import AssignmentColumns
from assignors.metrics import balance_metrics_of_columns
from schemas.rows import AssignmentCheckRow, MemberEventRow

from streaming.engine import connect_recorded, kip848, live_group
from streaming.engine.batch import Batch
from streaming.engine.consumer import partition_holdings, revocations
from streaming.engine.coordinator_events import (
    RECORDED_STATE,
    ConsumerGroupRecord,
    CoordinatorGeneration,
    CoordinatorMember,
)
from streaming.engine.generation import Generation, partition_balance, record_generation
from streaming.engine.state import CONNECT, Member, PendingRebalance, assignment_columns
from streaming.engine.topic_catalog import TopicCatalog

#: Assignors whose generations are cooperative: the client-side cooperative one, and KIP-848's
#: server-side ones (members revoke before they are given partitions).
COOPERATIVE = COOPERATIVE_ASSIGNORS | set(kip848.ASSIGNOR_NAMES.values())

Recorded = CoordinatorGeneration | ConsumerGroupRecord


def enqueue(batch: Batch, generations: Iterable[Recorded]) -> None:
    """Add new records to the group's backlog, in log order; records already seen are skipped."""
    s = batch.state
    known = {g.offset for g in s.coordinator_backlog}
    fresh = [g for g in generations if g.offset > s.coordinator_offset and g.offset not in known]
    if fresh:
        s.coordinator_backlog = sorted(s.coordinator_backlog + fresh, key=lambda g: (g.partition, g.offset))
        batch.stats.membership_accepted += len(fresh)


def ready(batch: Batch, catalog: TopicCatalog | None) -> list[Recorded]:
    """The backlog's first records whose time the catalog covers (they can be measured now)."""
    out = []
    for g in batch.state.coordinator_backlog:
        if catalog is None or not catalog.covers(g.event_time):
            break
        out.append(g)
    return out


def apply_recorded(batch: Batch, item: Recorded, catalog: TopicCatalog) -> None:
    """Apply one record of the backlog: a classic generation, or a KIP-848 record to fold."""
    s = batch.state
    s.coordinator_backlog.remove(item)
    s.coordinator_offset = item.offset
    g = kip848.fold(batch, item, catalog) if isinstance(item, ConsumerGroupRecord) else item
    if g is None or (not g.members and s.generation == 0):
        # Empty before any generation was recorded: a new group, all that compaction kept of an idle
        # one, or a group of a kind this source does not record going Empty: nothing to record.
        return
    _record(batch, g, catalog)


def _record(batch: Batch, g: CoordinatorGeneration, catalog: TopicCatalog) -> None:
    """Record one generation the coordinator wrote, and check it against the project's assignor."""
    s = batch.state
    at = max(g.event_time, s.frontier)
    # A Connect group's Empty record says "connect" too; its workers run connectors, not partitions.
    connect = g.protocol_type == CONNECT
    if connect:
        s.group_type = CONNECT
        if g.protocol:
            connect_recorded.adopt_protocol(s, g.protocol)
    else:
        subscribed = {t for m in g.members for t in m.topics}
        topics = _with_assigned(catalog.as_of(g.event_time, subscribed), g.members)
        s.topics = topics
        if g.protocol:
            s.assignor = g.protocol
            s.protocol = "cooperative" if g.protocol in COOPERATIVE else "eager"
    before = s.members
    members = {m.member_id: _member(m, before.get(m.member_id), at) for m in g.members}
    joined = [mid for mid in members if mid not in before]
    departed = [mid for mid in before if mid not in members]
    replaced = _static_replacements(before, members, joined, departed)
    if g.generation == s.generation and s.generation > 0:
        # The same generation written again: a static member was replaced (KIP-345), or the record
        # repeats. No rebalance happened; the new member id takes over its predecessor's partitions.
        _member_events(batch, at, g, before, members, joined, departed, replaced)
        s.members = members
        s.assignment = {mid: list(m.assignment or ()) for mid, m in zip(members, g.members)}
        return
    _member_events(batch, at, g, before, members, joined, departed, replaced)
    trigger, trigger_member = _cause(before, members, joined, departed, replaced, s.coordinator_phase)
    if connect:
        if trigger == "unknown":
            trigger, trigger_member = connect_recorded.quiet_cause(s, g, at)
        s.members = members
        connect_recorded.record(batch, at, g, PendingRebalance(at, at, trigger, trigger_member))
        return
    held = assignment_columns(s)
    new_assignment = {m.member_id: list(m.assignment or ()) for m in g.members}
    spec = GroupSpec(members=tuple(MemberSpec(mid, m.topics) for mid, m in members.items()), topics=topics,
                     group_id=s.group_id)
    # Reversed: where the recorded generation before gave a partition to two members, the later one
    # is its previous owner (balance_metrics counts the first holder listed).
    assigned = AssignmentColumns.from_lists(new_assignment)
    metrics = balance_metrics_of_columns(spec, assigned, held.select(held.members[::-1]))
    phase = _phase(s.coordinator_phase, g.protocol, metrics.unassigned, bool(members))
    s.members = members
    record_generation(batch, at, PendingRebalance(at, at, trigger, trigger_member), Generation(
        assignor=g.protocol or s.assignor_name(), protocol=s.protocol,
        holdings=partition_holdings(members, assigned),
        revocations=revocations(members, held, assigned, {}, set(), topics),
        balance=partition_balance(metrics, 0), assignor_ms=0.0, exact_mean=metrics.mean,
        group_instance_ids={mid: m.group_instance_id for mid, m in members.items()},
        number=g.generation, phase=phase))
    s.coordinator_phase = phase
    s.assignment = new_assignment
    if members and g.protocol and all(m.assignment is not None for m in g.members):
        _check(batch, at, g, topics)


def _with_assigned(topics: dict[str, TopicSpec], members: Iterable[CoordinatorMember]) -> dict[str, TopicSpec]:
    """The catalog's topics, each at least as large as the partitions the coordinator assigned: a
    partition the group really got exists (a description a moment older may not have it yet)."""
    out = dict(topics)
    for m in members:
        for tp in m.assignment or ():
            spec = out.get(tp.topic)
            if spec is None or tp.partition >= spec.partitions:
                out[tp.topic] = TopicSpec(tp.topic, tp.partition + 1, topic_id=spec.topic_id if spec else None)
    return out


def _member(m: CoordinatorMember, previous: Member | None, at: int) -> Member:
    # A Connect worker's join metadata, under the names the event-topic Connect path keeps it.
    task_metadata = {"worker_url": m.connect.url, "config_offset": m.connect.config_offset} if m.connect else {}
    return Member(member_id=m.member_id, topics=m.topics, joined_at=previous.joined_at if previous else at,
                  last_seen=at, session_timeout_ms=m.session_timeout_ms or 45_000,
                  group_instance_id=m.group_instance_id, client_id=m.client_id, host=m.host, rack=m.rack,
                  reported_owned=m.owned_partitions, reported_generation=m.member_generation, expires=False,
                  task_metadata=task_metadata)


def _static_replacements(before, members, joined, departed) -> dict[str, str]:
    """New member id -> the id it replaced: a static member (same group.instance.id) rejoined."""
    gone = {before[mid].group_instance_id: mid for mid in departed if before[mid].group_instance_id}
    return {mid: gone[members[mid].group_instance_id] for mid in joined
            if members[mid].group_instance_id in gone}


def _cause(before, members, joined, departed, replaced, previous_phase) -> tuple[str, str | None]:
    """What the log says started this generation: the follow-up of a revocation round, a member
    joining or leaving (the log cannot tell a clean leave from an expiry), or a changed subscription."""
    if previous_phase == "revocation":
        return "cooperative_followup", None
    new = [mid for mid in joined if mid not in replaced]
    if new:
        return "join", new[0]
    gone = [mid for mid in departed if mid not in replaced.values()]
    if gone:
        return "leave", gone[0]
    changed = [mid for mid, m in members.items() if mid in before and before[mid].topics != m.topics]
    if changed:
        return "update", changed[0]
    return ("static_rejoin", next(iter(replaced))) if replaced else ("unknown", None)


def _phase(previous_phase: str | None, protocol: str | None, unassigned: int, has_members: bool) -> str:
    """A cooperative generation that leaves subscribed partitions unassigned is a revocation round
    (the partitions are on their way to a new owner); the one after it is its follow-up."""
    if protocol in COOPERATIVE_ASSIGNORS and unassigned and has_members:
        return "revocation"
    return "followup" if previous_phase == "revocation" else "complete"


def _member_events(batch: Batch, at: int, g: CoordinatorGeneration, before, members, joined, departed,
                   replaced) -> None:
    s = batch.state
    rows = [(members[mid], "static_rejoin" if mid in replaced else "joined", replaced.get(mid), None)
            for mid in joined]
    rows += [(before[mid], "left", None, f"not in the coordinator's generation {g.generation}")
             for mid in departed if mid not in replaced.values()]
    for m, event, previous_id, reason in rows:
        batch.emit(MemberEventRow(
            group_id=s.group_id, event_time=at, member_id=m.member_id, event=event,
            group_instance_id=m.group_instance_id, client_id=m.client_id, host=m.host, reason=reason,
            event_id=g.event_id, previous_member_id=previous_id, late=False, generation_before=s.generation))


def _check(batch: Batch, at: int, g: CoordinatorGeneration, topics: dict[str, TopicSpec]) -> None:
    """The project's assignor on the recorded inputs, against the recorded assignment."""
    s = batch.state
    spec = GroupSpec(members=tuple(MemberSpec(
        member_id=m.member_id, topics=m.topics, owned_partitions=m.owned_partitions,
        generation=m.member_generation, group_instance_id=m.group_instance_id, rack=m.rack) for m in g.members),
        topics=topics, group_id=s.group_id)
    try:
        computed = assign(spec, g.protocol).assignment
    except RebalanceMonitorError:
        return  # an assignor this project does not have (a custom one): nothing to compare with
    actual: dict[str, list[TopicPartition]] = {m.member_id: list(m.assignment or ()) for m in g.members}
    differing = live_group.differing_partitions(computed, actual)
    unmatched = sorted(set(computed) ^ set(actual))
    batch.emit(AssignmentCheckRow(
        group_id=s.group_id, generation=g.generation, event_time=at, agrees=not differing and not unmatched,
        members_compared=len(set(computed) | set(actual)),
        partitions_compared=len(live_group.owners(computed).keys() | live_group.owners(actual).keys()),
        differing=differing, unmatched_members=unmatched, computed_assignor=g.protocol,
        reported_assignor=g.protocol, group_state=RECORDED_STATE))
    batch.alerts.on_check(at, len(differing) + len(unmatched), len(unmatched))
