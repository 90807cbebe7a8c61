"""The engine's input from the group coordinator's log (``__consumer_offsets``): typed records.

The job decodes the log (:mod:`streaming.coordinator_log`) and hands the engine these values, one per
record that matters, each with its place in the log (``partition``, ``offset``) and its Kafka
timestamp as its event time. ``to_json``/``from_json`` are the job's and the state codec's form.

* :class:`CoordinatorGeneration`: a classic group's generation (a ``GroupMetadata`` record): a
  consumer group's, or a Kafka Connect cluster's (its workers' :class:`ConnectWorker`).
* :class:`ConsumerGroupRecord`: one record of a KIP-848 consumer group (types 3, 5, 6, 7), which the
  engine folds into one generation per target-assignment epoch (:mod:`.kip848`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping

from assignors import TopicPartition

from streaming.errors import InvalidEventError


#: The group state a generation's record is written in: the leader's SyncGroup has been accepted.
RECORDED_STATE = "STABLE"


def _tps(pairs) -> tuple[TopicPartition, ...]:
    return tuple(TopicPartition(str(t), int(p)) for t, p in pairs or ())


@dataclass(frozen=True, slots=True)
class ConnectWork:
    """Connectors and tasks (``(connector, task number)``) as a Connect worker's bytes list them, in
    their order (the incremental assignor revokes the first excess items of a worker's list)."""

    connectors: tuple[str, ...] = ()
    tasks: tuple[tuple[str, int], ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"connectors": list(self.connectors), "tasks": [[c, i] for c, i in self.tasks]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> "ConnectWork | None":
        if data is None:
            return None
        return cls(tuple(str(c) for c in data.get("connectors") or ()),
                   tuple((str(c), int(i)) for c, i in data.get("tasks") or ()))


@dataclass(frozen=True, slots=True)
class ConnectWorker:
    """A Kafka Connect worker's join metadata and the assignment its leader sent it.

    ``held``: the incremental protocols' previous allocation (what the worker runs as it joins;
    None for a new worker and for the eager protocol, whose workers give everything up first).
    ``assigned``: the assignment's connectors and tasks (eager: everything the worker runs now;
    incremental: what it is given on top of ``held``); None until the leader's assignment exists.
    ``revoked`` and ``delay_ms`` are the incremental assignment's; ``error`` is Connect's
    (1 = CONFIG_MISMATCH) and ``leader_config_offset`` the config offset the leader assigned at.
    """

    url: str
    config_offset: int
    held: ConnectWork | None = None
    assigned: ConnectWork | None = None
    revoked: ConnectWork = ConnectWork()
    delay_ms: int = 0
    error: int = 0
    leader_config_offset: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"url": self.url, "config_offset": self.config_offset}
        for name in ("held", "assigned"):
            if (work := getattr(self, name)) is not None:
                out[name] = work.to_json()
        if self.revoked != ConnectWork():
            out["revoked"] = self.revoked.to_json()
        out.update(delay_ms=self.delay_ms, error=self.error, leader_config_offset=self.leader_config_offset)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "ConnectWorker":
        return cls(url=str(data["url"]), config_offset=int(data["config_offset"]),
                   held=ConnectWork.from_json(data.get("held")), assigned=ConnectWork.from_json(data.get("assigned")),
                   revoked=ConnectWork.from_json(data.get("revoked")) or ConnectWork(),
                   delay_ms=int(data.get("delay_ms") or 0), error=int(data.get("error") or 0),
                   leader_config_offset=data.get("leader_config_offset"))


@dataclass(frozen=True, slots=True)
class CoordinatorMember:
    """A member as the coordinator stored it: its subscription and its assignment (None: not sent yet)."""

    member_id: str
    topics: tuple[str, ...]
    owned_partitions: tuple[TopicPartition, ...] = ()
    member_generation: int = -1
    assignment: tuple[TopicPartition, ...] | None = None
    group_instance_id: str | None = None
    client_id: str | None = None
    host: str | None = None
    rack: str | None = None
    session_timeout_ms: int | None = None
    #: A Kafka Connect worker's metadata and assignment (protocol type ``connect``); None otherwise.
    connect: ConnectWorker | None = None


@dataclass(frozen=True, slots=True)
class CoordinatorGeneration:
    """A classic group's generation as its coordinator recorded it (a ``GroupMetadata`` record), in
    the log's order (``partition``, ``offset``), at ``event_time`` (the record's Kafka timestamp)."""

    group_id: str
    event_time: int
    partition: int
    offset: int
    generation: int
    protocol_type: str
    protocol: str | None  # the assignor the group chose; None for an Empty group
    leader: str | None
    members: tuple[CoordinatorMember, ...]

    @property
    def event_id(self) -> str:
        return f"__consumer_offsets-{self.partition}@{self.offset}"

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "members"}
        out["members"] = [{f.name: _member_field_json(f.name, v)
                           for f in fields(CoordinatorMember) if (v := getattr(m, f.name)) is not None}
                          for m in self.members]
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "CoordinatorGeneration":
        """The job's form (:meth:`to_json`); InvalidEventError names what is missing."""
        try:
            members = tuple(CoordinatorMember(**{**m, "topics": tuple(m.get("topics") or ()),
                                                 "owned_partitions": _tps(m.get("owned_partitions")),
                                                 "assignment": _tps(m["assignment"]) if m.get("assignment") is not None
                                                 else None,
                                                 "connect": ConnectWorker.from_json(m["connect"])
                                                 if m.get("connect") is not None else None})
                            for m in data.get("members") or ())
            return cls(**{**data, "members": members})
        except (TypeError, KeyError, ValueError) as exc:
            raise InvalidEventError(f"a coordinator generation that does not read back: {exc}") from None


def _member_field_json(name: str, value: Any) -> Any:
    if name in ("owned_partitions", "assignment"):
        return [[tp.topic, tp.partition] for tp in value]
    if name == "topics":
        return list(value)
    return value.to_json() if name == "connect" else value


@dataclass(frozen=True, slots=True)
class ConsumerGroupRecord:
    """One record of a KIP-848 consumer group, the fields the engine folds (None: not this type's)."""

    group_id: str
    event_time: int
    partition: int
    offset: int
    #: 3 group epoch, 5 member metadata, 6 target assignment epoch, 7 a member's target.
    record_type: int
    member_id: str | None = None
    #: A tombstone (the member left: its metadata and target are gone).
    tombstone: bool = False
    epoch: int | None = None  # 3: the group epoch; 6: the target assignment epoch
    topics: tuple[str, ...] | None = None  # 5: subscribed topic names
    server_assignor: str | None = None
    group_instance_id: str | None = None
    client_id: str | None = None
    host: str | None = None
    rack: str | None = None
    #: 7: the member's target, topic id (Kafka's spelling) -> partitions.
    target: Mapping[str, tuple[int, ...]] | None = None

    @property
    def event_id(self) -> str:
        return f"__consumer_offsets-{self.partition}@{self.offset}"

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}
        if self.topics is not None:
            out["topics"] = list(self.topics)
        if self.target is not None:
            out["target"] = {k: list(v) for k, v in self.target.items()}
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "ConsumerGroupRecord":
        try:
            values = dict(data)
            if values.get("topics") is not None:
                values["topics"] = tuple(values["topics"])
            if values.get("target") is not None:
                values["target"] = {str(k): tuple(int(p) for p in v) for k, v in values["target"].items()}
            return cls(**values)
        except (TypeError, ValueError) as exc:
            raise InvalidEventError(f"a KIP-848 coordinator record that does not read back: {exc}") from None
