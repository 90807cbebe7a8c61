"""The JSON contract of ``rebalance-monitor assign`` for Kafka Connect groups.

Assignors ``connect-eager`` (Kafka's ``EagerAssignor``) and ``connect-incremental``
(``IncrementalCooperativeAssignor``). One spec line is one rebalance as the leader sees it::

    {"id": "c1", "assignor": "connect-incremental",
     "connectors": {"jdbc-source": 2, "s3-sink": 1},
     "workers": [{"worker_id": "w1", "url": "http://w1:8083", "config_offset": 7,
                  "connectors": ["jdbc-source"], "tasks": [["jdbc-source", 0], ["jdbc-source", 1]]},
                 {"worker_id": "w2", "config_offset": 7}],
     "leader_id": "w1", "leader_config_offset": 7,
     "generation_id": 4, "last_completed_generation_id": 3,
     "scheduled_rebalance_max_delay_ms": 300000, "now_ms": 1000,
     "leader_state": {...the previous answer's leader_state...}}

Tasks are ``[connector, task number]`` pairs (Kafka's ``ConnectorTaskId``; a pair, because connector
names may contain the ``-`` that Kafka prints between the two). Defaults, chosen so a hand-written
first round needs only ``connectors`` and ``workers``: ``leader_id`` = the first worker,
``leader_config_offset`` = the highest worker ``config_offset`` (the leader re-reads the config
topic when behind, so a mismatch needs an explicit lower value), ``last_completed_generation_id`` =
the leader state's ``previous_generation_id`` (-1 without state), ``generation_id`` = that + 1.

The incremental assignor keeps memory between rebalances on the leader (previous assignment,
revocations, the lost-work delay and its candidate workers, the revocation back-off). Here that is
the explicit ``leader_state`` object: read from the spec, written to the answer, and fed into the
next round's spec (:func:`next_connect_spec` does it, with the workers' new assignments); absent =
a fresh leader. ``connect-eager`` has no state and refuses one.

The answer names, per worker, the full assignment it runs after this round (``connectors``,
``tasks``), what is new (``assigned_*``), what it must stop (``revoked_*``) and ``delay_ms``; and for
the group ``assignment_error`` (``NONE`` or ``CONFIG_MISMATCH``, Kafka's ``Assignment`` error),
``leader_id``, ``config_offset``, ``delay_ms``, lost work still held back, and ``leader_state``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Mapping

from ..errors import InvalidGroupSpecError
from ..spec_fields import (
    ID_FIELD,
    SpecField,
    check_members_match,
    check_object,
    is_int,
    object_schema,
    read_bool,
    read_int,
    read_int_map,
    read_list,
    read_spec_id,
    read_str,
    read_str_list,
    show,
)
from .model import (
    DEFAULT_SCHEDULED_REBALANCE_MAX_DELAY_MS,
    ConnectAssignment,
    ConnectAssignorState,
    ConnectGroupSpec,
    ConnectorTaskId,
    ConnectWorkerSpec,
    java_string_key,
    task_key,
)

EAGER = "connect-eager"
INCREMENTAL = "connect-incremental"
CONNECT_ASSIGNOR_NAMES: tuple[str, ...] = (EAGER, INCREMENTAL)

_TASK = {"type": "array", "prefixItems": [{"type": "string", "minLength": 1}, {"type": "integer", "minimum": 0}],
         "minItems": 2, "maxItems": 2}
_TASKS = {"type": "array", "items": _TASK, "uniqueItems": True}
_NAMES = {"type": "array", "items": {"type": "string", "minLength": 1}, "uniqueItems": True}
_FRESH = ConnectAssignorState()

WORKER_FIELDS: tuple[SpecField, ...] = (
    SpecField("worker_id", {"type": "string", "minLength": 1}, "The worker's member id.", required=True),
    SpecField("url", {"type": "string"}, "The worker's REST URL (carried, not used by the assignors).", default=""),
    SpecField("config_offset", {"type": "integer", "minimum": -1},
              "Offset of the config topic the worker has read up to.", default=0),
    SpecField("connectors", _NAMES, "Connectors the worker reports running, in its metadata's order.", default=[]),
    SpecField("tasks", _TASKS, "Tasks the worker reports running, as [connector, task] pairs, in order.",
              default=[]),
)

LEADER_STATE_FIELDS: tuple[SpecField, ...] = (
    SpecField("previous_connectors", _NAMES, "Connectors of the leader's previous assignment.", default=[]),
    SpecField("previous_tasks", _TASKS, "Tasks of the leader's previous assignment.", default=[]),
    SpecField("previous_revoked_connectors", _NAMES, "Connectors revoked last round.", default=[]),
    SpecField("previous_revoked_tasks", _TASKS, "Tasks revoked last round.", default=[]),
    SpecField("previous_generation_id", {"type": "integer", "minimum": -1},
              "Generation of the leader's previous assignment (-1 = none).", default=_FRESH.previous_generation_id),
    SpecField("previous_members", _NAMES, "Workers of the previous round.", default=[]),
    SpecField("scheduled_rebalance_ms", {"type": "integer", "minimum": 0},
              "Absolute time (ms) of the scheduled rebalance for lost work or the back-off; 0 = none.",
              default=0),
    SpecField("delay_ms", {"type": "integer", "minimum": 0}, "The delay given out last round.", default=0),
    SpecField("candidate_workers", _NAMES,
              "Workers seen empty during a lost-work delay, in the order they were seen.", default=[]),
    SpecField("revoked_in_previous", {"type": "boolean"}, "Whether the previous round revoked for balance.",
              default=False),
    SpecField("num_successive_revoking_rebalances", {"type": "integer", "minimum": 0},
              "Revoking rounds in a row (drives the back-off).", default=0),
)

CONNECT_SPEC_FIELDS: tuple[SpecField, ...] = (
    ID_FIELD,
    SpecField("assignor", {"enum": list(CONNECT_ASSIGNOR_NAMES)},
              "The assignor; may be left out when --assignor is given."),
    SpecField("connectors", {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}},
              "The config snapshot: each configured connector and its number of tasks (tasks 0..n-1).",
              required=True),
    SpecField("workers", {"type": "array", "minItems": 1, "items": object_schema(WORKER_FIELDS)},
              "The group's workers in JoinGroup order, each with what it reports running.", required=True),
    SpecField("leader_id", {"type": "string", "minLength": 1}, "The leader (one of the workers); default: the first."),
    SpecField("leader_config_offset", {"type": "integer", "minimum": -1},
              "Config offset of the leader's snapshot; default: the highest worker config_offset."),
    SpecField("generation_id", {"type": "integer", "minimum": 0},
              "Generation of this rebalance; default: last_completed_generation_id + 1."),
    SpecField("last_completed_generation_id", {"type": "integer", "minimum": -1},
              "The last generation this leader completed; default: leader_state.previous_generation_id."),
    SpecField("scheduled_rebalance_max_delay_ms", {"type": "integer", "minimum": 0},
              "scheduled.rebalance.max.delay.ms: how long lost work waits for its worker.",
              default=DEFAULT_SCHEDULED_REBALANCE_MAX_DELAY_MS),
    SpecField("now_ms", {"type": "integer", "minimum": 0}, "The leader's clock (incremental).", default=0),
    SpecField("leader_state", object_schema(LEADER_STATE_FIELDS),
              "connect-incremental only: the previous answer's leader_state; absent = a fresh leader."),
)


def connect_spec_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of one Connect spec line."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "rebalance-monitor assign: Kafka Connect group spec (connect-eager, connect-incremental)",
        **object_schema(CONNECT_SPEC_FIELDS, "One JSON Lines input line of `rebalance-monitor assign` for a"
                        " Kafka Connect group; see docs/assign.md."),
    }


@dataclass(frozen=True, slots=True)
class ParsedConnectSpec:
    """One Connect input line: its id, the assignor, the model spec, the leader state and the clock."""

    spec_id: str | int | None
    assignor: str
    spec: ConnectGroupSpec
    #: ``None`` for ``connect-eager``; for the incremental assignor, a fresh state when none was given.
    state: ConnectAssignorState | None
    now_ms: int


def parse_connect_spec(obj: object, assignor: str) -> ParsedConnectSpec:
    """Validate one decoded Connect spec line; every error names the field path at fault."""
    obj = check_object(obj, CONNECT_SPEC_FIELDS, "", "a JSON object (a Connect group spec)")
    spec_id = read_spec_id(obj)
    connectors = read_int_map(obj, "connectors", "", what="connector", minimum=0)
    if connectors is None:
        raise InvalidGroupSpecError("connectors: must be an object of connector -> task count, got null")
    for name in connectors:
        if not name:
            raise InvalidGroupSpecError("connectors: a connector name must not be empty")

    workers: list[ConnectWorkerSpec] = []
    index_of: dict[str, int] = {}
    for i, entry in enumerate(read_list(obj, "workers", "", what="worker objects")):
        worker = _read_worker(entry, f"workers[{i}]")
        if worker.worker_id in index_of:
            raise InvalidGroupSpecError(
                f"workers[{i}].worker_id: {worker.worker_id!r} is already used by workers[{index_of[worker.worker_id]}]"
            )
        index_of[worker.worker_id] = i
        workers.append(worker)
    if not workers:
        raise InvalidGroupSpecError("workers: a Connect group needs at least one worker")

    leader_id = read_str(obj, "leader_id", "", default=workers[0].worker_id)
    if leader_id not in index_of:
        raise InvalidGroupSpecError(f"leader_id: {leader_id!r} is not one of the workers")

    if "leader_state" in obj and assignor != INCREMENTAL:
        raise InvalidGroupSpecError(
            f"leader_state: only {INCREMENTAL} keeps leader state between rebalances; {assignor} has none"
        )
    state = _read_state(obj["leader_state"]) if "leader_state" in obj else None
    if assignor == INCREMENTAL and state is None:
        state = ConnectAssignorState()
    last_completed = read_int(
        obj, "last_completed_generation_id", "", minimum=-1,
        default=(state or _FRESH).previous_generation_id,
    )
    spec = ConnectGroupSpec(
        workers=tuple(workers),
        connectors=connectors,
        leader_id=leader_id,
        leader_config_offset=read_int(
            obj, "leader_config_offset", "", minimum=-1, default=max(w.config_offset for w in workers)
        ),
        generation_id=read_int(obj, "generation_id", "", minimum=0, default=last_completed + 1),
        last_completed_generation_id=last_completed,
        scheduled_rebalance_max_delay_ms=read_int(
            obj, "scheduled_rebalance_max_delay_ms", "", minimum=0, default=DEFAULT_SCHEDULED_REBALANCE_MAX_DELAY_MS
        ),
    )
    spec.validate()
    return ParsedConnectSpec(spec_id, assignor, spec, state, read_int(obj, "now_ms", "", default=0, minimum=0))


def format_connect_assignment(
    parsed: ParsedConnectSpec,
    result: ConnectAssignment,
    new_state: ConnectAssignorState | None,
    elapsed_ms: float,
) -> dict[str, Any]:
    """The answer line: every worker in spec order, then the group-level fields and the leader state."""
    worker_ids = [w.worker_id for w in parsed.spec.workers]
    check_members_match(parsed.assignor, "workers", worker_ids, result.workers)
    workers: dict[str, Any] = {}
    for wid in worker_ids:
        a = result.workers[wid]
        workers[wid] = {
            "connectors": list(a.connectors),
            "tasks": _task_pairs(a.tasks),
            "assigned_connectors": list(a.assigned_connectors),
            "assigned_tasks": _task_pairs(a.assigned_tasks),
            "revoked_connectors": list(a.revoked_connectors),
            "revoked_tasks": _task_pairs(a.revoked_tasks),
            "delay_ms": a.delay_ms,
        }
    answer: dict[str, Any] = {
        "id": parsed.spec_id,
        "assignor": parsed.assignor,
        "assignment_error": result.error,
        "leader_id": result.leader_id,
        "config_offset": result.config_offset,
        "delay_ms": result.delay_ms,
        "workers": workers,
        "lost_pending_connectors": list(result.lost_pending_connectors),
        "lost_pending_tasks": _task_pairs(result.lost_pending_tasks),
    }
    if new_state is not None:
        answer["leader_state"] = format_leader_state(new_state)
    answer["elapsed_ms"] = round(elapsed_ms, 4)
    return answer


def format_leader_state(state: ConnectAssignorState) -> dict[str, Any]:
    """The JSON form of the leader state; sets are listed in Kafka's order (names, then task numbers)."""
    return {
        "previous_connectors": sorted(state.previous_connectors, key=java_string_key),
        "previous_tasks": _task_pairs(sorted(state.previous_tasks, key=task_key)),
        "previous_revoked_connectors": sorted(state.previous_revoked_connectors, key=java_string_key),
        "previous_revoked_tasks": _task_pairs(sorted(state.previous_revoked_tasks, key=task_key)),
        "previous_generation_id": state.previous_generation_id,
        "previous_members": sorted(state.previous_members, key=java_string_key),
        "scheduled_rebalance_ms": state.scheduled_rebalance_ms,
        "delay_ms": state.delay_ms,
        "candidate_workers": list(state.candidate_workers),
        "revoked_in_previous": state.revoked_in_previous,
        "num_successive_revoking_rebalances": state.num_successive_revoking_rebalances,
    }


def next_connect_spec(spec: Mapping[str, Any], answer: Mapping[str, Any], *, now_ms: int | None = None) -> dict[str, Any]:
    """The spec of the next rebalance of the same workers, given this round's spec and answer.

    Each worker reports what the answer told it to run (revocations honoured, new work started) and
    the config offset of the assignment; after ``CONFIG_MISMATCH`` the workers keep running what they
    ran and the leader has caught up to the offset the answer names. The generation advances, the
    answer's ``leader_state`` is carried over, and ``now_ms`` defaults to this round's plus the
    answer's ``delay_ms`` (when the workers rejoin on their own). Workers that join or leave, and
    connector changes, are the caller's edit of the result.
    """
    if "error" in answer:
        raise InvalidGroupSpecError(f"the answer is an error line, there is no next round: {answer['error']}")
    parsed = parse_connect_spec(spec, answer["assignor"])
    next_spec = copy.deepcopy(dict(spec))
    if answer["assignment_error"] == "NONE":
        for worker in next_spec["workers"]:
            got = answer["workers"].get(worker["worker_id"])
            if got is None:
                raise InvalidGroupSpecError(
                    f"the answer has no worker {worker['worker_id']!r} of the spec; was it the answer to this spec?"
                )
            worker["connectors"] = list(got["connectors"])
            worker["tasks"] = [list(t) for t in got["tasks"]]
            worker["config_offset"] = answer["config_offset"]
    next_spec["leader_config_offset"] = answer["config_offset"]
    next_spec["last_completed_generation_id"] = parsed.spec.generation_id
    next_spec["generation_id"] = parsed.spec.generation_id + 1
    if "leader_state" in answer:
        next_spec["leader_state"] = copy.deepcopy(answer["leader_state"])
    next_spec["now_ms"] = parsed.now_ms + answer["delay_ms"] if now_ms is None else now_ms
    return next_spec


# --- parsing helpers ------------------------------------------------------------------------------


def _task_pairs(tasks) -> list[list[Any]]:
    return [[t.connector, t.task] for t in tasks]


def _read_tasks(obj: Mapping[str, Any], key: str, path: str) -> tuple[ConnectorTaskId, ...]:
    value = obj.get(key, [])
    where = f"{path}.{key}" if path else key
    if not isinstance(value, list):
        raise InvalidGroupSpecError(f"{where}: must be a list of [connector, task] pairs, got {show(value)}")
    tasks: list[ConnectorTaskId] = []
    seen: dict[ConnectorTaskId, int] = {}
    for i, pair in enumerate(value):
        if not isinstance(pair, list) or len(pair) != 2:
            raise InvalidGroupSpecError(f"{where}[{i}]: must be a [connector, task] pair, got {show(pair)}")
        connector, number = pair
        if not isinstance(connector, str) or not connector:
            raise InvalidGroupSpecError(f"{where}[{i}]: connector must be a non-empty string, got {show(connector)}")
        if not is_int(number) or number < 0:
            raise InvalidGroupSpecError(
                f"{where}[{i}]: task number of connector {connector!r} must be an integer >= 0, got {show(number)}"
            )
        task = ConnectorTaskId(connector, number)
        if task in seen:
            raise InvalidGroupSpecError(f"{where}[{i}]: task {connector!r} {number} is already listed at [{seen[task]}]")
        seen[task] = i
        tasks.append(task)
    return tuple(tasks)


def _read_worker(entry: object, path: str) -> ConnectWorkerSpec:
    entry = check_object(entry, WORKER_FIELDS, path, "an object with worker_id")
    url = entry.get("url", "")
    if not isinstance(url, str):
        raise InvalidGroupSpecError(f"{path}.url: must be a string, got {show(url)}")
    # Work a worker reports is kept even for connectors no longer configured: Kafka revokes it.
    return ConnectWorkerSpec(
        worker_id=read_str(entry, "worker_id", path),
        connectors=tuple(read_str_list(entry, "connectors", path, what="connector")),
        tasks=_read_tasks(entry, "tasks", path),
        config_offset=read_int(entry, "config_offset", path, default=0, minimum=-1),
        url=url,
    )


def _read_state(value: object) -> ConnectAssignorState:
    path = "leader_state"
    obj = check_object(value, LEADER_STATE_FIELDS, path, "an object (the previous answer's leader_state)")
    return ConnectAssignorState(
        previous_connectors=frozenset(read_str_list(obj, "previous_connectors", path, what="connector")),
        previous_tasks=frozenset(_read_tasks(obj, "previous_tasks", path)),
        previous_revoked_connectors=frozenset(read_str_list(obj, "previous_revoked_connectors", path, what="connector")),
        previous_revoked_tasks=frozenset(_read_tasks(obj, "previous_revoked_tasks", path)),
        previous_generation_id=read_int(obj, "previous_generation_id", path, default=-1, minimum=-1),
        previous_members=frozenset(read_str_list(obj, "previous_members", path, what="worker")),
        scheduled_rebalance_ms=read_int(obj, "scheduled_rebalance_ms", path, default=0, minimum=0),
        delay_ms=read_int(obj, "delay_ms", path, default=0, minimum=0),
        candidate_workers=tuple(read_str_list(obj, "candidate_workers", path, what="worker")),
        revoked_in_previous=read_bool(obj, "revoked_in_previous", path, default=False),
        num_successive_revoking_rebalances=read_int(obj, "num_successive_revoking_rebalances", path, default=0, minimum=0),
    )


__all__ = [
    "CONNECT_ASSIGNOR_NAMES",
    "CONNECT_SPEC_FIELDS",
    "LEADER_STATE_FIELDS",
    "WORKER_FIELDS",
    "ParsedConnectSpec",
    "connect_spec_schema",
    "format_connect_assignment",
    "format_leader_state",
    "next_connect_spec",
    "parse_connect_spec",
]
