"""Membership changes: joins, leaves, updates, static rejoins, workload changes, session expiries.

Each change is applied at its event time and written to ``member_events``; a change that alters
what the assignor sees opens a rebalance (:meth:`Batch.open_rebalance`), which the time loop
computes once the coalescing window has passed.
"""

from __future__ import annotations

from assignors import TopicSpec
from schemas.events import DEFAULT_SESSION_TIMEOUT_MS
from schemas.rows import MemberEventRow

from streaming.engine import live_group
from streaming.engine.batch import Batch
from streaming.engine.events import MembershipEvent
from streaming.engine.state import Member

#: Member events that count towards flapping.
_MEMBER_CHANGES = frozenset({"joined", "left", "expired", "static_rejoin"})
#: The Streams member metadata the task assignor sees: a change to one of these is a rebalance
#: trigger (offset sums are progress, not a trigger).
_ASSIGNOR_INPUTS = ("process_id", "threads", "client_tags")


def apply_membership(batch: Batch, e: MembershipEvent, late: bool) -> None:
    """Apply ``e`` (``late``: it arrived after the group had moved past its time, so it is applied
    at the group's time instead)."""
    at = max(e.event_time, batch.state.frontier) if late else e.event_time
    _apply(batch, e, at, late)
    if e.from_collector:
        live_group.observe(batch, e, at)


def expire(batch: Batch, member_id: str, at: int) -> None:
    s = batch.state
    member = s.members.pop(member_id)
    s.task_lags.pop(member_id, None)
    batch.left_or_expired.add(member_id)
    _member_event(batch, "expired", at, False, member, reason=f"no heartbeat for {member.session_timeout_ms} ms")
    batch.alerts.on_expiry(at, member_id)
    batch.open_rebalance(at, "expiry", member_id)


def _apply(batch: Batch, e: MembershipEvent, at: int, late: bool) -> None:
    s = batch.state
    if e.group_type:
        s.group_type = e.group_type
    if e.type == "workload":
        _apply_workload(batch, e, at, late)
        return
    member_id = e.member_id
    current = s.members.get(member_id)
    if e.assignor and e.assignor != s.assignor:
        changed = s.assignor is not None
        s.assignor = e.assignor
        if changed and current is not None:
            batch.open_rebalance(at, "update", member_id)
    if e.protocol:
        s.protocol = e.protocol

    if e.type == "leave":
        if current is None:
            _member_event(batch, "leave_of_unknown_member", at, late, event=e)
            return
        del s.members[member_id]
        s.task_lags.pop(member_id, None)
        batch.left_or_expired.add(member_id)
        _member_event(batch, "left", at, late, current, event=e)
        batch.open_rebalance(at, "leave", member_id)
        return

    topics = e.topics or ()
    if e.type == "join" and current is None:
        previous = _static_member(s, e.group_instance_id) if e.group_instance_id else None
        if previous is not None:
            _static_rejoin(batch, e, previous, at, late, topics)
            return
        member = Member(
            member_id=member_id, topics=topics, joined_at=at, last_seen=at,
            session_timeout_ms=e.session_timeout_ms or DEFAULT_SESSION_TIMEOUT_MS,
            group_instance_id=e.group_instance_id, client_id=e.client_id, host=e.host, rack=e.rack,
            reported_owned=e.held_partitions or (),
            reported_generation=e.generation if e.generation is not None else -1,
            expires=not e.from_collector, task_metadata=e.task_metadata())
        s.members[member_id] = member
        _member_event(batch, "joined", at, late, member, event=e)
        batch.open_rebalance(at, "join", member_id)
        batch.schedule_expiry(member)
        return

    if current is None:  # an update of a member the group does not know: treat it as a join
        _apply(batch, e.as_join(), at, late)
        return
    # A join of a known member, or an update: a rebalance only if what the assignor sees changed.
    current.last_seen = max(current.last_seen, at)
    metadata = e.task_metadata()
    relevant = bool((topics and topics != current.topics) or (e.rack and e.rack != current.rack)
                    or any(name in metadata and metadata[name] != current.task_metadata.get(name)
                           for name in _ASSIGNOR_INPUTS))
    current.task_metadata = {**current.task_metadata, **metadata}
    if topics:
        current.topics = topics
    for attr in ("client_id", "host", "rack"):
        if getattr(e, attr):
            setattr(current, attr, getattr(e, attr))
    if e.session_timeout_ms:
        current.session_timeout_ms = e.session_timeout_ms
    # The collector reports every poll's changes of assignment or group state as updates of each
    # member; only those that change what the assignor sees are worth a row.
    if relevant or not (e.type == "update" and e.from_collector):
        _member_event(batch, "updated" if relevant else "rejoined", at, late, current, event=e)
    if relevant:
        batch.open_rebalance(at, "update", member_id)
    batch.schedule_expiry(current)


def _static_member(s, group_instance_id: str) -> Member | None:
    """The member holding ``group_instance_id`` (KIP-345), if any. A scan, but only for static joins."""
    return next((m for m in s.members.values() if m.group_instance_id == group_instance_id), None)


def _static_rejoin(batch: Batch, e: MembershipEvent, previous: Member, at: int, late: bool,
                   topics: tuple[str, ...]) -> None:
    """KIP-345: the same group.instance.id under a new member id keeps its place, no rebalance."""
    s = batch.state
    new_id, old_id = e.member_id, previous.member_id
    # Keep the member's position in the subscription map: assignors' ties follow it.
    s.members = {(new_id if mid == old_id else mid): m for mid, m in s.members.items()}
    previous.member_id = new_id
    # Everything the group keeps per member follows the member to its new id: the computed
    # assignment, the live group's observed one (the coordinator hands the new id the old one's
    # partitions; no leave is ever reported for the old id) and the snapshot a pending rebalance
    # starts from.
    snapshot = s.pending.owned_snapshot if s.pending is not None else None
    for by_member in (s.assignment, s.task_assignment, s.task_lags, s.observed, snapshot):
        if by_member is not None and old_id in by_member:
            by_member[new_id] = by_member.pop(old_id)
    if s.connect_leader == old_id:
        s.connect_leader = new_id
    if s.member_table is not None:  # a KIP-848 group: the coordinator's member map changes now
        s.member_table = s.member_table.replaced(old_id, new_id)
    previous.task_metadata = {**previous.task_metadata, **e.task_metadata()}
    previous.last_seen = at
    previous.client_id = e.client_id or previous.client_id
    previous.host = e.host or previous.host
    _member_event(batch, "static_rejoin", at, late, previous, event=e, previous_member_id=old_id)
    if topics and topics != previous.topics:
        previous.topics = topics
        batch.open_rebalance(at, "update", new_id)
    batch.schedule_expiry(previous)


def _apply_workload(batch: Batch, e: MembershipEvent, at: int, late: bool) -> None:
    s = batch.state
    workload = e.workload
    topics: dict[str, TopicSpec] = {t.name: t for t in workload.topics}
    changed = topics != s.topics or workload.tasks != s.task_workload
    s.topics = topics
    s.task_workload = workload.tasks
    if workload.tasks is not None and workload.tasks.stateful is not None:
        stateful = set(workload.tasks.stateful)  # forget lags of tasks the application no longer has
        s.task_lags = {m: {t: lag for t, lag in lags.items() if t in stateful} for m, lags in s.task_lags.items()}
    _member_event(batch, "workload_changed" if changed else "workload_unchanged", at, late, event=e)
    if changed and s.members:
        batch.open_rebalance(at, "workload", None)


def _member_event(batch: Batch, kind: str, at: int, late: bool, member: Member | None = None, *,
                  event: MembershipEvent | None = None, reason: str | None = None,
                  previous_member_id: str | None = None) -> None:
    s = batch.state
    m, e = member, event
    batch.emit(MemberEventRow(
        group_id=s.group_id, event_time=at, member_id=m.member_id if m else (e.member_id if e else None),
        event=kind, group_instance_id=m.group_instance_id if m else (e.group_instance_id if e else None),
        client_id=m.client_id if m else (e.client_id if e else None),
        host=m.host if m else (e.host if e else None), reason=e.reason if e else reason,
        event_id=e.event_id if e else None, previous_member_id=previous_member_id, late=late,
        generation_before=s.generation))
    if kind in _MEMBER_CHANGES:
        batch.alerts.on_member_change(at, _identity(m, e))


def _identity(member: Member | None, event: MembershipEvent | None) -> str:
    """Who a member is across restarts: its static id, else its client id and host, else its id."""
    source = member if member is not None else event
    instance, client, host, member_id = (getattr(source, k) for k in ("group_instance_id", "client_id", "host",
                                                                      "member_id"))
    if instance:
        return instance
    if client:
        return f"{client}@{host}" if host else client
    return str(member_id)
