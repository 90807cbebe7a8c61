"""The consumer protocol's bytes inside a classic group's record: subscription and assignment.

A member of a group of protocol type ``consumer`` sends a ``ConsumerProtocolSubscription``
(kafka-clients 4.1.1, ``common/message/ConsumerProtocolSubscription.json``, v0-3, not flexible)
and receives a ``ConsumerProtocolAssignment``; the coordinator stores both bytes unread in its
``GroupMetadataValue``. Each starts with an int16 version.

Read as Kafka's own ``ConsumerProtocol.deserializeSubscription``/``deserializeAssignment`` read
them, because those are what the group's leader ran: a version above 3 is read as v3 (the
protocol promises that later versions only append fields), and bytes after the last known field
are ignored for the same reason. A negative version or a truncated field is an error.

The assignor's user data is kept raw and, for the two assignors whose format is Kafka's, decoded:
``sticky`` (the previous assignment and generation, ``StickyAssignor``'s
``STICKY_ASSIGNOR_USER_DATA_V1``, falling back to V0 and then to nothing exactly as Kafka does) and
``stream`` (Kafka Streams' ``SubscriptionInfoData`` and ``AssignmentInfo``, :mod:`.streams_protocol`).
"""

from __future__ import annotations

from dataclasses import dataclass

from streaming.errors import CoordinatorRecordError

from .streams_protocol import (
    StreamsAssignmentInfo, StreamsSubscriptionInfo, decode_assignment_info, decode_subscription_info,
)
from .wire import Reader

#: The highest version kafka-clients 4.1 knows; newer ones are read as this one.
HIGHEST_VERSION = 3
STICKY = "sticky"
_DEFAULT_GENERATION = -1
STREAMS = "stream"


@dataclass(frozen=True, slots=True)
class TopicPartitions:
    topic: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class StickyUserData:
    """``StickyAssignor``'s user data: the member's previous assignment and its generation (V1)."""

    partitions: tuple[TopicPartitions, ...]
    generation: int | None  # absent in the V0 layout


@dataclass(frozen=True, slots=True)
class ConsumerSubscription:
    version: int
    topics: tuple[str, ...]
    user_data: bytes | None
    owned_partitions: tuple[TopicPartitions, ...]  # v1+
    generation_id: int  # v2+, else -1
    rack_id: str | None  # v3+
    assignor_data: StickyUserData | StreamsSubscriptionInfo | None = None


@dataclass(frozen=True, slots=True)
class ConsumerAssignment:
    version: int
    assigned_partitions: tuple[TopicPartitions, ...]
    user_data: bytes | None
    assignor_data: StreamsAssignmentInfo | None = None


def _read_version(reader: Reader) -> tuple[int, int]:
    """The version written, and the one to read it as (Kafka reads a newer version as its highest)."""
    version = reader.int16("version")
    if version < 0:
        raise reader.error(f"unsupported version {version}")
    return version, min(version, HIGHEST_VERSION)


def _topic_partitions(reader: Reader, field: str) -> tuple[TopicPartitions, ...]:
    count = reader.array_length(False, field, 6)
    return tuple(TopicPartitions(reader.string(False, "topic"), reader.int32_array(False, "partitions"))
                 for _ in range(count))


def decode_subscription(data: bytes, protocol: str | None, context: str) -> ConsumerSubscription:
    """``data`` is a member's subscription bytes; ``protocol`` the group's chosen assignor."""
    reader = Reader(data, context)
    version, read_as = _read_version(reader)
    topics = reader.string_array(False, "topics")
    user_data = reader.nullable_bytes(False, "user data")
    owned = _topic_partitions(reader, "owned partitions") if read_as >= 1 else ()
    generation_id = reader.int32("generation id") if read_as >= 2 else -1
    rack_id = reader.nullable_string(False, "rack id") if read_as >= 3 else None
    assignor_data = None
    if user_data:
        if protocol == STICKY:
            assignor_data = sticky_user_data(user_data)
        elif protocol == STREAMS:
            assignor_data = decode_subscription_info(user_data, f"{context}, Streams subscription info")
    return ConsumerSubscription(version, topics, user_data, owned, generation_id, rack_id, assignor_data)


def decode_assignment(data: bytes, protocol: str | None, context: str) -> ConsumerAssignment:
    reader = Reader(data, context)
    version, _ = _read_version(reader)  # every version so far has the same two fields
    assigned = _topic_partitions(reader, "assigned partitions")
    user_data = reader.nullable_bytes(False, "user data")
    assignor_data = None
    if user_data and protocol == STREAMS:
        assignor_data = decode_assignment_info(user_data, f"{context}, Streams assignment info")
    return ConsumerAssignment(version, assigned, user_data, assignor_data)


def sticky_user_data(data: bytes) -> StickyUserData:
    """``StickyAssignor``'s user data as its ``memberData`` reads it.

    Kafka reads the V1 layout (topic partitions, generation), then the V0 layout (topic partitions
    only); if neither parses, it ignores the previous assignment: no partitions, generation -1
    (``DEFAULT_GENERATION``), and so does this. Topic names that are not UTF-8 get U+FFFD, as
    Java's strings do (such a topic matches no subscribed topic, so the assignor drops it).
    """
    for with_generation in (True, False):
        reader = Reader(data, "sticky user data", lenient_utf8=True)
        try:
            partitions = _topic_partitions(reader, "previous assignment")
            generation = reader.int32("generation") if with_generation else None
        except CoordinatorRecordError:
            continue
        return StickyUserData(partitions, generation)
    return StickyUserData((), _DEFAULT_GENERATION)
