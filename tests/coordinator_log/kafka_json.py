"""Our decoded records in the shape of Kafka's own JSON, and a field-by-field comparison with it.

The Java reference (jvm/coordinator-reference) prints each record as Kafka's generated
``CoordinatorRecordJsonConverters`` write it, plus what the group's leader decodes from each
member's protocol bytes. :func:`as_kafka_json` renders a :class:`CoordinatorRecord` the same way
(lower camel case of Kafka's field names, topic ids in Kafka's base64 form, bytes in base64), and
:func:`compare` walks both documents leaf by leaf.

Kafka's converters leave out a field the record's version does not have (and a tagged field at its
default); ours always has it, at Kafka's default. So a field only on our side counts as agreeing
only when it holds that default (-1, 0, null, "" or empty); any other value there is a mismatch.
"""

from __future__ import annotations

import base64
import dataclasses
import uuid
from dataclasses import dataclass, field

from streaming.coordinator_log import CoordinatorRecord, kafka_uuid
from streaming.coordinator_log.connect_protocol import ConnectAssignment, ConnectWorkerMetadata
from streaming.coordinator_log.consumer_protocol import ConsumerAssignment, ConsumerSubscription, StickyUserData
from streaming.coordinator_log.streams_protocol import (
    LATEST_OFFSET, HostPartitions, StreamsAssignmentInfo, StreamsSubscriptionInfo, StreamsTaskId,
)

_DEFAULTS = (None, -1, 0, "", [], {})
#: Our field names that Kafka spells otherwise (the classic records' keys say "group").
_KEY_NAMES = {"group_id": "group"}
_EMBEDDED = ("decoded_subscription", "decoded_assignment", "assignor_data")


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w.capitalize() for w in rest)


def _plain(value, names: dict[str, str] | None = None):
    """A dataclass tree as JSON values, named as Kafka's JSON converters name them."""
    if dataclasses.is_dataclass(value):
        return {(names or {}).get(f.name, _camel(f.name)): _plain(getattr(value, f.name))
                for f in dataclasses.fields(value) if f.name not in _EMBEDDED}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, uuid.UUID):
        return kafka_uuid(value)
    return value


def as_kafka_json(record: CoordinatorRecord) -> dict:
    out = {
        "type": int(record.type),
        "key": _plain(record.key, _KEY_NAMES if record.type <= 2 else None),
        "version": record.version,
        "value": None if record.value is None else _plain(record.value),
    }
    if record.type == 2 and record.value is not None:
        out["members"] = [_member(m) for m in record.value.members]
    return out


def _member(member) -> dict:
    out = {"memberId": member.member_id}
    if member.decoded_subscription is not None:
        out["subscription"] = _embedded(member.decoded_subscription)
    if member.decoded_assignment is not None:
        out["assignment"] = _embedded(member.decoded_assignment)
    return out


def _task(task: StreamsTaskId) -> str:
    return (f"{task.topology}__" if task.topology else "") + f"{task.subtopology}_{task.partition}"


def _tps(pairs) -> list[str]:
    return sorted(f"{topic}-{partition}" for topic, partition in pairs)


def _hosts(hosts: tuple[HostPartitions, ...]) -> dict:
    return {f"{h.host}:{h.port}": _tps(h.partitions) for h in hosts}


def _embedded(value) -> dict:
    if isinstance(value, ConsumerSubscription):
        out = {"topics": list(value.topics), "userData": _plain(value.user_data),
               "ownedPartitions": [{"topic": tp.topic, "partitions": list(tp.partitions)} for tp in value.owned_partitions],
               "generationId": value.generation_id, "rackId": value.rack_id, "version": value.version}
        if isinstance(value.assignor_data, StickyUserData):
            out["sticky"] = {"partitions": _tps((tp.topic, p) for tp in value.assignor_data.partitions for p in tp.partitions),
                             "generation": value.assignor_data.generation}
        elif isinstance(value.assignor_data, StreamsSubscriptionInfo):
            out["streams"] = _streams_subscription(value.assignor_data)
        return out
    if isinstance(value, ConsumerAssignment):
        out = {"assignedPartitions": [{"topic": tp.topic, "partitions": list(tp.partitions)}
                                      for tp in value.assigned_partitions],
               "userData": _plain(value.user_data), "version": value.version}
        if isinstance(value.assignor_data, StreamsAssignmentInfo):
            out["streams"] = _streams_assignment(value.assignor_data)
        return out
    if isinstance(value, ConnectWorkerMetadata):
        return {"version": value.version, "url": value.url, "configOffset": value.config_offset,
                "allocation": None if value.allocation is None else _embedded(value.allocation)}
    if isinstance(value, ConnectAssignment):
        return {"version": value.version, "error": value.error, "leader": value.leader, "leaderUrl": value.leader_url,
                "configOffset": value.config_offset, "connectors": sorted(value.connectors),
                "tasks": sorted(f"{t.connector}-{t.task}" for t in value.tasks),
                "revokedConnectors": sorted(value.revoked_connectors),
                "revokedTasks": sorted(f"{t.connector}-{t.task}" for t in value.revoked_tasks),
                "delay": value.delay_ms}
    raise TypeError(type(value))


def _streams_subscription(info: StreamsSubscriptionInfo) -> dict:
    out = {"version": info.version, "latestSupportedVersion": info.latest_supported_version}
    if info.process_id is None:
        return out
    sums = info.offset_sums()
    out.update({
        "processId": str(info.process_id), "userEndPoint": info.user_endpoint, "errorCode": info.error_code,
        "taskOffsetSums": {_task(t): s for t, s in sorted(sums.items())},
        "prevTasks": sorted(_task(t) for t, s in sums.items() if s == LATEST_OFFSET),
        "standbyTasks": sorted(_task(t) for t, s in sums.items() if s != LATEST_OFFSET),
        "clientTags": dict(sorted(info.client_tags)),
    })
    return out


def _streams_assignment(info: StreamsAssignmentInfo) -> dict:
    return {"version": info.version, "commonlySupportedVersion": info.commonly_supported_version,
            "activeTasks": [_task(t) for t in info.active_tasks],
            "standbyTasks": {_task(t): _tps(tps) for t, tps in sorted(info.standby_tasks)},
            "partitionsByHost": _hosts(info.partitions_by_host),
            "standbyPartitionsByHost": _hosts(info.standby_partitions_by_host),
            "errorCode": info.error_code, "nextRebalanceMs": info.next_rebalance_ms}


@dataclass
class Comparison:
    """Leaves compared, and where the two documents differ (path: Kafka's value, ours)."""

    leaves: int = 0
    agreed: int = 0
    differences: list[tuple[str, object, object]] = field(default_factory=list)

    def add(self, other: "Comparison") -> None:
        self.leaves += other.leaves
        self.agreed += other.agreed
        self.differences.extend(other.differences)


_MISSING = object()


def compare(kafka, ours, path: str = "") -> Comparison:
    result = Comparison()
    _walk(kafka, ours, path, result)
    return result


def _walk(kafka, ours, path: str, result: Comparison) -> None:
    if isinstance(kafka, dict) and isinstance(ours, dict):
        for k in kafka:
            _walk(kafka[k], ours.get(k, _MISSING), f"{path}.{k}", result)
        for k in ours.keys() - kafka.keys():
            result.leaves += 1
            if ours[k] in _DEFAULTS:
                result.agreed += 1
            else:
                result.differences.append((f"{path}.{k}", "(absent)", ours[k]))
        return
    if isinstance(kafka, list) and isinstance(ours, list) and len(kafka) == len(ours):
        if not kafka:
            result.leaves += 1
            result.agreed += 1
        for i, (a, b) in enumerate(zip(kafka, ours)):
            _walk(a, b, f"{path}[{i}]", result)
        return
    result.leaves += 1
    if kafka == ours and type(kafka) is type(ours):
        result.agreed += 1
    else:
        result.differences.append((path, kafka, "(absent)" if ours is _MISSING else ours))
