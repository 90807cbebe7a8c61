"""Kafka Connect's ``EagerAssignor`` (protocol "default", V0; spec 5.1).

Every rebalance starts from nothing: connectors sorted by name go round-robin over the workers
sorted by id, and the tasks (connectors in name order, tasks by number) *continue the same circular
iterator*, so with one task per connector the tasks do not all land where the connectors went.
Not sticky, no state.

If the leader's config snapshot is behind what some member has read, the leader cannot compute a
consistent assignment: everybody gets an empty assignment with ``CONFIG_MISMATCH`` and rejoins once
the leader has caught up.
"""

from __future__ import annotations

from .model import (
    ConnectAssignment,
    ConnectGroupSpec,
    ConnectorTaskId,
    ConnectWorkerAssignment,
    java_string_key,
)


def config_mismatch(spec: ConnectGroupSpec) -> ConnectAssignment | None:
    """The ``CONFIG_MISMATCH`` answer if the leader is behind the most advanced member, else ``None``."""
    max_offset = max(w.config_offset for w in spec.workers)
    if spec.leader_config_offset >= max_offset:
        return None
    return ConnectAssignment(
        workers={w.worker_id: ConnectWorkerAssignment(w.worker_id) for w in spec.workers},
        error="CONFIG_MISMATCH",
        leader_id=spec.leader_id,
        config_offset=max_offset,
    )


def assign_connect_eager(spec: ConnectGroupSpec) -> ConnectAssignment:
    """Assign every configured connector and task from scratch (Kafka ``EagerAssignor``)."""
    spec.validate()
    mismatch = config_mismatch(spec)
    if mismatch is not None:
        return mismatch

    workers = sorted((w.worker_id for w in spec.workers), key=java_string_key)
    connectors = sorted(spec.connectors, key=java_string_key)
    by_worker_connectors: dict[str, list[str]] = {w: [] for w in workers}
    by_worker_tasks: dict[str, list[ConnectorTaskId]] = {w: [] for w in workers}

    # One position shared by connectors and tasks: Kafka's CircularIterator is not restarted.
    position = 0
    for connector in connectors:
        by_worker_connectors[workers[position % len(workers)]].append(connector)
        position += 1
    for connector in connectors:
        for task in range(spec.connectors[connector]):
            by_worker_tasks[workers[position % len(workers)]].append(ConnectorTaskId(connector, task))
            position += 1

    result = {}
    for w in spec.workers:
        cs = tuple(by_worker_connectors[w.worker_id])
        ts = tuple(by_worker_tasks[w.worker_id])
        result[w.worker_id] = ConnectWorkerAssignment(
            w.worker_id, connectors=cs, tasks=ts, assigned_connectors=cs, assigned_tasks=ts
        )
    return ConnectAssignment(
        workers=result, leader_id=spec.leader_id, config_offset=spec.leader_config_offset
    )
