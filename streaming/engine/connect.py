"""A Kafka Connect cluster's generation: the eager or the incremental cooperative assignor (KIP-415).

Every member is a worker that runs what the previous generation gave it (revocations are
honoured). The leader is the oldest member; a new leader starts with a fresh assignor state, as in
Kafka. The incremental assignor's leader state (previous assignment, revocations, the lost-work
delay, its candidate workers, the back-off) is kept in the group state between generations. A
round that revokes is followed by a follow-up generation (``cooperative_followup_ms`` later) that
hands the revoked work out; a ``delay_ms`` becomes a scheduled rebalance at ``event time + delay_ms``.
"""

from __future__ import annotations

from typing import Container, Mapping

from assignors.connect import assign_connect_eager, assign_connect_incremental
from assignors.connect.codec import EAGER, INCREMENTAL
from assignors.connect.model import (
    DEFAULT_SCHEDULED_REBALANCE_MAX_DELAY_MS,
    ConnectAssignorState,
    ConnectGroupSpec,
    ConnectorTaskId,
    ConnectWorkerSpec,
)
from assignors.errors import RebalanceMonitorError

from streaming.engine.batch import Batch
from streaming.engine.events import TaskWorkload
from streaming.engine.generation import Generation, record_failure, record_generation, unit_balance
from streaming.engine.state import GroupState, PendingRebalance

ASSIGNORS = (EAGER, INCREMENTAL)
SCHEDULED_REBALANCE = "scheduled_rebalance"
_NO_WORKLOAD = TaskWorkload(connectors={})


def assignor_of(state: GroupState) -> str:
    """The group's Connect assignor; Kafka's default protocol (sessioned) is the incremental one."""
    return state.assignor if state.assignor in ASSIGNORS else INCREMENTAL


def task_name(task: ConnectorTaskId | list) -> str:
    """Kafka's ``ConnectorTaskId.toString``: ``<connector>-<task>``."""
    return f"{task[0]}-{task[1]}"


def rebalance(batch: Batch, at: int, pending: PendingRebalance | None) -> None:
    s = batch.state
    workload = s.task_workload or _NO_WORKLOAD
    connectors = dict(workload.connectors or {})
    max_delay = (workload.scheduled_rebalance_max_delay_ms if workload.scheduled_rebalance_max_delay_ms is not None
                 else DEFAULT_SCHEDULED_REBALANCE_MAX_DELAY_MS)
    assignor = assignor_of(s)
    members = list(s.members.values())

    previous_owner: dict[tuple[str, str], str] = {}  # (unit, id) -> member
    for mid, held in s.task_assignment.items():
        for c in held.get("connectors", ()):
            previous_owner.setdefault(("connector", c), mid)
        for pair in held.get("tasks", ()):
            previous_owner.setdefault(("task", task_name(pair)), mid)

    spec = result = None
    assignor_ms = 0.0
    if members:
        if s.connect_leader not in s.members:
            # Kafka: a new leader's assignor instance starts with no memory (spec scenario 42).
            s.connect_leader = members[0].member_id
            s.connect_leader_state = None
        workers = []
        for m in members:
            held = s.task_assignment.get(m.member_id) or {}
            workers.append(ConnectWorkerSpec(
                worker_id=m.member_id, connectors=tuple(held.get("connectors", ())),
                tasks=tuple(ConnectorTaskId(c, int(i)) for c, i in held.get("tasks", ())),
                config_offset=int(m.task_metadata.get("config_offset", 0)),
                url=m.task_metadata.get("worker_url") or ""))
        spec = ConnectGroupSpec(
            workers=tuple(workers), connectors=connectors, leader_id=s.connect_leader,
            # The leader re-reads the config topic when a worker is ahead of it, so no CONFIG_MISMATCH.
            leader_config_offset=max([workload.config_offset or 0] + [w.config_offset for w in workers]),
            generation_id=s.generation + 1, last_completed_generation_id=s.generation,
            scheduled_rebalance_max_delay_ms=max_delay)
        try:
            spec.validate()
            started = batch.start_stopwatch()
            if assignor == INCREMENTAL:
                result, new_state = assign_connect_incremental(
                    spec, s.connect_leader_state or ConnectAssignorState(), at)
            else:
                result, new_state = assign_connect_eager(spec), None
            assignor_ms = batch.elapsed_ms(started)
        except RebalanceMonitorError as exc:
            record_failure(batch, at, exc)
            return
        s.connect_leader_state = new_state
    else:
        s.connect_leader, s.connect_leader_state = None, None

    assignment = {w.worker_id: {"connectors": list(result.workers[w.worker_id].connectors),
                                "tasks": [[t.connector, t.task] for t in result.workers[w.worker_id].tasks]}
                  for w in (spec.workers if spec else ())}
    new_owner = {("connector", c): mid for mid, h in assignment.items() for c in h["connectors"]}
    new_owner.update({("task", task_name(p)): mid for mid, h in assignment.items() for p in h["tasks"]})
    configured = {("connector", c) for c in connectors}
    configured |= {("task", f"{c}-{i}") for c, n in connectors.items() for i in range(n)}

    revocations = revocation_rows(previous_owner, new_owner, s.members, configured, assignor == INCREMENTAL)

    if result is not None:
        revoked = sum(len(w.revoked_connectors) + len(w.revoked_tasks) for w in result.workers.values())
        lost_pending = len(result.lost_pending_connectors) + len(result.lost_pending_tasks)
        delay_ms = result.delay_ms
        held_back = {task_name(t) for t in result.lost_pending_tasks}
    else:  # nobody left to run anything: all of the group's work waits for a worker
        revoked, lost_pending, delay_ms, held_back = 0, len(configured), 0, set()
    task_owner = {k[1]: v for k, v in new_owner.items() if k[0] == "task"}
    # Withheld by a revocation round (lost work waiting for its worker is counted in lost_pending).
    unassigned = (len({u for kind, u in configured if kind == "task"} - set(task_owner) - held_back)
                  if result is not None else 0)
    balance = balance_columns(at, [m.member_id for m in members], assignment, previous_owner, new_owner,
                              unassigned=unassigned, lost_pending=lost_pending, revoked=revoked, delay_ms=delay_ms)
    record_generation(batch, at, pending, Generation(
        assignor=assignor, protocol="eager" if assignor == EAGER else "cooperative",
        holdings=[{"member_id": m.member_id, "partitions": [], "connectors": assignment[m.member_id]["connectors"],
                   "tasks": [task_name(p) for p in assignment[m.member_id]["tasks"]]} for m in members],
        revocations=revocations, balance=balance, assignor_ms=assignor_ms,
        needs_followup=assignor == INCREMENTAL and revoked > 0,
        scheduled=(at + delay_ms, SCHEDULED_REBALANCE) if delay_ms else None,
        group_instance_ids={mid: m.group_instance_id for mid, m in s.members.items()}))
    lost_due = at + (delay_ms if result is not None else max_delay) if lost_pending else None
    batch.alerts.on_connect_generation(at, lost_pending, lost_due)
    s.task_assignment = assignment


def revocation_rows(previous_owner: Mapping[tuple[str, str], str], new_owner: Mapping[tuple[str, str], str],
                    members: Container[str], configured: Container[tuple[str, str]], incremental: bool) -> list[dict]:
    """Every connector and task a worker held and no longer holds, as ``revocations`` columns: to
    whom it goes (None: nobody yet) and why. Units are ``(unit, id)``: ``("connector", name)``,
    ``("task", "<connector>-<n>")``."""
    out = []
    for (unit, unit_id), mid in previous_owner.items():
        if new_owner.get((unit, unit_id)) == mid:
            continue
        if mid not in members:
            reason = "member_left"
        elif (unit, unit_id) not in configured:
            reason = "deleted"
        else:
            # Eager workers give everything up; the incremental assignor revokes to balance the load.
            reason = "balance" if incremental else "moved"
        out.append({"member_id": mid, "to_member": new_owner.get((unit, unit_id)), "reason": reason,
                    "unit": unit, "unit_id": unit_id})
    return out


def balance_columns(at: int, members: list[str], assignment: Mapping[str, Mapping[str, list]],
                    previous_owner: Mapping[tuple[str, str], str], new_owner: Mapping[tuple[str, str], str], *,
                    unassigned: int, lost_pending: int, revoked: int, delay_ms: int) -> dict:
    """The ``balance_metrics`` columns of a Connect generation: the balance over connector tasks
    (:func:`~streaming.engine.generation.unit_balance`) and Connect's own columns.
    ``assignment``: worker -> {"connectors", "tasks"} after the generation, for ``members`` in order."""
    task_owner = {u: mid for (kind, u), mid in new_owner.items() if kind == "task"}
    previous_task_owner = {u: mid for (kind, u), mid in previous_owner.items() if kind == "task"}
    task_counts = [len(assignment[mid]["tasks"]) for mid in members]
    connector_counts = [len(assignment[mid]["connectors"]) for mid in members]
    balance = unit_balance("task", task_counts, previous_task_owner, task_owner, members)
    balance.update(
        unassigned=unassigned, connectors=sum(connector_counts), tasks=sum(task_counts),
        min_connectors_per_worker=min(connector_counts, default=None),
        max_connectors_per_worker=max(connector_counts, default=None),
        min_tasks_per_worker=min(task_counts, default=None), max_tasks_per_worker=max(task_counts, default=None),
        lost_pending=lost_pending, revoked=revoked, delay_ms=delay_ms,
        scheduled_rebalance_at=at + delay_ms if delay_ms else None)
    return balance
