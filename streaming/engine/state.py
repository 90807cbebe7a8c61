"""What the engine remembers of one group between micro-batches.

Everything here is plain data: the job keeps it in Spark's state store through
:mod:`streaming.engine.codec`, and a restart decodes it into an equal state, so nothing may live
only in memory.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

from assignors import TopicPartition, TopicSpec
from assignors.columns import AssignmentColumns
from assignors.connect.model import ConnectAssignorState
from assignors.timeline_order import MemberTable
from schemas.events import DEFAULT_SESSION_TIMEOUT_MS

from streaming.alerting.evaluator import AlertState
from streaming.engine.coordinator_events import ConsumerGroupRecord, CoordinatorGeneration
from streaming.engine.events import MembershipEvent, TaskWorkload

#: How many membership event ids a group remembers to recognise redeliveries.
SEEN_EVENT_IDS = 2_000

CONSUMER = "consumer"
STREAMS = "streams"
CONNECT = "connect"
TASK_GROUP_TYPES = frozenset({STREAMS, CONNECT})


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
    #: config_offset) join metadata, as :meth:`MembershipEvent.task_metadata` reads it.
    task_metadata: dict = field(default_factory=dict)

    def deadline(self) -> int | None:
        return self.last_seen + self.session_timeout_ms if self.expires else None

    @property
    def process_id(self) -> str:
        """Kafka Streams: the client (process) the member is a thread of; default its own id."""
        return self.task_metadata.get("process_id") or self.member_id

    @property
    def threads(self) -> int:
        return int(self.task_metadata.get("threads") or 1)


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
    group_type: str = CONSUMER
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
    buffered_events: list[MembershipEvent] = field(default_factory=list)
    #: Heartbeats newer than the group's safe time: (member, time), or (member, time, weight) for
    #: one that stands for more records than itself (the job's reduction dropped some).
    buffered_heartbeats: list[tuple] = field(default_factory=list)
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
    #: Streams or Connect groups: what the application or the Connect cluster runs.
    task_workload: TaskWorkload | None = None
    #: member -> {"active", "standby", "warmup"} task lists (Streams) or {"connectors", "tasks"}
    #: (Connect, tasks as [connector, number] pairs), after the latest generation.
    task_assignment: dict[str, dict[str, list]] = field(default_factory=dict)
    #: Streams: member -> task -> newest lag reported (heartbeat task_lags), applied in event time.
    task_lags: dict[str, dict[str, int]] = field(default_factory=dict)
    #: Lag reports [member, event time, lags] newer than the group's safe time.
    buffered_progress: list[list] = field(default_factory=list)
    #: Connect: the leader (oldest worker) and its incremental assignor's memory.
    connect_leader: str | None = None
    connect_leader_state: ConnectAssignorState | None = None
    #: A rebalance the assignor asked for at a later event time (Streams probing rebalance,
    #: Connect scheduled rebalance); a rebalance before it replaces it.
    scheduled: PendingRebalance | None = None
    #: A group recorded from its coordinator's log: generations it wrote that wait for the topic
    #: catalog to cover their time (in log order), the offset of the last one applied, and the
    #: phase of that one (a cooperative group's next generation after a revocation is its follow-up).
    coordinator_backlog: list[CoordinatorGeneration | ConsumerGroupRecord] = field(default_factory=list)
    coordinator_offset: int = -1
    coordinator_phase: str | None = None
    #: A KIP-848 group's fold of its records (:mod:`.kip848`): member -> metadata, member -> target.
    kip848: dict = field(default_factory=dict)
    #: A KIP-848 group's member map as its coordinator lays it out (as of the last computed target),
    #: and the order the assignor saw the members in then (a follow-up round keeps it).
    member_table: MemberTable | None = None
    member_order: tuple[str, ...] = ()

    @property
    def coordinator_fed(self) -> bool:
        return self.coordinator_offset >= 0 or bool(self.coordinator_backlog)

    def assignor_name(self) -> str:
        """The consumer group's assignor: as its members name it, else the protocol's default."""
        return self.assignor or ("cooperative-sticky" if self.protocol == "cooperative" else "range")


@dataclass(frozen=True)
class Packed:
    """A per-member partition map still in the bytes the codec stored it as: see :class:`_Unpacked`.

    ``unpack`` reads the bytes as lists of partitions, ``columns`` as
    :class:`~assignors.columns.AssignmentColumns` (:func:`assignment_columns`).
    """
    blob: bytes
    unpack: Callable[[bytes], dict]
    columns: Callable[[bytes], AssignmentColumns]


class _Unpacked:
    """A :class:`GroupState` field that the codec may hand over :class:`Packed`: unpacked on first use.

    A huge group's assignment is 500,000 partition objects, and a batch that only carries its
    heartbeats never reads it; unpacking and re-packing it was most of such a batch (4 s). So the
    field holds the stored bytes until someone reads it, and :func:`packed` gives the codec those
    bytes back to store as they are. Any read unpacks for good (a reader may mutate the map), so
    only a field nobody touched is stored from its old bytes: equal by construction.
    """

    def __init__(self, name: str):
        self.name = name

    def __get__(self, state: Any, owner: type | None = None) -> Any:
        if state is None:
            return self
        value = state.__dict__[self.name]
        if isinstance(value, Packed):
            value = state.__dict__[self.name] = value.unpack(value.blob)
        return value

    def __set__(self, state: Any, value: Any) -> None:
        state.__dict__[self.name] = value


# After the dataclass is made: its generated __init__ and __eq__ then go through the descriptor.
GroupState.assignment = _Unpacked("assignment")


def assignment_columns(state: GroupState) -> AssignmentColumns:
    """The state's current assignment as columns, read from its stored bytes while nobody has
    unpacked it (which leaves it packed: columns are read-only)."""
    stored = packed(state, "assignment")
    if stored is not None:
        return stored.columns(stored.blob)
    return AssignmentColumns.from_lists(state.assignment)


def packed(state: GroupState, name: str) -> Packed | None:
    """The field ``name`` of ``state`` as the codec stored it, if nobody has read it since."""
    value = state.__dict__.get(name)
    return value if isinstance(value, Packed) else None
