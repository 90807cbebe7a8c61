"""The time loop: one group's events applied in event-time order, and the generations they cause.

The job keeps a :class:`GroupState` per group and calls :func:`advance` with each micro-batch's
events of that group. Everything is decided in event time, so the generations depend only on the
events, never on how they were split into micro-batches:

* Events are applied in event-time order, but only up to the group's *safe time*: its newest
  heartbeat time minus ``allowed_lateness_ms``. Newer events wait in the state. The job reads the
  membership topic in full every micro-batch, so every membership event up to that time has
  arrived; within the lateness, the order in which records arrive does not matter.
* A silent group (no member heartbeats any more) is moved on by the stream's time instead: the
  watermark, which trails the newest heartbeat by ``idle_group_grace_ms``, a margin wider than
  the skew between partitions.
* A change (join, leave, subscription or metadata update, workload change, session expiry) opens
  a rebalance; every change within ``coalesce_ms`` of event time of the first joins it, and the
  generation is computed at the end of that window, as a coordinator waits for members to rejoin.
* Session expiry happens at ``last heartbeat + session timeout`` unless a heartbeat (or any event
  of the member) comes first.
* A cooperative generation withholds the partitions that change owner; the follow-up generation,
  ``cooperative_followup_ms`` later, assigns them.
* Events older than what the group has applied are late: they are applied at the group's current
  time and flagged, never dropped.
* Streams and Connect groups have scheduled rebalances too: Streams' probing rebalance at the time
  the assignor names, Connect's rebalance when the delay for lost work (or the back-off between
  revoking rounds) expires. Streams task lags come with heartbeats and are applied at their
  heartbeat's event time.
* A group the collector observes in a live cluster is judged by its coordinator: its members
  never expire here (the collector reports their departure), its assignor starts from the actual
  assignment observed before the change, and each settled observation is compared with the
  computed generation (:mod:`.live_group`).
* A generation the coordinator wrote into its log (:mod:`.coordinator`) is recorded at its record's
  time, in the log's order. The log of a group is one Kafka partition, read in order and in full
  every batch, so it needs no lateness: the group's safe time moves up to its newest generation
  whose partition counts the topic catalog knows.
"""

from __future__ import annotations

import math
from typing import Iterable, Mapping, Sequence

from schemas.rows import TableRow

from streaming.engine import connect, consumer, coordinator, live_group, membership, streams
from streaming.engine.batch import Batch, BatchStats, Stopwatch, alert_evaluator
from streaming.engine.coordinator_events import ConsumerGroupRecord, CoordinatorGeneration
from streaming.engine.events import LagReport, MembershipEvent, as_map
from streaming.engine.heartbeats import plain_list
from streaming.engine.settings import EngineSettings
from streaming.engine.state import CONNECT, STREAMS, GroupState
from streaming.engine.topic_catalog import TopicCatalog

_REBALANCE_OF = {STREAMS: streams.rebalance, CONNECT: connect.rebalance}


def advance(state: GroupState, membership_events: Iterable[MembershipEvent], heartbeat_member_ids: Sequence[str],
            heartbeat_times: Sequence[int], settings: EngineSettings, *, watermark_ms: int | None = None,
            stopwatch: Stopwatch | None = None, lag_reports: Iterable[LagReport] = (),
            heartbeat_progress: Mapping[str, Mapping[str, int]] | None = None,
            coordinator_generations: Iterable[CoordinatorGeneration | ConsumerGroupRecord] = (),
            topic_catalog: TopicCatalog | None = None,
            heartbeat_weights: Sequence[int] | None = None,
            ) -> tuple[list[TableRow], BatchStats]:
    """Apply one batch of a group's events to ``state``; return the rows for the tables and the counts.

    ``stopwatch`` only times the assignors (``assignor_ms``); nothing else reads a clock.

    Kafka Streams task lags (heartbeats' ``task_lags``) come in one of two forms:

    * ``lag_reports``: every report with its heartbeat's event time; the history is then
      independent of batch boundaries for lags too (the job's form).
    * ``heartbeat_progress``: member -> its latest lags in this batch, taken as of the member's
      newest heartbeat time in this batch (or the group's newest, if it has none here).

    ``coordinator_generations``: generations the group's coordinator wrote, or the KIP-848 records
    they are folded from (any order; the log's order is restored), measured against ``topic_catalog``.

    ``heartbeat_weights``: how many heartbeat records each heartbeat stands for (default one each).
    The job drops the heartbeats that cannot change a decision before they reach the engine
    (:mod:`streaming.job.heartbeat_reduction`) and adds each dropped one to the weight of a kept
    heartbeat of its member: it is counted (accepted, late, of an unknown member) with that one.
    """
    batch = Batch(state, settings, stopwatch)
    s = state
    fresh: list[MembershipEvent] = []
    # The remembered ids as a set as well, kept equal to the bounded deque: a deque lookup scans it,
    # and a huge group's 10,000 joins in one batch made that 20 million comparisons.
    seen: set[str] | None = None
    for e in membership_events:
        if seen is None:
            seen = set(s.seen_event_ids)
        if e.event_id in seen:
            batch.reject(f"duplicate event_id {e.event_id!r} (already applied)", e.event_time, e.event_id)
            continue
        if e.session_timeout_ms is not None and e.session_timeout_ms < settings.min_session_timeout_ms:
            # Kafka's coordinator refuses such a join (INVALID_SESSION_TIMEOUT). The engine must too:
            # the job's heartbeat reduction relies on no member expiring sooner than this.
            batch.reject(f"session_timeout_ms {e.session_timeout_ms} is below job.min_session_timeout_ms "
                         f"{settings.min_session_timeout_ms} (Kafka's group.min.session.timeout.ms): a "
                         f"coordinator refuses such a member; set job.min_session_timeout_ms to the "
                         f"cluster's value", e.event_time, e.event_id)
            continue
        if len(s.seen_event_ids) == s.seen_event_ids.maxlen:
            seen.discard(s.seen_event_ids[0])  # the id the append below pushes out
        s.seen_event_ids.append(e.event_id)
        seen.add(e.event_id)
        fresh.append(e)
    batch.stats.membership_accepted = len(fresh)
    hb_ids, hb_times = plain_list(heartbeat_member_ids), plain_list(heartbeat_times, int)
    hb_weights = plain_list(heartbeat_weights, int) if heartbeat_weights is not None else [1] * len(hb_times)
    batch.stats.heartbeats_accepted = sum(hb_weights)
    # Heartbeats older than what the group has applied: applied all the same (they can only tell
    # that a member was alive at a time already decided), and counted as late.
    batch.stats.late += sum(w for t, w in zip(hb_times, hb_weights) if t <= s.frontier)

    # Heartbeats set the group's time. Membership events do not: the job reads the membership
    # topic in full every batch, so it may hold events far ahead of the heartbeats; they wait here
    # until the group's time reaches them.
    s.clock = max(s.clock, max(hb_times, default=-1))
    safe = s.clock - settings.allowed_lateness_ms
    if watermark_ms is not None and watermark_ms > 0:
        # The job's watermark trails the stream's newest heartbeat by idle_group_grace_ms.
        safe = max(safe, watermark_ms)
    coordinator.enqueue(batch, coordinator_generations)
    recorded = coordinator.ready(batch, topic_catalog)
    if recorded:  # the coordinator's log is complete up to its newest record: no lateness to wait for
        safe = max(safe, recorded[-1].event_time, s.frontier)

    # Late membership events (older than what is applied) go first, at the group's current time.
    late = [e for e in fresh if e.event_time <= s.frontier]
    on_time = [e for e in fresh if e.event_time > s.frontier] + s.buffered_events
    on_time.sort(key=lambda e: (e.event_time, e.event_id))
    due = [e for e in on_time if e.event_time <= safe]
    s.buffered_events = [e for e in on_time if e.event_time > safe]

    # This batch's heartbeats and the buffered ones, (member, time, weight); those newer than the
    # safe time wait in the state: (member, time), or (member, time, weight) when it is not one.
    beats = list(zip(hb_ids, hb_times, hb_weights))
    beats.extend((b[0], b[1], b[2] if len(b) > 2 else 1) for b in s.buffered_heartbeats)
    s.buffered_heartbeats = [(m, t) if w == 1 else (m, t, w) for m, t, w in beats if t > safe]
    applied = [b for b in beats if b[1] <= safe]
    reports = _lag_reports(s, heartbeat_member_ids, heartbeat_times, heartbeat_progress, lag_reports)
    s.buffered_progress = [r for r in reports if r[1] > safe]
    reports = [r for r in reports if r[1] <= safe]
    batch.heartbeats.load(applied)
    known_before = set(s.members)

    for e in late:
        membership.apply_membership(batch, e, late=True)
        batch.stats.late += 1

    # Only members whose expiry can fall inside this batch need a place in the queue.
    for member in s.members.values():
        if batch.heartbeats.expiry_of(member) <= safe:
            batch.schedule_expiry(member)

    _run_until(batch, safe, due, reports, recorded, topic_catalog)

    for member in s.members.values():
        member.last_seen = batch.heartbeats.last_seen_at(member, safe)
    s.frontier = max(s.frontier, safe)
    # Heartbeats of members the group never had (in this batch or before): typically a member
    # the monitor expired that kept heartbeating, or events of a group the monitor joined late.
    batch.stats.unknown_member_heartbeats = batch.heartbeats.beats_of_members_outside(
        known_before | set(s.members) | batch.left_or_expired)
    return batch.rows, batch.stats


def _run_until(batch: Batch, safe: int, due: list[MembershipEvent], reports: list[list],
               recorded: list = (), catalog: TopicCatalog | None = None) -> None:
    """Apply, in event-time order up to ``safe``: events, lag reports, expiries, rebalances,
    alert deadlines and the coordinator's generations (in log order). At equal times: alert
    deadlines first (a window closes at its end), then a rebalance (a deadline at t takes the
    events before t; an event at exactly t opens the next one), then the coordinator's
    generations, lag reports, events and expiries."""
    s = batch.state
    i = j = k = 0
    while True:
        next_event = due[i].event_time if i < len(due) else math.inf
        next_report = reports[j][1] if j < len(reports) else math.inf
        # A record's time may step back (the coordinator's clock): the log's order wins.
        next_recorded = max(recorded[k].event_time, s.frontier) if k < len(recorded) else math.inf
        next_input = min(next_event, next_report, next_recorded)
        expiry = batch.expiries.next(s.members)
        next_expiry = expiry[0] if expiry else math.inf
        next_rebalance = min(s.pending.deadline if s.pending else math.inf,
                             s.scheduled.deadline if s.scheduled else math.inf)
        next_alert = batch.alerts.next_deadline()
        next_alert = math.inf if next_alert is None else next_alert
        horizon = min(next_input, next_expiry, next_rebalance, next_alert)
        if s.check_due_at is not None and horizon > s.check_due_at:
            live_group.check_agreement(batch)  # everything at the observation's time has been applied
        if horizon > safe:
            return
        if next_alert == horizon:
            batch.alerts.at_deadline(int(next_alert))
        elif next_rebalance <= next_input and next_rebalance <= next_expiry:
            _rebalance(batch, int(next_rebalance))
        elif next_recorded <= next_input and next_recorded <= next_expiry:
            coordinator.apply_recorded(batch, recorded[k], catalog)
            k += 1
        elif next_report <= next_event and next_report <= next_expiry:
            member_id, at, lags = reports[j]
            j += 1
            streams.apply_lag_report(batch, member_id, at, lags)
        elif next_event <= next_expiry:
            e = due[i]
            i += 1
            member = s.members.get(e.member_id or "")
            if member is not None:
                member.last_seen = batch.heartbeats.last_seen_at(member, e.event_time)
            membership.apply_membership(batch, e, late=False)
        else:
            membership.expire(batch, expiry[1], int(next_expiry))


def _rebalance(batch: Batch, at: int) -> None:
    s = batch.state
    # A change's rebalance and one the assignor scheduled that fall due together are one generation.
    pending = s.pending or s.scheduled
    s.pending = s.scheduled = None
    _REBALANCE_OF.get(s.group_type, consumer.rebalance)(batch, at, pending)


def _lag_reports(s: GroupState, hb_ids: Sequence[str], hb_times: Sequence[int],
                 heartbeat_progress: Mapping[str, Mapping[str, int]] | None,
                 lag_reports: Iterable[LagReport]) -> list[list]:
    """Streams lag reports as [member, event time, lags], buffered ones included, in event-time order."""
    reports = [list(r) for r in s.buffered_progress]
    for member_id, at, lags in lag_reports:
        if lags:
            reports.append([member_id, int(at), _lags(lags)])
    if heartbeat_progress:
        newest: dict[str, int] = {}
        for member_id, t in zip(plain_list(hb_ids), plain_list(hb_times, int)):
            if t > newest.get(member_id, t - 1):
                newest[member_id] = t
        for member_id, lags in heartbeat_progress.items():
            if lags:
                reports.append([member_id, int(newest.get(member_id, s.clock)), _lags(lags)])
    reports.sort(key=lambda r: (r[1], r[0]))
    return reports


def _lags(lags: Mapping[str, int]) -> dict[str, int]:
    return {str(k): int(v) for k, v in as_map(lags).items() if v is not None}


def next_deadline(state: GroupState, settings: EngineSettings) -> int | None:
    """The watermark at which this group needs attention even if no event of it arrives: the
    pending or scheduled rebalance (Streams probing, Connect delay), the earliest session expiry,
    or buffered membership events coming due. (Buffered heartbeats need no deadline of their own:
    they can only postpone an expiry, and they are applied before it is decided.)
    """
    candidates: list[int] = []
    if state.pending:
        candidates.append(state.pending.deadline)
    if state.scheduled:
        candidates.append(state.scheduled.deadline)
    candidates.extend(d for d in (m.deadline() for m in state.members.values()) if d is not None)
    if state.buffered_events:
        candidates.append(min(e.event_time for e in state.buffered_events))
    alert_deadline = alert_evaluator(state, settings, lambda row: None).next_deadline()
    if alert_deadline is not None:
        candidates.append(alert_deadline)
    return min(candidates) if candidates else None
