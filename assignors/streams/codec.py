"""The JSON contract of ``rebalance-monitor assign`` for Kafka Streams groups (assignor ``streams-ha``).

One spec line (field names follow :mod:`assignors.streams.model` and the Java reference's spec in
docs/streams-connect-reference.md, so a reference spec with an ``assignor`` added is a valid line)::

    {"id": "s1", "assignor": "streams-ha",
     "clients": [{"process_id": "p1", "capacity": 2, "task_lags": {"0_1": 1500},
                  "previous_active_tasks": ["0_0", "1_0"], "previous_standby_tasks": ["0_1"],
                  "tags": {"zone": "a"}}],
     "stateful_tasks": ["0_0", "0_1"], "stateless_tasks": ["1_0"],
     "config": {"acceptable_recovery_lag": 10000, "num_standby_replicas": 1, "max_warmup_replicas": 2,
                "probing_rebalance_interval_ms": 600000, "rack_aware_assignment_tags": []},
     "now_ms": 0}

and its answer (one client: nowhere to put a standby)::

    {"id": "s1", "assignor": "streams-ha",
     "clients": {"p1": {"active_tasks": ["0_0", "0_1", "1_0"], "standby_tasks": [], "warmup_tasks": []}},
     "probing_rebalance_needed": false, "probing_rebalance_at_ms": null,
     "moved_tasks": [], "fallback_used": false, "elapsed_ms": 0.93}

How Kafka encodes "previous" tasks, and so how the lists map onto the model: a client's subscription
carries one offset sum per task it has state for, ``-2`` (``Task.LATEST_OFFSET``) for the tasks it
ran as active. ``previous_active_tasks`` therefore sets the task's lag (or offset sum) to ``-2``, and
``previous_standby_tasks`` marks a standby copy, whose lag must come from ``task_lags`` or
``task_offset_sums`` (a listed standby without an offset sum has an empty store: offset sum 0).
A value that contradicts a list (a previous active with lag 40) is an error.

:func:`next_streams_spec` turns a spec and its answer into the next round's spec (the answer's
tasks become the previous ones, ``now_ms`` moves to the probing rebalance), see docs/assign.md.

Everything here is pure: dicts in, dicts out.
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
    join_path,
    object_schema,
    read_int,
    read_int_map,
    read_list,
    read_spec_id,
    read_str,
    read_str_list,
    show,
)
from .model import (
    LATEST_OFFSET,
    UNKNOWN_OFFSET_SUM,
    StreamsAssignment,
    StreamsAssignmentConfig,
    StreamsClient,
    StreamsGroupSpec,
    task_sort_key,
)

STREAMS_ASSIGNOR_NAMES: tuple[str, ...] = ("streams-ha",)

_TASK_ID_PATTERN = r"^[0-9]+_[0-9]+$"
_TASK_ID = {"type": "string", "pattern": _TASK_ID_PATTERN}
_TASK_LIST = {"type": "array", "items": _TASK_ID, "uniqueItems": True}
# A lag or an offset sum: a count, or one of Kafka's sentinels (-2 running as active, -3 unknown).
_LAG = {"anyOf": [{"type": "integer", "minimum": 0}, {"enum": [LATEST_OFFSET, UNKNOWN_OFFSET_SUM]}]}
_SENTINELS = frozenset({LATEST_OFFSET, UNKNOWN_OFFSET_SUM})


def _task_map(value_schema: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "object", "propertyNames": {"pattern": _TASK_ID_PATTERN}, "additionalProperties": value_schema}


_DEFAULTS = StreamsAssignmentConfig()

CONFIG_FIELDS: tuple[SpecField, ...] = (
    SpecField("acceptable_recovery_lag", {"type": "integer", "minimum": 0},
              "acceptable.recovery.lag: a client whose lag on a task is at most this is caught up.",
              default=_DEFAULTS.acceptable_recovery_lag),
    SpecField("num_standby_replicas", {"type": "integer", "minimum": 0},
              "num.standby.replicas: standby copies per stateful task.", default=_DEFAULTS.num_standby_replicas),
    SpecField("max_warmup_replicas", {"type": "integer", "minimum": 1},
              "max.warmup.replicas: warm-up copies (beyond the standbys) allowed at once in the group.",
              default=_DEFAULTS.max_warmup_replicas),
    SpecField("probing_rebalance_interval_ms", {"type": "integer", "minimum": 60_000},
              "probing.rebalance.interval.ms: delay of the probing rebalance that follows warm-ups.",
              default=_DEFAULTS.probing_rebalance_interval_ms),
    SpecField("rack_aware_assignment_tags", {"type": "array", "items": {"type": "string", "minLength": 1},
                                             "uniqueItems": True},
              "rack.aware.assignment.tags (KIP-708): client tag keys over which standbys are spread;"
              " empty = the default standby assignor.", default=[]),
)

CLIENT_FIELDS: tuple[SpecField, ...] = (
    SpecField("process_id", {"type": "string", "minLength": 1},
              "The client's process id (a UUID in Kafka; clients are visited in UUID order when every id"
              " is one, else in string order).", required=True),
    SpecField("capacity", {"type": "integer", "minimum": 1}, "Number of stream threads of the client.", default=1),
    SpecField("task_lags", _task_map(_LAG),
              "Lag per stateful task (-2 = running it as active, -3 = unknown). Give one per stateful task"
              " (previous actives may be left out), or give task_offset_sums instead."),
    SpecField("task_offset_sums", _task_map(_LAG),
              "What the client's subscription reports: summed changelog offsets of its local state per task"
              " (-2 = running it as active); absent task = no state. Needs task_end_offset_sums."),
    SpecField("previous_active_tasks", _TASK_LIST,
              "Tasks the client ran as active (their lag or offset sum is -2); stateless ones may be listed.",
              default=[]),
    SpecField("previous_standby_tasks", _TASK_LIST,
              "Stateful tasks the client holds a standby or warm-up copy of.", default=[]),
    SpecField("tags", {"type": "object", "additionalProperties": {"type": "string"}},
              "KIP-708 client tags (client.tag.*), used with config.rack_aware_assignment_tags.", default={}),
)

STREAMS_SPEC_FIELDS: tuple[SpecField, ...] = (
    ID_FIELD,
    SpecField("assignor", {"enum": list(STREAMS_ASSIGNOR_NAMES)},
              "The assignor; may be left out when --assignor is given."),
    SpecField("clients", {"type": "array", "minItems": 1, "items": {
        **object_schema(CLIENT_FIELDS), "not": {"required": ["task_lags", "task_offset_sums"]}}},
              "The group's Kafka Streams clients (one per process), in JoinGroup order.", required=True),
    SpecField("stateful_tasks", _TASK_LIST, "Tasks with state stores, as '<subtopology>_<partition>'.",
              required=True),
    SpecField("stateless_tasks", _TASK_LIST, "Tasks without state.", default=[]),
    SpecField("task_end_offset_sums", {"anyOf": [_task_map({"type": "integer", "minimum": 0}), {"type": "null"}]},
              "Summed changelog end offsets per stateful task, for clients that give task_offset_sums;"
              " null/absent with such clients = the fetch failed, and Kafka's fallback keeps the prior"
              " assignment."),
    SpecField("config", object_schema(CONFIG_FIELDS),
              "The assignment configs; every key is optional (Kafka's defaults)."),
    SpecField("now_ms", {"type": "integer", "minimum": 0},
              "The leader's clock; the probing rebalance is scheduled relative to it.", default=0),
)


def streams_spec_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of one Streams spec line."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "rebalance-monitor assign: Kafka Streams group spec (streams-ha)",
        **object_schema(STREAMS_SPEC_FIELDS, "One JSON Lines input line of `rebalance-monitor assign` for a"
                        " Kafka Streams group; see docs/assign.md."),
    }


@dataclass(frozen=True, slots=True)
class ParsedStreamsSpec:
    """One Streams input line: its id, the assignor, the model spec, and who ran each task as active."""

    spec_id: str | int | None
    assignor: str
    spec: StreamsGroupSpec
    #: Task -> clients reporting it as running active (-2), in spec order; for ``moved_tasks``.
    previous_active_owners: dict[str, tuple[str, ...]]


def parse_streams_spec(obj: object, assignor: str) -> ParsedStreamsSpec:
    """Validate one decoded Streams spec line; every error names the field path at fault."""
    obj = check_object(obj, STREAMS_SPEC_FIELDS, "", "a JSON object (a Streams group spec)")
    spec_id = read_spec_id(obj)
    stateful = _read_tasks(obj, "stateful_tasks", "")
    stateless = _read_tasks(obj, "stateless_tasks", "")
    stateful_set = set(stateful)
    for i, task in enumerate(stateless):
        if task in stateful_set:
            raise InvalidGroupSpecError(f"stateless_tasks[{i}]: task {task!r} is also listed in stateful_tasks")
    end_sums = read_int_map(obj, "task_end_offset_sums", "", what="task", minimum=0)
    if end_sums is not None:
        _check_task_keys(end_sums, "task_end_offset_sums", stateful_set)
        for task in stateful:
            if task not in end_sums:
                raise InvalidGroupSpecError(f"task_end_offset_sums: no end offset sum for stateful task {task!r}")
    config = _read_config(obj.get("config", {}))

    stateless_set = set(stateless)
    known_tasks = stateful_set | stateless_set
    clients: list[StreamsClient] = []
    owners: dict[str, list[str]] = {}
    index_of: dict[str, int] = {}
    for i, entry in enumerate(read_list(obj, "clients", "", what="client objects")):
        path = f"clients[{i}]"
        client = _read_client(entry, path, stateful, stateless_set, known_tasks)
        if client.process_id in index_of:
            raise InvalidGroupSpecError(
                f"{path}.process_id: {client.process_id!r} is already used by clients[{index_of[client.process_id]}]"
            )
        index_of[client.process_id] = i
        reported = client.task_lags if client.task_lags is not None else client.task_offset_sums
        for task, value in reported.items():
            if value == LATEST_OFFSET:
                owners.setdefault(task, []).append(client.process_id)
        clients.append(client)
    if not clients:
        raise InvalidGroupSpecError("clients: a Streams group needs at least one client")

    spec = StreamsGroupSpec(
        clients=tuple(clients),
        stateful_tasks=tuple(stateful),
        stateless_tasks=tuple(stateless),
        task_end_offset_sums=end_sums,
        config=config,
        now_ms=read_int(obj, "now_ms", "", default=0, minimum=0),
    )
    spec.validate()  # the model's own checks (config bounds), before any clock starts
    return ParsedStreamsSpec(spec_id, assignor, spec, {t: tuple(o) for t, o in owners.items()})


def format_streams_assignment(parsed: ParsedStreamsSpec, result: StreamsAssignment, elapsed_ms: float) -> dict[str, Any]:
    """The answer line: every client in spec order, then the probing decision and the moved tasks.

    ``moved_tasks`` lists ``[task, from, to]`` for each task some client ran as active before
    (``from``: the first such client in spec order) whose active is now on a client that did not.
    """
    process_ids = [c.process_id for c in parsed.spec.clients]
    check_members_match(parsed.assignor, "clients", process_ids, result.clients)
    clients: dict[str, Any] = {}
    active_owner: dict[str, str] = {}
    for pid in process_ids:
        a = result.clients[pid]
        clients[pid] = {
            "active_tasks": list(a.active_tasks),
            "standby_tasks": list(a.standby_tasks),
            "warmup_tasks": list(a.warmup_tasks),
        }
        for task in a.active_tasks:
            active_owner[task] = pid
    moved = [
        [task, owners[0], active_owner[task]]
        for task, owners in sorted(parsed.previous_active_owners.items(), key=lambda item: task_sort_key(item[0]))
        if task in active_owner and active_owner[task] not in owners
    ]
    return {
        "id": parsed.spec_id,
        "assignor": parsed.assignor,
        "clients": clients,
        "probing_rebalance_needed": result.probing_rebalance_needed,
        "probing_rebalance_at_ms": result.probing_rebalance_at_ms,
        "moved_tasks": moved,
        "fallback_used": result.fallback_used,
        "elapsed_ms": round(elapsed_ms, 4),
    }


def next_streams_spec(
    spec: Mapping[str, Any],
    answer: Mapping[str, Any],
    *,
    now_ms: int | None = None,
    reported: Mapping[str, Mapping[str, int]] | None = None,
) -> dict[str, Any]:
    """The spec of the next rebalance of the same clients, given this round's spec and answer.

    Each client's answer becomes its ``previous_active_tasks`` (lag/offset sum -2) and
    ``previous_standby_tasks`` (standbys and warm-ups). A task a client stops running as active was
    current when it stopped: its lag becomes 0 (offset sum: the end offset sum). Every other lag is
    carried over unchanged unless ``reported`` gives a new value (``process_id -> task -> value``, in
    the client's own unit: a lag for ``task_lags`` clients, an offset sum otherwise), which is how a
    caller says that warm-ups have caught up. ``now_ms`` defaults to the answer's probing rebalance
    time, else this round's ``now_ms``. Clients that join or leave are the caller's edit of the result.
    """
    if "error" in answer:
        raise InvalidGroupSpecError(f"the answer is an error line, there is no next round: {answer['error']}")
    next_spec = copy.deepcopy(dict(spec))
    stateful = set(next_spec.get("stateful_tasks", []))
    end_sums = next_spec.get("task_end_offset_sums") or {}
    reported = dict(reported or {})
    for client in next_spec["clients"]:
        pid = client["process_id"]
        got = answer["clients"].get(pid)
        if got is None:
            raise InvalidGroupSpecError(f"the answer has no client {pid!r} of the spec; was it the answer to this spec?")
        actives = list(got["active_tasks"])
        standbys = sorted([*got["standby_tasks"], *got["warmup_tasks"]], key=task_sort_key)
        lags_key = "task_lags" if "task_lags" in client else "task_offset_sums"
        values = dict(client.get(lags_key) or {})
        was_active = set(client.get("previous_active_tasks", [])) | {t for t, v in values.items() if v == LATEST_OFFSET}
        for task in was_active - set(actives):
            if task not in stateful:
                values.pop(task, None)
            elif lags_key == "task_lags":
                values[task] = 0
            elif task in end_sums:
                values[task] = end_sums[task]
            else:
                values.pop(task, None)  # no end offset known: the lag is unknown either way
        for task in actives:
            values.pop(task, None)  # previous_active_tasks says -2
        values.update(reported.pop(pid, {}))
        if values or lags_key == "task_lags":
            client[lags_key] = values
        else:
            client.pop(lags_key, None)
        client["previous_active_tasks"] = actives
        client["previous_standby_tasks"] = standbys
    if reported:
        raise InvalidGroupSpecError(f"reported: unknown client(s) {sorted(reported)}")
    if now_ms is not None:
        next_spec["now_ms"] = now_ms
    elif answer.get("probing_rebalance_at_ms") is not None:
        next_spec["now_ms"] = answer["probing_rebalance_at_ms"]
    return next_spec


# --- parsing helpers ------------------------------------------------------------------------------


def _read_tasks(obj: Mapping[str, Any], key: str, path: str) -> list[str]:
    tasks = read_str_list(obj, key, path, what="task id")
    for i, task in enumerate(tasks):
        _check_task_id(task, f"{join_path(path, key)}[{i}]")
    return tasks


def _check_task_id(task: str, where: str) -> None:
    try:
        task_sort_key(task)
    except InvalidGroupSpecError as exc:
        raise InvalidGroupSpecError(f"{where}: {exc}") from None


def _check_task_keys(values: Mapping[str, int], where: str, known: set[str] | frozenset[str] = frozenset()) -> None:
    # Ids of the topology's tasks are already checked; with a lag per task per client that is most keys.
    for task in values:
        if task not in known:
            _check_task_id(task, f"{where}[{task!r}]")


def _read_config(value: object) -> StreamsAssignmentConfig:
    cfg = check_object(value, CONFIG_FIELDS, "config", "an object of assignment configs")
    d = _DEFAULTS
    tags = read_str_list(cfg, "rack_aware_assignment_tags", "config", what="tag key")
    return StreamsAssignmentConfig(
        acceptable_recovery_lag=read_int(cfg, "acceptable_recovery_lag", "config", default=d.acceptable_recovery_lag, minimum=0),
        num_standby_replicas=read_int(cfg, "num_standby_replicas", "config", default=d.num_standby_replicas, minimum=0),
        max_warmup_replicas=read_int(cfg, "max_warmup_replicas", "config", default=d.max_warmup_replicas, minimum=1),
        probing_rebalance_interval_ms=read_int(
            cfg, "probing_rebalance_interval_ms", "config", default=d.probing_rebalance_interval_ms, minimum=60_000
        ),
        rack_aware_assignment_tags=tuple(tags),
    )


def _read_client(
    entry: object, path: str, stateful: list[str], stateless: set[str], known_tasks: set[str]
) -> StreamsClient:
    entry = check_object(entry, CLIENT_FIELDS, path, "an object with process_id and capacity")
    process_id = read_str(entry, "process_id", path)
    capacity = read_int(entry, "capacity", path, default=1, minimum=1)
    lags = read_int_map(entry, "task_lags", path, what="task", minimum=0, allowed_below=_SENTINELS)
    sums = read_int_map(entry, "task_offset_sums", path, what="task", minimum=0, allowed_below=_SENTINELS)
    if lags is not None and sums is not None:
        raise InvalidGroupSpecError(f"{path}: give task_lags or task_offset_sums, not both")
    lags_key = "task_lags" if lags is not None else "task_offset_sums"
    values = lags if lags is not None else dict(sums or {})
    _check_task_keys(values, join_path(path, lags_key), known_tasks)

    previous_active = _read_tasks(entry, "previous_active_tasks", path)
    previous_standby = _read_tasks(entry, "previous_standby_tasks", path)
    active_set = set(previous_active)
    for i, task in enumerate(previous_active):
        value = values.get(task, LATEST_OFFSET)
        if value != LATEST_OFFSET:
            raise InvalidGroupSpecError(
                f"{path}.previous_active_tasks[{i}]: task {task!r} ran as active, so its {lags_key} value is -2,"
                f" but {lags_key} gives {value}"
            )
        values[task] = LATEST_OFFSET
    for i, task in enumerate(previous_standby):
        where = f"{path}.previous_standby_tasks[{i}]"
        if task in active_set:
            raise InvalidGroupSpecError(f"{where}: task {task!r} is also in previous_active_tasks")
        if task in stateless:
            raise InvalidGroupSpecError(f"{where}: task {task!r} is stateless; only stateful tasks have standbys")
        if values.get(task) == LATEST_OFFSET:
            raise InvalidGroupSpecError(
                f"{where}: task {task!r} has {lags_key} -2 (running it as active), so it is not a standby"
            )
        if lags is None:
            # The store exists but its restored offsets were not given: offset sum 0, lag = the end offset.
            values.setdefault(task, 0)
    if lags is not None:
        for task in stateful:
            if task not in values:
                raise InvalidGroupSpecError(
                    f"{path}.task_lags: no lag for stateful task {task!r} (give one per stateful task;"
                    " -2 = running it as active)"
                )

    tags_value = entry.get("tags", {})
    if not isinstance(tags_value, Mapping) or not all(
        isinstance(k, str) and k and isinstance(v, str) for k, v in tags_value.items()
    ):
        raise InvalidGroupSpecError(f"{path}.tags: must be an object of tag key -> string value, got {show(tags_value)}")

    return StreamsClient(
        process_id=process_id,
        capacity=capacity,
        task_offset_sums=values if lags is None else {},
        task_lags=values if lags is not None else None,
        tags=dict(tags_value),
    )


__all__ = [
    "CLIENT_FIELDS",
    "CONFIG_FIELDS",
    "STREAMS_ASSIGNOR_NAMES",
    "STREAMS_SPEC_FIELDS",
    "ParsedStreamsSpec",
    "format_streams_assignment",
    "next_streams_spec",
    "parse_streams_spec",
    "streams_spec_schema",
]
