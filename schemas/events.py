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


def translate_type(t: FieldType, atoms: dict, array, map_, struct):
    """``t`` in another type system, built bottom-up: ``atoms[name]`` for an atom,
    ``array(element)``, ``map_(value)`` (keys are strings) and ``struct([(name, type), ...])`` with
    the parts already translated. The Spark, Arrow and JSON Schema generators are each one call."""
    def go(t: FieldType):
        if isinstance(t, str):
            return atoms[t]
        if isinstance(t, Array):
            return array(go(t.element))
        if isinstance(t, Map):
            return map_(go(t.value))
        if isinstance(t, Struct):
            return struct([(n, go(ft)) for n, ft in t.fields])
        raise TypeError(f"unknown field type {t!r}")

    return go(t)

TOPIC_PARTITION = Struct((("topic", "string"), ("partition", "int")))
#: ``topic_id``: the topic's Kafka Uuid in Kafka's own form (22 characters of URL-safe base64), when
#: known; Kafka's server-side (KIP-848) assignors walk topics in the hash order of their ids.
WORKLOAD_TOPIC = Struct((("name", "string"), ("partitions", "int"), ("racks", Array(Array("string"))),
                         ("topic_id", "string")))
#: Kafka Streams: the application's tasks ("<subtopology>_<partition>" ids), with and without state.
WORKLOAD_TASKS = Struct((("stateful", Array("string")), ("stateless", Array("string"))))
#: Kafka Streams' assignment configs; names as in docs/assign.md (the ``streams-ha`` spec's ``config``).
STREAMS_CONFIG = Struct((("acceptable_recovery_lag", "long"), ("num_standby_replicas", "int"),
                         ("max_warmup_replicas", "int"), ("probing_rebalance_interval_ms", "long"),
                         ("rack_aware_assignment_tags", Array("string"))))
#: Kafka Connect: a configured connector and its number of tasks (tasks 0..n-1).
WORKLOAD_CONNECTOR = Struct((("name", "string"), ("tasks", "int")))
WORKLOAD = Struct((
    ("topics", Array(WORKLOAD_TOPIC)),
    ("tasks", WORKLOAD_TASKS),
    ("task_end_offset_sums", Map("long")),
    ("config", STREAMS_CONFIG),
    ("connectors", Array(WORKLOAD_CONNECTOR)),
    ("config_offset", "long"),
    ("scheduled_rebalance_max_delay_ms", "long"),
))
#: Task ids of Kafka Streams (Kafka's ``TaskId`` printed form).
STREAMS_TASK_ID_PATTERN = r"^[0-9]+_[0-9]+$"


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
    Field("workload", WORKLOAD,
          "For type=workload, what the group works on. Consumer groups: `topics`, the topics with "
          "partition counts and, optionally, per partition the racks of its replicas. Kafka Streams "
          "groups: `tasks` (`stateful` and `stateless` task ids `<subtopology>_<partition>`), optional "
          "`task_end_offset_sums` (task -> summed changelog end offsets, to turn `task_offset_sums` into "
          "lags) and optional `config` (`acceptable_recovery_lag`, `num_standby_replicas`, "
          "`max_warmup_replicas`, `probing_rebalance_interval_ms`, `rack_aware_assignment_tags`; Kafka's "
          "defaults). Kafka Connect groups: `connectors` (`name`, `tasks` = task count), `config_offset` "
          "(the config topic offset of this snapshot) and `scheduled_rebalance_max_delay_ms` (default "
          "300000). See docs/streams-connect-groups.md.",
          example={"topics": [{"name": "orders", "partitions": 12, "racks": None}]}),
    # Kafka Streams members (group_type streams): the client's subscription metadata.
    Field("process_id", "string", "Kafka Streams: the client (process) the member belongs to; its threads "
          "share it, and the task assignor places tasks per process. Default: the member id.",
          non_empty=True),
    Field("threads", "int", "Kafka Streams: stream threads this member stands for (the client's capacity "
          "is the sum over its members; default 1, one member per thread as in Kafka).", minimum=1),
    Field("task_offset_sums", Map("long"), "Kafka Streams: summed changelog offsets of the client's local "
          "state per task (-2 = running it as active), as its subscription reports them; lags are these "
          "against workload.task_end_offset_sums until heartbeats report task_lags."),
    Field("client_tags", Map("string"), "Kafka Streams: KIP-708 client tags (client.tag.*)."),
    # Kafka Connect members (group_type connect).
    Field("worker_url", "string", "Kafka Connect: the worker's REST URL."),
    Field("config_offset", "long", "Kafka Connect: the config topic offset the worker has read up to.",
          minimum=-1),
)

HEARTBEAT_FIELDS: tuple[Field, ...] = _COMMON + (
    Field("member_id", "string", "The member that is alive.", required=True, non_empty=True,
          example="consumer-1-7f3a"),
    Field("generation", "int", "Generation as seen by the member.", minimum=-1, example=4),
    Field("task_lags", Map("long"), "Kafka Streams: the member's current lag per stateful task it holds "
          "state for (warm-ups and standbys restoring, actives catching up). The engine uses the newest "
          "report at a rebalance's event time, for warm-up and probing decisions."),
)

#: Member events must say which member; the workload event is about the group.
MEMBER_EVENT_TYPES = ("join", "leave", "update")


def example_event(fields: tuple[Field, ...]) -> dict:
    return {f.name: f.example for f in fields if f.example is not None}
