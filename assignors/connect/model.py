"""Inputs, outputs and leader-local state of Kafka Connect's assignors (spec section 5).

Everything here is an immutable value. The incremental cooperative assignor keeps, in Kafka, a
handful of fields on the leader's assignor instance between rebalances; here that state is the
explicit :class:`ConnectAssignorState`, passed in and handed back, so that a caller such as the
streaming job can keep it in its own state store and replay a leader's decisions exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Mapping, NamedTuple

from ..errors import InvalidGroupSpecError

#: Kafka's default ``scheduled.rebalance.max.delay.ms`` (5 minutes).
DEFAULT_SCHEDULED_REBALANCE_MAX_DELAY_MS = 300_000

#: ``Assignment.NO_ERROR`` / ``Assignment.CONFIG_MISMATCH`` of Connect's protocol.
ConnectError = Literal["NONE", "CONFIG_MISMATCH"]


class InvalidConnectSpecError(InvalidGroupSpecError):
    """A Connect group spec is malformed; the message names the worker, connector or task."""


class ConnectorTaskId(NamedTuple):
    """Kafka's ``ConnectorTaskId``; ordered by connector name, then task number (spec 0.1)."""

    connector: str
    task: int

    def __str__(self) -> str:  # Kafka prints task ids as "connector-3"
        return f"{self.connector}-{self.task}"


def java_string_key(s: str) -> bytes:
    """Sort key equal to Java ``String.compareTo`` (UTF-16 code units), also past the BMP."""
    return s.encode("utf-16-be", "surrogatepass")


def task_key(t: ConnectorTaskId) -> tuple[bytes, int]:
    return (java_string_key(t.connector), t.task)


@dataclass(frozen=True, slots=True)
class ConnectWorkerSpec:
    """One worker's JoinGroup metadata.

    ``connectors`` and ``tasks`` are what the worker reports running, in the order of its
    metadata: load-balancing revocations take the *first* excess items of that order, as Kafka does.
    """

    worker_id: str
    connectors: tuple[str, ...] = ()
    tasks: tuple[ConnectorTaskId, ...] = ()
    #: Offset of the config topic the worker has read up to.
    config_offset: int = 0
    url: str = ""


@dataclass(frozen=True, slots=True)
class ConnectGroupSpec:
    """One Connect rebalance as the leader sees it.

    ``workers`` are in the order the JoinGroup response listed them (the order in which Kafka's
    ``memberConfigs`` HashMap was filled); where Kafka iterates that map we reproduce Java
    ``HashMap`` order relative to it (:func:`assignors.java_order.hashmap_order`).
    ``connectors`` maps each configured connector to its number of tasks (tasks ``0..n-1``).
    """

    workers: tuple[ConnectWorkerSpec, ...]
    connectors: Mapping[str, int]
    leader_id: str
    #: Offset of the leader's config snapshot, after the fresh read Kafka does when behind.
    leader_config_offset: int
    #: Generation of this rebalance (``coordinator.generationId()``).
    generation_id: int = 0
    #: ``coordinator.lastCompletedGenerationId()``: the last generation this leader completed.
    last_completed_generation_id: int = -1
    scheduled_rebalance_max_delay_ms: int = DEFAULT_SCHEDULED_REBALANCE_MAX_DELAY_MS

    def validate(self) -> None:
        if not self.workers:
            raise InvalidConnectSpecError("a Connect rebalance needs at least one worker; got none")
        seen: set[str] = set()
        for w in self.workers:
            if w.worker_id in seen:
                raise InvalidConnectSpecError(f"worker {w.worker_id!r} appears twice in the group spec")
            seen.add(w.worker_id)
            for t in w.tasks:
                if not isinstance(t, ConnectorTaskId):
                    raise InvalidConnectSpecError(
                        f"worker {w.worker_id!r} reports task {t!r}: use ConnectorTaskId(connector, task)"
                    )
        if self.leader_id not in seen:
            raise InvalidConnectSpecError(
                f"leader {self.leader_id!r} is not one of the workers {sorted(seen)}"
            )
        for name, count in self.connectors.items():
            if count < 0:
                raise InvalidConnectSpecError(f"connector {name!r} has a negative task count {count}")
        if self.scheduled_rebalance_max_delay_ms < 0:
            raise InvalidConnectSpecError(
                "scheduled_rebalance_max_delay_ms must be >= 0, got "
                f"{self.scheduled_rebalance_max_delay_ms}"
            )

    def configured_tasks(self) -> list[ConnectorTaskId]:
        """Every configured task, in ``ConnectorTaskId`` order."""
        tasks = [ConnectorTaskId(c, i) for c, n in self.connectors.items() for i in range(n)]
        tasks.sort(key=task_key)
        return tasks


@dataclass(frozen=True, slots=True)
class ConnectWorkerAssignment:
    """What one worker is told.

    ``connectors``/``tasks`` are the full assignment it runs after this round (Kafka's
    ``allAssignedConnectors``/``allAssignedTasks``); ``assigned_*`` are the newly added items
    (what goes on the wire), ``revoked_*`` what it must stop; ``delay_ms`` is the delay after which
    it rejoins on its own (0 = none).
    """

    worker_id: str
    connectors: tuple[str, ...] = ()
    tasks: tuple[ConnectorTaskId, ...] = ()
    assigned_connectors: tuple[str, ...] = ()
    assigned_tasks: tuple[ConnectorTaskId, ...] = ()
    revoked_connectors: tuple[str, ...] = ()
    revoked_tasks: tuple[ConnectorTaskId, ...] = ()
    delay_ms: int = 0


@dataclass(frozen=True, slots=True)
class ConnectAssignment:
    """The leader's answer for the whole group; ``workers`` follows spec order."""

    workers: dict[str, ConnectWorkerAssignment]
    error: ConnectError = "NONE"
    leader_id: str = ""
    #: The config offset the assignment was computed at (members behind it wait to catch up).
    config_offset: int = 0
    delay_ms: int = 0
    #: Lost connectors/tasks held back this round, waiting for their worker or the delay to expire.
    lost_pending_connectors: tuple[str, ...] = ()
    lost_pending_tasks: tuple[ConnectorTaskId, ...] = ()


@dataclass(frozen=True, slots=True)
class ConnectAssignorState:
    """The leader-local memory of ``IncrementalCooperativeAssignor`` between rebalances.

    A new leader starts from ``ConnectAssignorState()`` (or ``None``), exactly as a fresh Kafka
    assignor instance does (spec 5.2, scenario 42).
    """

    previous_connectors: frozenset[str] = frozenset()
    previous_tasks: frozenset[ConnectorTaskId] = frozenset()
    previous_revoked_connectors: frozenset[str] = frozenset()
    previous_revoked_tasks: frozenset[ConnectorTaskId] = frozenset()
    previous_generation_id: int = -1
    previous_members: frozenset[str] = frozenset()
    #: Absolute time (ms) of the scheduled rebalance; 0 = none scheduled.
    scheduled_rebalance_ms: int = 0
    delay_ms: int = 0
    #: Workers seen empty during a lost-work delay, in Kafka's LinkedHashSet insertion order.
    candidate_workers: tuple[str, ...] = ()
    revoked_in_previous: bool = False
    num_successive_revoking_rebalances: int = 0


__all__ = [
    "ConnectAssignment",
    "ConnectAssignorState",
    "ConnectError",
    "ConnectGroupSpec",
    "ConnectWorkerAssignment",
    "ConnectWorkerSpec",
    "ConnectorTaskId",
    "DEFAULT_SCHEDULED_REBALANCE_MAX_DELAY_MS",
    "InvalidConnectSpecError",
    "java_string_key",
    "task_key",
]
