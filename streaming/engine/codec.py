"""A group's state as bytes for Spark's state store, and back.

JSON rather than pickle: the state outlives the code that wrote it, and a versioned,
explicit format can be read by the next release of the job. Waiting membership events are stored
as the JSON they arrived as (:meth:`MembershipEvent.to_json`), the Streams or Connect workload and
the Connect leader's assignor state as plain JSON objects.

Since format 6 a blob has two sections, because a huge group's current assignment (500,000
partitions) dwarfs the rest and changes only at a generation, while the rest changes with every
heartbeat: the JSON of everything else, and the assignment packed as columns (topic numbers and
partition numbers, little-endian int32, each member's run in its list order). A state keeps the
assignment packed until something reads it (:class:`~streaming.engine.state.Packed`), after
decoding and after encoding alike, and an assignment nobody read is stored again from its old
bytes. Members' subscriptions are stored once per distinct list: 10,000 members subscribing to the
same 100 topics are one list, not a million names. Format 5 blobs (one zlib-compressed JSON
document) are still read.

Since format 7 the JSON section is not compressed here: the state bucket compresses all its groups
at once (:mod:`streaming.job.state_bucket`), one zstd call per bucket where zlib per group cost
31 us of a 10-member group's 52 us encoding, and the groups of a bucket, alike, compress better
together. Format 6 blobs (a zlib-compressed JSON section) are still read.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections import deque
from functools import partial
from typing import Mapping

import numpy as np
import orjson

from assignors import TopicPartition, TopicSpec
from assignors.columns import AssignmentColumns
from assignors.connect.model import ConnectAssignorState, ConnectorTaskId
from assignors.model import topic_id_from_string, topic_id_string
from assignors.timeline_order import MemberTable

from streaming.alerting.evaluator import AlertState
from streaming.engine.coordinator_events import ConsumerGroupRecord, CoordinatorGeneration
from streaming.engine.events import MembershipEvent, TaskWorkload
from streaming.engine.state import SEEN_EVENT_IDS, GroupState, Member, Packed, PendingRebalance, packed

#: 7: the JSON section uncompressed (the state bucket compresses).
#: 6: two sections (the assignment packed apart, see above) and subscriptions stored once each.
#: 5: groups recorded from the coordinator's log (backlog, offset, phase); 4 is read as 5 without them.
#: 4: Streams/Connect groups (member task metadata, task workload and assignment, lags, Connect
#: leader state, scheduled rebalance) and their alert state; 3 had no alert state.
FORMAT_VERSION = 7
_READABLE_VERSIONS = (4, 5, 6, 7)
#: A format 7 or 6 blob starts with these bytes (a format 5 blob is a zlib stream: it starts with 0x78).
_MAGIC = b"\x00RM\x07"
_MAGIC_6 = b"\x00RM\x06"
_LENGTH = struct.Struct(">I")
_INT32 = np.iinfo(np.int32)
_LEADER_SETS = ("previous_connectors", "previous_revoked_connectors", "previous_members")
_LEADER_TASK_SETS = ("previous_tasks", "previous_revoked_tasks")


def _dumps(data) -> bytes:
    """JSON with orjson, which encodes a group's state in an eighth of ``json.dumps``'s time (8 us
    against 67 us for a 10-member group; the job encodes every group it touches in every batch).

    Integer keys become strings, as ``json.dumps`` makes them. What orjson cannot encode (an integer
    beyond 64 bits, a string with a lone surrogate) goes to ``json.dumps``, marked so that
    :func:`_loads` reads it back with ``json.loads``: orjson would read such an integer as a float.
    The state holds no NaN or infinity (orjson would write null): its only floats are the alerts'
    measured values and thresholds, and the config refuses thresholds that are not finite."""
    try:
        return orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATACLASS)
    except orjson.JSONEncodeError:
        return _STDLIB_MARK + json.dumps(data, separators=(",", ":")).encode()


#: Prefix of JSON that :func:`_dumps` left to the standard library (not a JSON value's first byte).
_STDLIB_MARK = b"~"


def _loads(raw: bytes):
    """What :func:`_dumps` wrote; also reads the ``json.dumps`` output of states stored before it."""
    if raw[:1] == _STDLIB_MARK:
        return json.loads(raw[1:])
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:  # the standard library's NaN or Infinity: never written, read all the same
        return json.loads(raw)


def _encode_assignment(assignment: dict[str, list[TopicPartition]]) -> dict:
    out: dict[str, dict[str, list[int]]] = {}
    for member_id, tps in assignment.items():
        by_topic: dict[str, list[int]] = {}
        for topic, partition in tps:
            by_topic.setdefault(topic, []).append(partition)
        out[member_id] = by_topic
    return out


def _decode_assignment(data: dict) -> dict[str, list[TopicPartition]]:
    return {member_id: [TopicPartition(t, p) for t, ps in by_topic.items() for p in ps]
            for member_id, by_topic in data.items()}


def pack_assignment(assignment: dict[str, list[TopicPartition]]) -> bytes:
    """``assignment`` as :func:`pack_columns` stores it."""
    return pack_columns(AssignmentColumns.from_lists(assignment))


def pack_columns(columns: AssignmentColumns) -> bytes:
    """A member -> partitions map as stored: a JSON header (members, their partition counts, topic
    names), then every partition's topic number and partition number as little-endian int32
    arrays; zlib over it all."""
    for name, values in (("topic", columns.topic), ("partition", columns.partition)):
        if len(values) and not (_INT32.min <= values.min() and values.max() <= _INT32.max):
            raise ValueError(f"an assignment's {name} number does not fit in 32 bits: {values.min()}..{values.max()}")
    header = _dumps([columns.members, columns.counts.tolist(), columns.topics])
    return zlib.compress(_LENGTH.pack(len(header)) + header + columns.topic.astype("<i4").tobytes()
                         + columns.partition.astype("<i4").tobytes(), 1)


def unpack_columns(blob: bytes) -> AssignmentColumns:
    """The map :func:`pack_columns` stored, as columns."""
    raw = zlib.decompress(blob)
    (length,) = _LENGTH.unpack_from(raw)
    members, counts, names = _loads(raw[_LENGTH.size:_LENGTH.size + length])
    start, total = _LENGTH.size + length, sum(counts)
    return AssignmentColumns(
        members, np.array(counts, dtype=np.int64), names,
        np.frombuffer(raw, dtype="<i4", count=total, offset=start).astype(np.int64),
        np.frombuffer(raw, dtype="<i4", count=total, offset=start + 4 * total).astype(np.int64))


def unpack_assignment(blob: bytes, topics: Mapping[str, TopicSpec] | None = None) -> dict[str, list[TopicPartition]]:
    """The assignment :func:`pack_assignment` packed, as lists (:meth:`AssignmentColumns.to_lists`:
    with the group's ``topics``, its partitions are the topic specs' own objects)."""
    return unpack_columns(blob).to_lists(topics)


def packed_assignment(columns: AssignmentColumns, topics: Mapping[str, TopicSpec]) -> Packed:
    """``columns`` as a state's packed assignment field: stored as it is, unpacked on first use."""
    return Packed(pack_columns(columns), partial(unpack_assignment, topics=topics), lambda _blob: columns)


def _encode_pending(pending: PendingRebalance | None) -> list | None:
    if pending is None:
        return None
    return [pending.start, pending.deadline, pending.trigger, pending.trigger_member,
            _encode_assignment(pending.owned_snapshot) if pending.owned_snapshot is not None else None]


def _decode_pending(data: list | None) -> PendingRebalance | None:
    if not data:
        return None
    start, deadline, trigger, trigger_member, snapshot = data
    return PendingRebalance(start, deadline, trigger, trigger_member,
                            _decode_assignment(snapshot) if snapshot is not None else None)


def _encode_leader_state(state: ConnectAssignorState | None) -> dict | None:
    """The Connect leader's memory; sets sorted so that equal states encode to equal bytes."""
    if state is None:
        return None
    out = {}
    for name in ConnectAssignorState.__dataclass_fields__:
        value = getattr(state, name)
        if name in _LEADER_SETS:
            value = sorted(value)
        elif name in _LEADER_TASK_SETS:
            value = sorted([t.connector, t.task] for t in value)
        elif name == "candidate_workers":
            value = list(value)
        out[name] = value
    return out


def _decode_leader_state(data: dict | None) -> ConnectAssignorState | None:
    if data is None:
        return None
    values = dict(data)
    for name in _LEADER_SETS:
        values[name] = frozenset(values[name])
    for name in _LEADER_TASK_SETS:
        values[name] = frozenset(ConnectorTaskId(c, int(t)) for c, t in values[name])
    values["candidate_workers"] = tuple(values["candidate_workers"])
    return ConnectAssignorState(**values)


def _decode_topic(name: str, partitions: int, racks: list | None, topic_id: str | None = None) -> TopicSpec:
    """A topic as stored; states stored before topic ids were kept have three fields."""
    return TopicSpec(name, partitions, tuple(frozenset(r) for r in racks) if racks is not None else None,
                     topic_id=topic_id_from_string(topic_id) if topic_id is not None else None)


def encode_state(state: GroupState) -> bytes:
    subscriptions: dict[tuple[str, ...], int] = {}
    data = {
        "v": FORMAT_VERSION,
        "group_id": state.group_id,
        "group_type": state.group_type,
        "assignor": state.assignor,
        "protocol": state.protocol,
        "topics": [[t.name, t.partitions, [sorted(r) for r in t.replica_racks] if t.replica_racks is not None else None,
                    topic_id_string(t.topic_id) if t.topic_id is not None else None]
                   for t in state.topics.values()],
        "members": [[m.member_id, subscriptions.setdefault(m.topics, len(subscriptions)), m.joined_at, m.last_seen,
                     m.session_timeout_ms, m.group_instance_id, m.client_id, m.host, m.rack,
                     [[tp.topic, tp.partition] for tp in m.reported_owned], m.reported_generation, m.expires,
                     m.task_metadata]
                    for m in state.members.values()],
        "generation": state.generation,
        "pending": _encode_pending(state.pending),
        "frontier": state.frontier,
        "clock": state.clock,
        "buffered_events": [e.to_json() for e in state.buffered_events],
        "buffered_heartbeats": state.buffered_heartbeats,
        "recent_rebalances": state.recent_rebalances,
        "seen_event_ids": list(state.seen_event_ids),
        "failed_rebalances": state.failed_rebalances,
        "collector_fed": state.collector_fed,
        "observed": _encode_assignment(state.observed),
        "observed_group_state": state.observed_group_state,
        "observed_assignor": state.observed_assignor,
        "check_due_at": state.check_due_at,
        "last_check": state.last_check,
        "alerts": state.alerts.to_json(),
        "task_workload": state.task_workload.to_json() if state.task_workload is not None else None,
        "task_assignment": state.task_assignment,
        "task_lags": state.task_lags,
        "buffered_progress": state.buffered_progress,
        "connect_leader": state.connect_leader,
        "connect_leader_state": _encode_leader_state(state.connect_leader_state),
        "scheduled": _encode_pending(state.scheduled),
        "coordinator_backlog": [g.to_json() for g in state.coordinator_backlog],
        "kip848": state.kip848,
        "coordinator_offset": state.coordinator_offset,
        "coordinator_phase": state.coordinator_phase,
        "member_table": state.member_table.to_json() if state.member_table is not None else None,
        "member_order": list(state.member_order),
    }
    data["subscriptions"] = [list(topics) for topics in subscriptions]
    kept = packed(state, "assignment")
    if kept is None:
        kept = Packed(pack_assignment(state.assignment), partial(unpack_assignment, topics=state.topics),
                      unpack_columns)
        # From here on the state holds its assignment packed, equal to what it held: the job keeps
        # a worker's state objects between batches (state_bucket.RecentStates), and a batch that
        # does not read the assignment then stores these bytes again instead of packing it anew.
        state.assignment = kept
    core = _dumps(data)
    return _MAGIC + _LENGTH.pack(len(core)) + core + kept.blob


def decode_state(blob: bytes) -> GroupState:
    if blob.startswith((_MAGIC, _MAGIC_6)):
        start = len(_MAGIC) + _LENGTH.size
        (length,) = _LENGTH.unpack_from(blob, len(_MAGIC))
        core = blob[start:start + length]
        data = _loads(core if blob.startswith(_MAGIC) else zlib.decompress(core))
        subscriptions = [tuple(topics) for topics in data["subscriptions"]]
        packed_section = blob[start + length:]
    else:  # format 4 or 5: one JSON document, subscriptions and assignment inline
        data = _loads(zlib.decompress(blob))
        subscriptions = None
        packed_section = None
    if data.get("v") not in _READABLE_VERSIONS:
        raise ValueError(f"group state format {data.get('v')!r} is not {FORMAT_VERSION}: "
                         f"this job cannot read a checkpoint written by another version")
    topic_specs = {t[0]: _decode_topic(*t) for t in data["topics"]}
    if packed_section is None:
        assignment = _decode_assignment(data.get("assignment", {}))
    else:
        # The topics as decoded: an event that replaces them before the assignment is read makes
        # its partitions built rather than looked up, equal all the same.
        assignment = Packed(packed_section, partial(unpack_assignment, topics=topic_specs), unpack_columns)
    members = {}
    for (mid, topics, joined, last_seen, st, gid, client_id, host, rack, owned, gen, expires,
         task_metadata) in data["members"]:
        topics = subscriptions[topics] if subscriptions is not None else tuple(topics)
        members[mid] = Member(mid, topics, joined, last_seen, st, gid, client_id, host, rack,
                              tuple(TopicPartition(t, p) for t, p in owned), gen, expires, task_metadata)
    return GroupState(
        group_id=data["group_id"],
        group_type=data["group_type"],
        assignor=data["assignor"],
        protocol=data["protocol"],
        topics=topic_specs,
        members=members,
        generation=data["generation"],
        assignment=assignment,
        pending=_decode_pending(data["pending"]),
        frontier=data["frontier"],
        clock=data["clock"],
        buffered_events=[MembershipEvent.from_json(e) for e in data["buffered_events"]],
        buffered_heartbeats=[tuple(x) for x in data["buffered_heartbeats"]],
        recent_rebalances=data["recent_rebalances"],
        seen_event_ids=deque(data["seen_event_ids"], maxlen=SEEN_EVENT_IDS),
        failed_rebalances=data["failed_rebalances"],
        collector_fed=data["collector_fed"],
        observed=_decode_assignment(data["observed"]),
        observed_group_state=data["observed_group_state"],
        observed_assignor=data["observed_assignor"],
        check_due_at=data["check_due_at"],
        last_check=data["last_check"],
        alerts=AlertState.from_json(data["alerts"]),
        task_workload=TaskWorkload.from_json(data["task_workload"]) if data["task_workload"] is not None else None,
        task_assignment=data["task_assignment"],
        task_lags=data["task_lags"],
        buffered_progress=data["buffered_progress"],
        connect_leader=data["connect_leader"],
        connect_leader_state=_decode_leader_state(data["connect_leader_state"]),
        scheduled=_decode_pending(data["scheduled"]),
        coordinator_backlog=[(ConsumerGroupRecord if "record_type" in g else CoordinatorGeneration).from_json(g)
                             for g in data.get("coordinator_backlog", ())],
        kip848=data.get("kip848", {}),
        coordinator_offset=data.get("coordinator_offset", -1),
        coordinator_phase=data.get("coordinator_phase"),
        member_table=MemberTable.from_json(data["member_table"]) if data.get("member_table") else None,
        member_order=tuple(data.get("member_order", ())),
    )
