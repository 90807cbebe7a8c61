"""The group coordinator's log (``__consumer_offsets``) as a source of the job.

Spark's Kafka source reads the topic (its own cluster and security options, ``read_committed``);
offset commits, nearly all of the topic, are dropped in Spark SQL from their key's first two bytes
before any row reaches Python; the rest is decoded before the shuffle (:func:`decode_batches`, an
Arrow function on the executors) into the operator's input columns
(:data:`~streaming.job.operator_input.INPUT_COLUMNS`):

* a classic group's ``GroupMetadata`` record of protocol type ``consumer`` or ``connect`` (a Kafka
  Connect cluster on a protocol Connect knows: ``default``, ``compatible``, ``sessioned``), or of an
  Empty group, becomes a :data:`COORDINATOR` row keyed by its group id, whose payload is an
  :class:`~streaming.engine.events.CoordinatorGeneration`;
* a record that cannot be decoded (an unknown type or version, a truncated value, garbage) becomes
  a refused row with the decoder's reason, bound for ``rejected_events``; the job keeps running;
* a KIP-848 consumer group's records of types 3, 5, 6 and 7 (tombstones included) become
  :data:`COORDINATOR` rows too, whose payload is a
  :class:`~streaming.engine.coordinator_events.ConsumerGroupRecord` (the engine folds them);
* everything else (offset commits that got this far, members' current assignments (type 8), share
  and KIP-1071 Streams groups' records, classic tombstones, classic groups of other protocol types)
  is decoded and set aside.

The topic-metadata topic (:mod:`streaming.feeds.topic_metadata`) is read beside it: each
description becomes a :data:`TOPIC_METADATA` row that the job hands to every state bucket.
"""

from __future__ import annotations

import json
from typing import Iterator

from streaming.coordinator_log import CoordinatorRecordError, RecordType, decode, kafka_uuid
from streaming.coordinator_log.connect_protocol import ConnectAssignment, ConnectWorkerMetadata
from streaming.coordinator_log.consumer_protocol import STICKY, StickyUserData
from streaming.coordinator_log.records import GroupMetadataValue
from streaming.engine.coordinator_events import (
    ConnectWork,
    ConnectWorker,
    ConsumerGroupRecord,
    CoordinatorGeneration,
    CoordinatorMember,
)
from assignors import TopicPartition

#: Operator input kinds of this source's rows.
COORDINATOR = "coordinator"
TOPIC_METADATA = "topic_metadata"
#: Bytes of a refused record's key and value kept (as hex) in rejected_events.
SHOWN_BYTES = 2048
#: The Spark SQL condition that keeps a record that is not an offset commit (types 0 and 1: the
#: key's first two bytes are 0x0000 or 0x0001). A record without a key is kept: it is refused later.
NOT_AN_OFFSET_COMMIT = "coalesce(hex(substring(key, 1, 2)) NOT IN ('0000', '0001'), true)"
#: What the Kafka source's rows are narrowed to before decoding.
SOURCE_COLUMNS = ("key", "value", "topic", "partition", "offset", "kafka_timestamp")


def _partitions(topic_partitions) -> tuple[TopicPartition, ...]:
    return tuple(TopicPartition(t.topic, p) for t in topic_partitions for p in t.partitions)


#: The classic groups' protocol types this source records.
RECORDED_PROTOCOL_TYPES = ("consumer", "connect")


def generation_of(group_id: str, value: GroupMetadataValue, partition: int, offset: int,
                  timestamp: int) -> CoordinatorGeneration | None:
    """A ``GroupMetadata`` value as the engine's input; None for groups this source does not record
    (a custom protocol type, or a Connect group on a protocol Connect does not know)."""
    if value.members and value.protocol_type not in RECORDED_PROTOCOL_TYPES:
        return None
    if value.protocol_type == "connect":
        return _connect_generation(group_id, value, partition, offset, timestamp)
    members = []
    for m in value.members:
        sub, assignment = m.decoded_subscription, m.decoded_assignment
        owned, member_generation = (_partitions(sub.owned_partitions), sub.generation_id) if sub else ((), -1)
        if value.protocol == STICKY and sub is not None:
            # The eager sticky assignor reads what a member owned from its user data, never from the
            # subscription's fields (its members revoke everything before they join; Kafka's
            # StickyAssignor.memberData): no user data, nothing owned.
            data = sub.assignor_data if isinstance(sub.assignor_data, StickyUserData) else None
            owned = _partitions(data.partitions) if data else ()
            member_generation = data.generation if data and data.generation is not None else -1
        members.append(CoordinatorMember(
            member_id=m.member_id, topics=tuple(sub.topics) if sub else (),
            owned_partitions=owned, member_generation=member_generation,
            assignment=_partitions(assignment.assigned_partitions) if assignment is not None else None,
            group_instance_id=m.group_instance_id, client_id=m.client_id, host=m.client_host,
            rack=sub.rack_id if sub else None, session_timeout_ms=m.session_timeout))
    return CoordinatorGeneration(group_id=group_id, event_time=timestamp, partition=partition, offset=offset,
                                 generation=value.generation, protocol_type=value.protocol_type,
                                 protocol=value.protocol, leader=value.leader, members=tuple(members))


def _connect_generation(group_id: str, value: GroupMetadataValue, partition: int, offset: int,
                        timestamp: int) -> CoordinatorGeneration | None:
    members = []
    for m in value.members:
        metadata = m.decoded_subscription
        if not isinstance(metadata, ConnectWorkerMetadata):
            return None  # a protocol Connect does not know: its bytes were kept raw, nothing to read
        assignment = m.decoded_assignment if isinstance(m.decoded_assignment, ConnectAssignment) else None
        worker = ConnectWorker(
            url=metadata.url, config_offset=metadata.config_offset, held=_work(metadata.allocation),
            assigned=_work(assignment),
            revoked=ConnectWork(assignment.revoked_connectors, _tasks(assignment.revoked_tasks)) if assignment
            else ConnectWork(),
            delay_ms=assignment.delay_ms if assignment else 0, error=assignment.error if assignment else 0,
            leader_config_offset=assignment.config_offset if assignment else None)
        members.append(CoordinatorMember(
            member_id=m.member_id, topics=(), group_instance_id=m.group_instance_id, client_id=m.client_id,
            host=m.client_host, session_timeout_ms=m.session_timeout, connect=worker))
    return CoordinatorGeneration(group_id=group_id, event_time=timestamp, partition=partition, offset=offset,
                                 generation=value.generation, protocol_type=value.protocol_type,
                                 protocol=value.protocol, leader=value.leader, members=tuple(members))


def _tasks(tasks) -> tuple[tuple[str, int], ...]:
    return tuple((t.connector, t.task) for t in tasks)


def _work(assignment: ConnectAssignment | None) -> ConnectWork | None:
    """Connectors and tasks of an assignment (a worker's previous allocation, or the one it got)."""
    return ConnectWork(assignment.connectors, _tasks(assignment.tasks)) if assignment is not None else None


def _shown(data: bytes | None) -> str | None:
    if data is None:
        return None
    head = data[:SHOWN_BYTES].hex()
    return head if len(data) <= SHOWN_BYTES else f"{head}... ({len(data)} bytes)"


def _group_of(key: bytes | None) -> str | None:
    """The group id of a record whose value could not be decoded, when its key can be."""
    try:
        return decode(key, None).group_id
    except CoordinatorRecordError:
        return None


def input_row(key: bytes | None, value: bytes | None, topic: str, partition: int, offset: int,
              timestamp: int) -> dict | None:
    """One record of the offsets topic as the operator's input row, or None when it is set aside."""
    try:
        record = decode(key, value)
    except CoordinatorRecordError as exc:
        group_id = _group_of(key)
        source = {"group_id": group_id, "event_id": f"{topic}-{partition}@{offset}", "source_topic": topic,
                  "source_partition": partition, "source_offset": offset, "record_key": _shown(key),
                  "raw_value": _shown(value), "event_time": timestamp, "kafka_timestamp": timestamp}
        return {"group_key": group_id or "", "kind": COORDINATOR, "member_id": None, "event_time": timestamp,
                "reject_reason": f"undecodable coordinator record: {exc}", "payload": json.dumps(source)}
    if record.type == RecordType.GROUP_METADATA and record.value is not None:
        item = generation_of(record.group_id, record.value, partition, offset, timestamp)
    elif record.type in KIP848_TYPES:
        item = kip848_record_of(record, partition, offset, timestamp)
    else:
        return None
    if item is None:
        return None
    return {"group_key": record.group_id, "kind": COORDINATOR, "member_id": None, "event_time": timestamp,
            "reject_reason": None, "payload": json.dumps(item.to_json(), separators=(",", ":"))}


#: The KIP-848 records the engine folds: group epoch, member metadata, target epoch, member target.
KIP848_TYPES = frozenset({RecordType.CONSUMER_GROUP_METADATA, RecordType.CONSUMER_GROUP_MEMBER_METADATA,
                          RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
                          RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER})


def kip848_record_of(record, partition: int, offset: int, timestamp: int) -> ConsumerGroupRecord:
    """A KIP-848 record as the engine's input (topic ids in Kafka's printed form)."""
    v = record.value
    common = {"group_id": record.group_id, "event_time": timestamp, "partition": partition, "offset": offset,
              "record_type": int(record.type), "member_id": getattr(record.key, "member_id", None),
              "tombstone": v is None}
    if v is None:
        return ConsumerGroupRecord(**common)
    if record.type == RecordType.CONSUMER_GROUP_METADATA:
        return ConsumerGroupRecord(**common, epoch=v.epoch)
    if record.type == RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA:
        return ConsumerGroupRecord(**common, epoch=v.assignment_epoch)
    if record.type == RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER:
        return ConsumerGroupRecord(**common, target={kafka_uuid(t.topic_id): tuple(t.partitions)
                                                     for t in v.topic_partitions})
    return ConsumerGroupRecord(**common, topics=tuple(v.subscribed_topic_names), server_assignor=v.server_assignor,
                               group_instance_id=v.instance_id, client_id=v.client_id, host=v.client_host,
                               rack=v.rack_id)


def decode_batches(batches) -> Iterator:
    """The Arrow side of :func:`coordinator_rows`: source rows in, operator input rows out."""
    import pyarrow as pa

    schema = _input_arrow_schema()
    for batch in batches:
        columns = batch.to_pydict()
        rows = [input_row(*values) for values in zip(*(columns[c] for c in SOURCE_COLUMNS))]
        rows = [r for r in rows if r is not None]
        yield pa.RecordBatch.from_pylist(rows, schema=schema)


def _input_arrow_schema():
    import pyarrow as pa

    return pa.schema([pa.field("group_key", pa.string(), nullable=False), pa.field("kind", pa.string()),
                      pa.field("member_id", pa.string()), pa.field("event_time", pa.int64()),
                      pa.field("reject_reason", pa.string()), pa.field("payload", pa.string())])


def _input_spark_schema():
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    return StructType([StructField("group_key", StringType(), False), StructField("kind", StringType()),
                       StructField("member_id", StringType()), StructField("event_time", LongType()),
                       StructField("reject_reason", StringType()), StructField("payload", StringType())])


def coordinator_rows(spark, config):
    """The offsets topic as operator input rows (before ``beat_times`` is added)."""
    from pyspark.sql import functions as F

    source = config.offsets_topic
    # Spark's Kafka source, with its default (AdminClient-based) offset reader, drops every topic
    # whose description says internal, and __consumer_offsets is one: the query then reads
    # nothing, silently (measured: 0 rows without this setting, 7 with it, on a broker where one
    # group had committed). The consumer-based offset reader lists partitions without that filter.
    # A session setting: the job's other Kafka sources use that reader too, which they read alike.
    spark.conf.set("spark.sql.streaming.kafka.useDeprecatedOffsetFetching", "true")
    raw = spark.readStream.format("kafka").options(**source.source_options(config.kafka)).load()
    narrowed = (raw.where(F.expr(NOT_AN_OFFSET_COMMIT))
                .select("key", "value", "topic", "partition", "offset",
                        F.unix_millis("timestamp").alias("kafka_timestamp")))
    return narrowed.mapInArrow(decode_batches, _input_spark_schema())


def metadata_rows(spark, config):
    """The topic-metadata topic as operator input rows: one per description, under no group."""
    from pyspark.sql import functions as F

    raw = spark.readStream.format("kafka").options(**config.offsets_topic.metadata_source_options(config.kafka)).load()
    value = F.col("value").cast("string")
    event_time = F.get_json_object(value, "$.event_time").cast("long")
    refused = event_time.isNull()
    source = F.to_json(F.struct(F.col("topic").alias("source_topic"), F.col("partition").alias("source_partition"),
                                F.col("offset").alias("source_offset"), value.alias("raw_value"),
                                F.unix_millis("timestamp").alias("kafka_timestamp")))
    return raw.select(F.lit("").alias("group_key"), F.lit(TOPIC_METADATA).alias("kind"),
                      F.lit(None).cast("string").alias("member_id"), event_time.alias("event_time"),
                      F.when(refused, F.lit("topic metadata: not a description with an event_time")).alias("reject_reason"),
                      F.when(refused, source).otherwise(value).alias("payload"))
