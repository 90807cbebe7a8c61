"""One group's rebalance history as a pure function of its events (no Spark, no wall clock).

The streaming job keeps a :class:`GroupState` per group and calls :func:`advance` with each
micro-batch's events of that group. Everything here is decided in event time, so the generations
depend only on the events, never on how they were split into micro-batches:

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
* A group the collector observes in a live cluster (events with ``source: "collector"``) is judged
  by its coordinator: its members never expire here (the collector reports their departure), its
  assignor starts from the actual assignment observed before the change, and each settled
  observation is compared with the computed generation (``assignment_checks``).

* Kafka Streams and Kafka Connect groups (``group_type`` streams or connect) run their task
  assignors (:mod:`streaming.task_groups`). Their timers are scheduled rebalances: Streams' probing
  rebalance at the time the assignor names, Connect's rebalance when the delay for lost work (or
  the back-off between revoking rounds) expires. Streams task lags come with heartbeats and are
  applied at their heartbeat's event time.

Heartbeats are the bulk of the traffic, so they never go through the per-event loop: they are
reduced per member with NumPy (last heartbeat, and the first gap longer than the session timeout).
"""

from __future__ import annotations

import bisect
import heapq
import math
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from assignors import COOPERATIVE_ASSIGNORS, GroupSpec, MemberSpec, TopicPartition, TopicSpec, assign
from assignors.errors import RebalanceMonitorError
from assignors.metrics import balance_metrics
from schemas.events import DEFAULT_SESSION_TIMEOUT_MS

from . import task_groups
from .alert_rules import AlertRules
from .alerts import ALERTS_TABLE, AlertEvaluator, AlertState
from .assignment_check import differing_partitions, fingerprint, is_settled, owners

HOUR_MS = 3_600_000
#: How many membership event ids a group remembers to recognise redeliveries.
SEEN_EVENT_IDS = 2_000
#: Server-side (KIP-848) assignors revoke before they assign, like a cooperative rebalance.
TWO_PHASE_ASSIGNORS = COOPERATIVE_ASSIGNORS | {"uniform", "server-range"}


@dataclass(frozen=True)
class EngineSettings:
    coalesce_ms: int = 1_000
    allowed_lateness_ms: int = 2_000
    cooperative_followup_ms: int = 500
    #: How far the stream's time (its newest heartbeat) must be past a group's own time before it
    #: moves the group on; the job's watermark delay. Only a silent group (every member stopped
    #: heartbeating) needs the stream's time; the margin absorbs the skew between Kafka partitions
    #: read at different speeds, so a group whose heartbeats are merely not read yet is never
    #: expired for it, and Spark drops no heartbeat as late unless it is this far behind.
    idle_group_grace_ms: int = 30_000
    alert_rules: AlertRules = field(default_factory=AlertRules)


@dataclass
class Member:
    member_id: str
    topics: tuple[str, ...]
    joined_at: int
    last_seen: int
    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS
    group_instance_id: str | None = None
    client_id: str | None = None
    host: str | None = None
    rack: str | None = None
    #: What the member said it owned when it joined, and its generation then; used until the
    #: monitor has computed an assignment for it (a monitor attached to a running group).
    reported_owned: tuple[TopicPartition, ...] = ()
    reported_generation: int = -1
    #: False for members reported by the collector: the coordinator decides their liveness and the
    #: collector reports their departure, so a pause in its polls can never expire them here.
    expires: bool = True
    #: Streams (process_id, threads, task_offset_sums, client_tags) and Connect (worker_url,
    #: config_offset) join metadata; see streaming/task_groups.py.
    task_metadata: dict = field(default_factory=dict)

    def deadline(self) -> int | None:
        return self.last_seen + self.session_timeout_ms if self.expires else None


@dataclass
class PendingRebalance:
    start: int
    deadline: int
    trigger: str
    trigger_member: str | None
    #: For collector-fed groups: the actual assignment observed before the change that opened the
    #: rebalance, which is what the real group's assignor starts from.
    owned_snapshot: dict[str, list[TopicPartition]] | None = None


@dataclass
class GroupState:
    group_id: str
    group_type: str = "consumer"
    assignor: str | None = None
    protocol: str = "eager"
    topics: dict[str, TopicSpec] = field(default_factory=dict)
    #: In join order: the order of Kafka's subscription map, which some assignors' ties follow.
    members: dict[str, Member] = field(default_factory=dict)
    generation: int = 0
    #: The current assignment (after the latest generation); may hold departed members until
    #: the next generation reassigns their partitions.
    assignment: dict[str, list[TopicPartition]] = field(default_factory=dict)
    pending: PendingRebalance | None = None
    #: Event time up to which the group's events have been applied.
    frontier: int = -1
    #: Newest heartbeat time seen for the group: the group's own event time.
    clock: int = -1
    buffered_events: list[dict] = field(default_factory=list)
    buffered_heartbeats: list[tuple[str, int]] = field(default_factory=list)
    recent_rebalances: list[int] = field(default_factory=list)
    seen_event_ids: deque = field(default_factory=lambda: deque(maxlen=SEEN_EVENT_IDS))
    failed_rebalances: int = 0
    #: Set once an event came from the collector: the group is a live cluster's group.
    collector_fed: bool = False
    #: The actual assignment the collector reported last (KIP-848: the target assignment).
    observed: dict[str, list[TopicPartition]] = field(default_factory=dict)
    observed_group_state: str | None = None
    observed_assignor: str | None = None
    #: Event time of the newest observation or generation not yet compared; None when up to date.
    check_due_at: int | None = None
    #: Generation and observed assignment of the last comparison written, so each is written once.
    last_check: str | None = None
    alerts: AlertState = field(default_factory=AlertState)
    #: Streams or Connect groups (streaming/task_groups.py). The workload: Streams tasks, end offset
    #: sums and configs, or Connect connectors, config offset and max delay.
    task_workload: dict | None = None
    #: member -> {"active", "standby", "warmup"} task lists (Streams) or {"connectors", "tasks"}
    #: (Connect, tasks as [connector, number] pairs), after the latest generation.
    task_assignment: dict[str, dict[str, list]] = field(default_factory=dict)
    #: Streams: member -> task -> newest lag reported (heartbeat task_lags), applied in event time.
    task_lags: dict[str, dict[str, int]] = field(default_factory=dict)
    #: Lag reports [member, event time, lags] newer than the group's safe time.
    buffered_progress: list[list] = field(default_factory=list)
    #: Connect: the leader (oldest worker) and its incremental assignor's memory (the codec's JSON).
    connect_leader: str | None = None
    connect_leader_state: dict | None = None
    #: A rebalance the assignor asked for at a later event time (Streams probing rebalance,
    #: Connect scheduled rebalance); a rebalance before it replaces it.
    scheduled: PendingRebalance | None = None


@dataclass
class Output:
    """A row for one of the job's tables."""

    table: str
    row: dict[str, Any]


@dataclass
class BatchStats:
    """Counts of one batch: accepted events are applied now or wait (in the state) for their time."""

    membership_accepted: int = 0
    heartbeats_accepted: int = 0
    late: int = 0
    rejected: int = 0
    unknown_member_heartbeats: int = 0


class _Run:
    """One call of :func:`advance`: the state being changed and the outputs being collected."""

    def __init__(self, state: GroupState, settings: EngineSettings, clock: Callable[[], float]):
        self.s = state
        self.settings = settings
        self.clock = clock
        self.out: list[Output] = []
        self.stats = BatchStats()
        self.hb_by_member: dict[str, list[int]] = {}
        self.expiry_heap: list[tuple[int, str, int]] = []
        self.versions: dict[str, int] = {}
        self.left_or_expired: set[str] = set()
        self.alerts = alert_evaluator(state, settings, lambda row: self.out.append(Output(ALERTS_TABLE, row)))

    # -- heartbeats -----------------------------------------------------------------------------

    def load_heartbeats(self, member_ids: np.ndarray, times: np.ndarray) -> None:
        """Each member's heartbeat times of the batch, sorted, as a plain list.

        Plain lists, not arrays: a member has a handful of heartbeats per batch, and at that size
        the per-member lookups below cost about a tenth with lists and ``bisect`` of what NumPy's
        per-call overhead costs (they run for every member of every group in every batch)."""
        if len(times) == 0:
            return
        order = np.lexsort((times, member_ids))
        member_ids, times = member_ids[order], times[order].tolist()
        boundaries = np.flatnonzero(member_ids[1:] != member_ids[:-1]) + 1
        starts = [0, *boundaries.tolist()]
        ends = [*boundaries.tolist(), len(times)]
        for a, b in zip(starts, ends):
            self.hb_by_member[member_ids[a]] = times[a:b]

    def last_seen_at(self, member: Member, at: int) -> int:
        hbs = self.hb_by_member.get(member.member_id)
        if not hbs:
            return member.last_seen
        i = bisect.bisect_right(hbs, at)
        return max(member.last_seen, hbs[i - 1]) if i else member.last_seen

    def expiry_of(self, member: Member) -> int:
        """When the member expires given its heartbeats in this batch: the first gap too long."""
        if not member.expires:
            return math.inf
        st = member.session_timeout_ms
        hbs = self.hb_by_member.get(member.member_id)
        if not hbs:
            return member.deadline()
        previous = member.last_seen
        later = hbs[bisect.bisect_right(hbs, previous):]
        if not later:
            return member.deadline()
        for t in later:
            if t - previous > st:
                return previous + st
            previous = t
        return previous + st

    def schedule_expiry(self, member: Member) -> None:
        version = self.versions.get(member.member_id, 0) + 1
        self.versions[member.member_id] = version
        heapq.heappush(self.expiry_heap, (self.expiry_of(member), member.member_id, version))

    def next_expiry(self) -> tuple[int, str] | None:
        while self.expiry_heap:
            at, member_id, version = self.expiry_heap[0]
            if self.versions.get(member_id) == version and member_id in self.s.members:
                return at, member_id
            heapq.heappop(self.expiry_heap)
        return None

    # -- changes --------------------------------------------------------------------------------

    def change(self, at: int, trigger: str, member_id: str | None) -> None:
        s = self.s
        if s.pending is None:
            snapshot = {m: list(tps) for m, tps in s.observed.items()} if s.collector_fed else None
            s.pending = PendingRebalance(at, at + self.settings.coalesce_ms, trigger, member_id, snapshot)

    def member_event(self, event: Mapping, kind: str, at: int, late: bool, member: Member | None = None,
                     previous_member_id: str | None = None) -> None:
        m = member
        self.out.append(Output("member_events", {
            "group_id": self.s.group_id,
            "event_time": at,
            "member_id": m.member_id if m else event.get("member_id"),
            "event": kind,
            "group_instance_id": m.group_instance_id if m else event.get("group_instance_id"),
            "client_id": m.client_id if m else event.get("client_id"),
            "host": m.host if m else event.get("host"),
            "reason": event.get("reason"),
            "event_id": event.get("event_id"),
            "previous_member_id": previous_member_id,
            "late": late,
            "generation_before": self.s.generation,
        }))
        if kind in _MEMBER_CHANGES:
            self.alerts.on_member_change(at, _identity(m, event))

    def apply_membership(self, e: Mapping, late: bool) -> None:
        self._apply_membership(e, late)
        if e.get("source") == "collector":
            self.observe(e, max(int(e["event_time"]), self.s.frontier) if late else int(e["event_time"]))

    def observe(self, e: Mapping, at: int) -> None:
        """Record what the collector saw of the live group, after the event itself was applied (so
        a rebalance the event opened starts from the observations before it)."""
        s = self.s
        s.collector_fed = True
        if e.get("group_state"):
            s.observed_group_state = e["group_state"]
        if e.get("partition_assignor"):
            s.observed_assignor = e["partition_assignor"]
        member_id = e.get("member_id")
        if e["type"] == "leave":
            s.observed.pop(member_id, None)
        elif member_id:
            actual = e.get("target_partitions")
            if actual is None:
                actual = e.get("owned_partitions")
            if actual is not None:
                s.observed[member_id] = [TopicPartition(p["topic"], int(p["partition"])) for p in actual]
        s.check_due_at = at

    def check_agreement(self) -> None:
        """Compare the computed generation with the observed assignment, once the group is settled
        on both sides: no rebalance pending here, and the coordinator reports it stable."""
        s = self.s
        if s.check_due_at is None or s.pending is not None or s.generation == 0:
            return
        if not is_settled(s.observed_group_state):
            return
        at, s.check_due_at = s.check_due_at, None
        key = f"{s.generation}:{fingerprint(s.observed)}"
        if key == s.last_check:
            return
        s.last_check = key
        differing = differing_partitions(s.assignment, s.observed)
        unmatched = sorted(set(s.members) ^ set(s.observed))
        self.out.append(Output("assignment_checks", {
            "group_id": s.group_id, "generation": s.generation, "event_time": at,
            "agrees": not differing and not unmatched,
            "members_compared": len(set(s.members) | set(s.observed)),
            "partitions_compared": len(owners(s.assignment).keys() | owners(s.observed).keys()),
            "differing": differing, "unmatched_members": unmatched,
            "computed_assignor": self.assignor_name(), "reported_assignor": s.observed_assignor,
            "group_state": s.observed_group_state,
        }))
        counts_differ = sum(1 for m in set(s.members) & set(s.observed)
                            if len(s.assignment.get(m, ())) != len(s.observed[m]))
        self.alerts.on_check(at, len(differing) + len(unmatched), counts_differ + len(unmatched))

    def assignor_name(self) -> str:
        s = self.s
        return s.assignor or ("cooperative-sticky" if s.protocol == "cooperative" else "range")

    def _apply_membership(self, e: Mapping, late: bool) -> None:
        s = self.s
        at = max(int(e["event_time"]), s.frontier) if late else int(e["event_time"])
        kind = e["type"]
        if e.get("group_type"):
            s.group_type = e["group_type"]
        if kind == "workload":
            self.apply_workload(e, at, late)
            return
        member_id = e["member_id"]
        current = s.members.get(member_id)
        if e.get("assignor") and e["assignor"] != s.assignor:
            changed = s.assignor is not None
            s.assignor = e["assignor"]
            if changed and current is not None:
                self.change(at, "update", member_id)
        if e.get("protocol"):
            s.protocol = e["protocol"]

        if kind == "leave":
            if current is None:
                self.member_event(e, "leave_of_unknown_member", at, late)
                return
            del s.members[member_id]
            s.task_lags.pop(member_id, None)
            self.left_or_expired.add(member_id)
            self.member_event(e, "left", at, late, current)
            self.change(at, "leave", member_id)
            return

        topics = tuple(e.get("topics") or ())
        if kind == "join" and current is None:
            static_id = e.get("group_instance_id")
            previous = next((m for m in s.members.values() if static_id and m.group_instance_id == static_id), None)
            if previous is not None:
                self.static_rejoin(e, previous, at, late, topics)
                return
            member = Member(
                member_id=member_id, topics=topics, joined_at=at, last_seen=at,
                session_timeout_ms=int(e.get("session_timeout_ms") or DEFAULT_SESSION_TIMEOUT_MS),
                group_instance_id=static_id, client_id=e.get("client_id"), host=e.get("host"),
                rack=e.get("rack"),
                reported_owned=tuple(TopicPartition(p["topic"], int(p["partition"]))
                                     for p in (e.get("owned_partitions") or ())),
                reported_generation=int(e["generation"]) if e.get("generation") is not None else -1,
                expires=e.get("source") != "collector",
                task_metadata=task_groups.member_metadata(e),
            )
            s.members[member_id] = member
            self.member_event(e, "joined", at, late, member)
            self.change(at, "join", member_id)
            self.schedule_expiry(member)
            return

        if current is None:  # an update of a member the group does not know: treat it as a join
            self._apply_membership({**e, "type": "join"}, late)
            return
        # join of a known member, or update: a rebalance only if what the assignor sees changed.
        current.last_seen = max(current.last_seen, at)
        relevant = (topics and topics != current.topics) or (e.get("rack") and e.get("rack") != current.rack)
        metadata = task_groups.member_metadata(e)
        relevant = relevant or task_groups.metadata_changed(current.task_metadata, metadata)
        current.task_metadata = {**current.task_metadata, **metadata}
        if topics:
            current.topics = topics
        for attr in ("client_id", "host", "rack"):
            if e.get(attr):
                setattr(current, attr, e[attr])
        if e.get("session_timeout_ms"):
            current.session_timeout_ms = int(e["session_timeout_ms"])
        # The collector reports every poll's changes of assignment or group state as updates of
        # each member; only those that change what the assignor sees are worth a row.
        if relevant or not (kind == "update" and e.get("source") == "collector"):
            self.member_event(e, "updated" if relevant else "rejoined", at, late, current)
        if relevant:
            self.change(at, "update", member_id)
        self.schedule_expiry(current)

    def static_rejoin(self, e: Mapping, previous: Member, at: int, late: bool, topics: tuple[str, ...]) -> None:
        """KIP-345: the same group.instance.id under a new member id keeps its place, no rebalance."""
        s = self.s
        new_id = e["member_id"]
        old_id = previous.member_id
        # Keep the member's position in the subscription map: assignors' ties follow it.
        s.members = {(new_id if mid == old_id else mid): m for mid, m in s.members.items()}
        previous.member_id = new_id
        if old_id in s.assignment:
            s.assignment[new_id] = s.assignment.pop(old_id)
        for by_member in (s.task_assignment, s.task_lags):
            if old_id in by_member:
                by_member[new_id] = by_member.pop(old_id)
        if s.connect_leader == old_id:
            s.connect_leader = new_id
        previous.task_metadata = {**previous.task_metadata, **task_groups.member_metadata(e)}
        previous.last_seen = at
        previous.client_id = e.get("client_id") or previous.client_id
        previous.host = e.get("host") or previous.host
        self.member_event(e, "static_rejoin", at, late, previous, previous_member_id=old_id)
        if topics and topics != previous.topics:
            previous.topics = topics
            self.change(at, "update", new_id)
        self.schedule_expiry(previous)

    def apply_workload(self, e: Mapping, at: int, late: bool) -> None:
        s = self.s
        topics = {}
        for t in (e.get("workload") or {}).get("topics") or ():
            racks = t.get("racks")
            topics[t["name"]] = TopicSpec(
                name=t["name"], partitions=int(t["partitions"]),
                replica_racks=tuple(frozenset(r or ()) for r in racks) if racks is not None else None)
        task_workload = task_groups.read_workload(e.get("workload"))
        changed = topics != s.topics or task_workload != s.task_workload
        s.topics = topics
        s.task_workload = task_workload
        if task_workload is not None and "stateful" in task_workload:
            stateful = set(task_workload["stateful"])  # forget lags of tasks the application no longer has
            s.task_lags = {m: {t: lag for t, lag in lags.items() if t in stateful} for m, lags in s.task_lags.items()}
        self.member_event(e, "workload_changed" if changed else "workload_unchanged", at, late)
        if changed and s.members:
            self.change(at, "workload", None)

    def expire(self, member_id: str, at: int) -> None:
        member = self.s.members.pop(member_id)
        self.s.task_lags.pop(member_id, None)
        self.left_or_expired.add(member_id)
        self.member_event({"reason": f"no heartbeat for {member.session_timeout_ms} ms"}, "expired", at, False, member)
        self.alerts.on_expiry(at, member_id)
        self.change(at, "expiry", member_id)

    # -- generations ----------------------------------------------------------------------------

    def rebalance_failed(self, at: int, exc: Exception) -> None:
        self.s.failed_rebalances += 1
        self.out.append(Output("rejected_events", {
            "group_id": self.s.group_id, "reason": f"rebalance at {at} failed: {exc}", "event_time": at}))
        self.stats.rejected += 1

    def apply_progress(self, member_id: str, at: int, lags: Mapping[str, int]) -> None:
        """A Streams member's task lags as of its heartbeat at ``at``: kept for the next rebalance
        (warm-ups catching up), and checked against the not-caught-up alert."""
        s = self.s
        member = s.members.get(member_id)
        if member is None or s.group_type != task_groups.STREAMS:
            return
        s.task_lags.setdefault(member_id, {}).update(lags)
        self.alerts.on_streams_lags(at, task_groups.process_id(member), lags,
                                    task_groups.streams_config(s).acceptable_recovery_lag)

    def rebalance(self, at: int) -> None:
        s = self.s
        # A change's rebalance and one the assignor scheduled that fall due together are one generation.
        pending = s.pending or s.scheduled
        s.pending = s.scheduled = None
        if s.group_type in task_groups.TASK_GROUP_TYPES:
            self.task_rebalance(at, pending)
            return
        assignor = self.assignor_name()
        two_phase = s.protocol == "cooperative" or assignor in TWO_PHASE_ASSIGNORS

        # What each member holds going in: the monitor's own previous generation, or for a live
        # cluster's group the actual assignment observed before the change (the real assignor's
        # input, so a divergence is never carried from one generation to the next).
        held = s.assignment
        if pending is not None and pending.owned_snapshot is not None and s.generation > 0:
            held = pending.owned_snapshot
        previous_owner: dict[TopicPartition, str] = {}
        for mid, tps in held.items():
            for tp in tps:
                previous_owner.setdefault(tp, mid)
        duplicates: set[TopicPartition] = set()
        members = []
        for m in s.members.values():
            known = m.member_id in held
            owned = tuple(held[m.member_id]) if known else m.reported_owned
            if not known:
                for tp in m.reported_owned:
                    if tp in previous_owner and previous_owner[tp] != m.member_id:
                        duplicates.add(tp)
                    previous_owner.setdefault(tp, m.member_id)
            members.append(MemberSpec(
                member_id=m.member_id, topics=m.topics, owned_partitions=owned,
                generation=s.generation if known else m.reported_generation,
                group_instance_id=m.group_instance_id, rack=m.rack))
        spec = GroupSpec(members=tuple(members), topics=dict(s.topics), group_id=s.group_id)

        started = self.clock()
        try:
            result = assign(spec, assignor)
        except RebalanceMonitorError as exc:
            self.rebalance_failed(at, exc)
            return
        assignor_ms = (self.clock() - started) * 1000.0

        new_assignment = {mid: list(tps) for mid, tps in result.assignment.items()}
        transferring = dict(result.transferring)
        if not two_phase:  # an eager group gets everything at once
            for tp, mid in transferring.items():
                new_assignment.setdefault(mid, []).append(tp)
            transferring = {}
        elif assignor not in COOPERATIVE_ASSIGNORS:
            transferring = _withhold_moving_partitions(new_assignment, previous_owner, s.members)

        s.generation += 1
        generation = s.generation
        s.recent_rebalances = [t for t in s.recent_rebalances if t > at - HOUR_MS] + [at]
        trigger = pending.trigger if pending else "unknown"
        base = {"group_id": s.group_id, "generation": generation, "event_time": at}

        new_owner = {tp: mid for mid, tps in new_assignment.items() for tp in tps}
        for mid, tps in held.items():
            member = s.members.get(mid)
            kept = set(new_assignment.get(mid, ()))
            for tp in tps:
                if tp in kept:
                    continue
                to_member = new_owner.get(tp) or transferring.get(tp)
                if member is None:
                    reason = "member_left"
                elif tp in duplicates:
                    reason = "duplicate"
                elif tp.topic not in s.topics or tp.partition >= s.topics[tp.topic].partitions:
                    reason = "deleted"
                elif tp.topic not in member.topics:
                    reason = "unsubscribed"
                else:
                    reason = "moved"
                self.out.append(Output("revocations", {
                    **base, "member_id": mid, "topic": tp.topic, "partition": tp.partition,
                    "to_member": to_member, "reason": reason, "unit": "partition",
                    "unit_id": f"{tp.topic}-{tp.partition}"}))

        phase = "revocation" if transferring else ("followup" if trigger == "cooperative_followup" else "complete")
        for m in s.members.values():
            self.out.append(Output("assignments", {
                **base, "member_id": m.member_id, "group_instance_id": m.group_instance_id,
                "partitions": [{"topic": tp.topic, "partition": tp.partition} for tp in new_assignment.get(m.member_id, ())],
                "assignor": assignor, "protocol": s.protocol, "trigger": trigger, "phase": phase,
                "group_type": s.group_type}))

        metrics = balance_metrics(spec, new_assignment, previous_owners=previous_owner)
        # A withheld partition is on its way to another member: it moves in this generation,
        # though nobody holds it until the follow-up.
        in_transit = sum(1 for tp in transferring if tp in previous_owner)
        self.out.append(Output("balance_metrics", {
            **base, "trigger": trigger, "trigger_member": pending.trigger_member if pending else None,
            "assignor": assignor, "protocol": s.protocol, "group_type": s.group_type, "phase": phase,
            "members": metrics.members, "partitions": metrics.partitions,
            "min_per_member": metrics.min, "max_per_member": metrics.max,
            "mean_per_member": round(metrics.mean, 6), "stddev_per_member": round(metrics.stddev, 6),
            "imbalance": metrics.imbalance, "balance_score": metrics.balance_score,
            "moved": metrics.moved + in_transit, "stickiness": round(metrics.stickiness, 6),
            "unassigned": metrics.unassigned, "assignor_ms": round(assignor_ms, 3),
            "rebalances_last_hour": len(s.recent_rebalances),
            "rebalance_started_at": pending.start if pending else at, "unit": "partition",
        }))
        self.alerts.on_generation(at, phase, metrics.members, metrics.imbalance, metrics.max, metrics.mean,
                                  metrics.unassigned)
        s.assignment = {mid: new_assignment.get(mid, []) for mid in s.members}
        if transferring:
            s.pending = PendingRebalance(at, at + self.settings.cooperative_followup_ms,
                                         "cooperative_followup", None)
        if s.collector_fed:
            s.check_due_at = at


    def task_rebalance(self, at: int, pending: PendingRebalance | None) -> None:
        """A generation of a Streams or Connect group (streaming/task_groups.py), with its timers."""
        s = self.s
        try:
            result = task_groups.rebalance(s, at, self.clock)
        except RebalanceMonitorError as exc:
            self.rebalance_failed(at, exc)
            return
        s.generation += 1
        s.recent_rebalances = [t for t in s.recent_rebalances if t > at - HOUR_MS] + [at]
        trigger = pending.trigger if pending else "unknown"
        base = {"group_id": s.group_id, "generation": s.generation, "event_time": at}
        phase = "revocation" if result.needs_followup else ("followup" if trigger == "cooperative_followup"
                                                             else "complete")
        for row in result.revocation_rows:
            self.out.append(Output("revocations", {**base, "topic": None, "partition": None, **row}))
        for row in result.assignment_rows:
            self.out.append(Output("assignments", {
                **base, **row, "group_instance_id": s.members[row["member_id"]].group_instance_id,
                "assignor": result.assignor, "protocol": result.protocol, "trigger": trigger, "phase": phase,
                "group_type": s.group_type}))
        m = result.metrics
        self.out.append(Output("balance_metrics", {
            **base, "trigger": trigger, "trigger_member": pending.trigger_member if pending else None,
            "assignor": result.assignor, "protocol": result.protocol, "group_type": s.group_type, "phase": phase,
            **m, "assignor_ms": round(result.assignor_ms, 3), "rebalances_last_hour": len(s.recent_rebalances),
            "rebalance_started_at": pending.start if pending else at}))
        self.alerts.on_generation(at, phase, m["members"], m["imbalance"], m["max_per_member"], m["mean_per_member"],
                                  m["unassigned"])
        if s.group_type == task_groups.STREAMS:
            self.alerts.on_streams_generation(at, result.active_client, result.lagging)
        else:
            self.alerts.on_connect_generation(at, result.lost_pending, result.lost_due)
        s.task_assignment = result.assignment
        if result.needs_followup:
            s.pending = PendingRebalance(at, at + self.settings.cooperative_followup_ms, "cooperative_followup", None)
        if result.scheduled is not None:
            when, why = result.scheduled
            s.scheduled = PendingRebalance(when, when, why, None)


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


def _event_order(e: Mapping) -> tuple:
    return (int(e["event_time"]), str(e.get("event_id") or ""))


def advance(state: GroupState, membership_events: Iterable[Mapping], heartbeat_member_ids: Sequence[str],
            heartbeat_times: Sequence[int], settings: EngineSettings = EngineSettings(),
            watermark_ms: int | None = None, clock: Callable[[], float] = time.perf_counter,
            *, heartbeat_progress: Mapping[str, Mapping[str, int]] | None = None,
            progress_reports: Iterable[tuple[str, int, Mapping[str, int]]] | None = None,
            ) -> tuple[list[Output], BatchStats]:
    """Apply one batch of a group's events; return the rows for the tables and the counts.

    ``clock`` only times the assignor (the ``assignor_ms`` metric); nothing else reads it.

    Kafka Streams task lags (heartbeats' ``task_lags``) come in one of two forms:

    * ``heartbeat_progress``: member -> its latest lags in this batch, taken as of the member's
      newest heartbeat time in this batch (or the group's newest, if it has none here). A batch
      keeps only the last report per member, so a rebalance that falls between two reports of
      one member in one batch sees the later report only when both arrive in later batches.
    * ``progress_reports``: every report as (member, heartbeat event time, lags); the history is
      then independent of batch boundaries for lags too.
    """
    run = _Run(state, settings, clock)
    s = state
    fresh: list[dict] = []
    for e in membership_events:
        event_id = e.get("event_id")
        if event_id in s.seen_event_ids:
            run.out.append(Output("rejected_events", {
                "group_id": s.group_id, "event_time": e.get("event_time"),
                "reason": f"duplicate event_id {event_id!r} (already applied)", "event_id": event_id}))
            run.stats.rejected += 1
            continue
        s.seen_event_ids.append(event_id)
        fresh.append(dict(e))
    run.stats.membership_accepted = len(fresh)
    hb_ids = np.asarray(heartbeat_member_ids, dtype=object)
    hb_times = np.asarray(heartbeat_times, dtype=np.int64)

    # Heartbeats set the group's time. Membership events do not: the job reads the membership
    # topic in full every batch, so it may hold events far ahead of the heartbeats; they wait here
    # until the group's time reaches them.
    newest = max(s.clock, int(hb_times.max()) if len(hb_times) else -1)
    s.clock = newest
    safe = newest - settings.allowed_lateness_ms
    if watermark_ms is not None and watermark_ms > 0:
        # The job's watermark trails the stream's newest heartbeat by idle_group_grace_ms.
        safe = max(safe, watermark_ms)

    # Late membership events (older than what is applied) go first, at the group's current time.
    late = [e for e in fresh if int(e["event_time"]) <= s.frontier]
    on_time = [e for e in fresh if int(e["event_time"]) > s.frontier] + s.buffered_events
    on_time.sort(key=_event_order)
    due = [e for e in on_time if int(e["event_time"]) <= safe]
    s.buffered_events = [e for e in on_time if int(e["event_time"]) > safe]

    if s.buffered_heartbeats:
        hb_ids = np.concatenate((hb_ids, np.array([m for m, _ in s.buffered_heartbeats], dtype=object)))
        hb_times = np.concatenate((hb_times, np.array([t for _, t in s.buffered_heartbeats], dtype=np.int64)))
    keep = hb_times > safe
    s.buffered_heartbeats = list(zip(hb_ids[keep].tolist(), hb_times[keep].tolist()))
    reports = _lag_reports(s, np.asarray(heartbeat_member_ids, dtype=object),
                           np.asarray(heartbeat_times, dtype=np.int64), heartbeat_progress, progress_reports)
    s.buffered_progress = [r for r in reports if r[1] > safe]
    reports = [r for r in reports if r[1] <= safe]
    run.load_heartbeats(hb_ids[~keep], hb_times[~keep])
    run.stats.heartbeats_accepted = len(heartbeat_times)
    known_before = set(s.members)

    for e in late:
        run.apply_membership(e, late=True)
        run.stats.late += 1

    # Only members whose expiry can fall inside this batch need a place in the heap.
    for member in s.members.values():
        if run.expiry_of(member) <= safe:
            run.schedule_expiry(member)

    i = j = 0
    while True:
        next_event = int(due[i]["event_time"]) if i < len(due) else math.inf
        next_report = reports[j][1] if j < len(reports) else math.inf
        next_input = min(next_event, next_report)
        expiry = run.next_expiry()
        next_expiry = expiry[0] if expiry else math.inf
        next_rebalance = min(s.pending.deadline if s.pending else math.inf,
                             s.scheduled.deadline if s.scheduled else math.inf)
        next_alert = run.alerts.next_deadline()
        next_alert = math.inf if next_alert is None else next_alert
        horizon = min(next_input, next_expiry, next_rebalance, next_alert)
        if s.check_due_at is not None and horizon > s.check_due_at:
            run.check_agreement()  # everything at the observation's time has been applied
        if horizon > safe:
            break
        if next_alert == horizon:  # time-based alert transitions first: a window closes at its end
            run.alerts.at_deadline(int(next_alert))
        elif next_rebalance <= next_input and next_rebalance <= next_expiry:
            # A deadline at t takes the events before t; an event at exactly t opens the next one.
            run.rebalance(int(next_rebalance))
        elif next_report <= next_event and next_report <= next_expiry:
            member_id, at, lags = reports[j]
            j += 1
            run.apply_progress(member_id, at, lags)
        elif next_event <= next_expiry:
            e = due[i]
            i += 1
            member = s.members.get(e.get("member_id") or "")
            if member is not None:
                member.last_seen = run.last_seen_at(member, int(e["event_time"]))
            run.apply_membership(e, late=False)
        else:
            run.expire(expiry[1], int(next_expiry))

    for member in s.members.values():
        member.last_seen = run.last_seen_at(member, safe)
    s.frontier = max(s.frontier, safe)
    # Heartbeats of members the group never had (in this batch or before): typically a member
    # the monitor expired that kept heartbeating, or events of a group the monitor joined late.
    ever = known_before | set(s.members) | run.left_or_expired
    run.stats.unknown_member_heartbeats = sum(len(v) for k, v in run.hb_by_member.items() if k not in ever)
    return run.out, run.stats


def _lag_reports(s: GroupState, hb_ids: np.ndarray, hb_times: np.ndarray,
                 heartbeat_progress: Mapping[str, Mapping[str, int]] | None,
                 progress_reports: Iterable[tuple[str, int, Mapping[str, int]]] | None) -> list[list]:
    """Streams lag reports as [member, event time, lags], buffered ones included, in event-time order."""
    reports = [list(r) for r in s.buffered_progress]
    for member_id, at, lags in progress_reports or ():
        if lags:
            reports.append([member_id, int(at), _lags(lags)])
    if heartbeat_progress:
        newest: dict[str, int] = {}
        if len(hb_times):
            order = np.lexsort((hb_times, hb_ids))
            ids, times = hb_ids[order], hb_times[order]
            last = np.concatenate((ids[1:] != ids[:-1], [True]))
            newest = dict(zip(ids[last].tolist(), times[last].tolist()))
        for member_id, lags in heartbeat_progress.items():
            if lags:
                reports.append([member_id, int(newest.get(member_id, s.clock)), _lags(lags)])
    reports.sort(key=lambda r: (r[1], r[0]))
    return reports


def _lags(lags: Mapping[str, int]) -> dict[str, int]:
    return {str(k): int(v) for k, v in task_groups.as_map(lags).items() if v is not None}


def next_deadline(state: GroupState, settings: EngineSettings = EngineSettings()) -> int | None:
    """The watermark at which this group needs attention even if no event of it arrives: the
    pending or scheduled rebalance (Streams probing, Connect delay), the earliest session expiry,
    or buffered membership events coming due.
    (Buffered heartbeats need no deadline of their own: they can only postpone an expiry, and
    they are applied before it is decided.)
    """
    candidates: list[int] = []
    if state.pending:
        candidates.append(state.pending.deadline)
    if state.scheduled:
        candidates.append(state.scheduled.deadline)
    candidates.extend(d for d in (m.deadline() for m in state.members.values()) if d is not None)
    if state.buffered_events:
        candidates.append(min(int(e["event_time"]) for e in state.buffered_events))
    alert_deadline = alert_evaluator(state, settings, lambda row: None).next_deadline()
    if alert_deadline is not None:
        candidates.append(alert_deadline)
    return min(candidates) if candidates else None


#: Member events that count towards flapping.
_MEMBER_CHANGES = frozenset({"joined", "left", "expired", "static_rejoin"})


def _identity(member: Member | None, event: Mapping) -> str:
    """Who a member is across restarts: its static id, else its client id and host, else its id."""
    if member is not None:
        instance, client, host, member_id = member.group_instance_id, member.client_id, member.host, member.member_id
    else:
        instance, client, host, member_id = (event.get(k) for k in ("group_instance_id", "client_id", "host",
                                                                     "member_id"))
    if instance:
        return instance
    if client:
        return f"{client}@{host}" if host else client
    return str(member_id)


def alert_evaluator(state: GroupState, settings: EngineSettings, emit) -> AlertEvaluator:
    return AlertEvaluator(state.alerts, state.group_id, settings.alert_rules.for_group(state.group_id),
                          emit, lambda: state.generation)
