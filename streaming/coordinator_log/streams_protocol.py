"""Kafka Streams' user data inside the consumer protocol: what a Streams client tells its leader.

A Kafka Streams application is a classic consumer group whose assignor is ``stream``
(``StreamsPartitionAssignor``); its members' subscription user data is a ``SubscriptionInfoData``
(kafka-streams 4.1.1, ``common/message/SubscriptionInfoData.json``, versions 1-11, not flexible)
and the leader's assignment user data an ``AssignmentInfo`` (hand-written with a
``DataInputStream``, versions 1-11). Read as ``SubscriptionInfo.decode`` and ``AssignmentInfo.decode``
read them:

- a subscription of a version above 11 (from a newer client, during a version probe) carries only
  its version and latest supported version, which is all Streams reads of it;
- from v7 on, a subscription has no previous and standby task lists but task offset sums, from
  which Streams derives both (an offset sum of -2, ``Task.LATEST_OFFSET``, marks a running active
  task; anything else a standby or a task with local state) and, on the leader, each task's lag;
- strings in ``AssignmentInfo`` are Java's "modified UTF-8" (``DataInputStream.readUTF``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from .wire import Reader

LATEST_SUPPORTED_VERSION = 11
#: ``Task.LATEST_OFFSET``: a task offset sum that means "running active task here".
LATEST_OFFSET = -2
#: ``SubscriptionInfo.UNKNOWN_OFFSET_SUM``: what a pre-v7 standby task is given.
UNKNOWN_OFFSET_SUM = -3
_UNKNOWN = -1
_MIN_OFFSET_SUM_VERSION = 7
_MIN_NAMED_TOPOLOGY_VERSION = 10


@dataclass(frozen=True, slots=True, order=True)
class StreamsTaskId:
    subtopology: int
    partition: int
    topology: str | None = None  # named topologies (v10+), None when unnamed


@dataclass(frozen=True, slots=True)
class StreamsSubscriptionInfo:
    version: int
    latest_supported_version: int  # v3+, else -1
    process_id: uuid.UUID | None  # None only for a version this client cannot read
    prev_tasks: tuple[StreamsTaskId, ...]  # v1-6
    standby_tasks: tuple[StreamsTaskId, ...]  # v1-6
    user_endpoint: str | None  # v2+, "host:port"; None when empty
    task_offset_sums: tuple[tuple[StreamsTaskId, int], ...]  # v7+
    unique_field: int  # v8+
    error_code: int  # v9+
    client_tags: tuple[tuple[str, str], ...]  # v11+

    def offset_sums(self) -> dict[StreamsTaskId, int]:
        """Offset sum per task, as ``SubscriptionInfo.taskOffsetSums`` gives them for any version."""
        if self.version >= _MIN_OFFSET_SUM_VERSION:
            return dict(self.task_offset_sums)
        sums = {task: LATEST_OFFSET for task in self.prev_tasks}
        sums.update((task, UNKNOWN_OFFSET_SUM) for task in self.standby_tasks)
        return sums


@dataclass(frozen=True, slots=True)
class HostPartitions:
    host: str
    port: int
    partitions: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class StreamsAssignmentInfo:
    version: int
    commonly_supported_version: int  # v3+, else -1
    active_tasks: tuple[StreamsTaskId, ...]
    standby_tasks: tuple[tuple[StreamsTaskId, tuple[tuple[str, int], ...]], ...]
    partitions_by_host: tuple[HostPartitions, ...]  # v2+
    standby_partitions_by_host: tuple[HostPartitions, ...]  # v6+
    error_code: int  # v4+, else 0
    next_rebalance_ms: int  # v7+, else Long.MAX_VALUE


_LONG_MAX = (1 << 63) - 1


def _subscription_task_id(reader: Reader) -> StreamsTaskId:
    return StreamsTaskId(reader.int32("task subtopology"), reader.int32("task partition"))


def decode_subscription_info(data: bytes, context: str) -> StreamsSubscriptionInfo:
    reader = Reader(data, context)
    version = reader.int32("version")
    if version > LATEST_SUPPORTED_VERSION:
        latest = reader.int32("latest supported version")
        _validate(reader, version, latest)
        return StreamsSubscriptionInfo(version, latest, None, (), (), None, (), 0, 0, ())
    latest = reader.int32("latest supported version") if version >= 3 else _UNKNOWN
    _validate(reader, version, latest)
    process_id = reader.uuid("process id")
    prev_tasks = standby_tasks = ()
    if version <= 6:
        prev_tasks = tuple(_subscription_task_id(reader)
                           for _ in range(reader.array_length(False, "previous tasks", 8)))
        standby_tasks = tuple(_subscription_task_id(reader)
                              for _ in range(reader.array_length(False, "standby tasks", 8)))
    endpoint = reader.bytes(False, "user endpoint") if version >= 2 else b""
    sums: list[tuple[StreamsTaskId, int]] = []
    if version >= _MIN_OFFSET_SUM_VERSION:
        for _ in range(reader.array_length(False, "task offset sums", 8)):
            subtopology = reader.int32("task subtopology")
            if version >= _MIN_NAMED_TOPOLOGY_VERSION:
                partition = reader.int32("task partition")
                offset_sum = reader.int64("task offset sum")
                topology = reader.nullable_string(False, "named topology")
                sums.append((StreamsTaskId(subtopology, partition, topology or None), offset_sum))
            else:
                for _ in range(reader.array_length(False, "partition offset sums", 12)):
                    partition = reader.int32("task partition")
                    sums.append((StreamsTaskId(subtopology, partition), reader.int64("task offset sum")))
    unique_field = reader.int8("unique field") if version >= 8 else 0
    error_code = reader.int32("error code") if version >= 9 else 0
    tags: dict[str, str] = {}
    if version >= 11:
        for _ in range(reader.array_length(False, "client tags", 8)):
            key = _utf8(reader, reader.bytes(False, "client tag key"), "client tag key")
            if key in tags:  # SubscriptionInfo.clientTags() refuses a repeated key
                raise reader.error(f"client tag {key!r} appears twice")
            tags[key] = _utf8(reader, reader.bytes(False, "client tag value"), "client tag value")
    return StreamsSubscriptionInfo(version, latest, process_id, prev_tasks, standby_tasks,
                                   _utf8(reader, endpoint, "user endpoint") or None, tuple(sums),
                                   unique_field, error_code, tuple(tags.items()))


def _validate(reader: Reader, version: int, latest: int) -> None:
    """``SubscriptionInfo.validateVersions``: which (version, latest supported) pairs are sane."""
    if latest == _UNKNOWN and not 1 <= version <= 2:
        raise reader.error(f"version {version} without a latest supported version (only 1 and 2 may)")
    if latest != _UNKNOWN and not 1 <= version <= latest:
        raise reader.error(f"version {version} outside 1..{latest} (its latest supported version)")


def _utf8(reader: Reader, raw: bytes, field: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise reader.error(f"bad UTF-8 in {field} at its byte {e.start}") from None


# -- AssignmentInfo: DataInputStream, Java's modified UTF-8 -----------------------------------------


def _java_utf(reader: Reader, field: str) -> str:
    """``DataInputStream.readUTF``: uint16 length, then modified UTF-8 (CESU-8 with 0 as C0 80)."""
    size = reader.uint16(field)
    at = reader.take(size, field)
    raw = reader.data[at:at + size]
    try:
        return raw.decode("utf-8")  # the common case: plain ASCII/UTF-8 without NUL or astral chars
    except UnicodeDecodeError:
        pass
    units = []
    i = 0
    while i < size:
        c = raw[i]
        if c < 0x80:
            units.append(c)
            i += 1
        elif c >> 5 == 0b110 and i + 1 < size and raw[i + 1] >> 6 == 0b10:
            units.append(((c & 0x1F) << 6) | (raw[i + 1] & 0x3F))
            i += 2
        elif c >> 4 == 0b1110 and i + 2 < size and raw[i + 1] >> 6 == 0b10 and raw[i + 2] >> 6 == 0b10:
            units.append(((c & 0x0F) << 12) | ((raw[i + 1] & 0x3F) << 6) | (raw[i + 2] & 0x3F))
            i += 3
        else:
            raise reader.error(f"bad modified UTF-8 in {field} at byte {at + i}")
    return _utf16(reader, units, field, at)


def _utf16(reader: Reader, units: list[int], field: str, at: int) -> str:
    try:
        return b"".join(u.to_bytes(2, "big") for u in units).decode("utf-16-be")
    except UnicodeDecodeError:
        raise reader.error(f"unpaired surrogate in {field} at byte {at}") from None


def _assignment_task_id(reader: Reader, version: int) -> StreamsTaskId:
    subtopology = reader.int32("task subtopology")
    partition = reader.int32("task partition")
    topology = None
    if version >= _MIN_NAMED_TOPOLOGY_VERSION:
        at = reader.pos
        chars = reader.int32("named topology length")
        if chars < 0 or 2 * chars > reader.remaining:
            raise reader.error(f"truncated at byte {at}: named topology claims {chars} chars")
        units = [reader.uint16("named topology") for _ in range(chars)]
        topology = _utf16(reader, units, "named topology", at) or None
    return StreamsTaskId(subtopology, partition, topology)


def _count(reader: Reader, field: str, min_item_size: int) -> int:
    return reader.array_length(False, field, min_item_size)


# Streams keeps partitions in sets and tasks and hosts as map keys: a repeated entry counts once
# (and a repeated key keeps its last value), so the same holds here.


def _topic_partitions(reader: Reader) -> tuple[tuple[str, int], ...]:
    return tuple(dict.fromkeys((_java_utf(reader, "topic"), reader.int32("partition"))
                               for _ in range(_count(reader, "topic partitions", 6))))


def _indexed_topic_partitions(reader: Reader, topics: dict[int, str]) -> tuple[tuple[str, int], ...]:
    out = []
    for _ in range(_count(reader, "topic partitions", 8)):
        index = reader.int32("topic index")
        if index not in topics:
            raise reader.error(f"topic index {index} is not in the assignment's topic dictionary")
        out.append((topics[index], reader.int32("partition")))
    return tuple(dict.fromkeys(out))


def _hosts(reader: Reader, topics: dict[int, str] | None) -> tuple[HostPartitions, ...]:
    hosts: dict[tuple[str, int], HostPartitions] = {}
    for _ in range(_count(reader, "hosts", 10)):
        host, port = _java_utf(reader, "host"), reader.int32("port")
        partitions = _topic_partitions(reader) if topics is None else _indexed_topic_partitions(reader, topics)
        hosts[(host, port)] = HostPartitions(host, port, partitions)
    return tuple(hosts.values())


def decode_assignment_info(data: bytes, context: str) -> StreamsAssignmentInfo:
    reader = Reader(data, context)
    version = reader.int32("version")
    if not 1 <= version <= LATEST_SUPPORTED_VERSION:
        raise reader.error(f"unknown Streams assignment version {version} "
                           f"(Kafka 4.1 reads 1..{LATEST_SUPPORTED_VERSION})")
    common = reader.int32("commonly supported version") if version >= 3 else _UNKNOWN
    task_size = 12 if version >= _MIN_NAMED_TOPOLOGY_VERSION else 8
    active = tuple(_assignment_task_id(reader, version) for _ in range(_count(reader, "active tasks", task_size)))
    standby = tuple({_assignment_task_id(reader, version): _topic_partitions(reader)
                     for _ in range(_count(reader, "standby tasks", task_size + 4))}.items())
    by_host: tuple[HostPartitions, ...] = ()
    standby_by_host: tuple[HostPartitions, ...] = ()
    if version >= 5:
        topics = {}
        for _ in range(_count(reader, "topic dictionary", 6)):
            index = reader.int32("topic index")
            topics[index] = _java_utf(reader, "topic")
        by_host = _hosts(reader, topics)
        if version >= 6:
            standby_by_host = _hosts(reader, topics)
    elif version >= 2:
        by_host = _hosts(reader, None)
    error_code = reader.int32("error code") if version >= 4 else 0
    next_rebalance = reader.int64("next rebalance time") if version >= 7 else _LONG_MAX
    return StreamsAssignmentInfo(version, common, active, standby, by_host, standby_by_host, error_code,
                                 next_rebalance)
