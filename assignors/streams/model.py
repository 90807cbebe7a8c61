"""Inputs and outputs of the Kafka Streams task assignor (spec section 4.1).

Process ids: a Kafka Streams client is keyed by its ``ProcessId`` (a ``java.util.UUID``), and
the assignor visits clients in UUID order, which compares the two 64-bit halves as *signed*
longs. When every process id in a spec parses as a UUID we use exactly that order. When any does
not (tests, simulations), all ids are ordered by Java ``String.compareTo`` instead (UTF-16 code
units). Mixing the two orders per id would not be a total order, hence all-or-nothing.

Task ids are Kafka ``TaskId`` strings ``"<subtopology>_<partition>"`` (``"0_1"``), ordered by
subtopology, then partition, numerically.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from typing import Mapping

from ..errors import InvalidGroupSpecError
from ..java_order import uuid_compare_key

#: ``Task.LATEST_OFFSET``: the client was running the task as active.
LATEST_OFFSET = -2
#: ``SubscriptionInfo.UNKNOWN_OFFSET_SUM``: the offset sum (and so the lag) is unknown.
UNKNOWN_OFFSET_SUM = -3
#: ``Long.MAX_VALUE``: an ``acceptable_recovery_lag`` that makes every client caught up.
LONG_MAX = (1 << 63) - 1

_TASK_ID = re.compile(r"^(\d+)_(\d+)$")


class InvalidStreamsSpecError(InvalidGroupSpecError):
    """A Streams group spec is malformed; the message names the client, task or config at fault."""


def task_sort_key(task: str) -> tuple[int, int]:
    """Kafka ``TaskId`` order for ``"subtopology_partition"`` ids."""
    m = _TASK_ID.match(task)
    if m is None:
        raise InvalidStreamsSpecError(
            f"task id {task!r} is not of the form '<subtopology>_<partition>' (for example '0_1')"
        )
    return (int(m.group(1)), int(m.group(2)))


def process_id_sort_keys(process_ids: list[str]) -> list[tuple]:
    """One sort key per id: signed UUID order if all ids are UUIDs, Java String order otherwise."""
    try:
        return [uuid_compare_key(uuid.UUID(p)) for p in process_ids]
    except ValueError:
        return [(p.encode("utf-16-be", "surrogatepass"),) for p in process_ids]


@dataclass(frozen=True, slots=True)
class StreamsClient:
    """One Kafka Streams instance (all its stream threads).

    Give either ``task_offset_sums`` (what the client's subscription reports: ``-2`` for a task it
    runs as active, else the summed changelog offsets of its local state; absent = no state) together
    with the group's ``task_end_offset_sums``, or ``task_lags`` directly (one per stateful task).
    """

    process_id: str
    #: Number of stream threads (consumers) of the client in this rebalance.
    capacity: int = 1
    task_offset_sums: Mapping[str, int] = field(default_factory=dict)
    task_lags: Mapping[str, int] | None = None
    #: KIP-708 client tags (``client.tag.*``).
    tags: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StreamsAssignmentConfig:
    acceptable_recovery_lag: int = 10_000
    num_standby_replicas: int = 0
    max_warmup_replicas: int = 2
    probing_rebalance_interval_ms: int = 600_000
    #: ``rack.aware.assignment.tags``: non-empty selects the client-tag-aware standby assignor.
    rack_aware_assignment_tags: tuple[str, ...] = ()

    def validate(self) -> None:
        if self.acceptable_recovery_lag < 0:
            raise InvalidStreamsSpecError(f"acceptable_recovery_lag must be >= 0, got {self.acceptable_recovery_lag}")
        if self.num_standby_replicas < 0:
            raise InvalidStreamsSpecError(f"num_standby_replicas must be >= 0, got {self.num_standby_replicas}")
        if self.max_warmup_replicas < 1:
            raise InvalidStreamsSpecError(f"max_warmup_replicas must be >= 1, got {self.max_warmup_replicas}")
        if self.probing_rebalance_interval_ms < 60_000:
            raise InvalidStreamsSpecError(
                f"probing_rebalance_interval_ms must be >= 60000, got {self.probing_rebalance_interval_ms}"
            )


@dataclass(frozen=True, slots=True)
class StreamsGroupSpec:
    clients: tuple[StreamsClient, ...]
    stateful_tasks: tuple[str, ...]
    stateless_tasks: tuple[str, ...] = ()
    #: Summed changelog end offsets per stateful task; ``None`` with clients that give offset sums =
    #: the fetch failed (Kafka then runs its fallback assignor, see ``fallback.py``). Not needed
    #: when every client gives ``task_lags``.
    task_end_offset_sums: Mapping[str, int] | None = None
    config: StreamsAssignmentConfig = field(default_factory=StreamsAssignmentConfig)
    #: The leader's clock at assignment time: the probing rebalance is scheduled relative to it.
    now_ms: int = 0

    def validate(self) -> None:
        self.config.validate()
        if not self.clients:
            raise InvalidStreamsSpecError("a Streams rebalance needs at least one client; got none")
        seen: set[str] = set()
        for c in self.clients:
            if c.process_id in seen:
                raise InvalidStreamsSpecError(f"client {c.process_id!r} appears twice in the group spec")
            seen.add(c.process_id)
            if c.capacity < 1:
                raise InvalidStreamsSpecError(f"client {c.process_id!r} has capacity {c.capacity}; it needs >= 1 thread")
        stateful = set(self.stateful_tasks)
        if len(stateful) != len(self.stateful_tasks):
            raise InvalidStreamsSpecError("stateful_tasks lists a task twice")
        for t in self.stateless_tasks:
            if t in stateful:
                raise InvalidStreamsSpecError(f"task {t!r} is listed both as stateful and as stateless")
        for t in (*self.stateful_tasks, *self.stateless_tasks):
            task_sort_key(t)


@dataclass(frozen=True, slots=True)
class StreamsClientAssignment:
    """Tasks of one client, each tuple in ``TaskId`` order.

    ``standby_tasks`` are the real standby replicas; ``warmup_tasks`` are the extra copies placed
    only so that a client can catch up before a task moves to it (Kafka ships both as standbys).
    """

    process_id: str
    active_tasks: tuple[str, ...] = ()
    standby_tasks: tuple[str, ...] = ()
    warmup_tasks: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class StreamsAssignment:
    #: Every client of the spec, in spec order.
    clients: dict[str, StreamsClientAssignment]
    probing_rebalance_needed: bool
    #: ``now_ms + probing_rebalance_interval_ms`` when a probing rebalance is needed, else ``None``.
    probing_rebalance_at_ms: int | None
    #: True when the end offsets were missing and Kafka's ``FallbackPriorTaskAssignor`` ran
    #: (previous actives kept, a probing rebalance asked for) instead of the HA assignor.
    fallback_used: bool = False
