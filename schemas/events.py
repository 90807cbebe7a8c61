"""The events rebalance-monitor consumes: the one definition of their fields.

Spark types (:mod:`schemas.spark`), the JSON Schema files (:mod:`schemas.json_schema`), the job's
validation rules and docs/events.md are all generated from the definitions here, so they cannot
drift apart. Both topics carry JSON values keyed by group id, so one group's events stay in order.
"""

from __future__ import annotations

from dataclasses import dataclass

SCHEMA_VERSION = 1
GROUP_TYPES = ("consumer", "streams", "connect")
MEMBERSHIP_TYPES = ("join", "leave", "update", "workload")
PROTOCOLS = ("eager", "cooperative")
DEFAULT_SESSION_TIMEOUT_MS = 45_000

# Every assignor a group may name in its events. The consumer assignors are Kafka's client and
# KIP-848 names; Streams and Connect groups use theirs.
ASSIGNOR_NAMES = (
    "range", "roundrobin", "sticky", "cooperative-sticky", "uniform", "server-range",
    "streams-ha", "connect-eager", "connect-incremental",
)



# A tiny type language both generators (Spark, JSON Schema) understand without a JVM.
@dataclass(frozen=True)
class Array:
    element: "FieldType"


@dataclass(frozen=True)
class Struct:
    fields: tuple[tuple[str, "FieldType"], ...]


@dataclass(frozen=True)
class Map:
    value: "FieldType"  # keys are strings


FieldType = str | Array | Struct | Map  # str: "string", "int", "long", "double", "boolean"

TOPIC_PARTITION = Struct((("topic", "string"), ("partition", "int")))
WORKLOAD_TOPIC = Struct((("name", "string"), ("partitions", "int"), ("racks", Array(Array("string")))))


@dataclass(frozen=True)
class Field:
    name: str
    type: FieldType
    doc: str
    required: bool = False
    enum: tuple[str, ...] | None = None
    minimum: int | None = None
    non_empty: bool = False
    example: object = None


_COMMON = (
    Field("schema_version", "int", f"Event schema version; this is version {SCHEMA_VERSION}.",
          required=True, enum=None, minimum=SCHEMA_VERSION, example=1),
    Field("event_id", "string", "Unique id of the event; replays and duplicates are recognised by it.",
          required=True, non_empty=True, example="m-000042"),
    Field("event_time", "long", "When it happened, epoch milliseconds. Time in the job is event time.",
          required=True, minimum=0, example=1767225600000),
    Field("group_id", "string", "The group (also the Kafka record key).", required=True, non_empty=True,
          example="orders-service"),
)

MEMBERSHIP_FIELDS: tuple[Field, ...] = _COMMON + (
    Field("group_type", "string", "Kind of group.", enum=GROUP_TYPES, example="consumer"),
    Field("type", "string", "join, leave or update of a member; workload = the group's topics changed.",
          required=True, enum=MEMBERSHIP_TYPES, example="join"),
    Field("member_id", "string", "Member id given by the coordinator. Required for join, leave, update.",
          non_empty=True, example="consumer-1-7f3a"),
    Field("group_instance_id", "string", "Static membership id (KIP-345), if the member has one.",
          example="orders-0"),
    Field("client_id", "string", "The member's client.id.", example="consumer-1"),
    Field("host", "string", "The member's host as the coordinator sees it.", example="/10.0.0.7"),
    Field("rack", "string", "The member's client.rack (KIP-881).", example="use1-az1"),
    Field("topics", Array("string"), "Subscribed topics.", example=["orders"]),
    Field("owned_partitions", Array(TOPIC_PARTITION), "Partitions the member says it owns.",
          example=[{"topic": "orders", "partition": 0}]),
    Field("generation", "int", "Generation as seen by the member; -1 = unknown.", minimum=-1, example=4),
    Field("protocol", "string", "Rebalance protocol.", enum=PROTOCOLS, example="eager"),
    Field("assignor", "string", "Kafka name of the group's assignor.", enum=ASSIGNOR_NAMES, example="range"),
    Field("session_timeout_ms", "long",
          f"Session timeout; the member expires this long after its last heartbeat "
          f"(default {DEFAULT_SESSION_TIMEOUT_MS}).", minimum=1, example=45000),
    Field("reason", "string", "Why the member joined or left, as the client reports it.",
          example="rebalance after restart"),
    Field("target_partitions", Array(TOPIC_PARTITION),
          "KIP-848 groups, from the collector: the target assignment the coordinator is moving the "
          "member to.", example=None),
    Field("group_protocol", "string", "The group's rebalance protocol as the coordinator reports it: "
          "classic, or consumer (KIP-848).", enum=("classic", "consumer"), example="classic"),
    Field("group_state", "string", "The coordinator's group state when the collector polled it.",
          example="STABLE"),
    Field("partition_assignor", "string", "The assignor name exactly as the coordinator reports it "
          "(including custom ones), from the collector.", example="range"),
    Field("source", "string", "Who observed the event: collector (owned_partitions is the group's "
          "actual assignment), or a client or simulator.", example="collector"),
    Field("workload", Struct((("topics", Array(WORKLOAD_TOPIC)),)),
          "For type=workload: the group's topics with partition counts and, optionally, per partition "
          "the racks of its replicas.",
          example={"topics": [{"name": "orders", "partitions": 12, "racks": None}]}),
)

HEARTBEAT_FIELDS: tuple[Field, ...] = _COMMON + (
    Field("member_id", "string", "The member that is alive.", required=True, non_empty=True,
          example="consumer-1-7f3a"),
    Field("generation", "int", "Generation as seen by the member.", minimum=-1, example=4),
)

#: Member events must say which member; the workload event is about the group.
MEMBER_EVENT_TYPES = ("join", "leave", "update")


def example_event(fields: tuple[Field, ...]) -> dict:
    return {f.name: f.example for f in fields if f.example is not None}
