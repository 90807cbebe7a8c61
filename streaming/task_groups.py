"""Kafka Streams and Kafka Connect groups in the engine: their rebalance, rows and timers.

:mod:`streaming.group_state` keeps one state per group and decides *when* a group rebalances; this
module decides *what* a rebalance of a Streams or Connect group gives, with the pure assignors of
:mod:`assignors.streams` and :mod:`assignors.connect`. The assignors' specs are built as the JSON
objects of their ``rebalance-monitor assign`` codecs and parsed by those codecs, so the job feeds
them exactly what the command line accepts (and refuses what it refuses, with the same messages).

* **Streams** (``streams-ha``): members are grouped into clients by ``process_id``; a client's
  capacity is the sum of its members' ``threads``. Its previous active and standby tasks are the
  monitor's previous generation (or, for a client the monitor has not assigned yet, the tasks its
  ``task_offset_sums`` mark ``-2``). A stateful task's lag on a client is, in this order: the newest
  ``task_lags`` a member of the client reported in a heartbeat, its ``task_offset_sums`` against
  ``workload.task_end_offset_sums``, else the task's end offset sum (no local state), else
  Long.MAX_VALUE (unknown: never caught up). A client that stops running an active was current
  when it stopped: its lag becomes 0, as ``next_streams_spec`` does. The assignor's client-level
  answer is dealt to the client's members (threads), keeping each task with its previous member
  where the member's share allows. The probing rebalance the assignor asks for becomes a
  scheduled rebalance at that event time.
* **Connect** (``connect-eager``, ``connect-incremental``): every member is a worker that runs what
  the previous generation gave it (revocations are honoured). The leader is the oldest member; a
  new leader starts with a fresh assignor state, as in Kafka. The incremental assignor's leader
  state (previous assignment, revocations, the lost-work delay, its candidate workers, the
  back-off) is kept in the group state between generations. A round that revokes is followed by a
  follow-up generation (``cooperative_followup_ms`` later) that hands the revoked work out; a
  ``delay_ms`` becomes a scheduled rebalance at ``event time + delay_ms``.

Pure: no Spark, no I/O; the clock only times the assignor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from assignors.connect import assign_connect_eager, assign_connect_incremental
from assignors.connect.codec import EAGER, INCREMENTAL, format_connect_assignment, parse_connect_spec
from assignors.connect.model import DEFAULT_SCHEDULED_REBALANCE_MAX_DELAY_MS
from assignors.streams import LATEST_OFFSET, LONG_MAX, StreamsAssignmentConfig, assign_streams_ha, task_sort_key
from assignors.streams.codec import STREAMS_ASSIGNOR_NAMES, format_streams_assignment, parse_streams_spec

if TYPE_CHECKING:  # group_state imports this module
    from .group_state import GroupState, Member

STREAMS = "streams"
CONNECT = "connect"
TASK_GROUP_TYPES = frozenset({STREAMS, CONNECT})
STREAMS_ASSIGNOR = STREAMS_ASSIGNOR_NAMES[0]
CONNECT_ASSIGNORS = (EAGER, INCREMENTAL)
PROBING_REBALANCE = "probing_rebalance"
SCHEDULED_REBALANCE = "scheduled_rebalance"

#: Membership fields of Streams and Connect members that the engine keeps (schemas/events.py).
_STREAMS_MEMBER_FIELDS = ("process_id", "threads", "task_offset_sums", "client_tags")
_CONNECT_MEMBER_FIELDS = ("worker_url", "config_offset")
_CONFIG_KEYS = frozenset(f.name for f in fields(StreamsAssignmentConfig))
#: The member metadata the assignors see: a change to one of these is a rebalance trigger.
_ASSIGNOR_INPUTS = ("process_id", "threads", "client_tags")


def as_map(value: Any) -> dict:
    """A map field as a dict, whether it arrives as a JSON object or as Arrow's list of pairs."""
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    return {k: v for k, v in value}


def member_metadata(event: Mapping) -> dict:
    """The Streams/Connect fields an event gives for its member (absent ones are left out)."""
    out = {}
    for name in _STREAMS_MEMBER_FIELDS + _CONNECT_MEMBER_FIELDS:
        value = event.get(name)
        if value is None:
            continue
        if name in ("task_offset_sums", "client_tags"):
            value = {str(k): (int(v) if name == "task_offset_sums" else str(v)) for k, v in as_map(value).items()}
        elif name in ("threads", "config_offset"):
            value = int(value)
        out[name] = value
    return out


def metadata_changed(old: Mapping, new: Mapping) -> bool:
    """Whether an update changes what the task assignor sees (offset sums are progress, not a trigger)."""
    return any(name in new and new[name] != old.get(name) for name in _ASSIGNOR_INPUTS)


def read_workload(workload: Mapping | None) -> dict | None:
    """The Streams or Connect part of a workload event, normalised; None for a consumer workload."""
    if not workload:
        return None
    tasks = workload.get("tasks")
    connectors = workload.get("connectors")
    if tasks is None and connectors is None:
        return None
    out: dict[str, Any] = {}
    if tasks is not None:
        out["stateful"] = list(tasks.get("stateful") or [])
        out["stateless"] = list(tasks.get("stateless") or [])
        end_sums = workload.get("task_end_offset_sums")
        out["task_end_offset_sums"] = ({str(k): int(v) for k, v in as_map(end_sums).items()}
                                       if end_sums is not None else None)
        # Only the assignor's configs (the event contract's struct has no others; a plain dict might).
        out["config"] = {k: (list(v) if k == "rack_aware_assignment_tags" else int(v))
                         for k, v in (workload.get("config") or {}).items() if v is not None and k in _CONFIG_KEYS}
    if connectors is not None:
        out["connectors"] = {c["name"]: int(c["tasks"]) for c in connectors}
        if workload.get("config_offset") is not None:
            out["config_offset"] = int(workload["config_offset"])
        if workload.get("scheduled_rebalance_max_delay_ms") is not None:
            out["scheduled_rebalance_max_delay_ms"] = int(workload["scheduled_rebalance_max_delay_ms"])
    return out


def streams_config(state: "GroupState") -> StreamsAssignmentConfig:
    config = dict((state.task_workload or {}).get("config") or {})
    if "rack_aware_assignment_tags" in config:
        config["rack_aware_assignment_tags"] = tuple(config["rack_aware_assignment_tags"])
    return StreamsAssignmentConfig(**config)


def process_id(member: "Member") -> str:
    return member.task_metadata.get("process_id") or member.member_id


def connect_assignor(state: "GroupState") -> str:
    """The group's Connect assignor; Kafka's default protocol (sessioned) is the incremental one."""
    return state.assignor if state.assignor in CONNECT_ASSIGNORS else INCREMENTAL


def assignor_name(state: "GroupState") -> str:
    return STREAMS_ASSIGNOR if state.group_type == STREAMS else connect_assignor(state)


def protocol_of(state: "GroupState") -> str:
    return "eager" if state.group_type == CONNECT and connect_assignor(state) == EAGER else "cooperative"


def connect_task_name(pair) -> str:
    """Kafka's ``ConnectorTaskId.toString``: ``<connector>-<task>``."""
    return f"{pair[0]}-{pair[1]}"


@dataclass
class TaskRebalance:
    """One generation of a Streams or Connect group, without the group/generation/time columns."""

    assignor: str
    protocol: str
    #: member id -> the new holdings, in the form kept in ``GroupState.task_assignment``.
    assignment: dict[str, dict[str, list]]
    assignment_rows: list[dict]
    revocation_rows: list[dict]
    metrics: dict[str, Any]
    assignor_ms: float
    #: Revocations were handed out: a follow-up generation assigns the revoked work.
    needs_followup: bool = False
    #: (event time, trigger) of the rebalance the assignor asked for, if any.
    scheduled: tuple[int, str] | None = None
    #: Streams: task -> (process id, lag) of actives placed on clients that are not caught up.
    lagging: dict[str, tuple[str, int]] = field(default_factory=dict)
    #: Streams: task -> process id of every active, for the not-caught-up alert.
    active_client: dict[str, str] = field(default_factory=dict)
    #: Connect: lost connectors and tasks held back, and when their delay expires.
    lost_pending: int = 0
    lost_due: int | None = None


def rebalance(state: "GroupState", at: int, clock: Callable[[], float]) -> TaskRebalance:
    """Run the group's task assignor for a generation at event time ``at``.

    Raises :class:`assignors.errors.RebalanceMonitorError` (the codecs' messages) when the group's
    workload or members cannot be assigned; the engine records that as a failed rebalance.
    """
    if state.group_type == STREAMS:
        return _streams_rebalance(state, at, clock)
    return _connect_rebalance(state, at, clock)


# -- Kafka Streams ---------------------------------------------------------------------------------


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


def _deal(tasks: list[str], members: list["Member"], previous: Mapping[str, str]) -> dict[str, list[str]]:
    """A client's tasks over its members (threads): each task stays with its previous member while
    that member is within its share (by threads), the rest go to the least loaded, in join order."""
    threads = {m.member_id: int(m.task_metadata.get("threads") or 1) for m in members}
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


def _streams_rebalance(s: "GroupState", at: int, clock: Callable[[], float]) -> TaskRebalance:
    workload = s.task_workload or {}
    stateful = list(workload.get("stateful") or [])
    stateless = list(workload.get("stateless") or [])
    known_tasks = set(stateful) | set(stateless)
    end_sums = workload.get("task_end_offset_sums")
    config = streams_config(s)

    clients: dict[str, list[Member]] = {}
    for m in s.members.values():
        clients.setdefault(process_id(m), []).append(m)
    spec_clients = []
    client_lags: dict[str, dict[str, int]] = {}
    client_previous_active: dict[str, set[str]] = {}
    for pid, members in clients.items():
        active: set[str] = set()
        copies: set[str] = set()
        offset_sums: dict[str, int] = {}
        reported: dict[str, int] = {}
        tags: dict[str, str] = {}
        known = False
        for m in members:
            held = s.task_assignment.get(m.member_id)
            if held is not None:
                known = True
                active.update(held.get("active", ()))
                copies.update(held.get("standby", ()), held.get("warmup", ()))
            offset_sums.update(m.task_metadata.get("task_offset_sums") or {})
            tags.update(m.task_metadata.get("client_tags") or {})
            for task, lag in (s.task_lags.get(m.member_id) or {}).items():
                reported[task] = min(lag, reported.get(task, lag))  # the most caught-up thread's report
        if not known:  # a client the monitor has not assigned yet: what its subscription says it runs
            active.update(t for t, v in offset_sums.items() if v == LATEST_OFFSET)
        active &= known_tasks
        copies = (copies & set(stateful)) - active
        lags = {t: _lag(t, reported, offset_sums, end_sums) for t in stateful if t not in active}
        client_lags[pid] = lags
        client_previous_active[pid] = active
        spec_clients.append({
            "process_id": pid, "capacity": sum(int(m.task_metadata.get("threads") or 1) for m in members),
            "task_lags": lags, "previous_active_tasks": sorted(active, key=task_sort_key),
            "previous_standby_tasks": sorted(copies, key=task_sort_key), "tags": tags})
    previous_active: dict[str, str] = {}  # task -> member that ran it (departed members included)
    previous_copy: dict[str, dict[str, str]] = {}  # process id -> standby/warm-up task -> member
    for mid, held in s.task_assignment.items():
        for task in held.get("active", ()):
            previous_active.setdefault(task, mid)
        member = s.members.get(mid)
        if member is not None:
            copies = previous_copy.setdefault(process_id(member), {})
            for task in (*held.get("standby", ()), *held.get("warmup", ())):
                copies.setdefault(task, mid)

    answer = None
    elapsed = 0.0
    if spec_clients:
        spec = {"assignor": STREAMS_ASSIGNOR, "clients": spec_clients, "stateful_tasks": stateful,
                "stateless_tasks": stateless, "now_ms": at,
                "config": {k: (list(v) if isinstance(v, tuple) else v)
                           for k, v in (workload.get("config") or {}).items()}}
        parsed = parse_streams_spec(spec, STREAMS_ASSIGNOR)
        started = clock()
        result = assign_streams_ha(parsed.spec)
        elapsed = (clock() - started) * 1000.0
        answer = format_streams_assignment(parsed, result, elapsed)

    assignment: dict[str, dict[str, list]] = {}
    lagging: dict[str, tuple[str, int]] = {}
    active_client: dict[str, str] = {}
    per_thread_active: list[float] = []
    per_thread_standby: list[float] = []
    for pid, members in clients.items():
        got = answer["clients"][pid]
        dealt = {kind: _deal(got[f"{kind}_tasks"], members,
                             previous_active if kind == "active" else previous_copy.get(pid, {}))
                 for kind in ("active", "standby", "warmup")}
        for m in members:
            assignment[m.member_id] = {kind: dealt[kind][m.member_id] for kind in ("active", "standby", "warmup")}
        threads = sum(int(m.task_metadata.get("threads") or 1) for m in members)
        per_thread_active.append(len(got["active_tasks"]) / threads)
        per_thread_standby.append(len(got["standby_tasks"]) / threads)
        for task in got["active_tasks"]:
            active_client[task] = pid
            lag = client_lags[pid].get(task)
            # Long.MAX_VALUE is "no information" (no report, offset sum or end offset): not evidence of a restore.
            if (task not in client_previous_active[pid] and lag is not None and lag != LONG_MAX
                    and lag > config.acceptable_recovery_lag):
                lagging[task] = (pid, lag)

    # A member that stops running an active was current when it stopped (next_streams_spec does the same).
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
            reason = ("member_left" if mid not in s.members else "deleted" if task not in known_tasks else "moved")
            revocations.append({"member_id": mid, "to_member": new_owner.get(task), "reason": reason,
                                "unit": "task", "unit_id": task})

    rows = [{"member_id": m.member_id, "process_id": process_id(m), "partitions": [],
             "active_tasks": assignment[m.member_id]["active"], "standby_tasks": assignment[m.member_id]["standby"],
             "warmup_tasks": assignment[m.member_id]["warmup"], "connectors": None, "tasks": None}
            for m in s.members.values()]
    counts = [len(assignment[mid]["active"]) for mid in s.members]
    metrics = _unit_metrics("active_task", counts, previous_active, new_owner, s.members)
    probing_at = answer["probing_rebalance_at_ms"] if answer else None
    metrics.update(
        clients=len(clients), threads=sum(c["capacity"] for c in spec_clients),
        active_tasks=sum(counts), standby_tasks=sum(len(h["standby"]) for h in assignment.values()),
        warmup_tasks=sum(len(h["warmup"]) for h in assignment.values()),
        min_actives_per_thread=_rounded(min(per_thread_active, default=None)),
        max_actives_per_thread=_rounded(max(per_thread_active, default=None)),
        min_standbys_per_thread=_rounded(min(per_thread_standby, default=None)),
        max_standbys_per_thread=_rounded(max(per_thread_standby, default=None)),
        not_caught_up_actives=len(lagging), probing_rebalance_at=probing_at)
    return TaskRebalance(
        assignor=STREAMS_ASSIGNOR, protocol=protocol_of(s), assignment=assignment, assignment_rows=rows,
        revocation_rows=revocations, metrics=metrics, assignor_ms=elapsed,
        scheduled=(probing_at, PROBING_REBALANCE) if probing_at is not None else None,
        lagging=lagging, active_client=active_client)


# -- Kafka Connect ---------------------------------------------------------------------------------


def _connect_rebalance(s: "GroupState", at: int, clock: Callable[[], float]) -> TaskRebalance:
    workload = s.task_workload or {}
    connectors = dict(workload.get("connectors") or {})
    max_delay = int(workload.get("scheduled_rebalance_max_delay_ms", DEFAULT_SCHEDULED_REBALANCE_MAX_DELAY_MS))
    assignor = connect_assignor(s)
    members = list(s.members.values())

    previous_owner: dict[tuple[str, str], str] = {}  # (unit, id) -> member
    for mid, held in s.task_assignment.items():
        for c in held.get("connectors", ()):
            previous_owner.setdefault(("connector", c), mid)
        for pair in held.get("tasks", ()):
            previous_owner.setdefault(("task", connect_task_name(pair)), mid)

    answer = None
    elapsed = 0.0
    if members:
        if s.connect_leader not in s.members:
            # Kafka: a new leader's assignor instance starts with no memory (spec scenario 42).
            s.connect_leader = members[0].member_id
            s.connect_leader_state = None
        workers = []
        for m in members:
            held = s.task_assignment.get(m.member_id) or {}
            workers.append({"worker_id": m.member_id, "url": m.task_metadata.get("worker_url") or "",
                            "config_offset": int(m.task_metadata.get("config_offset", 0)),
                            "connectors": list(held.get("connectors", ())),
                            "tasks": [list(p) for p in held.get("tasks", ())]})
        spec = {"assignor": assignor, "connectors": connectors, "workers": workers, "leader_id": s.connect_leader,
                # The leader re-reads the config topic when a worker is ahead of it, so no CONFIG_MISMATCH.
                "leader_config_offset": max([int(workload.get("config_offset", 0))]
                                            + [w["config_offset"] for w in workers]),
                "generation_id": s.generation + 1, "last_completed_generation_id": s.generation,
                "scheduled_rebalance_max_delay_ms": max_delay, "now_ms": at}
        if assignor == INCREMENTAL and s.connect_leader_state is not None:
            spec["leader_state"] = s.connect_leader_state
        parsed = parse_connect_spec(spec, assignor)
        started = clock()
        if assignor == INCREMENTAL:
            result, new_state = assign_connect_incremental(parsed.spec, parsed.state, parsed.now_ms)
        else:
            result, new_state = assign_connect_eager(parsed.spec), None
        elapsed = (clock() - started) * 1000.0
        answer = format_connect_assignment(parsed, result, new_state, elapsed)
        s.connect_leader_state = answer.get("leader_state")
    else:
        s.connect_leader, s.connect_leader_state = None, None

    assignment = {mid: {"connectors": list(w["connectors"]), "tasks": [list(p) for p in w["tasks"]]}
                  for mid, w in (answer["workers"].items() if answer else ())}
    new_owner = {("connector", c): mid for mid, h in assignment.items() for c in h["connectors"]}
    new_owner.update({("task", connect_task_name(p)): mid for mid, h in assignment.items() for p in h["tasks"]})
    configured = {("connector", c) for c in connectors}
    configured |= {("task", f"{c}-{i}") for c, n in connectors.items() for i in range(n)}

    revocations = []
    for (unit, unit_id), mid in previous_owner.items():
        if new_owner.get((unit, unit_id)) == mid:
            continue
        if mid not in s.members:
            reason = "member_left"
        elif (unit, unit_id) not in configured:
            reason = "deleted"
        else:
            # Eager workers give everything up; the incremental assignor revokes to balance the load.
            reason = "balance" if assignor == INCREMENTAL else "moved"
        revocations.append({"member_id": mid, "to_member": new_owner.get((unit, unit_id)), "reason": reason,
                            "unit": unit, "unit_id": unit_id})

    revoked = sum(len(w["revoked_connectors"]) + len(w["revoked_tasks"]) for w in answer["workers"].values()) \
        if answer else 0
    if answer:
        lost_pending = len(answer["lost_pending_connectors"]) + len(answer["lost_pending_tasks"])
        delay_ms = int(answer["delay_ms"])
    else:  # nobody left to run anything: all of the group's work waits for a worker
        lost_pending = len(configured)
        delay_ms = 0
    rows = [{"member_id": m.member_id, "process_id": None, "partitions": [], "active_tasks": None,
             "standby_tasks": None, "warmup_tasks": None, "connectors": assignment[m.member_id]["connectors"],
             "tasks": [connect_task_name(p) for p in assignment[m.member_id]["tasks"]]}
            for m in members]
    task_owner = {k[1]: v for k, v in new_owner.items() if k[0] == "task"}
    previous_task_owner = {k[1]: v for k, v in previous_owner.items() if k[0] == "task"}
    task_counts = [len(assignment[m.member_id]["tasks"]) for m in members]
    connector_counts = [len(assignment[m.member_id]["connectors"]) for m in members]
    metrics = _unit_metrics("task", task_counts, previous_task_owner, task_owner, s.members)
    # Withheld by a revocation round (lost work waiting for its worker is counted in lost_pending).
    held_back = {connect_task_name(p) for p in answer["lost_pending_tasks"]} if answer else set()
    metrics["unassigned"] = len({u for kind, u in configured if kind == "task"} - set(task_owner) - held_back) \
        if answer else 0
    metrics.update(
        connectors=sum(connector_counts), tasks=sum(task_counts),
        min_connectors_per_worker=min(connector_counts, default=None),
        max_connectors_per_worker=max(connector_counts, default=None),
        min_tasks_per_worker=min(task_counts, default=None), max_tasks_per_worker=max(task_counts, default=None),
        lost_pending=lost_pending, revoked=revoked, delay_ms=delay_ms,
        scheduled_rebalance_at=at + delay_ms if delay_ms else None)
    return TaskRebalance(
        assignor=assignor, protocol=protocol_of(s), assignment=assignment, assignment_rows=rows,
        revocation_rows=revocations, metrics=metrics, assignor_ms=elapsed,
        needs_followup=assignor == INCREMENTAL and revoked > 0,
        scheduled=(at + delay_ms, SCHEDULED_REBALANCE) if delay_ms else None,
        lost_pending=lost_pending, lost_due=at + (delay_ms if answer else max_delay) if lost_pending else None)


# -- metrics ---------------------------------------------------------------------------------------


def _rounded(x: float | None) -> float | None:
    return None if x is None else round(x, 6)


def _unit_metrics(unit: str, counts: list[int], previous_owner: Mapping[str, str], new_owner: Mapping[str, str],
                  members: Iterable[str]) -> dict[str, Any]:
    """The per-member columns of balance_metrics over the group's unit (active tasks, connector tasks)."""
    members = set(members)
    n = len(counts)
    mean = sum(counts) / n if n else 0.0
    ordered = sorted(counts)
    # Kafka's balance score, sum over member pairs of |size difference|, from the sorted sizes.
    score = sum((2 * i - n + 1) * c for i, c in enumerate(ordered))
    moved = sum(1 for u, mid in previous_owner.items() if u in new_owner and new_owner[u] != mid)
    retainable = [u for u, mid in previous_owner.items() if mid in members and u in new_owner]
    retained = sum(1 for u in retainable if new_owner[u] == previous_owner[u])
    return {
        "unit": unit, "members": n, "partitions": None,
        "min_per_member": ordered[0] if n else 0, "max_per_member": ordered[-1] if n else 0,
        "mean_per_member": round(mean, 6),
        "stddev_per_member": round(math.sqrt(sum((c - mean) ** 2 for c in counts) / n), 6) if n else 0.0,
        "imbalance": (ordered[-1] - ordered[0]) if n else 0, "balance_score": score, "moved": moved,
        "stickiness": round(retained / len(retainable), 6) if retainable else 1.0, "unassigned": 0,
    }
