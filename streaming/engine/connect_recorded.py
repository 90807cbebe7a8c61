"""A Kafka Connect cluster's generation as its group coordinator recorded it (``__consumer_offsets``).

A Connect cluster is a classic group of protocol type ``connect`` (connect-runtime 4.1.1): each
``GroupMetadata`` record of a completed generation holds every worker's join metadata and the
assignment its leader sent it. What a worker runs after the generation follows from them:

- eager (``default``, ``EagerAssignor``): a worker gives everything up before it joins, and the
  assignment lists everything it runs from now on;
- incremental cooperative (``compatible``, ``sessioned``; KIP-415): a worker keeps running what its
  metadata's previous allocation lists, stops what the assignment revokes and starts what it adds
  (as ``WorkerCoordinator.onJoinComplete`` merges them). A round that revokes is followed at once
  by the round that hands the revoked work out; a delay in the assignment holds lost work back
  (the worker that ran it left) until the scheduled rebalance.

The generation is written with the rows the event-topic Connect path writes (:mod:`.connect`):
units ``connector`` and ``task``, revocations (to whom, when the generation says), the balance over
connector tasks, lost work held back and the delay. Nothing is computed to decide it.

Then the project's Connect assignor runs on what the leader's assignor saw, and
``assignment_checks`` compares its answer with the workers' holdings after the generation. The
log does not carry the connectors' configuration (the config topic's content): the connectors and
their task counts are taken from the generation itself (what the workers run after it, what it
revokes, and lost work it holds back), so a connector deleted or shrunk in a round that revokes it
looks to the check like running work, and that round's check can differ. The incremental leader's
memory (previous assignment, revocations, the delay) is replayed from the log: it is corrected to
what each generation really gave, so one disagreement is not carried into the next check.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterable, Mapping

from assignors.connect import (
    DEFAULT_SCHEDULED_REBALANCE_MAX_DELAY_MS,
    ConnectAssignorState,
    ConnectGroupSpec,
    ConnectorTaskId,
    ConnectWorkerSpec,
    assign_connect_eager,
    assign_connect_incremental,
)
from assignors.connect.codec import EAGER, INCREMENTAL
from assignors.errors import RebalanceMonitorError
from schemas.rows import AssignmentCheckRow

from streaming.engine.batch import Batch
from streaming.engine.connect import SCHEDULED_REBALANCE, balance_columns, revocation_rows, task_name
from streaming.engine.coordinator_events import RECORDED_STATE, ConnectWork, CoordinatorGeneration
from streaming.engine.events import TaskWorkload
from streaming.engine.generation import Generation, record_generation
from streaming.engine.state import GroupState, PendingRebalance

#: ``ConnectProtocolCompatibility``: the eager protocol's name; the others are incremental.
EAGER_PROTOCOL = "default"
#: Connect's ``Assignment.NO_ERROR``.
NO_ERROR = 0

Unit = tuple[str, str]  # ("connector", name) or ("task", "<connector>-<n>"), as revocations name them


def adopt_protocol(s: GroupState, protocol: str) -> None:
    """The group's assignor and rebalance protocol, from the Connect protocol it chose (any case, as
    Connect reads it): ``default`` is the eager one, ``compatible`` and ``sessioned`` incremental."""
    eager = protocol.lower() == EAGER_PROTOCOL
    s.assignor, s.protocol = (EAGER, "eager") if eager else (INCREMENTAL, "cooperative")


def quiet_cause(s: GroupState, g: CoordinatorGeneration, at: int) -> tuple[str, str | None]:
    """Why a Connect generation happened when no worker joined or left: the delay the previous
    generation gave out expired (Kafka Connect's scheduled rebalance), or a worker read a newer
    connector configuration (a workload change)."""
    scheduled = s.connect_leader_state.scheduled_rebalance_ms if s.connect_leader_state else 0
    if scheduled and at >= scheduled:
        return SCHEDULED_REBALANCE, None
    known = s.task_workload.config_offset if s.task_workload and s.task_workload.config_offset is not None else -1
    if any(m.connect and m.connect.config_offset > known for m in g.members):
        return "workload", None
    return "unknown", None


def record(batch: Batch, at: int, g: CoordinatorGeneration, pending: PendingRebalance) -> None:
    """Write the generation ``g`` (``batch.state.members`` are already its workers) and check it."""
    s = batch.state
    previous_generation = s.generation
    incremental = s.assignor == INCREMENTAL
    workers = [m.member_id for m in g.members]
    going_in = {m.member_id: _as_holding(m.connect.held if incremental and m.connect else None) for m in g.members}
    after = {m.member_id: _after(going_in[m.member_id], m.connect) for m in g.members}
    revoked = {m.member_id: m.connect.revoked for m in g.members if m.connect}
    delay_ms = max((m.connect.delay_ms for m in g.members if m.connect), default=0)
    failed = any(m.connect and m.connect.error != NO_ERROR for m in g.members)

    # Who held each unit before: incremental workers say so in their metadata (the leader's input);
    # eager workers gave everything up, and workers that left said nothing: the previous generation.
    before = dict(s.task_assignment)
    if incremental:
        before = {**going_in, **{mid: held for mid, held in before.items() if mid not in going_in}}
    previous_owner: dict[Unit, str] = {}
    for mid, held in before.items():
        for unit in _units(held):
            previous_owner.setdefault(unit, mid)
    new_owner = {unit: mid for mid, held in after.items() for unit in _units(held)}
    revoked_units = {unit for work in revoked.values() for unit in _units(_as_holding(work))}

    # The configuration as the generation implies it (the log does not carry the config topic).
    known = set(previous_owner) | _configured_units(s.task_workload)
    unheld = known - set(new_owner) - revoked_units
    # Kafka holds lost work back only while a delay runs; work nobody holds without one was deleted.
    lost = unheld if incremental and delay_ms and not failed else set()
    if failed:  # CONFIG_MISMATCH: the leader could not read the configuration, nothing was assigned
        configured = known
    else:
        configured = set(new_owner) | revoked_units | lost
    workload = TaskWorkload(connectors=_connector_tasks(configured), config_offset=_leader_offset(g, s),
                            scheduled_rebalance_max_delay_ms=_max_delay(s, delay_ms, lost))

    revoked_count = sum(len(w.connectors) + len(w.tasks) for w in revoked.values())
    unassigned = len({u for kind, u in configured if kind == "task"} - {u for kind, u in new_owner if kind == "task"}
                     - {u for kind, u in lost if kind == "task"})
    balance = balance_columns(at, workers, after, previous_owner, new_owner, unassigned=unassigned,
                              lost_pending=len(lost), revoked=revoked_count, delay_ms=delay_ms)
    phase = ("revocation" if incremental and revoked_count and workers else
             "followup" if s.coordinator_phase == "revocation" else "complete")
    record_generation(batch, at, pending, Generation(
        assignor=s.assignor, protocol=s.protocol,
        holdings=[{"member_id": mid, "partitions": [], "connectors": after[mid]["connectors"],
                   "tasks": [task_name(t) for t in after[mid]["tasks"]]} for mid in workers],
        revocations=revocation_rows(previous_owner, new_owner, set(workers), configured, incremental),
        balance=balance, assignor_ms=0.0, number=g.generation, phase=phase,
        group_instance_ids={mid: m.group_instance_id for mid, m in s.members.items()}))
    s.coordinator_phase = phase
    batch.alerts.on_connect_generation(at, len(lost), at + delay_ms if lost else None)

    leader_state = s.connect_leader_state if g.leader == s.connect_leader else None
    if workers and g.protocol and g.leader in after and all(m.connect and m.connect.assigned is not None
                                                            for m in g.members):
        leader_state = _check(batch, at, g, workload, leader_state, previous_generation, after) or leader_state
    s.connect_leader = g.leader if workers else None
    s.connect_leader_state = (_as_logged(leader_state, g, at, after, revoked_units, lost, delay_ms)
                              if workers and incremental else None)
    s.task_assignment = after
    s.task_workload = workload


def _check(batch: Batch, at: int, g: CoordinatorGeneration, workload: TaskWorkload,
           leader_state: ConnectAssignorState | None, previous_generation: int,
           after: Mapping[str, dict]) -> ConnectAssignorState | None:
    """The project's Connect assignor on what the leader's assignor saw, against what the workers hold after
    the generation; the leader state it leaves (None for the eager protocol, which keeps none)."""
    s = batch.state
    incremental = s.assignor == INCREMENTAL
    failed = any(m.connect.error != NO_ERROR for m in g.members)
    spec = ConnectGroupSpec(
        workers=tuple(ConnectWorkerSpec(
            worker_id=m.member_id, config_offset=m.connect.config_offset, url=m.connect.url,
            connectors=m.connect.held.connectors if incremental and m.connect.held else (),
            tasks=tuple(ConnectorTaskId(c, i) for c, i in (m.connect.held.tasks if incremental and m.connect.held
                                                             else ()))) for m in g.members),
        connectors=dict(workload.connectors or {}), leader_id=g.leader,
        # The assignment's config offset is the leader's; with CONFIG_MISMATCH it is the workers'
        # newest, which the leader could not read: give ours a leader behind every worker, as it was.
        leader_config_offset=-1 if failed else workload.config_offset,
        generation_id=g.generation,
        # The same leader as in the previous generation completed it (a new leader's memory is empty).
        last_completed_generation_id=previous_generation if leader_state is not None else -1,
        scheduled_rebalance_max_delay_ms=workload.scheduled_rebalance_max_delay_ms)
    try:
        if incremental:
            result, new_state = assign_connect_incremental(spec, leader_state or ConnectAssignorState(), at)
        else:
            result, new_state = assign_connect_eager(spec), None
    except RebalanceMonitorError:
        return None  # the recorded group is not one the assignor accepts (no configuration it can see)
    computed = {w: {"connectors": list(a.connectors), "tasks": [[t.connector, t.task] for t in a.tasks]}
                for w, a in result.workers.items()}
    by_ours, by_log = _owners(computed), _owners(after)
    differing = [{"unit": kind, "unit_id": unit_id, "computed_member": by_ours.get((kind, unit_id)),
                  "actual_member": by_log.get((kind, unit_id))}
                 for kind, unit_id in sorted(by_ours.keys() | by_log.keys())
                 if by_ours.get((kind, unit_id)) != by_log.get((kind, unit_id))]
    unmatched = sorted(set(computed) ^ set(after))
    batch.emit(AssignmentCheckRow(
        group_id=s.group_id, generation=g.generation, event_time=at, agrees=not differing and not unmatched,
        members_compared=len(set(computed) | set(after)), partitions_compared=0,
        units_compared=len(by_ours.keys() | by_log.keys()), differing=[], differing_units=differing,
        unmatched_members=unmatched, computed_assignor=s.assignor, reported_assignor=g.protocol,
        group_state=RECORDED_STATE))
    counts_differ = sum(1 for w in set(computed) & set(after)
                        if len(_units(computed[w])) != len(_units(after[w])))
    batch.alerts.on_check(at, len(differing) + len(unmatched), counts_differ + len(unmatched))
    return new_state


def _as_logged(state: ConnectAssignorState | None, g: CoordinatorGeneration, at: int, after: Mapping[str, dict],
               revoked: set[Unit], lost: set[Unit], delay_ms: int) -> ConnectAssignorState:
    """The incremental leader's memory after ``g`` as the log shows it: what it assigned (lost work
    included, as Kafka's ``previousAssignment`` keeps it), what it revoked, and the delay it gave
    out. The rest (back-off count, candidate workers) is the assignor's own reckoning."""
    held = {u for h in after.values() for u in _units(h)} | lost
    return replace(state or ConnectAssignorState(),
                   previous_connectors=frozenset(u for kind, u in held if kind == "connector"),
                   previous_tasks=frozenset(_task_id(u) for kind, u in held if kind == "task"),
                   previous_revoked_connectors=frozenset(u for kind, u in revoked if kind == "connector"),
                   previous_revoked_tasks=frozenset(_task_id(u) for kind, u in revoked if kind == "task"),
                   previous_generation_id=g.generation, previous_members=frozenset(after),
                   delay_ms=delay_ms, scheduled_rebalance_ms=at + delay_ms if delay_ms else 0)


def _as_holding(work: ConnectWork | None) -> dict:
    return {"connectors": list(work.connectors) if work else [],
            "tasks": [[c, i] for c, i in work.tasks] if work else []}


def _after(going_in: Mapping[str, list], worker) -> dict:
    """What a worker runs after the generation: what it kept (its allocation less what the
    assignment revokes; nothing for an eager worker) and what the assignment gives it."""
    if worker is None:
        return _as_holding(None)
    revoked_c, revoked_t = set(worker.revoked.connectors), {tuple(t) for t in worker.revoked.tasks}
    connectors = [c for c in going_in["connectors"] if c not in revoked_c]
    tasks = [list(t) for t in going_in["tasks"] if tuple(t) not in revoked_t]
    assigned = worker.assigned or ConnectWork()
    connectors += [c for c in assigned.connectors if c not in connectors]
    tasks += [[c, i] for c, i in assigned.tasks if [c, i] not in tasks]
    return {"connectors": connectors, "tasks": tasks}


def _units(holding: Mapping[str, Iterable]) -> list[Unit]:
    return ([("connector", c) for c in holding.get("connectors", ())]
            + [("task", task_name(t)) for t in holding.get("tasks", ())])


def _owners(assignment: Mapping[str, dict]) -> dict[Unit, str]:
    return {unit: mid for mid, holding in assignment.items() for unit in _units(holding)}


def _task_id(unit_id: str) -> ConnectorTaskId:
    connector, _, number = unit_id.rpartition("-")
    return ConnectorTaskId(connector, int(number))


def _configured_units(workload: TaskWorkload | None) -> set[Unit]:
    connectors = (workload.connectors or {}) if workload else {}
    return ({("connector", c) for c in connectors}
            | {("task", f"{c}-{i}") for c, n in connectors.items() for i in range(n)})


def _connector_tasks(units: set[Unit]) -> dict[str, int]:
    """Connector -> task count: tasks are numbered from 0, so the highest number seen + 1."""
    out: dict[str, int] = {}
    for kind, unit_id in sorted(units):
        if kind == "connector":
            out.setdefault(unit_id, 0)
        else:
            task = _task_id(unit_id)
            out[task.connector] = max(out.get(task.connector, 0), task.task + 1)
    return out


def _leader_offset(g: CoordinatorGeneration, s: GroupState) -> int | None:
    offsets = [m.connect.leader_config_offset for m in g.members
               if m.connect and m.connect.leader_config_offset is not None]
    if offsets:
        return max(offsets)
    return s.task_workload.config_offset if s.task_workload else None


def _max_delay(s: GroupState, delay_ms: int, lost: set[Unit]) -> int:
    """``scheduled.rebalance.max.delay.ms``, a worker setting the log does not carry: the delay a
    round gives out when lost work starts waiting (Kafka then gives the whole of it), else the one
    learned before, else Kafka's default."""
    running = s.connect_leader_state.scheduled_rebalance_ms if s.connect_leader_state else 0
    if lost and delay_ms and not running:
        return delay_ms
    if s.task_workload and s.task_workload.scheduled_rebalance_max_delay_ms is not None:
        return s.task_workload.scheduled_rebalance_max_delay_ms
    return DEFAULT_SCHEDULED_REBALANCE_MAX_DELAY_MS
