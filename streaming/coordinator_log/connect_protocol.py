"""Kafka Connect's bytes inside a classic group's record: worker metadata and assignment.

A Connect cluster is a classic group of protocol type ``connect``; the protocol the group chose
says which encoding its members' bytes use (connect-runtime 4.1.1, ``ConnectProtocolCompatibility``):

- ``default`` (eager, ``ConnectProtocol``): metadata = int16 version, worker url, config offset;
  assignment = version, error, leader, leader url, config offset, connectors with their tasks;
- ``compatible`` and ``sessioned`` (incremental cooperative, KIP-415/KIP-507,
  ``IncrementalCooperativeConnectProtocol`` v1/v2): the metadata adds the worker's previous
  allocation (itself an assignment, nullable bytes), and the assignment adds the revoked
  connectors and tasks and the delay before lost work is reassigned. Fields missing at the end of
  these two take their defaults (Kafka's ``TOLERATE_MISSING_FIELDS_WITH_DEFAULTS``).

Read as Kafka reads them: any version from 0 up is read with the layout of the chosen protocol
(Connect promises that later versions only append), trailing bytes are ignored, a negative
version is an error. In the connector/task lists a task number of -1 is the connector itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from .wire import Reader

EAGER = "default"
INCREMENTAL = ("compatible", "sessioned")
_CONNECTOR_TASK = -1


@dataclass(frozen=True, slots=True, order=True)
class ConnectorTaskId:
    connector: str
    task: int


@dataclass(frozen=True, slots=True)
class ConnectAssignment:
    version: int
    error: int
    leader: str
    leader_url: str
    config_offset: int
    connectors: tuple[str, ...]
    tasks: tuple[ConnectorTaskId, ...]
    revoked_connectors: tuple[str, ...] = ()  # incremental only
    revoked_tasks: tuple[ConnectorTaskId, ...] = ()
    delay_ms: int = 0  # scheduled rebalance delay (KIP-415), incremental only


@dataclass(frozen=True, slots=True)
class ConnectWorkerMetadata:
    version: int
    url: str
    config_offset: int
    allocation: ConnectAssignment | None = None  # the worker's previous assignment, incremental only


def is_connect_protocol(protocol: str | None) -> bool:
    """Whether Connect knows the protocol (``ConnectProtocolCompatibility.fromProtocol``: any case)."""
    return protocol is not None and (protocol.lower() == EAGER or protocol.lower() in INCREMENTAL)


def _eager(protocol: str | None) -> bool:
    return protocol is not None and protocol.lower() == EAGER


def _version(reader: Reader) -> int:
    version = reader.int16("version")
    if version < 0:
        raise reader.error(f"unsupported Connect protocol version {version}")
    return version


def _work(reader: Reader, field: str, nullable: bool) -> tuple[tuple[str, ...], tuple[ConnectorTaskId, ...]]:
    connectors: list[str] = []
    tasks: list[ConnectorTaskId] = []
    count = reader.array_length(False, field, 6, nullable=nullable)
    for _ in range(max(count, 0)):
        connector = reader.string(False, "connector")
        for task in reader.int32_array(False, "tasks"):
            if task == _CONNECTOR_TASK:
                connectors.append(connector)
            else:
                tasks.append(ConnectorTaskId(connector, task))
    return tuple(connectors), tuple(tasks)


def decode_assignment(data: bytes, protocol: str | None, context: str) -> ConnectAssignment:
    reader = Reader(data, context)
    version = _version(reader)
    if _eager(protocol):
        error = reader.int16("error")
        leader = reader.string(False, "leader")
        leader_url = reader.string(False, "leader url")
        offset = reader.int64("config offset")
        connectors, tasks = _work(reader, "assignment", nullable=False)
        return ConnectAssignment(version, error, leader, leader_url, offset, connectors, tasks)
    return _incremental_assignment(reader, version)


def _incremental_assignment(reader: Reader, version: int) -> ConnectAssignment:
    # ASSIGNMENT_V1 tolerates missing trailing fields: those with a default take it once the bytes
    # run out; error, leader, leader url and config offset have none.
    error = reader.int16("error")
    leader = reader.string(False, "leader")
    leader_url = reader.string(False, "leader url")
    offset = reader.int64("config offset")
    connectors, tasks = _work(reader, "assignment", nullable=True) if reader.remaining else ((), ())
    revoked_connectors, revoked_tasks = _work(reader, "revoked", nullable=True) if reader.remaining else ((), ())
    delay = reader.int32("delay") if reader.remaining else 0
    return ConnectAssignment(version, error, leader, leader_url, offset, connectors, tasks,
                             revoked_connectors, revoked_tasks, delay)


def decode_metadata(data: bytes, protocol: str | None, context: str) -> ConnectWorkerMetadata:
    reader = Reader(data, context)
    version = _version(reader)
    url = reader.string(False, "url")
    offset = reader.int64("config offset")
    if _eager(protocol):
        return ConnectWorkerMetadata(version, url, offset)
    allocation = reader.nullable_bytes(False, "allocation") if reader.remaining else None
    previous = None
    if allocation is not None:
        sub = Reader(allocation, f"{context}, previous allocation")
        previous = _incremental_assignment(sub, _version(sub))
    return ConnectWorkerMetadata(version, url, offset, previous)
