"""The typed records of ``__consumer_offsets``, as Kafka 4.1's group coordinator writes them.

One frozen class per key and per value message of ``kafka-group-coordinator-4.1.1.jar``'s
``common/message/*.json``, named as there (``GroupMetadataValue``, ``ConsumerGroupMemberMetadataValue``
...), with Kafka's field names in snake case. A record is a :class:`CoordinatorRecord`: its
:class:`RecordType`, its key, and its value with the value's version, or no value for a tombstone.

Topic ids (KIP-848 and share groups) are :class:`uuid.UUID`; :func:`kafka_uuid` gives the
22-character form that Kafka's tools print (``Uuid.toString``).

What the embedded protocol bytes of a classic group decode into lives beside their decoders:
:mod:`.consumer_protocol`, :mod:`.connect_protocol`, :mod:`.streams_protocol`.
"""

from __future__ import annotations

import base64
import enum
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

if TYPE_CHECKING:
    from .connect_protocol import ConnectAssignment, ConnectWorkerMetadata
    from .consumer_protocol import ConsumerAssignment, ConsumerSubscription


class RecordType(enum.IntEnum):
    """The int16 that starts every key (``CoordinatorRecordType`` in Kafka 4.1.1).

    Types 9 and 18 were used by pre-release share and Streams group records and are unknown to
    4.1, as any number above 23.
    """

    LEGACY_OFFSET_COMMIT = 0
    OFFSET_COMMIT = 1
    GROUP_METADATA = 2
    CONSUMER_GROUP_METADATA = 3
    CONSUMER_GROUP_PARTITION_METADATA = 4
    CONSUMER_GROUP_MEMBER_METADATA = 5
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
    SHARE_GROUP_MEMBER_METADATA = 10
    SHARE_GROUP_METADATA = 11
    SHARE_GROUP_TARGET_ASSIGNMENT_METADATA = 12
    SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER = 13
    SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT = 14
    SHARE_GROUP_STATE_PARTITION_METADATA = 15
    CONSUMER_GROUP_REGULAR_EXPRESSION = 16
    STREAMS_GROUP_METADATA = 17
    STREAMS_GROUP_MEMBER_METADATA = 19
    STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA = 20
    STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER = 21
    STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT = 22
    STREAMS_GROUP_TOPOLOGY = 23


def kafka_uuid(value: uuid.UUID) -> str:
    """Kafka's printed form of a UUID (``Uuid.toString``: URL-safe base64, no padding)."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")


def _frozen(cls):
    return dataclass(frozen=True, slots=True)(cls)


# -- keys --------------------------------------------------------------------------------------------


@_frozen
class OffsetCommitKey:
    """Key of types 0 and 1: one committed partition of a group."""

    group_id: str
    topic: str
    partition: int


@_frozen
class GroupKey:
    """Key of the records that belong to a whole group (types 2, 3, 4, 6, 11, 12, 15, 17, 20, 23)."""

    group_id: str


@_frozen
class MemberKey:
    """Key of the records that belong to one member (types 5, 7, 8, 10, 13, 14, 19, 21, 22)."""

    group_id: str
    member_id: str


@_frozen
class RegularExpressionKey:
    """Key of type 16: one subscription regular expression of a consumer group."""

    group_id: str
    regular_expression: str


RecordKey = Union[OffsetCommitKey, GroupKey, MemberKey, RegularExpressionKey]


# -- offset commits (types 0, 1) ---------------------------------------------------------------------


@_frozen
class LegacyOffsetCommitValue:
    offset: int
    metadata: str
    commit_timestamp: int


@_frozen
class OffsetCommitValue:
    """v0-4; 4.1 writes v4 (v1 when the commit carried a retention time)."""

    offset: int
    leader_epoch: int  # v3+, else -1
    metadata: str
    commit_timestamp: int
    expire_timestamp: int  # v1 only, else -1
    topic_id: uuid.UUID | None  # tagged, v4+; None when absent (Kafka's ZERO_UUID)


# -- classic groups (type 2) -------------------------------------------------------------------------


@_frozen
class GroupMemberMetadata:
    """One member of a classic group, with its protocol bytes raw and decoded.

    ``decoded_subscription`` and ``decoded_assignment`` are set for the protocol types this package
    knows (``consumer``: :class:`~.consumer_protocol.ConsumerSubscription`; ``connect``:
    :class:`~.connect_protocol.ConnectWorkerMetadata`), None for other protocol types and for empty
    bytes (a member whose assignment the coordinator has not received yet).
    """

    member_id: str
    group_instance_id: str | None  # v3+
    client_id: str
    client_host: str
    rebalance_timeout: int  # v1+, else -1
    session_timeout: int
    subscription: bytes
    assignment: bytes
    decoded_subscription: ConsumerSubscription | ConnectWorkerMetadata | None = None
    decoded_assignment: ConsumerAssignment | ConnectAssignment | None = None


@_frozen
class GroupMetadataValue:
    """A classic group's state at a completed generation (or Empty); v0-4, 4.1 writes v3."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int  # v2+, else -1
    members: tuple[GroupMemberMetadata, ...]


# -- KIP-848 consumer groups (types 3-8, 16) ---------------------------------------------------------


@_frozen
class TopicIdPartitions:
    """Partitions of one topic, named by its topic id (the new protocol's records)."""

    topic_id: uuid.UUID
    partitions: tuple[int, ...]


@_frozen
class ConsumerGroupMetadataValue:
    epoch: int
    metadata_hash: int  # tagged (KIP-1101, 4.1), 0 when absent


@_frozen
class PartitionRacks:
    partition: int
    racks: tuple[str, ...]


@_frozen
class TopicMetadata:
    topic_id: uuid.UUID
    topic_name: str
    num_partitions: int
    partition_metadata: tuple[PartitionRacks, ...]


@_frozen
class ConsumerGroupPartitionMetadataValue:
    """Replaced by the metadata hash in 4.1, which writes only its tombstones."""

    topics: tuple[TopicMetadata, ...]


@_frozen
class ClassicProtocol:
    name: str
    metadata: bytes


@_frozen
class ClassicMemberMetadata:
    """A classic-protocol member of a consumer group (KIP-848's upgrade path)."""

    session_timeout_ms: int
    supported_protocols: tuple[ClassicProtocol, ...]


@_frozen
class ConsumerGroupMemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic_member_metadata: ClassicMemberMetadata | None  # tagged


@_frozen
class ConsumerGroupTargetAssignmentMetadataValue:
    assignment_epoch: int


@_frozen
class ConsumerGroupTargetAssignmentMemberValue:
    topic_partitions: tuple[TopicIdPartitions, ...]


class MemberState(enum.IntEnum):
    """``MemberState`` of the new protocol's current assignment (types 8, 14, 22)."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


@_frozen
class ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int  # a MemberState value; kept as the int Kafka wrote
    assigned_partitions: tuple[TopicIdPartitions, ...]
    partitions_pending_revocation: tuple[TopicIdPartitions, ...]


@_frozen
class ConsumerGroupRegularExpressionValue:
    topics: tuple[str, ...]
    version: int
    timestamp: int


# -- share groups (types 10-15): decoded so that they pass through, not used by the monitor ----------


@_frozen
class ShareGroupMemberMetadataValue:
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]


@_frozen
class ShareGroupMetadataValue:
    epoch: int
    metadata_hash: int


@_frozen
class ShareGroupTargetAssignmentMetadataValue:
    assignment_epoch: int


@_frozen
class ShareGroupTargetAssignmentMemberValue:
    topic_partitions: tuple[TopicIdPartitions, ...]


@_frozen
class ShareGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: tuple[TopicIdPartitions, ...]


@_frozen
class ShareTopicPartitions:
    topic_id: uuid.UUID
    topic_name: str
    partitions: tuple[int, ...]


@_frozen
class ShareTopic:
    topic_id: uuid.UUID
    topic_name: str


@_frozen
class ShareGroupStatePartitionMetadataValue:
    initializing_topics: tuple[ShareTopicPartitions, ...]
    initialized_topics: tuple[ShareTopicPartitions, ...]
    deleting_topics: tuple[ShareTopic, ...]


# -- KIP-1071 Streams groups (types 17, 19-23) ---------------------------------------------------------


@_frozen
class StreamsGroupMetadataValue:
    epoch: int
    metadata_hash: int


@_frozen
class Endpoint:
    host: str
    port: int


@_frozen
class KeyValue:
    key: str
    value: str


@_frozen
class StreamsGroupMemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    topology_epoch: int
    process_id: str
    user_endpoint: Endpoint | None
    client_tags: tuple[KeyValue, ...]


@_frozen
class StreamsGroupTargetAssignmentMetadataValue:
    assignment_epoch: int


@_frozen
class TaskIds:
    subtopology_id: str
    partitions: tuple[int, ...]


@_frozen
class StreamsGroupTargetAssignmentMemberValue:
    active_tasks: tuple[TaskIds, ...]
    standby_tasks: tuple[TaskIds, ...]
    warmup_tasks: tuple[TaskIds, ...]


@_frozen
class StreamsGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    active_tasks: tuple[TaskIds, ...]
    standby_tasks: tuple[TaskIds, ...]
    warmup_tasks: tuple[TaskIds, ...]
    active_tasks_pending_revocation: tuple[TaskIds, ...]
    standby_tasks_pending_revocation: tuple[TaskIds, ...]
    warmup_tasks_pending_revocation: tuple[TaskIds, ...]


@_frozen
class TopicConfig:
    key: str
    value: str


@_frozen
class TopicInfo:
    name: str
    partitions: int
    replication_factor: int
    topic_configs: tuple[TopicConfig, ...]


@_frozen
class CopartitionGroup:
    source_topics: tuple[int, ...]
    source_topic_regex: tuple[int, ...]
    repartition_source_topics: tuple[int, ...]


@_frozen
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...]
    source_topic_regex: tuple[str, ...]
    state_changelog_topics: tuple[TopicInfo, ...]
    repartition_sink_topics: tuple[str, ...]
    repartition_source_topics: tuple[TopicInfo, ...]
    copartition_groups: tuple[CopartitionGroup, ...]


@_frozen
class StreamsGroupTopologyValue:
    epoch: int
    subtopologies: tuple[Subtopology, ...]


RecordValue = Union[
    LegacyOffsetCommitValue, OffsetCommitValue, GroupMetadataValue,
    ConsumerGroupMetadataValue, ConsumerGroupPartitionMetadataValue, ConsumerGroupMemberMetadataValue,
    ConsumerGroupTargetAssignmentMetadataValue, ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupCurrentMemberAssignmentValue, ConsumerGroupRegularExpressionValue,
    ShareGroupMemberMetadataValue, ShareGroupMetadataValue, ShareGroupTargetAssignmentMetadataValue,
    ShareGroupTargetAssignmentMemberValue, ShareGroupCurrentMemberAssignmentValue,
    ShareGroupStatePartitionMetadataValue,
    StreamsGroupMetadataValue, StreamsGroupMemberMetadataValue, StreamsGroupTargetAssignmentMetadataValue,
    StreamsGroupTargetAssignmentMemberValue, StreamsGroupCurrentMemberAssignmentValue,
    StreamsGroupTopologyValue,
]


@_frozen
class CoordinatorRecord:
    """One record of ``__consumer_offsets``: type, key, and the value with its version.

    ``value`` and ``version`` are None for a tombstone (Kafka's null value: the group, member or
    offset is gone, and compaction will drop the key).
    """

    type: RecordType
    key: RecordKey
    version: int | None
    value: RecordValue | None

    @property
    def group_id(self) -> str:
        return self.key.group_id

    @property
    def is_tombstone(self) -> bool:
        return self.value is None
