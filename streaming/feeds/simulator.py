"""Seeded, simulated group traffic: the records the monitor reads, without a real cluster.

Pure: no Kafka, no wall clock, no global random state. A :class:`SimulationConfig` fully decides
the output, so the same config always yields byte-identical records with the same event ids; that
is what lets tests compare what the job computed against what was sent, and lets a run be replayed.

The simulation is a discrete-event loop over one heap ordered by (event time, sequence number), so
records come out in event-time order across all groups. Per group it emits a ``workload`` event,
then the members' joins, then a heartbeat per live member every heartbeat interval, with churn
(joins, leaves, static bounces, crashes) interleaved. Heartbeats are the bulk of the traffic, so
their JSON is filled into per-member templates instead of going through ``json.dumps``.

Optionally a share of the groups are Kafka Streams applications (``streams_share``: tasks from
the group's topics, one client per member, and heartbeats of a newly joined client report its task
lags falling to 0 as it restores) or Kafka Connect clusters (``connect_share``: one connector per
topic with a task per partition, workers with URLs). With both shares at 0 the output is exactly
that of a consumer-only simulation.

Bad records (for the job's rejected-events path) are injected *beside* the good stream, from their
own random generator and their own event-id namespace: turning them on or off never changes a
single good record, so a test can tell exactly which records the job must accept.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import math
import random
import uuid
from collections import Counter
from dataclasses import dataclass, field, fields
from typing import Iterator, NamedTuple

from schemas.events import DEFAULT_SESSION_TIMEOUT_MS, SCHEMA_VERSION

from streaming.config import KafkaConfig
from streaming.errors import SimulationError

#: Which of the two topics a record belongs on (the CLI maps these to topic names).
MEMBERSHIP = "membership"
HEARTBEAT = "heartbeat"

#: Kinds of deliberately invalid records; each one breaks the event contract in one known way.
BAD_KINDS = ("malformed_json", "missing_field", "unknown_assignor", "negative_partitions",
             "oversized", "wrong_type")

#: Eager groups pick one of these; cooperative groups always use cooperative-sticky, the only
#: cooperative client assignor Kafka ships.
EAGER_ASSIGNORS = ("range", "roundrobin", "sticky")
COOPERATIVE_ASSIGNOR = "cooperative-sticky"

#: Kafka Streams groups: a new client restores every stateful task from this lag down to 0, in
#: this much event time, reporting its lags with each heartbeat until one interval after that.
STREAMS_RESTORE_LAG = 5_000
STREAMS_RESTORE_MS = 30_000
STREAMS_CONFIG = {"acceptable_recovery_lag": 1_000, "num_standby_replicas": 0, "max_warmup_replicas": 2,
                  "probing_rebalance_interval_ms": 60_000}
#: Options added after the first release: left out of the run tag at their defaults, so the event
#: ids of existing configurations do not change.
_LATER_OPTIONS = {"streams_share": 0.0, "connect_share": 0.0}

#: 2026-01-01T00:00:00Z: a fixed default so that a config without a start time is still repeatable.
DEFAULT_START_TIME_MS = 1_767_225_600_000

#: Reasons as Kafka's clients report them (KIP-800), so the member_events table reads like a real one.
REASON_START = "group start"
REASON_NEW_MEMBER = "new member joined"
REASON_LEAVE = "the consumer is being closed"
REASON_STATIC_RESTART = "static member restarted"

# Initial joins land within this long after the group's workload event, like a deployment's pods
# starting together but not in the same millisecond.
_INITIAL_JOIN_SPREAD_MS = 500
# Churn starts once the initial members are in, so the first generation is the deployment itself.
_CHURN_START_DELAY_MS = 1_000

# Heap actions. Ints, not an Enum: the heap loop runs once per record.
_JOIN, _CHURN, _REJOIN, _START = range(4)


class SimRecord(NamedTuple):
    """One record to produce: ``bad`` is None for a valid event, else the kind of breakage."""

    topic_kind: str  # MEMBERSHIP or HEARTBEAT
    key: str  # the group id (Kafka record key)
    value: bytes  # JSON (or, for malformed_json, something that is not)
    bad: str | None = None


def _option(name: str) -> str:
    return f"{name} (--{name.replace('_', '-')})"


@dataclass(frozen=True)
class SimulationConfig:
    """Everything that decides the simulated traffic. Invalid values raise :class:`SimulationError`."""

    groups: int = 10
    #: Members per group: a fixed count, or an inclusive (low, high) range; churn keeps it in range.
    members: int | tuple[int, int] = 3
    #: Topics per group (each group subscribes to all of its own topics).
    topics: int = 2
    #: Partitions per topic: fixed, or an inclusive (low, high) range drawn per topic.
    partitions: int | tuple[int, int] = 6
    #: Member joins plus departures per minute per group (a Poisson process in event time).
    churn_per_minute: float = 1.0
    heartbeat_interval_ms: int = 3_000
    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS
    #: Share of members with a group_instance_id. They never leave; they bounce: go silent and
    #: rejoin with a new member_id and the same group_instance_id within the session timeout.
    static_share: float = 0.0
    #: Share of groups using the cooperative protocol (cooperative-sticky; for Connect groups
    #: connect-incremental); the rest are eager.
    cooperative_share: float = 0.5
    #: Shares of groups that are Kafka Streams applications and Kafka Connect clusters.
    streams_share: float = 0.0
    connect_share: float = 0.0
    #: Share of groups whose departing dynamic members crash (stop heartbeating, no leave event).
    crash_share: float = 0.0
    #: Share of all records that are deliberately invalid, spread over ``bad_kinds``.
    bad_share: float = 0.0
    bad_kinds: tuple[str, ...] = BAD_KINDS
    #: Size of an ``oversized`` record's value; default one byte over the job's default limit.
    oversized_bytes: int = KafkaConfig.max_record_bytes + 1
    #: Racks for members (client.rack) and partition replicas; empty = no rack data at all.
    racks: tuple[str, ...] = ()
    start_time_ms: int = DEFAULT_START_TIME_MS
    seed: int = 0
    group_prefix: str = "sim"

    def __post_init__(self) -> None:
        # Normalise equal values to one form (6 and 6.0, [2, 3] and (2, 3)): the run tag hashes
        # the config, and the same traffic must get the same event ids however it was configured.
        for name in ("churn_per_minute", "static_share", "cooperative_share", "crash_share", "bad_share",
                     "streams_share", "connect_share"):
            value = getattr(self, name)
            if isinstance(value, int) and not isinstance(value, bool):
                object.__setattr__(self, name, float(value))
        for name in ("members", "partitions", "bad_kinds", "racks"):
            if isinstance(getattr(self, name), list):
                object.__setattr__(self, name, tuple(getattr(self, name)))

        def whole(name: str, minimum: int) -> None:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise SimulationError(f"{_option(name)} must be an integer >= {minimum}, got {value!r}")

        def share(name: str, below_one: bool = False) -> None:
            value = getattr(self, name)
            ok = (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
                  and 0.0 <= value and (value < 1.0 if below_one else value <= 1.0))
            if not ok:
                bound = "0 <= x < 1" if below_one else "0 <= x <= 1"
                raise SimulationError(f"{_option(name)} must be a share {bound}, got {value!r}")

        def count_range(name: str) -> None:
            value = getattr(self, name)
            if isinstance(value, tuple):
                ok = (len(value) == 2 and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
                      and 1 <= value[0] <= value[1])
            else:
                ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
            if not ok:
                raise SimulationError(f"{_option(name)} must be an integer >= 1 or a range LOW-HIGH with "
                                      f"1 <= LOW <= HIGH, got {value!r}")

        whole("groups", 1)
        count_range("members")
        whole("topics", 1)
        count_range("partitions")
        churn = self.churn_per_minute
        if isinstance(churn, bool) or not isinstance(churn, (int, float)) or not math.isfinite(churn) or churn < 0:
            raise SimulationError(f"{_option('churn_per_minute')} must be a number >= 0, got {churn!r}")
        whole("heartbeat_interval_ms", 1)
        whole("session_timeout_ms", 1)
        # Kafka's own rule (heartbeat.interval.ms must be lower than session.timeout.ms): otherwise
        # every member would expire between two of its own heartbeats.
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise SimulationError(
                f"{_option('heartbeat_interval_ms')} ({self.heartbeat_interval_ms}) must be lower than "
                f"{_option('session_timeout_ms')} ({self.session_timeout_ms})")
        for name in ("static_share", "cooperative_share", "crash_share", "streams_share", "connect_share"):
            share(name)
        if self.streams_share + self.connect_share > 1.0:
            raise SimulationError(f"{_option('streams_share')} + {_option('connect_share')} must be at most 1, got "
                                  f"{self.streams_share} + {self.connect_share}")
        share("bad_share", below_one=True)  # all-bad would leave no stream to inject into
        unknown = [k for k in self.bad_kinds if k not in BAD_KINDS]
        if unknown or not self.bad_kinds:
            raise SimulationError(f"bad_kinds must be a non-empty subset of {', '.join(BAD_KINDS)}; "
                                  f"got {list(self.bad_kinds)!r}")
        whole("oversized_bytes", 1_024)
        if any(not isinstance(r, str) or not r for r in self.racks):
            raise SimulationError(f"racks must be non-empty strings, got {list(self.racks)!r}")
        whole("start_time_ms", 0)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise SimulationError(f"{_option('seed')} must be an integer, got {self.seed!r}")
        if not isinstance(self.group_prefix, str) or not self.group_prefix:
            raise SimulationError(f"group_prefix must be a non-empty string, got {self.group_prefix!r}")

    @property
    def member_range(self) -> tuple[int, int]:
        return self.members if isinstance(self.members, tuple) else (self.members, self.members)

    @property
    def partition_range(self) -> tuple[int, int]:
        return self.partitions if isinstance(self.partitions, tuple) else (self.partitions, self.partitions)

    def run_tag(self) -> str:
        """A short id of everything that shapes the good stream; it prefixes every event id.

        Runs with different settings therefore never reuse an event id (the job would drop the
        second as a duplicate), while the same settings reproduce the same ids. The bad-record
        settings are left out so that they cannot change any good record.
        """
        shaping = [(f.name, getattr(self, f.name)) for f in fields(self)
                   if f.name not in ("bad_share", "bad_kinds", "oversized_bytes")
                   and not (f.name in _LATER_OPTIONS and getattr(self, f.name) == _LATER_OPTIONS[f.name])]
        return hashlib.blake2b(repr(shaping).encode(), digest_size=4).hexdigest()


@dataclass
class SimulationStats:
    """What a simulation emitted so far; the CLI prints it, tests compare it with the records."""

    records: Counter = field(default_factory=Counter)  # per topic kind, bad records included
    membership_types: Counter = field(default_factory=Counter)  # good membership events per type
    bad: Counter = field(default_factory=Counter)  # per bad kind
    churn_events: int = 0  # joins of new members + leaves + crashes + static bounces
    leaves: int = 0
    crashes: int = 0
    static_bounces: int = 0  # static members that went silent and rejoined (or will)
    first_event_time: int | None = None
    last_event_time: int | None = None

    @property
    def total(self) -> int:
        return sum(self.records.values())


class _Member:
    __slots__ = ("group", "index", "member_id", "instance_id", "client_id", "host", "rack", "tail", "alive",
                 "joined", "phase", "lags_until")

    def __init__(self, group, index, member_id, instance_id, client_id, host, rack):
        group_id = group.group_id
        self.group = group
        self.index = index
        self.member_id = member_id
        self.instance_id = instance_id
        self.client_id = client_id
        self.host = host
        self.rack = rack
        # The fixed end of this member's heartbeat JSON; only the event id and time vary.
        self.tail = f',"group_id":{json.dumps(group_id)},"member_id":{json.dumps(member_id)}}}'
        self.alive = False  # heartbeating: set at join, cleared at leave, crash or bounce
        self.joined = -1  # event time of the join
        self.phase = -1  # heartbeats at every time t with t % heartbeat_interval_ms == phase
        self.lags_until = -1  # Streams: its heartbeats carry task_lags up to this time

    def last_heartbeat(self, now: int, interval: int) -> int | None:
        """Time of the member's latest heartbeat at or before ``now`` (None if it has not sent one)."""
        last = now - (now - self.phase) % interval
        return last if last > self.joined else None


class _Group:
    __slots__ = ("index", "group_id", "topics", "workload", "protocol", "assignor", "crashes", "low", "high",
                 "live", "away", "next_member", "kind", "stateful")

    def __init__(self, index, group_id, topics, workload, protocol, assignor, crashes, low, high,
                 kind="consumer", stateful=()):
        self.index = index
        self.group_id = group_id
        self.topics = topics
        self.workload = workload
        self.protocol = protocol
        self.assignor = assignor
        self.crashes = crashes
        self.low = low
        self.high = high
        self.live: list[_Member] = []  # joined and heartbeating
        self.away = 0  # static members between their bounce and their rejoin (still count as members)
        self.next_member = 0
        self.kind = kind  # group_type: consumer, streams or connect
        self.stateful = stateful  # Streams: the stateful task ids


class Simulation:
    """A running simulation; :meth:`batches` and :meth:`records` pull records from it.

    The simulation keeps its state between calls, so records can be pulled in as many pieces as
    the caller likes; the concatenation is always the same sequence for the same config.
    """

    def __init__(self, config: SimulationConfig):
        self.config = config
        self.stats = SimulationStats()
        self._rng = random.Random(config.seed)
        # Separate generator for bad records: enabling them must not shift the good stream.
        self._bad_rng = random.Random(f"bad-{config.seed}")
        tag = config.run_tag()
        self._id_head = f'{{"schema_version":{SCHEMA_VERSION},"event_id":"{tag}-'
        self._tag = tag
        self._bad_tag = f"{tag}-x"
        self._next_id = 0
        self._next_bad_id = 0
        self._seq = 0
        # Sparse events (starts, joins, churn, rejoins) go through a heap; heartbeats, the bulk,
        # through a ring of per-millisecond slots: a member with phase p heartbeats at every t with
        # t % interval == p, so walking the ring emits them in time order without a heap operation.
        self._heap: list[tuple[int, int, int, object]] = []
        self._slots: list[list[_Member]] = [[] for _ in range(config.heartbeat_interval_ms)]
        self._heartbeating = 0
        self._now = config.start_time_ms
        self._out: list[SimRecord] = []
        self._bad_credit = 0.0
        # bad / (good + bad) = bad_share  <=>  bad records per good record = share / (1 - share)
        self._bad_per_good = config.bad_share / (1.0 - config.bad_share)
        self._churn_rate_per_ms = config.churn_per_minute / 60_000.0
        self._groups = self._make_groups()
        self._oversized_padding: str | None = None

    # -- setup -------------------------------------------------------------------------------

    def _make_groups(self) -> list[_Group]:
        c, rng = self.config, self._rng
        width = max(4, len(str(c.groups - 1)))
        cooperative = set(rng.sample(range(c.groups), round(c.cooperative_share * c.groups)))
        crashing = set(rng.sample(range(c.groups), round(c.crash_share * c.groups)))
        p_low, p_high = c.partition_range
        m_low, m_high = c.member_range
        kinds: dict[int, str] = {}
        if c.streams_share or c.connect_share:  # no draw otherwise: consumer-only runs stay as they were
            chosen = rng.sample(range(c.groups), round((c.streams_share + c.connect_share) * c.groups))
            n_streams = round(c.streams_share * c.groups)
            kinds = {g: ("streams" if i < n_streams else "connect") for i, g in enumerate(chosen)}
        groups = []
        for g in range(c.groups):
            group_id = f"{c.group_prefix}-group-{g:0{width}d}"
            topics, workload = [], []
            for t in range(c.topics):
                name = f"{group_id}.topic-{t}"
                count = rng.randint(p_low, p_high)
                entry = {"name": name, "partitions": count}
                if c.racks:
                    # Replicas on up to three distinct racks, rotated so leaders spread over racks.
                    replicas = min(3, len(c.racks))
                    entry["racks"] = [[c.racks[(p + r) % len(c.racks)] for r in range(replicas)]
                                      for p in range(count)]
                topics.append(name)
                workload.append(entry)
            if g in cooperative:
                protocol, assignor = "cooperative", COOPERATIVE_ASSIGNOR
            else:
                protocol, assignor = "eager", rng.choice(EAGER_ASSIGNORS)
            kind = kinds.get(g, "consumer")
            stateful: tuple[str, ...] = ()
            if kind == "streams":
                # Subtopology 0 reads topic 0 with a state store; any further topics feed stateless ones.
                counts = [w["partitions"] for w in workload]
                stateful = tuple(f"0_{p}" for p in range(counts[0]))
                stateless = [f"{s}_{p}" for s in range(1, len(counts)) for p in range(counts[s])]
                workload = {"tasks": {"stateful": list(stateful), "stateless": stateless},
                            "task_end_offset_sums": {t: STREAMS_RESTORE_LAG for t in stateful},
                            "config": STREAMS_CONFIG}
                protocol, assignor = "cooperative", "streams-ha"
            elif kind == "connect":
                workload = {"connectors": [{"name": f"{w['name']}-sink", "tasks": w["partitions"]} for w in workload],
                            "config_offset": 1}
                assignor = "connect-incremental" if protocol == "cooperative" else "connect-eager"
            group = _Group(g, group_id, topics, workload, protocol, assignor, g in crashing, m_low, m_high,
                           kind, stateful)
            groups.append(group)
            # Groups start spread over the first heartbeat interval, like services deployed one by one.
            self._push(c.start_time_ms + rng.randrange(c.heartbeat_interval_ms), _START, group)
        return groups

    def _push(self, time: int, action: int, payload: object) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (time, self._seq, action, payload))

    def _new_member(self, group: _Group, instance_id: str | None = None, like: _Member | None = None) -> _Member:
        c, rng = self.config, self._rng
        if like is not None:  # a static member restarting: same instance, client, host and rack
            index, client_id, host, rack = like.index, like.client_id, like.host, like.rack
        else:
            index = group.next_member
            group.next_member += 1
            client_id = f"consumer-{group.group_id}-{index + 1}"
            host = f"/10.{(group.index >> 8) & 255}.{group.index & 255}.{index % 250 + 1}"
            rack = c.racks[index % len(c.racks)] if c.racks else None
            # (Connect workers have no static membership.)
            if rng.random() < c.static_share and group.kind != "connect":
                instance_id = f"{group.group_id}-instance-{index}"
        # Kafka's member ids are client id + "-" + a UUID; this UUID comes from the seeded generator.
        member_id = f"{client_id}-{uuid.UUID(int=rng.getrandbits(128), version=4)}"
        return _Member(group, index, member_id, instance_id, client_id, host, rack)

    # -- emitting ----------------------------------------------------------------------------

    def _event_id(self) -> str:
        self._next_id += 1
        return f"{self._tag}-{self._next_id}"

    def _emit_membership(self, group: _Group, time: int, event: dict) -> None:
        event = {"schema_version": SCHEMA_VERSION, "event_id": self._event_id(), "event_time": time,
                 "group_id": group.group_id, "group_type": group.kind, **event}
        self._out.append(SimRecord(MEMBERSHIP, group.group_id,
                                   json.dumps(event, separators=(",", ":")).encode()))
        self.stats.membership_types[event["type"]] += 1
        self._count(MEMBERSHIP, time, group)

    def _count(self, kind: str, time: int, group: _Group) -> None:
        stats = self.stats
        stats.records[kind] += 1
        if stats.first_event_time is None:
            stats.first_event_time = time
        stats.last_event_time = time
        if self._bad_per_good:
            self._owe_bad(1, group, time)

    def _owe_bad(self, good: int, group: _Group, time: int) -> None:
        # A running credit instead of a coin per record: the share is exact, not just on average.
        self._bad_credit += good * self._bad_per_good
        while self._bad_credit >= 1.0:
            self._bad_credit -= 1.0
            self._emit_bad(group, time)

    def _join(self, group: _Group, member: _Member, time: int, reason: str) -> None:
        event = {"type": "join", "member_id": member.member_id}
        if member.instance_id is not None:
            event["group_instance_id"] = member.instance_id
        event.update(client_id=member.client_id, host=member.host)
        if member.rack is not None:
            event["rack"] = member.rack
        # A joining member owns nothing yet and has no generation; the job computes assignments.
        if group.kind != "connect":
            event["topics"] = group.topics
        event.update(owned_partitions=[], generation=-1, protocol=group.protocol,
                     assignor=group.assignor, session_timeout_ms=self.config.session_timeout_ms, reason=reason)
        if group.kind == "streams":  # one client (process) per member; a restarted one keeps its id
            event.update(process_id=f"{group.group_id}-process-{member.index}", threads=1)
            member.lags_until = time + STREAMS_RESTORE_MS + self.config.heartbeat_interval_ms
        elif group.kind == "connect":
            event.update(worker_url=f"http://{member.host.lstrip('/')}:8083", config_offset=1)
        self._emit_membership(group, time, event)
        member.alive = True
        member.joined = time
        group.live.append(member)
        self._heartbeating += 1
        # First heartbeat somewhere in the first interval, so a group's heartbeats spread out.
        interval = self.config.heartbeat_interval_ms
        member.phase = (time + self._rng.randint(1, interval)) % interval
        self._slots[member.phase].append(member)

    def _start(self, group: _Group, time: int) -> None:
        workload = {"topics": group.workload} if group.kind == "consumer" else group.workload
        self._emit_membership(group, time, {"type": "workload", "workload": workload})
        count = self._rng.randint(group.low, group.high)
        for _ in range(count):
            self._push(time + self._rng.randint(1, _INITIAL_JOIN_SPREAD_MS), _JOIN, (group, self._new_member(group)))
        if self._churn_rate_per_ms > 0:
            self._push(time + _CHURN_START_DELAY_MS + self._churn_gap(), _CHURN, group)

    def _churn_gap(self) -> int:
        return max(1, round(self._rng.expovariate(self._churn_rate_per_ms)))

    def _churn(self, group: _Group, time: int) -> None:
        rng, stats = self._rng, self.stats
        count = len(group.live) + group.away
        low, high = group.low, group.high
        if count < low:
            grow = True
        elif count > high:
            grow = False
        elif low == high:
            grow = rng.random() < 0.5
        else:  # at a bound, move inward; inside the range, either way
            grow = True if count == low else False if count == high else rng.random() < 0.5
        if grow:
            stats.churn_events += 1
            self._join(group, self._new_member(group), time, REASON_NEW_MEMBER)
        elif group.live:
            stats.churn_events += 1
            member = group.live.pop(rng.randrange(len(group.live)))
            member.alive = False
            self._heartbeating -= 1
            if member.instance_id is not None:
                # Static members do not send LeaveGroup (KIP-345): the process restarts and rejoins
                # under the same instance id before the session times out, counted from its last
                # heartbeat (at most one interval before now, and heartbeat < session timeout).
                stats.static_bounces += 1
                group.away += 1
                last = member.last_heartbeat(time, self.config.heartbeat_interval_ms)
                if last is None:
                    last = member.joined  # its join is its last sign of life
                downtime = round(rng.uniform(0.3, 0.8) * self.config.session_timeout_ms)
                rejoin = min(max(time + 1, last + downtime), last + self.config.session_timeout_ms - 1)
                self._push(max(time + 1, rejoin), _REJOIN, (group, member))
            elif group.crashes:
                stats.crashes += 1  # silent: only the missing heartbeats tell
            else:
                stats.leaves += 1
                self._emit_membership(group, time, {
                    "type": "leave", "member_id": member.member_id, "client_id": member.client_id,
                    "host": member.host, "reason": REASON_LEAVE})
        self._push(time + self._churn_gap(), _CHURN, group)

    # -- bad records -------------------------------------------------------------------------

    def _emit_bad(self, group: _Group, time: int) -> None:
        rng = self._bad_rng
        kind = rng.choice(self.config.bad_kinds)
        self._next_bad_id += 1
        event_id = f"{self._bad_tag}{self._next_bad_id}"
        # A member id no good record uses: if the job wrongly accepted one, a phantom member would show.
        phantom = f"bad-member-{self._next_bad_id}"
        base = {"schema_version": SCHEMA_VERSION, "event_id": event_id, "event_time": time,
                "group_id": group.group_id}
        join = {**base, "group_type": "consumer", "type": "join", "member_id": phantom, "topics": group.topics,
                "owned_partitions": [], "generation": -1, "protocol": group.protocol, "assignor": group.assignor,
                "session_timeout_ms": self.config.session_timeout_ms}
        topic_kind = MEMBERSHIP
        if kind == "malformed_json":
            topic_kind = rng.choice((MEMBERSHIP, HEARTBEAT))
            text = json.dumps(join if topic_kind == MEMBERSHIP else {**base, "member_id": phantom})
            value = text[: rng.randint(1, len(text) - 1)].encode()  # cut short: never valid JSON
        elif kind == "missing_field":
            if rng.random() < 0.5:
                missing = rng.choice(("event_id", "event_time", "group_id", "type", "member_id"))
                value = _dumps({k: v for k, v in join.items() if k != missing})
            else:
                topic_kind = HEARTBEAT
                value = _dumps(base)  # a heartbeat that does not say which member is alive
        elif kind == "unknown_assignor":
            value = _dumps({**join, "assignor": "fancy-assignor"})
        elif kind == "negative_partitions":
            topics = [{"name": name, "partitions": -rng.randint(1, 12)} for name in group.topics[:1]]
            value = _dumps({**base, "group_type": "consumer", "type": "workload", "workload": {"topics": topics}})
        elif kind == "oversized":
            topic_kind = rng.choice((MEMBERSHIP, HEARTBEAT))
            event = join if topic_kind == MEMBERSHIP else {**base, "member_id": phantom}
            value = self._oversized(event)
        else:  # wrong_type
            if rng.random() < 0.5:
                value = _dumps({**join, "generation": "minus one", "session_timeout_ms": "45s"})
            else:
                topic_kind = HEARTBEAT
                value = _dumps({**base, "event_time": str(time), "member_id": phantom})
        self._out.append(SimRecord(topic_kind, group.group_id, value, kind))
        self.stats.records[topic_kind] += 1
        self.stats.bad[kind] += 1

    def _oversized(self, event: dict) -> bytes:
        """Valid JSON, valid event, just too big: the size limit alone must refuse it."""
        head = _dumps({**event, "reason": ""})[:-2]  # ends with "reason":"  (the '"}' is re-added)
        size = self.config.oversized_bytes
        pad = size - len(head) - 2
        if self._oversized_padding is None or len(self._oversized_padding) < pad:
            self._oversized_padding = "x" * max(pad, 0)  # built once; compressible, so cheap to ship
        return head + self._oversized_padding[:pad].encode() + b'"}'

    # -- the loop ----------------------------------------------------------------------------

    def batches(self, batch_size: int = 4_096, *, max_records: int | None = None,
                end_time_ms: int | None = None) -> Iterator[list[SimRecord]]:
        """Yield lists of about ``batch_size`` records in event-time order.

        Stops before the first event at or after ``end_time_ms`` (simulated time), or after
        ``max_records`` records in total; with neither it never stops. Reaching ``max_records``
        ends the simulation (records generated in the same millisecond beyond it are discarded).
        """
        if batch_size < 1:
            raise SimulationError(f"batch_size must be >= 1, got {batch_size!r}")
        heap, slots, out, stats = self._heap, self._slots, self._out, self.stats
        records = stats.records
        interval = self.config.heartbeat_interval_ms
        id_head = self._id_head
        heappop = heapq.heappop
        bad_on = self._bad_per_good > 0
        end = end_time_ms if end_time_ms is not None else math.inf
        limit = max_records if max_records is not None else math.inf
        t = self._now
        while t < end and stats.total < limit:
            # Heartbeats of this millisecond first, then membership changes: a member leaving at t
            # may still heartbeat at t, and one joining at t heartbeats one to `interval` ms later.
            index = t % interval
            slot = slots[index]
            if slot:
                n = self._next_id
                mid = f'","event_time":{t}'
                stale = False
                emitted = len(out)
                for member in slot:
                    if member.alive:
                        n += 1
                        if member.lags_until >= t:
                            out.append(self._lag_heartbeat(member, n, t))
                            continue
                        # The hot path: a template fill instead of json.dumps.
                        out.append(SimRecord(HEARTBEAT, member.group.group_id,
                                             f"{id_head}{n}{mid}{member.tail}".encode()))
                    else:
                        stale = True  # left, crashed or bounced since it was filed here
                emitted = len(out) - emitted
                self._next_id = n
                if stale:
                    slots[index] = [m for m in slot if m.alive]
                if emitted:
                    records[HEARTBEAT] += emitted
                    if stats.first_event_time is None:
                        stats.first_event_time = t
                    stats.last_event_time = t
                    if bad_on:
                        self._owe_bad(emitted, slot[-1].group, t)
            while heap and heap[0][0] <= t:
                _, _, action, payload = heappop(heap)
                if action == _JOIN:
                    group, member = payload
                    self._join(group, member, t, REASON_START)
                elif action == _CHURN:
                    self._churn(payload, t)
                elif action == _REJOIN:
                    group, old = payload
                    group.away -= 1
                    self._join(group, self._new_member(group, old.instance_id, like=old), t, REASON_STATIC_RESTART)
                else:
                    self._start(payload, t)
            t += 1
            if not self._heartbeating:
                # Nothing heartbeats: jump to the next scheduled change instead of walking empty time.
                if not heap:
                    break  # and nothing ever will
                t = max(t, heap[0][0])
            if len(out) >= batch_size:
                self._now = t
                yield self._take(max_records)
        self._now = t
        if out:
            yield self._take(max_records)

    def _lag_heartbeat(self, member: _Member, n: int, t: int) -> SimRecord:
        """A Streams member's heartbeat while it restores: every stateful task's lag, falling to 0."""
        left = max(0, STREAMS_RESTORE_MS - (t - member.joined))
        lag = STREAMS_RESTORE_LAG * left // STREAMS_RESTORE_MS
        group = member.group
        return SimRecord(HEARTBEAT, group.group_id, _dumps({
            "schema_version": SCHEMA_VERSION, "event_id": f"{self._tag}-{n}", "event_time": t,
            "group_id": group.group_id, "member_id": member.member_id,
            "task_lags": {task: lag for task in group.stateful}}))

    def _take(self, max_records: int | None) -> list[SimRecord]:
        batch = self._out[:]
        self._out.clear()
        if max_records is not None:
            # One event can bring bad records with it; never hand out more than asked for, and
            # keep the stats equal to what was handed out.
            excess = self.stats.total - max_records
            if excess > 0:
                batch, dropped = batch[: len(batch) - excess], batch[len(batch) - excess:]
                for record in dropped:
                    self.stats.records[record.topic_kind] -= 1
                    if record.bad:
                        self.stats.bad[record.bad] -= 1
                    elif record.topic_kind == MEMBERSHIP:
                        self.stats.membership_types[json.loads(record.value)["type"]] -= 1
        return batch

    def records(self, *, max_records: int | None = None, end_time_ms: int | None = None) -> Iterator[SimRecord]:
        for batch in self.batches(max_records=max_records, end_time_ms=end_time_ms):
            yield from batch


def _dumps(event: dict) -> bytes:
    return json.dumps(event, separators=(",", ":")).encode()


def simulate(config: SimulationConfig, *, max_records: int | None = None,
             end_time_ms: int | None = None) -> Iterator[SimRecord]:
    """Yield the records of a fresh simulation of ``config`` in event-time order (see :class:`Simulation`)."""
    return Simulation(config).records(max_records=max_records, end_time_ms=end_time_ms)
