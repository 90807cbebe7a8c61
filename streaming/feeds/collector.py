"""The collector's pure core: turn successive snapshots of a live cluster into the monitor's events.

A real cluster does not tell anyone when a member joins or leaves; the coordinator only answers
DescribeGroups with who is in the group *now*. The collector polls that answer and this module
diffs each poll against what it has already told the job:

* a member that appears -> ``join`` (its assignment as ``owned_partitions``);
* a member that is gone -> ``leave`` (reason ``vanished from DescribeGroups``), except a static
  member (KIP-345) replaced by a new member id with the same ``group.instance.id``: that is only
  the new member's ``join``, which the job applies as a static rejoin;
* a member whose assignment, target assignment, metadata or topics changed -> ``update``;
* the group's topics, their partition counts or replica racks changed, or a group seen for the
  first time -> ``workload``;
* every live member -> one heartbeat per poll at the poll time, which keeps the group's event time
  moving in the job and stops members from expiring there.

Silence is not departure: a poll that failed is no snapshot at all (:meth:`Collector.observe`
with ``None``) and emits nothing; the next good snapshot is diffed against the last good one, so
members that really left in between leave then. A group that could not be described this poll
(``ClusterSnapshot.unobserved``) is carried over the same way, silently.

No I/O, no clock, no Kafka client here: the poll time comes in with the snapshot, and the same
snapshots always give the same events with the same ids.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from schemas.events import ASSIGNOR_NAMES, DEFAULT_SESSION_TIMEOUT_MS, SCHEMA_VERSION

log = logging.getLogger("rebalance_monitor.collector")

TopicPartition = tuple[str, int]
Assignment = tuple[TopicPartition, ...]

MEMBERSHIP = "membership"
HEARTBEAT = "heartbeat"

#: Group rebalance protocols (``ConsumerGroupDescription.type``): classic, or KIP-848's "consumer".
CLASSIC = "classic"
CONSUMER = "consumer"

LEAVE_REASON = "vanished from DescribeGroups"
JOIN_REASON = "appeared in DescribeGroups"

#: Events of one group at one poll share an event time; the job orders those by event id, so the
#: id starts with a rank: the workload first (joins need the topics), then leaves, joins, updates.
_RANK = {"workload": 0, "leave": 1, "join": 2, "update": 3}

#: KIP-848 server-side assignor names as the coordinator reports them -> our contract's names.
_KIP848_ASSIGNORS = {"uniform": "uniform", "range": "server-range"}

#: The classic protocol's client-side assignors (protocol names as the coordinator reports them).
_CLASSIC_ASSIGNORS = tuple(n for n in ("range", "roundrobin", "sticky", "cooperative-sticky") if n in ASSIGNOR_NAMES)



# -- snapshots: what one successful poll saw -----------------------------------------------------

@dataclass(frozen=True)
class MemberSnapshot:
    member_id: str
    client_id: str | None = None
    host: str | None = None
    group_instance_id: str | None = None
    #: The member's current assignment; ``None`` when the coordinator does not say (a classic
    #: group only reports assignments while it is Stable).
    assignment: Assignment | None = None
    #: KIP-848 groups only: the assignment the coordinator is moving the member to.
    target_assignment: Assignment | None = None


@dataclass(frozen=True)
class GroupSnapshot:
    group_id: str
    #: The coordinator's state name: STABLE, PREPARING_REBALANCING, COMPLETING_REBALANCING,
    #: EMPTY, DEAD, ... (KIP-848 states as the client reports them).
    state: str = "STABLE"
    #: ``classic`` or ``consumer`` (KIP-848).
    type: str = CLASSIC
    #: ``partition_assignor`` as the coordinator reports it ("range", "cooperative-sticky",
    #: "uniform", a custom name, or "" while a classic group has not chosen one).
    partition_assignor: str | None = None
    members: tuple[MemberSnapshot, ...] = ()
    #: The group's subscribed topics when something knows them (DescribeGroups does not say).
    subscribed_topics: tuple[str, ...] | None = None

    @property
    def assignments_known(self) -> bool:
        return self.type == CONSUMER or self.state.upper() == "STABLE"


@dataclass(frozen=True)
class TopicSnapshot:
    name: str
    partitions: int
    #: Per partition, the racks of its replicas; ``None`` when no broker has a rack.
    racks: tuple[tuple[str, ...], ...] | None = None
    #: Kafka's topic id (base64 form), which KIP-848's assignors order topics by; None if unknown.
    topic_id: str | None = None

    def as_workload(self) -> dict:
        out = {"name": self.name, "partitions": self.partitions,
               "racks": [list(r) for r in self.racks] if self.racks is not None else None}
        if self.topic_id is not None:
            out["topic_id"] = self.topic_id
        return out


@dataclass(frozen=True)
class ClusterSnapshot:
    time_ms: int
    groups: Mapping[str, GroupSnapshot]
    topics: Mapping[str, TopicSnapshot] = field(default_factory=dict)
    #: Groups that exist but could not be described this poll: their last view is kept, and
    #: nothing (no leave, no heartbeat) is emitted for them.
    unobserved: frozenset[str] = frozenset()


@dataclass(frozen=True)
class CollectedEvent:
    kind: str  # MEMBERSHIP or HEARTBEAT
    group_id: str  # the record key
    value: dict


# -- what the job has been told, per group --------------------------------------------------------

@dataclass(frozen=True)
class MemberView:
    member_id: str
    client_id: str | None
    host: str | None
    group_instance_id: str | None
    topics: tuple[str, ...]
    owned: Assignment | None  # None = never known
    target: Assignment | None


@dataclass(frozen=True)
class GroupView:
    group_id: str
    group_protocol: str
    raw_assignor: str | None
    state: str
    topics: tuple[str, ...]
    workload: tuple[TopicSnapshot, ...]
    members: Mapping[str, MemberView]

    @property
    def assignor(self) -> str | None:
        return contract_assignor(self.raw_assignor, self.group_protocol)

    @property
    def protocol(self) -> str:
        return "cooperative" if self.group_protocol == CONSUMER or self.assignor == "cooperative-sticky" \
            else "eager"


def contract_assignor(raw: str | None, group_protocol: str) -> str | None:
    """Our contract's assignor name for what the coordinator reports; ``None`` when it has none."""
    if not raw:
        return None
    name = raw.strip().lower()
    if group_protocol == CONSUMER:
        return _KIP848_ASSIGNORS.get(name)
    return name if name in _CLASSIC_ASSIGNORS else None


@dataclass(frozen=True)
class CollectorSettings:
    #: Declared in joins: the job expires a member this long after its last heartbeat. The
    #: collector's heartbeats come once per poll, so this must span several polls.
    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS
    id_prefix: str = "col"

    @classmethod
    def for_interval(cls, interval_s: float, **kwargs) -> "CollectorSettings":
        """A session of at least three polls, and never shorter than Kafka's default 45 s."""
        return cls(session_timeout_ms=max(DEFAULT_SESSION_TIMEOUT_MS, int(interval_s * 1000) * 3), **kwargs)


def event_id(prefix: str, group_id: str, member_id: str | None, time_ms: int, kind: str) -> str:
    digest = hashlib.sha1("\0".join((group_id, member_id or "", str(time_ms), kind)).encode()).hexdigest()[:16]
    rank = _RANK.get(kind)
    tag = f"{rank}{kind}" if rank is not None else kind
    return f"{prefix}-{time_ms}-{tag}-{digest}"


def _sorted(tps: Iterable[TopicPartition] | None) -> Assignment | None:
    return None if tps is None else tuple(sorted({(str(t), int(p)) for t, p in tps}))


def _as_listed(tps: Iterable[TopicPartition] | None) -> Assignment | None:
    """A KIP-848 target assignment in the order the coordinator listed it (duplicates dropped).

    The order is not noise: it is the iteration order of the coordinator's ``HashMap`` of topic
    ids, and where two ids share a bucket only this order says which comes first. Kafka's uniform
    assignor trims a member over its quota in that order (assignors/server_group.py), so a sorted
    target makes the job compute another assignment than the coordinator whenever two of a
    member's topic ids collide."""
    return None if tps is None else tuple(dict.fromkeys((str(t), int(p)) for t, p in tps))


def _partitions(tps: Assignment | None) -> list[dict] | None:
    return None if tps is None else [{"topic": t, "partition": p} for t, p in tps]


# -- the diff -------------------------------------------------------------------------------------

def _group_topics(g: GroupSnapshot, old: GroupView | None) -> tuple[str, ...]:
    if g.subscribed_topics is not None:
        return tuple(sorted(set(g.subscribed_topics)))
    seen: set[str] = set()
    if g.assignments_known:
        for m in g.members:
            for tps in (m.assignment, m.target_assignment):
                seen.update(t for t, _ in tps or ())
    if old is None or (seen and g.state.upper() == "STABLE"):
        # Settled, every subscribed topic is held by someone: the held topics are the topics.
        return tuple(sorted(seen))
    # Mid-rebalance (a KIP-848 group reconciling, whose targets are not computed yet, or a classic
    # group that reports no assignment): a topic nobody holds for a moment is still subscribed.
    return tuple(sorted(set(old.topics) | seen))


def _workload(group_topics: tuple[str, ...], topics: Mapping[str, TopicSnapshot],
              old: GroupView | None) -> tuple[TopicSnapshot, ...]:
    """The group's topics as described this poll. Mid-rebalance nobody holds a partition, so the
    poll may not have described the group's topics at all: those keep their last description
    (an empty workload would make the job drop every partition)."""
    before = {t.name: t for t in old.workload} if old is not None else {}
    return tuple(topics.get(t) or before[t] for t in group_topics if t in topics or t in before)


def _view_of(g: GroupSnapshot, old: GroupView | None, topics: Mapping[str, TopicSnapshot]) -> GroupView:
    group_topics = _group_topics(g, old)
    old_members = old.members if old is not None else {}
    members: dict[str, MemberView] = {}
    for m in sorted(g.members, key=lambda m: m.member_id):
        before = old_members.get(m.member_id)
        if g.assignments_known:
            owned = _sorted(m.assignment) if m.assignment is not None else ()
            target = _as_listed(m.target_assignment) if g.type == CONSUMER else None
        else:
            owned = before.owned if before else None
            target = before.target if before else None
        members[m.member_id] = MemberView(
            member_id=m.member_id, client_id=m.client_id or None, host=m.host or None,
            group_instance_id=m.group_instance_id or None, topics=group_topics, owned=owned, target=target)
    return GroupView(
        group_id=g.group_id, group_protocol=g.type,
        raw_assignor=g.partition_assignor or (old.raw_assignor if old is not None else None),
        state=g.state, topics=group_topics,
        workload=_workload(group_topics, topics, old),
        members=members)


class _Emitter:
    def __init__(self, settings: CollectorSettings, time_ms: int):
        self.settings = settings
        self.time_ms = time_ms
        self.membership: list[CollectedEvent] = []
        self.heartbeats: list[CollectedEvent] = []

    def _base(self, group_id: str, member_id: str | None, kind: str) -> dict:
        return {"schema_version": SCHEMA_VERSION,
                "event_id": event_id(self.settings.id_prefix, group_id, member_id, self.time_ms, kind),
                "event_time": self.time_ms, "group_id": group_id}

    def workload(self, view: GroupView) -> None:
        value = {**self._base(view.group_id, None, "workload"), "group_type": "consumer", "type": "workload",
                 "workload": {"topics": [t.as_workload() for t in view.workload]}, "source": "collector"}
        self.membership.append(CollectedEvent(MEMBERSHIP, view.group_id, value))

    def member(self, kind: str, view: GroupView, m: MemberView, reason: str) -> None:
        value = {**self._base(view.group_id, m.member_id, kind), "group_type": "consumer", "type": kind,
                 "member_id": m.member_id}
        for name in ("group_instance_id", "client_id", "host"):
            if getattr(m, name):
                value[name] = getattr(m, name)
        if kind != "leave":
            value["topics"] = list(m.topics)
            if m.owned is not None:
                value["owned_partitions"] = _partitions(m.owned)
            if m.target is not None:
                value["target_partitions"] = _partitions(m.target)
            value["generation"] = -1  # DescribeGroups does not report it
            value["protocol"] = view.protocol
            if view.assignor:
                value["assignor"] = view.assignor
            if kind == "join":
                value["session_timeout_ms"] = self.settings.session_timeout_ms
        value["reason"] = reason
        # Not (yet) in the contract; the job ignores unknown fields. See docs/collector.md.
        value["group_protocol"] = view.group_protocol
        value["group_state"] = view.state
        if view.raw_assignor:
            value["partition_assignor"] = view.raw_assignor
        value["source"] = "collector"
        self.membership.append(CollectedEvent(MEMBERSHIP, view.group_id, value))

    def heartbeat(self, group_id: str, member_id: str) -> None:
        value = {**self._base(group_id, member_id, "heartbeat"), "member_id": member_id}
        self.heartbeats.append(CollectedEvent(HEARTBEAT, group_id, value))


def _update_reason(before: MemberView, after: MemberView, group_changed: bool, state_changed: bool) -> str | None:
    what = []
    if before.owned != after.owned:
        what.append("assignment")
    if before.target != after.target:
        what.append("target assignment")
    if before.topics != after.topics:
        what.append("topics")
    if (before.client_id, before.host, before.group_instance_id) != (after.client_id, after.host,
                                                                       after.group_instance_id):
        what.append("metadata")
    if group_changed:
        what.append("assignor")
    if state_changed:
        what.append("group state")
    return " and ".join(what) + " changed" if what else None


def diff(previous: Mapping[str, GroupView], snapshot: ClusterSnapshot,
         settings: CollectorSettings = CollectorSettings()) -> tuple[dict[str, GroupView], list[CollectedEvent]]:
    """The events that take the job from ``previous`` to ``snapshot``, and the new views.

    Membership events come first (per group: workload, leaves, joins, updates), then one
    heartbeat per live member, all at ``snapshot.time_ms``.
    """
    out = _Emitter(settings, snapshot.time_ms)
    views: dict[str, GroupView] = {}
    for group_id in sorted(set(previous) | set(snapshot.groups)):
        old = previous.get(group_id)
        if group_id in snapshot.unobserved:
            if old is not None:
                views[group_id] = old
            continue
        g = snapshot.groups.get(group_id)
        if g is None:  # deleted (or no longer matching): everyone in it is gone
            if old is not None:
                for m in old.members.values():
                    out.member("leave", old, m, LEAVE_REASON)
            continue
        new = _view_of(g, old, snapshot.topics)
        views[group_id] = new
        if old is None or new.workload != old.workload:
            out.workload(new)
        old_members = old.members if old is not None else {}
        replaced = {m.group_instance_id for m in new.members.values()
                    if m.group_instance_id and m.member_id not in old_members}
        for m in old_members.values():
            if m.member_id not in new.members and m.group_instance_id not in replaced:
                # The group's state now, not at the last poll: a departure usually starts a
                # rebalance, and the job must not take the others' last assignment as settled.
                out.member("leave", new, m, LEAVE_REASON)
        for m in new.members.values():
            if m.member_id not in old_members:
                out.member("join", new, m, JOIN_REASON)
        group_changed = old is not None and (new.assignor, new.protocol) != (old.assignor, old.protocol)
        # The job compares its computed assignment with the actual one only while the group is
        # settled, so it must hear when the coordinator's state changes, even if nothing else did.
        state_changed = old is not None and new.state.upper() != old.state.upper()
        for m in new.members.values():
            before = old_members.get(m.member_id)
            if before is not None:
                reason = _update_reason(before, m, group_changed, state_changed)
                if reason:
                    out.member("update", new, m, reason)
        for member_id in new.members:
            out.heartbeat(group_id, member_id)
    return views, out.membership + out.heartbeats


class Collector:
    """Remembers what the job was told and diffs each poll against it.

    ``plan`` computes a poll's events without forgetting anything; ``commit`` makes it the new
    reference once the events are delivered, so a poll whose events could not be produced is
    simply diffed again next time.
    """

    def __init__(self, settings: CollectorSettings = CollectorSettings()):
        self.settings = settings
        self.views: dict[str, GroupView] = {}
        self.last_good_time_ms: int | None = None
        self.failed_polls = 0  # consecutive

    def restore(self, views: Mapping[str, GroupView]) -> None:
        """Start from what an earlier run told the job (:func:`views_from_events`), not from nothing."""
        self.views = dict(views)

    def plan(self, snapshot: ClusterSnapshot | None,
             error: str | None = None) -> tuple[dict[str, GroupView] | None, list[CollectedEvent]]:
        if snapshot is None:
            self.failed_polls += 1
            since = (f"; last good poll at {self.last_good_time_ms}" if self.last_good_time_ms is not None
                     else "; no good poll yet")
            log.warning("poll failed (%s): emitting nothing for it, members are NOT considered gone "
                        "(%d failed in a row%s)", error or "no snapshot", self.failed_polls, since)
            return None, []
        if self.failed_polls:
            log.info("cluster answered again after %d failed polls: resynchronising against the last "
                     "good snapshot", self.failed_polls)
        return diff(self.views, snapshot, self.settings)

    def commit(self, views: dict[str, GroupView] | None, time_ms: int | None = None) -> None:
        if views is None:
            return
        self.views = views
        self.failed_polls = 0
        if time_ms is not None:
            self.last_good_time_ms = time_ms

    def observe(self, snapshot: ClusterSnapshot | None, error: str | None = None) -> list[CollectedEvent]:
        """``plan`` and ``commit`` in one step (for callers that deliver events reliably)."""
        views, events = self.plan(snapshot, error)
        self.commit(views, snapshot.time_ms if snapshot is not None else None)
        return events


# -- a restarted collector: what did it tell the job before? ------------------------------------

def _assignment_field(value: Mapping, name: str, as_kept=_sorted) -> Assignment | None:
    """An event's partitions as the collector's views keep them (``_sorted``, or ``_as_listed``)."""
    parts = value.get(name)
    return None if parts is None else as_kept((p["topic"], p["partition"]) for p in parts)


def views_from_events(events: Iterable[Mapping], group_ids: Iterable[str] | None = None) -> dict[str, GroupView]:
    """The views a collector had after producing ``events`` (its own membership events, as read back
    from the monitor's membership topic), so a restarted collector diffs its first poll against what
    the job was last told: a member that left while it was down gets its leave, and members that are
    still there get no second join.

    Events without ``source: "collector"`` (a simulator, an instrumented client) are not the
    collector's and are skipped; with ``group_ids``, only those groups are rebuilt (several
    collectors may share a topic, each with its own ``--groups``). Events are applied in the job's
    order (event time, then event id), whatever order they were read in.
    """
    wanted = set(group_ids) if group_ids is not None else None
    mine = [e for e in events if e.get("source") == "collector"]
    groups: dict[str, dict] = {}
    for e in sorted(mine, key=lambda e: (int(e["event_time"]), str(e["event_id"]))):
        group_id = e["group_id"]
        if wanted is not None and group_id not in wanted:
            continue
        g = groups.setdefault(group_id, {"group_protocol": CLASSIC, "raw_assignor": None, "state": "STABLE",
                                         "topics": (), "workload": (), "members": {}})
        kind = e["type"]
        if kind == "workload":
            g["workload"] = tuple(
                TopicSnapshot(t["name"], int(t["partitions"]),
                              tuple(tuple(r) for r in t["racks"]) if t.get("racks") is not None else None,
                              topic_id=t.get("topic_id"))
                for t in (e.get("workload") or {}).get("topics") or ())
            continue
        g["group_protocol"] = e.get("group_protocol") or g["group_protocol"]
        g["raw_assignor"] = e.get("partition_assignor") or g["raw_assignor"]
        g["state"] = e.get("group_state") or g["state"]
        if kind == "leave":
            g["members"].pop(e["member_id"], None)
            continue
        g["topics"] = tuple(e.get("topics") or ())
        static_id = e.get("group_instance_id")
        if kind == "join" and static_id:  # a static member under a new id replaced the old one
            g["members"] = {mid: m for mid, m in g["members"].items() if m.group_instance_id != static_id}
        g["members"][e["member_id"]] = MemberView(
            member_id=e["member_id"], client_id=e.get("client_id"), host=e.get("host"),
            group_instance_id=e.get("group_instance_id"), topics=g["topics"],
            owned=_assignment_field(e, "owned_partitions"),
            target=_assignment_field(e, "target_partitions", _as_listed))
    return {group_id: GroupView(group_id=group_id, group_protocol=g["group_protocol"], raw_assignor=g["raw_assignor"],
                                state=g["state"], topics=g["topics"], workload=g["workload"],
                                members=dict(sorted(g["members"].items())))
            for group_id, g in sorted(groups.items()) if g["members"]}
