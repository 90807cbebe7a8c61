"""A Kafka Streams application's generation: KIP-441's HighAvailabilityTaskAssignor.

Members are grouped into clients by ``process_id``; a client's capacity is the sum of its members'
``threads``. Its previous active and standby tasks are the monitor's previous generation (or, for a
client the monitor has not assigned yet, the tasks its ``task_offset_sums`` mark ``-2``). A stateful
task's lag on a client is, in this order: the newest ``task_lags`` a member of the client reported
in a heartbeat, its ``task_offset_sums`` against ``workload.task_end_offset_sums``, else the task's
end offset sum (no local state), else Long.MAX_VALUE (unknown: never caught up). A client that
stops running an active was current when it stopped: its lag becomes 0.

The assignor's client-level answer is dealt to the client's members (threads), keeping each task
with its previous member where the member's share allows. The probing rebalance the assignor asks
for becomes a scheduled rebalance at that event time; lag reports are applied in event time
(:func:`apply_lag_report`), so the lags a rebalance sees do not depend on batch boundaries.
"""

from __future__ import annotations

import math
from typing import Mapping

from assignors.errors import InvalidGroupSpecError, RebalanceMonitorError
from assignors.streams import (
    LATEST_OFFSET,
    LONG_MAX,
    StreamsClient,
    StreamsGroupSpec,
    assign_streams_ha,
    task_sort_key,
)
from assignors.streams.codec import STREAMS_ASSIGNOR_NAMES

from streaming.engine.batch import Batch
from streaming.engine.events import TaskWorkload
from streaming.engine.generation import Generation, record_failure, record_generation, rounded, unit_balance
from streaming.engine.state import STREAMS, Member, PendingRebalance

ASSIGNOR = STREAMS_ASSIGNOR_NAMES[0]
PROBING_REBALANCE = "probing_rebalance"
_NO_WORKLOAD = TaskWorkload(stateful=())


def apply_lag_report(batch: Batch, member_id: str, at: int, lags: Mapping[str, int]) -> None:
    """A member's task lags as of its heartbeat at ``at``: kept for the next rebalance (warm-ups
    catching up), and checked against the not-caught-up alert."""
    s = batch.state
    member = s.members.get(member_id)
    if member is None or s.group_type != STREAMS:
        return
    s.task_lags.setdefault(member_id, {}).update(lags)
    config = (s.task_workload or _NO_WORKLOAD).config
    batch.alerts.on_streams_lags(at, member.process_id, lags, config.acceptable_recovery_lag)


def rebalance(batch: Batch, at: int, pending: PendingRebalance | None) -> None:
    s = batch.state
    workload = s.task_workload or _NO_WORKLOAD
    stateful = list(workload.stateful or ())
    stateless = list(workload.stateless)
    known_tasks = set(stateful) | set(stateless)
    end_sums = workload.task_end_offset_sums

    clients: dict[str, list[Member]] = {}
    for m in s.members.values():
        clients.setdefault(m.process_id, []).append(m)
    spec_clients = []
    client_lags: dict[str, dict[str, int]] = {}
    client_previous_active: dict[str, set[str]] = {}
    for pid, members in clients.items():
        active, lags, tags = _client_inputs(s, members, stateful, known_tasks, end_sums)
        client_lags[pid] = lags
        client_previous_active[pid] = active
        spec_clients.append(StreamsClient(
            process_id=pid, capacity=sum(m.threads for m in members),
            # Every previous active (stateless ones too) is reported as running: -2.
            task_lags={**lags, **dict.fromkeys(sorted(active, key=task_sort_key), LATEST_OFFSET)}, tags=tags))

    answer = None
    assignor_ms = 0.0
    if spec_clients:
        spec = StreamsGroupSpec(clients=tuple(spec_clients), stateful_tasks=tuple(stateful),
                                stateless_tasks=tuple(stateless), task_end_offset_sums=end_sums,
                                config=workload.config, now_ms=at)
        try:
            _check_workload(stateful, stateless, end_sums)
            spec.validate()
            started = batch.start_stopwatch()
            answer = assign_streams_ha(spec)
            assignor_ms = batch.elapsed_ms(started)
        except RebalanceMonitorError as exc:
            record_failure(batch, at, exc)
            return

    previous_active: dict[str, str] = {}  # task -> member that ran it (departed members included)
    previous_copy: dict[str, dict[str, str]] = {}  # process id -> standby/warm-up task -> member
    for mid, held in s.task_assignment.items():
        for task in held.get("active", ()):
            previous_active.setdefault(task, mid)
        member = s.members.get(mid)
        if member is not None:
            copies = previous_copy.setdefault(member.process_id, {})
            for task in (*held.get("standby", ()), *held.get("warmup", ())):
                copies.setdefault(task, mid)

    assignment: dict[str, dict[str, list]] = {}
    lagging: dict[str, tuple[str, int]] = {}
    active_client: dict[str, str] = {}
    per_thread_active: list[float] = []
    per_thread_standby: list[float] = []
    for pid, members in clients.items():
        got = answer.clients[pid]
        dealt = {kind: _deal(list(getattr(got, f"{kind}_tasks")), members,
                             previous_active if kind == "active" else previous_copy.get(pid, {}))
                 for kind in ("active", "standby", "warmup")}
        for m in members:
            assignment[m.member_id] = {kind: dealt[kind][m.member_id] for kind in ("active", "standby", "warmup")}
        threads = sum(m.threads for m in members)
        per_thread_active.append(len(got.active_tasks) / threads)
        per_thread_standby.append(len(got.standby_tasks) / threads)
        for task in got.active_tasks:
            active_client[task] = pid
            lag = client_lags[pid].get(task)
            # Long.MAX_VALUE is "no information" (no report, offset sum or end offset): not evidence of a restore.
            if (task not in client_previous_active[pid] and lag is not None and lag != LONG_MAX
                    and lag > workload.config.acceptable_recovery_lag):
                lagging[task] = (pid, lag)

    # A member that stops running an active was current when it stopped.
    for mid, held in s.task_assignment.items():
        if mid in assignment:
            stopped = set(held.get("active", ())) - set(assignment[mid]["active"])
            if stopped:
                s.task_lags.setdefault(mid, {}).update({t: 0 for t in stopped if t in set(stateful)})

    new_owner = {t: mid for mid, held in assignment.items() for t in held["active"]}
    revocations = []
    for mid, held in s.task_assignment.items():
        for task in held.get("active", ()):
            if task in assignment.get(mid, {}).get("active", ()):
                continue
            reason = "member_left" if mid not in s.members else "deleted" if task not in known_tasks else "moved"
            revocations.append({"member_id": mid, "to_member": new_owner.get(task), "reason": reason,
                                "unit": "task", "unit_id": task})

    counts = [len(assignment[mid]["active"]) for mid in s.members]
    balance = unit_balance("active_task", counts, previous_active, new_owner, s.members)
    probing_at = answer.probing_rebalance_at_ms if answer else None
    balance.update(
        clients=len(clients), threads=sum(c.capacity for c in spec_clients), active_tasks=sum(counts),
        standby_tasks=sum(len(h["standby"]) for h in assignment.values()),
        warmup_tasks=sum(len(h["warmup"]) for h in assignment.values()),
        min_actives_per_thread=rounded(min(per_thread_active, default=None)),
        max_actives_per_thread=rounded(max(per_thread_active, default=None)),
        min_standbys_per_thread=rounded(min(per_thread_standby, default=None)),
        max_standbys_per_thread=rounded(max(per_thread_standby, default=None)),
        not_caught_up_actives=len(lagging), probing_rebalance_at=probing_at)
    record_generation(batch, at, pending, Generation(
        assignor=ASSIGNOR, protocol="cooperative",
        holdings=[{"member_id": m.member_id, "process_id": m.process_id, "partitions": [],
                   "active_tasks": assignment[m.member_id]["active"],
                   "standby_tasks": assignment[m.member_id]["standby"],
                   "warmup_tasks": assignment[m.member_id]["warmup"]} for m in s.members.values()],
        revocations=revocations, balance=balance, assignor_ms=assignor_ms,
        scheduled=(probing_at, PROBING_REBALANCE) if probing_at is not None else None,
        group_instance_ids={mid: m.group_instance_id for mid, m in s.members.items()}))
    batch.alerts.on_streams_generation(at, active_client, lagging)
    s.task_assignment = assignment


def _client_inputs(s, members: list[Member], stateful: list[str], known_tasks: set[str],
                   end_sums: Mapping[str, int] | None) -> tuple[set[str], dict[str, int], dict[str, str]]:
    """A client's previous actives, its lag per stateful task it does not run, and its tags."""
    active: set[str] = set()
    offset_sums: dict[str, int] = {}
    reported: dict[str, int] = {}
    tags: dict[str, str] = {}
    known = False
    for m in members:
        held = s.task_assignment.get(m.member_id)
        if held is not None:
            known = True
            active.update(held.get("active", ()))
        offset_sums.update(m.task_metadata.get("task_offset_sums") or {})
        tags.update(m.task_metadata.get("client_tags") or {})
        for task, lag in (s.task_lags.get(m.member_id) or {}).items():
            reported[task] = min(lag, reported.get(task, lag))  # the most caught-up thread's report
    if not known:  # a client the monitor has not assigned yet: what its subscription says it runs
        active.update(t for t, v in offset_sums.items() if v == LATEST_OFFSET)
    active &= known_tasks
    lags = {t: _lag(t, reported, offset_sums, end_sums) for t in stateful if t not in active}
    return active, lags, tags


def _lag(task: str, reported: Mapping[str, int], offset_sums: Mapping[str, int],
         end_sums: Mapping[str, int] | None) -> int:
    """The client's lag on a stateful task it does not run as active (see the module docstring)."""
    value = reported.get(task)
    if value is not None and (value >= 0 or value == LATEST_OFFSET):
        return max(0, value)  # -2 in a report: the thread runs it, so it is current
    value = offset_sums.get(task)
    if value is not None and end_sums is not None and task in end_sums and (value >= 0 or value == LATEST_OFFSET):
        return 0 if value == LATEST_OFFSET else max(0, end_sums[task] - value)
    if end_sums is not None and task in end_sums:
        return end_sums[task]  # no local state: the whole changelog to restore
    return LONG_MAX


def _check_workload(stateful: list[str], stateless: list[str], end_sums: Mapping[str, int] | None) -> None:
    """What the assignor cannot take, named by where it is in the workload (as ``assign`` names it)."""
    for key, tasks in (("stateful_tasks", stateful), ("stateless_tasks", stateless)):
        for i, task in enumerate(tasks):
            try:
                task_sort_key(task)
            except InvalidGroupSpecError as exc:
                raise InvalidGroupSpecError(f"{key}[{i}]: {exc}") from None
    stateful_set = set(stateful)
    for i, task in enumerate(stateless):
        if task in stateful_set:
            raise InvalidGroupSpecError(f"stateless_tasks[{i}]: task {task!r} is also listed in stateful_tasks")
    if end_sums is not None:
        for task in stateful:
            if task not in end_sums:
                raise InvalidGroupSpecError(f"task_end_offset_sums: no end offset sum for stateful task {task!r}")


def _deal(tasks: list[str], members: list[Member], previous: Mapping[str, str]) -> dict[str, list[str]]:
    """A client's tasks over its members (threads): each task stays with its previous member while
    that member is within its share (by threads), the rest go to the least loaded, in join order."""
    threads = {m.member_id: m.threads for m in members}
    total = sum(threads.values())
    cap = {mid: math.ceil(len(tasks) * t / total) for mid, t in threads.items()}
    out: dict[str, list[str]] = {m.member_id: [] for m in members}
    rest = []
    for task in tasks:
        owner = previous.get(task)
        if owner in out and len(out[owner]) < cap[owner]:
            out[owner].append(task)
        else:
            rest.append(task)
    order = {m.member_id: i for i, m in enumerate(members)}
    for task in rest:
        target = min(out, key=lambda mid: (len(out[mid]) / threads[mid], order[mid]))
        out[target].append(task)
    return {mid: sorted(ts, key=task_sort_key) for mid, ts in out.items()}
