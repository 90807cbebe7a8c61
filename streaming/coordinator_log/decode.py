"""Key and value bytes of ``__consumer_offsets`` -> :class:`~.records.CoordinatorRecord`.

Follows Kafka 4.1.1's ``CoordinatorRecordSerde.deserialize`` and ``GroupCoordinatorRecordSerde``:
the key is an int16 record type followed by the key struct (read the same way whatever the type's
number); the value is an int16 version followed by the value struct, and a null value is a
tombstone. A value version outside what 4.1 reads for its type is refused, as Kafka refuses it.

Stricter than Kafka in three ways, each so that a damaged record is reported instead of half-read:
bytes left after the key or the value are an error (Kafka ignores them); a string that is not
UTF-8 is an error (Java substitutes U+FFFD); a known tagged field must fill its declared size.

The embedded protocol bytes of a classic group (type 2) are decoded as its members' leader decodes
them: ``consumer`` groups by :mod:`.consumer_protocol` (Kafka Streams' user data included),
``connect`` groups by :mod:`.connect_protocol`; other protocol types keep their bytes raw.
"""

from __future__ import annotations

from collections.abc import Callable

from streaming.errors import CoordinatorRecordError

from . import connect_protocol, consumer_protocol
from .records import (
    ClassicMemberMetadata, ClassicProtocol, ConsumerGroupCurrentMemberAssignmentValue, ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataValue, ConsumerGroupPartitionMetadataValue, ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberValue, ConsumerGroupTargetAssignmentMetadataValue, CoordinatorRecord,
    CopartitionGroup, Endpoint, GroupKey, GroupMemberMetadata, GroupMetadataValue, KeyValue,
    LegacyOffsetCommitValue, MemberKey, OffsetCommitKey, OffsetCommitValue, PartitionRacks, RecordType,
    RegularExpressionKey, ShareGroupCurrentMemberAssignmentValue, ShareGroupMemberMetadataValue,
    ShareGroupMetadataValue, ShareGroupStatePartitionMetadataValue, ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataValue, ShareTopic, ShareTopicPartitions, StreamsGroupCurrentMemberAssignmentValue,
    StreamsGroupMemberMetadataValue, StreamsGroupMetadataValue, StreamsGroupTargetAssignmentMemberValue,
    StreamsGroupTargetAssignmentMetadataValue, StreamsGroupTopologyValue, Subtopology, TaskIds, TopicConfig,
    TopicIdPartitions, TopicInfo, TopicMetadata,
)
from .wire import Reader

_TYPE_NAMES = {t.value: "".join(w.capitalize() for w in t.name.split("_")) for t in RecordType}
_RECORD_TYPES = {t.value: t for t in RecordType}
# Error-message prefixes, made once: formatting them per record was a fifth of an offset commit's cost.
_KEY_CONTEXTS = {t: f"{name} (type {t}) key" for t, name in _TYPE_NAMES.items()}


def peek_record_type(key: bytes) -> int:
    """The record type of a key, without decoding anything else (to skip or count offset commits)."""
    if key is None or len(key) < 2:
        raise CoordinatorRecordError(f"key of {0 if key is None else len(key)} bytes has no record type")
    return int.from_bytes(key[:2], "big", signed=True)


def is_offset_commit(key: bytes) -> bool:
    """True for types 0 and 1, the bulk of the topic, decided from the key's first two bytes."""
    return key is not None and len(key) >= 2 and key[0] == 0 and key[1] <= 1


def decode(key: bytes, value: bytes | None) -> CoordinatorRecord:
    """Decode one record; raises :class:`CoordinatorRecordError` naming what is wrong.

    ``key`` and ``value`` may be ``bytes``, ``bytearray`` (PySpark's binary values) or ``memoryview``;
    the record's byte fields are always ``bytes``.
    """
    if type(key) is not bytes and key is not None:
        key = bytes(key)
    if type(value) is not bytes and value is not None:
        value = bytes(value)
    number = peek_record_type(key)
    record_type = _RECORD_TYPES.get(number)
    if record_type is None:
        raise CoordinatorRecordError(f"unknown record type {number} (Kafka 4.1 writes "
                                     f"{', '.join(str(t.value) for t in RecordType)})")
    reader = Reader(key, _KEY_CONTEXTS[number], start=2)
    key_value = _KEYS[number](reader)
    reader.expect_end("the key")
    if value is None:
        return CoordinatorRecord(record_type, key_value, None, None)
    if len(value) < 2:
        raise CoordinatorRecordError(f"{_TYPE_NAMES[number]} (type {number}) value of {len(value)} bytes "
                                     f"has no version")
    version = int.from_bytes(value[:2], "big", signed=True)
    contexts, read_value = _VALUES[number]
    context = contexts.get(version)
    if context is None:
        raise CoordinatorRecordError(f"{_TYPE_NAMES[number]} (type {number}) value v{version}: unknown version "
                                     f"(Kafka 4.1 reads v{min(contexts)}-v{max(contexts)})")
    reader = Reader(value, context, start=2)
    decoded = read_value(reader, version)
    reader.expect_end("the value")
    return CoordinatorRecord(record_type, key_value, version, decoded)


# -- keys (never flexible; the same layout whatever the record type's number) ------------------------


def _offset_commit_key(r: Reader) -> OffsetCommitKey:
    return OffsetCommitKey(r.string(False, "group"), r.string(False, "topic"), r.int32("partition"))


def _group_key(r: Reader) -> GroupKey:
    return GroupKey(r.string(False, "group id"))


def _member_key(r: Reader) -> MemberKey:
    return MemberKey(r.string(False, "group id"), r.string(False, "member id"))


def _regex_key(r: Reader) -> RegularExpressionKey:
    return RegularExpressionKey(r.string(False, "group id"), r.string(False, "regular expression"))


_KEYS: dict[int, Callable[[Reader], object]] = {
    0: _offset_commit_key, 1: _offset_commit_key, 16: _regex_key,
    **{t: _group_key for t in (2, 3, 4, 6, 11, 12, 15, 17, 20, 23)},
    **{t: _member_key for t in (5, 7, 8, 10, 13, 14, 19, 21, 22)},
}


# -- offset commits ----------------------------------------------------------------------------------


def _legacy_offset_commit(r: Reader, version: int) -> LegacyOffsetCommitValue:
    return LegacyOffsetCommitValue(r.int64("offset"), r.string(False, "metadata"), r.int64("commit timestamp"))


def _offset_commit(r: Reader, version: int) -> OffsetCommitValue:
    flexible = version >= 4
    offset = r.int64("offset")
    leader_epoch = r.int32("leader epoch") if version >= 3 else -1
    metadata = r.string(flexible, "metadata")
    commit_timestamp = r.int64("commit timestamp")
    expire_timestamp = r.int64("expire timestamp") if version == 1 else -1
    topic_id = None
    if flexible:
        topic_id = r.tagged_fields(_OFFSET_COMMIT_TAGS).get(0)
        if topic_id is not None and topic_id.int == 0:
            topic_id = None
    return OffsetCommitValue(offset, leader_epoch, metadata, commit_timestamp, expire_timestamp, topic_id)


_OFFSET_COMMIT_TAGS = {0: lambda r: r.uuid("topic id")}


# -- classic groups ----------------------------------------------------------------------------------


def _group_metadata(r: Reader, version: int) -> GroupMetadataValue:
    flexible = version >= 4
    protocol_type = r.string(flexible, "protocol type")
    generation = r.int32("generation")
    protocol = r.nullable_string(flexible, "protocol")
    leader = r.nullable_string(flexible, "leader")
    timestamp = r.int64("current state timestamp") if version >= 2 else -1
    count = r.array_length(flexible, "members", 4 if flexible else 18)
    members = []
    for _ in range(count):
        member_id = r.string(flexible, "member id")
        instance_id = r.nullable_string(flexible, "group instance id") if version >= 3 else None
        client_id = r.string(flexible, "client id")
        client_host = r.string(flexible, "client host")
        rebalance_timeout = r.int32("rebalance timeout") if version >= 1 else -1
        session_timeout = r.int32("session timeout")
        subscription = r.bytes(flexible, "subscription")
        assignment = r.bytes(flexible, "assignment")
        if flexible:
            r.tagged_fields()
        members.append(_with_protocol(
            GroupMemberMetadata(member_id, instance_id, client_id, client_host, rebalance_timeout,
                                session_timeout, subscription, assignment),
            protocol_type, protocol, r.context))
    if flexible:
        r.tagged_fields()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, timestamp, tuple(members))


def _with_protocol(member: GroupMemberMetadata, protocol_type: str, protocol: str | None,
                   context: str) -> GroupMemberMetadata:
    """The member with its subscription and assignment decoded, when the protocol type is known."""
    if protocol_type == "consumer":
        subscription_of, assignment_of = consumer_protocol.decode_subscription, consumer_protocol.decode_assignment
    elif protocol_type == "connect" and connect_protocol.is_connect_protocol(protocol):
        subscription_of, assignment_of = connect_protocol.decode_metadata, connect_protocol.decode_assignment
    else:
        return member
    where = f"{context}, member {member.member_id!r}"
    # Empty bytes: an Empty group's record keeps no member, but a member whose assignment the
    # leader has not sent yet (a static member replaced mid-rebalance) is stored with none.
    subscription = (subscription_of(member.subscription, protocol, f"{where}, {protocol_type} subscription")
                    if member.subscription else None)
    assignment = (assignment_of(member.assignment, protocol, f"{where}, {protocol_type} assignment")
                  if member.assignment else None)
    return GroupMemberMetadata(member.member_id, member.group_instance_id, member.client_id, member.client_host,
                               member.rebalance_timeout, member.session_timeout, member.subscription,
                               member.assignment, subscription, assignment)


# -- the new protocol's records (all flexible from v0) -------------------------------------------------
# Every struct of a flexible version ends with its own tagged-field section, array elements included.


def _topic_id_partitions(r: Reader, field: str) -> tuple[TopicIdPartitions, ...]:
    out = []
    for _ in range(r.array_length(True, field, 18)):
        topic_id = r.uuid("topic id")
        partitions = r.int32_array(True, "partitions")
        r.tagged_fields()
        out.append(TopicIdPartitions(topic_id, partitions))
    return tuple(out)


def _consumer_group_metadata(r: Reader, version: int) -> ConsumerGroupMetadataValue:
    epoch = r.int32("epoch")
    metadata_hash = r.tagged_fields({0: lambda t: t.int64("metadata hash")}).get(0, 0)
    return ConsumerGroupMetadataValue(epoch, metadata_hash)


def _consumer_group_partition_metadata(r: Reader, version: int) -> ConsumerGroupPartitionMetadataValue:
    topics = []
    for _ in range(r.array_length(True, "topics", 24)):
        topic_id = r.uuid("topic id")
        name = r.string(True, "topic name")
        num_partitions = r.int32("number of partitions")
        racks = []
        for _ in range(r.array_length(True, "partition metadata", 6)):
            partition = r.int32("partition")
            racks.append(PartitionRacks(partition, r.string_array(True, "racks")))
            r.tagged_fields()
        r.tagged_fields()
        topics.append(TopicMetadata(topic_id, name, num_partitions, tuple(racks)))
    r.tagged_fields()
    return ConsumerGroupPartitionMetadataValue(tuple(topics))


def _classic_member_metadata(r: Reader) -> ClassicMemberMetadata:
    session_timeout = r.int32("session timeout")
    protocols = []
    for _ in range(r.array_length(True, "supported protocols", 3)):
        name = r.string(True, "protocol name")
        metadata = r.bytes(True, "protocol metadata")
        r.tagged_fields()
        protocols.append(ClassicProtocol(name, metadata))
    r.tagged_fields()
    return ClassicMemberMetadata(session_timeout, tuple(protocols))


def _nullable_classic_member_metadata(r: Reader) -> ClassicMemberMetadata | None:
    # A nullable struct in a tagged field is prefixed by an unsigned varint, 0 for null (outside tagged
    # fields the prefix is an int8, -1 for null: see _endpoint).
    marker = r.unsigned_varint("classic member metadata marker")
    return None if marker <= 0 else _classic_member_metadata(r)


def _consumer_group_member_metadata(r: Reader, version: int) -> ConsumerGroupMemberMetadataValue:
    instance_id = r.nullable_string(True, "instance id")
    rack_id = r.nullable_string(True, "rack id")
    client_id = r.string(True, "client id")
    client_host = r.string(True, "client host")
    topics = r.string_array(True, "subscribed topic names")
    regex = r.nullable_string(True, "subscribed topic regex")
    rebalance_timeout = r.int32("rebalance timeout")
    server_assignor = r.nullable_string(True, "server assignor")
    classic = r.tagged_fields({0: _nullable_classic_member_metadata}).get(0)
    return ConsumerGroupMemberMetadataValue(instance_id, rack_id, client_id, client_host, topics, regex,
                                            rebalance_timeout, server_assignor, classic)


def _assignment_epoch(cls):
    def read(r: Reader, version: int):
        epoch = r.int32("assignment epoch")
        r.tagged_fields()
        return cls(epoch)
    return read


def _consumer_group_target_member(r: Reader, version: int) -> ConsumerGroupTargetAssignmentMemberValue:
    partitions = _topic_id_partitions(r, "topic partitions")
    r.tagged_fields()
    return ConsumerGroupTargetAssignmentMemberValue(partitions)


def _consumer_group_current_member(r: Reader, version: int) -> ConsumerGroupCurrentMemberAssignmentValue:
    epoch = r.int32("member epoch")
    previous = r.int32("previous member epoch")
    state = r.int8("state")
    assigned = _topic_id_partitions(r, "assigned partitions")
    pending = _topic_id_partitions(r, "partitions pending revocation")
    r.tagged_fields()
    return ConsumerGroupCurrentMemberAssignmentValue(epoch, previous, state, assigned, pending)


def _consumer_group_regex(r: Reader, version: int) -> ConsumerGroupRegularExpressionValue:
    topics = r.string_array(True, "topics")
    regex_version = r.int64("version")
    timestamp = r.int64("timestamp")
    r.tagged_fields()
    return ConsumerGroupRegularExpressionValue(topics, regex_version, timestamp)


# -- share groups ------------------------------------------------------------------------------------


def _share_group_member_metadata(r: Reader, version: int) -> ShareGroupMemberMetadataValue:
    rack_id = r.nullable_string(True, "rack id")
    client_id = r.string(True, "client id")
    client_host = r.string(True, "client host")
    topics = r.string_array(True, "subscribed topic names")
    r.tagged_fields()
    return ShareGroupMemberMetadataValue(rack_id, client_id, client_host, topics)


def _epoch_and_hash(cls):
    def read(r: Reader, version: int):
        epoch = r.int32("epoch")
        metadata_hash = r.int64("metadata hash")
        r.tagged_fields()
        return cls(epoch, metadata_hash)
    return read


def _share_group_target_member(r: Reader, version: int) -> ShareGroupTargetAssignmentMemberValue:
    partitions = _topic_id_partitions(r, "topic partitions")
    r.tagged_fields()
    return ShareGroupTargetAssignmentMemberValue(partitions)


def _share_group_current_member(r: Reader, version: int) -> ShareGroupCurrentMemberAssignmentValue:
    epoch = r.int32("member epoch")
    previous = r.int32("previous member epoch")
    state = r.int8("state")
    assigned = _topic_id_partitions(r, "assigned partitions")
    r.tagged_fields()
    return ShareGroupCurrentMemberAssignmentValue(epoch, previous, state, assigned)


def _share_topic_partitions(r: Reader, field: str) -> tuple[ShareTopicPartitions, ...]:
    out = []
    for _ in range(r.array_length(True, field, 19)):
        topic_id = r.uuid("topic id")
        name = r.string(True, "topic name")
        partitions = r.int32_array(True, "partitions")
        r.tagged_fields()
        out.append(ShareTopicPartitions(topic_id, name, partitions))
    return tuple(out)


def _share_group_state_partition_metadata(r: Reader, version: int) -> ShareGroupStatePartitionMetadataValue:
    initializing = _share_topic_partitions(r, "initializing topics")
    initialized = _share_topic_partitions(r, "initialized topics")
    deleting = []
    for _ in range(r.array_length(True, "deleting topics", 18)):
        topic_id = r.uuid("topic id")
        name = r.string(True, "topic name")
        r.tagged_fields()
        deleting.append(ShareTopic(topic_id, name))
    r.tagged_fields()
    return ShareGroupStatePartitionMetadataValue(initializing, initialized, tuple(deleting))


# -- Streams groups (KIP-1071) -----------------------------------------------------------------------


def _task_ids(r: Reader, field: str) -> tuple[TaskIds, ...]:
    out = []
    for _ in range(r.array_length(True, field, 3)):
        subtopology = r.string(True, "subtopology id")
        partitions = r.int32_array(True, "partitions")
        r.tagged_fields()
        out.append(TaskIds(subtopology, partitions))
    return tuple(out)


def _endpoint(r: Reader) -> Endpoint | None:
    if r.int8("user endpoint marker") < 0:
        return None
    host = r.string(True, "endpoint host")
    port = r.uint16("endpoint port")
    r.tagged_fields()
    return Endpoint(host, port)


def _streams_group_member_metadata(r: Reader, version: int) -> StreamsGroupMemberMetadataValue:
    instance_id = r.nullable_string(True, "instance id")
    rack_id = r.nullable_string(True, "rack id")
    client_id = r.string(True, "client id")
    client_host = r.string(True, "client host")
    rebalance_timeout = r.int32("rebalance timeout")
    topology_epoch = r.int32("topology epoch")
    process_id = r.string(True, "process id")
    endpoint = _endpoint(r)
    tags = []
    for _ in range(r.array_length(True, "client tags", 3)):
        key = r.string(True, "client tag key")
        value = r.string(True, "client tag value")
        r.tagged_fields()
        tags.append(KeyValue(key, value))
    r.tagged_fields()
    return StreamsGroupMemberMetadataValue(instance_id, rack_id, client_id, client_host, rebalance_timeout,
                                           topology_epoch, process_id, endpoint, tuple(tags))


def _streams_group_target_member(r: Reader, version: int) -> StreamsGroupTargetAssignmentMemberValue:
    active = _task_ids(r, "active tasks")
    standby = _task_ids(r, "standby tasks")
    warmup = _task_ids(r, "warm-up tasks")
    r.tagged_fields()
    return StreamsGroupTargetAssignmentMemberValue(active, standby, warmup)


def _streams_group_current_member(r: Reader, version: int) -> StreamsGroupCurrentMemberAssignmentValue:
    epoch = r.int32("member epoch")
    previous = r.int32("previous member epoch")
    state = r.int8("state")
    lists = [_task_ids(r, field) for field in ("active tasks", "standby tasks", "warm-up tasks",
                                               "active tasks pending revocation",
                                               "standby tasks pending revocation",
                                               "warm-up tasks pending revocation")]
    r.tagged_fields()
    return StreamsGroupCurrentMemberAssignmentValue(epoch, previous, state, *lists)


def _topic_infos(r: Reader, field: str) -> tuple[TopicInfo, ...]:
    out = []
    for _ in range(r.array_length(True, field, 9)):
        name = r.string(True, "topic name")
        partitions = r.int32("partitions")
        replication = r.int16("replication factor")
        configs = []
        for _ in range(r.array_length(True, "topic configs", 3)):
            key = r.string(True, "config key")
            value = r.string(True, "config value")
            r.tagged_fields()
            configs.append(TopicConfig(key, value))
        r.tagged_fields()
        out.append(TopicInfo(name, partitions, replication, tuple(configs)))
    return tuple(out)


def _streams_group_topology(r: Reader, version: int) -> StreamsGroupTopologyValue:
    epoch = r.int32("epoch")
    subtopologies = []
    for _ in range(r.array_length(True, "subtopologies", 8)):
        subtopology_id = r.string(True, "subtopology id")
        source_topics = r.string_array(True, "source topics")
        source_regex = r.string_array(True, "source topic regex")
        changelogs = _topic_infos(r, "state changelog topics")
        sinks = r.string_array(True, "repartition sink topics")
        repartition_sources = _topic_infos(r, "repartition source topics")
        groups = []
        for _ in range(r.array_length(True, "copartition groups", 4)):
            groups.append(CopartitionGroup(r.int16_array(True, "source topics"),
                                           r.int16_array(True, "source topic regex"),
                                           r.int16_array(True, "repartition source topics")))
            r.tagged_fields()
        r.tagged_fields()
        subtopologies.append(Subtopology(subtopology_id, source_topics, source_regex, changelogs, sinks,
                                         repartition_sources, tuple(groups)))
    r.tagged_fields()
    return StreamsGroupTopologyValue(epoch, tuple(subtopologies))


#: Per record type: lowest and highest value version Kafka 4.1 reads, and the reader.
_VALUE_READERS: dict[int, tuple[int, int, Callable[[Reader, int], object]]] = {
    RecordType.LEGACY_OFFSET_COMMIT: (0, 0, _legacy_offset_commit),
    RecordType.OFFSET_COMMIT: (0, 4, _offset_commit),
    RecordType.GROUP_METADATA: (0, 4, _group_metadata),
    RecordType.CONSUMER_GROUP_METADATA: (0, 0, _consumer_group_metadata),
    RecordType.CONSUMER_GROUP_PARTITION_METADATA: (0, 0, _consumer_group_partition_metadata),
    RecordType.CONSUMER_GROUP_MEMBER_METADATA: (0, 0, _consumer_group_member_metadata),
    RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA:
        (0, 0, _assignment_epoch(ConsumerGroupTargetAssignmentMetadataValue)),
    RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER: (0, 0, _consumer_group_target_member),
    RecordType.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: (0, 0, _consumer_group_current_member),
    RecordType.SHARE_GROUP_MEMBER_METADATA: (0, 0, _share_group_member_metadata),
    RecordType.SHARE_GROUP_METADATA: (0, 0, _epoch_and_hash(ShareGroupMetadataValue)),
    RecordType.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA:
        (0, 0, _assignment_epoch(ShareGroupTargetAssignmentMetadataValue)),
    RecordType.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER: (0, 0, _share_group_target_member),
    RecordType.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT: (0, 0, _share_group_current_member),
    RecordType.SHARE_GROUP_STATE_PARTITION_METADATA: (0, 0, _share_group_state_partition_metadata),
    RecordType.CONSUMER_GROUP_REGULAR_EXPRESSION: (0, 0, _consumer_group_regex),
    RecordType.STREAMS_GROUP_METADATA: (0, 0, _epoch_and_hash(StreamsGroupMetadataValue)),
    RecordType.STREAMS_GROUP_MEMBER_METADATA: (0, 0, _streams_group_member_metadata),
    RecordType.STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA:
        (0, 0, _assignment_epoch(StreamsGroupTargetAssignmentMetadataValue)),
    RecordType.STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER: (0, 0, _streams_group_target_member),
    RecordType.STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT: (0, 0, _streams_group_current_member),
    RecordType.STREAMS_GROUP_TOPOLOGY: (0, 0, _streams_group_topology),
}

#: Per record type: the error-message prefix of each value version Kafka 4.1 reads, and the reader.
_VALUES: dict[int, tuple[dict[int, str], Callable[[Reader, int], object]]] = {
    number: ({v: f"{_TYPE_NAMES[number]} (type {number}) value v{v}" for v in range(lowest, highest + 1)}, read)
    for number, (lowest, highest, read) in _VALUE_READERS.items()
}
