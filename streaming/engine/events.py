"""The engine's input: typed, validated membership events and lag reports.

The job parses and validates the Kafka records in Spark (:mod:`streaming.job.parse`); the engine
takes the result as :class:`MembershipEvent` values, built by :meth:`MembershipEvent.from_json`,
which checks every field against the same definitions (``schemas/events.py``) and refuses a bad one
with :class:`InvalidEventError` naming the field. Heartbeats, the bulk of the traffic, never become
objects: they reach the engine as two arrays (member ids, event times).

``to_json`` gives the event back as plain JSON data: the engine's state codec stores the events
that wait for their time that way, and ``from_json(e.to_json()) == e``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Mapping, NamedTuple

from assignors import TopicPartition, TopicSpec
from assignors.model import topic_id_from_string
from assignors.streams import StreamsAssignmentConfig
from schemas.events import (
    MEMBER_EVENT_TYPES,
    MEMBERSHIP_FIELDS,
    STREAMS_CONFIG,
    Array,
    Field,
    Map,
    Struct,
)

from streaming.errors import InvalidEventError

# What the group coordinator wrote (the coordinator's log source): typed inputs of their own module.
from streaming.engine.coordinator_events import (  # noqa: F401
    ConsumerGroupRecord, CoordinatorGeneration, CoordinatorMember,
)

COLLECTOR = "collector"

_FIELDS: dict[str, Field] = {f.name: f for f in MEMBERSHIP_FIELDS}
#: The engine knows its group and reads every version it is given; the job checks both before.
_REQUIRED = ("event_id", "event_time", "type")
_STREAMS_CONFIG_KEYS = tuple(name for name, _ in STREAMS_CONFIG.fields)
#: Streams and Connect member fields the engine keeps per member (Member.task_metadata).
_TASK_MEMBER_FIELDS = ("process_id", "threads", "task_offset_sums", "client_tags", "worker_url", "config_offset")


def as_map(value: Any) -> dict:
    """A map field as a dict, whether it arrives as a JSON object or as Arrow's list of pairs."""
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    return {k: v for k, v in value}


# -- checking a value against the event contract's type language ---------------------------------


#: The contract's ``int`` is 32 bits, as in Arrow and Spark, where the job parses it; the engine
#: stores partition numbers as 32-bit columns (:mod:`.codec`).
_INT_RANGE = range(-2**31, 2**31)

_SCALARS = {"string": lambda v: isinstance(v, str),
            "int": lambda v: isinstance(v, int) and not isinstance(v, bool) and v in _INT_RANGE,
            "long": lambda v: isinstance(v, int) and not isinstance(v, bool),
            "double": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
            "boolean": lambda v: isinstance(v, bool)}

#: The exact types an array of each scalar type holds when it comes from JSON (None: a null); an
#: array of ``int`` is checked element by element, for their range.
_PLAIN_TYPES = {"string": {str, type(None)}, "int": set(), "long": {int, type(None)},
                "double": {int, float, type(None)}, "boolean": {bool, type(None)}}


def _check(path: str, value: Any, t) -> Any:
    """``value`` if it is of type ``t`` (maps become dicts); else InvalidEventError naming ``path``."""
    if value is None:
        return None
    if isinstance(t, str):
        if not _SCALARS[t](value):
            raise InvalidEventError(f"field {path}: expected {t}, got {value!r:.80}")
        return value
    if isinstance(t, Array):
        if not isinstance(value, (list, tuple)):
            raise InvalidEventError(f"field {path}: expected an array, got {value!r:.80}")
        if isinstance(t.element, str) and set(map(type, value)) <= _PLAIN_TYPES[t.element]:
            # An array of plain scalars in one pass (a join listing 100 topics was 100 calls);
            # anything else takes the path below, which names a bad element.
            return list(value)
        return [_check(f"{path}[{i}]", v, t.element) for i, v in enumerate(value)]
    if isinstance(t, Map):
        try:
            entries = as_map(value)
        except (TypeError, ValueError):
            raise InvalidEventError(f"field {path}: expected an object, got {value!r:.80}") from None
        return {str(k): _check(f"{path}.{k}", v, t.value) for k, v in entries.items()}
    if isinstance(t, Struct):
        if not isinstance(value, Mapping):
            raise InvalidEventError(f"field {path}: expected an object, got {value!r:.80}")
        known = dict(t.fields)
        unknown = sorted(set(value) - set(known))
        if unknown:
            raise InvalidEventError(f"field {path}: unknown key {unknown[0]!r}; known: {', '.join(known)}")
        return {name: _check(f"{path}.{name}", value.get(name), ft) for name, ft in t.fields}
    raise TypeError(f"unknown field type {t!r}")


def _check_field(f: Field, value: Any) -> Any:
    value = _check(f.name, value, f.type)
    if value is None:
        return None
    if f.non_empty and isinstance(value, str) and not value.strip():
        raise InvalidEventError(f"field {f.name} must not be empty")
    if f.enum and value not in f.enum:
        raise InvalidEventError(f"field {f.name}: unknown value {value!r} (expected one of {', '.join(f.enum)})")
    if f.minimum is not None and value < f.minimum:
        raise InvalidEventError(f"field {f.name}: {value} is below the minimum {f.minimum}")
    return value


def _partitions(values: list | None, name: str) -> tuple[TopicPartition, ...] | None:
    if values is None:
        return None
    out = []
    for i, p in enumerate(values):
        if p["topic"] is None or p["partition"] is None:
            raise InvalidEventError(f"field {name}[{i}]: every entry needs a topic and a partition")
        if p["partition"] < 0:
            raise InvalidEventError(f"field {name}[{i}]: a partition number is negative")
        out.append(TopicPartition(p["topic"], int(p["partition"])))
    return tuple(out)


def _partitions_json(tps: tuple[TopicPartition, ...]) -> list[dict]:
    return [{"topic": tp.topic, "partition": tp.partition} for tp in tps]


# -- the workload ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TaskWorkload:
    """What a Kafka Streams application or a Kafka Connect cluster runs (a workload event's part)."""

    #: Kafka Streams: task ids with and without state (None: the event gave no tasks).
    stateful: tuple[str, ...] | None = None
    stateless: tuple[str, ...] = ()
    task_end_offset_sums: Mapping[str, int] | None = None
    #: Kafka Streams: the assignment configs the event gave (Kafka's defaults for the others).
    config: StreamsAssignmentConfig = StreamsAssignmentConfig()
    #: Kafka Connect: connector -> number of tasks (None: the event gave no connectors).
    connectors: Mapping[str, int] | None = None
    config_offset: int | None = None
    scheduled_rebalance_max_delay_ms: int | None = None

    def to_json(self) -> dict:
        out: dict[str, Any] = {}
        if self.stateful is not None:
            defaults = StreamsAssignmentConfig()
            out.update(stateful=list(self.stateful), stateless=list(self.stateless),
                       task_end_offset_sums=dict(self.task_end_offset_sums)
                       if self.task_end_offset_sums is not None else None,
                       config={k: (list(v) if isinstance(v, tuple) else v) for k in _STREAMS_CONFIG_KEYS
                               if (v := getattr(self.config, k)) != getattr(defaults, k)})
        if self.connectors is not None:
            out["connectors"] = dict(self.connectors)
            if self.config_offset is not None:
                out["config_offset"] = self.config_offset
            if self.scheduled_rebalance_max_delay_ms is not None:
                out["scheduled_rebalance_max_delay_ms"] = self.scheduled_rebalance_max_delay_ms
        return out

    @classmethod
    def from_json(cls, data: Mapping) -> "TaskWorkload":
        """The state codec's form (:meth:`to_json`)."""
        config = dict(data.get("config") or {})
        if "rack_aware_assignment_tags" in config:
            config["rack_aware_assignment_tags"] = tuple(config["rack_aware_assignment_tags"])
        end_sums = data.get("task_end_offset_sums")
        return cls(
            stateful=tuple(data["stateful"]) if data.get("stateful") is not None else None,
            stateless=tuple(data.get("stateless") or ()),
            task_end_offset_sums=dict(end_sums) if end_sums is not None else None,
            config=StreamsAssignmentConfig(**config),
            connectors=dict(data["connectors"]) if data.get("connectors") is not None else None,
            config_offset=data.get("config_offset"),
            scheduled_rebalance_max_delay_ms=data.get("scheduled_rebalance_max_delay_ms"))


@dataclass(frozen=True, slots=True)
class Workload:
    """A workload event's content: the consumer group's topics, or a Streams/Connect workload."""

    topics: tuple[TopicSpec, ...] = ()
    tasks: TaskWorkload | None = None
    #: The event as it came (checked), for the state codec.
    source: Mapping[str, Any] | None = None

    @classmethod
    def from_checked(cls, w: Mapping[str, Any]) -> "Workload":
        topics = []
        for i, t in enumerate(w.get("topics") or ()):
            if t["name"] is None or not t["name"].strip():
                raise InvalidEventError(f"field workload.topics[{i}]: a topic has no name")
            if t["partitions"] is None or t["partitions"] < 0:
                raise InvalidEventError(f"field workload.topics[{i}]: a partition count is missing or negative")
            racks = t.get("racks")
            if racks is not None and len(racks) != t["partitions"]:
                raise InvalidEventError(f"field workload.topics[{i}]: racks must list one entry per partition")
            topic_id = None
            if t.get("topic_id") is not None:
                try:
                    topic_id = topic_id_from_string(t["topic_id"])
                except ValueError as exc:
                    raise InvalidEventError(f"field workload.topics[{i}].topic_id: {exc}") from None
            topics.append(TopicSpec(name=t["name"], partitions=int(t["partitions"]),
                                    replica_racks=tuple(frozenset(r or ()) for r in racks)
                                    if racks is not None else None, topic_id=topic_id))
        tasks = w.get("tasks")
        connectors = w.get("connectors")
        task_workload = None
        if tasks is not None or connectors is not None:
            config = {k: (tuple(v) if k == "rack_aware_assignment_tags" else v)
                      for k, v in (w.get("config") or {}).items() if v is not None}
            for c in connectors or ():
                if c["name"] is None or not c["name"].strip():
                    raise InvalidEventError("field workload.connectors: a connector has no name")
                if c["tasks"] is None or c["tasks"] < 0:
                    raise InvalidEventError("field workload.connectors: a task count is missing or negative")
            task_workload = TaskWorkload(
                stateful=tuple((tasks or {}).get("stateful") or ()) if tasks is not None else None,
                stateless=tuple((tasks or {}).get("stateless") or ()),
                task_end_offset_sums=w.get("task_end_offset_sums"),
                config=StreamsAssignmentConfig(**config),
                connectors={c["name"]: int(c["tasks"]) for c in connectors} if connectors is not None else None,
                config_offset=w.get("config_offset"),
                scheduled_rebalance_max_delay_ms=w.get("scheduled_rebalance_max_delay_ms"))
        return cls(topics=tuple(topics), tasks=task_workload, source=w)


# -- membership events -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MembershipEvent:
    """One membership event of a group (see docs/events.md for every field's meaning)."""

    event_id: str
    event_time: int
    type: str
    member_id: str | None = None
    group_id: str | None = None
    schema_version: int | None = None
    group_type: str | None = None
    group_instance_id: str | None = None
    client_id: str | None = None
    host: str | None = None
    rack: str | None = None
    #: None: not given (an update keeps the member's topics).
    topics: tuple[str, ...] | None = None
    owned_partitions: tuple[TopicPartition, ...] | None = None
    generation: int | None = None
    protocol: str | None = None
    assignor: str | None = None
    session_timeout_ms: int | None = None
    reason: str | None = None
    target_partitions: tuple[TopicPartition, ...] | None = None
    group_protocol: str | None = None
    group_state: str | None = None
    partition_assignor: str | None = None
    source: str | None = None
    workload: Workload | None = None
    process_id: str | None = None
    threads: int | None = None
    task_offset_sums: Mapping[str, int] | None = None
    client_tags: Mapping[str, str] | None = None
    worker_url: str | None = None
    config_offset: int | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "MembershipEvent":
        """Check ``data`` (a decoded membership event) and type it; InvalidEventError names the field."""
        unknown = sorted(k for k in data if k not in _FIELDS)
        if unknown:
            raise InvalidEventError(f"unknown field {unknown[0]!r} in a membership event")
        # Most of the ~30 fields are absent from any one event: those need no check.
        values = {name: None if (value := data.get(name)) is None else _check_field(f, value)
                  for name, f in _FIELDS.items()}
        for name in _REQUIRED:
            if values[name] is None:
                raise InvalidEventError(f"missing required field {name}")
        kind = values["type"]
        if kind in MEMBER_EVENT_TYPES and values["member_id"] is None:
            raise InvalidEventError(f"missing required field member_id for a {kind} event")
        if kind == "workload" and values["workload"] is None:
            raise InvalidEventError("missing required field workload for a workload event")
        topics = values["topics"]
        if topics is not None and "" in map(str.strip, topics):
            raise InvalidEventError("field topics: a topic name is empty")
        values.update(
            topics=tuple(topics) if topics is not None else None,
            owned_partitions=_partitions(values["owned_partitions"], "owned_partitions"),
            target_partitions=_partitions(values["target_partitions"], "target_partitions"),
            workload=Workload.from_checked(values["workload"]) if values["workload"] is not None else None,
        )
        return cls(**values)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON data (None fields left out) that :meth:`from_json` turns back into this event."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            if f.name in ("owned_partitions", "target_partitions"):
                value = _partitions_json(value)
            elif f.name == "topics":
                value = list(value)
            elif f.name == "workload":
                value = _workload_json(value)
            elif isinstance(value, Mapping):
                value = dict(value)
            out[f.name] = value
        return out

    # -- derived ---------------------------------------------------------------------------------

    @property
    def held_partitions(self) -> tuple[TopicPartition, ...] | None:
        """What the member holds as the assignor sees it: for a KIP-848 member seen by the collector
        its target assignment, listed as the coordinator lists it (the server-side assignor starts
        from the target and walks it in that order: assignors/server_group.py); else its owned
        partitions. None: the event says neither."""
        return self.target_partitions if self.target_partitions is not None else self.owned_partitions

    @property
    def from_collector(self) -> bool:
        """Observed in a live cluster by the collector: ``owned_partitions`` is the actual assignment."""
        return self.source == COLLECTOR

    def as_join(self) -> "MembershipEvent":
        """This event as a join (an update of a member the group does not know)."""
        return replace(self, type="join")

    def task_metadata(self) -> dict:
        """The Streams/Connect member fields this event gives (absent ones are left out)."""
        out = {}
        for name in _TASK_MEMBER_FIELDS:
            value = getattr(self, name)
            if value is not None:
                out[name] = dict(value) if isinstance(value, Mapping) else value
        return out


def _workload_json(w: Workload) -> dict:
    """The workload as the event carried it (the state codec stores waiting events this way)."""
    return {k: v for k, v in dict(w.source or {}).items() if v is not None}


class LagReport(NamedTuple):
    """A Kafka Streams member's task lags as of one of its heartbeats (heartbeats' ``task_lags``)."""

    member_id: str
    event_time: int
    lags: Mapping[str, int]

