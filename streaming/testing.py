"""Drive the engine, or the job's Spark processor, from a plain test: events in, rows back.

In the spirit of bytewax's testing source and sink: no broker and no Spark session, so a scenario
runs in milliseconds. Events are written as in the stories of ``tests/stories.py``:

* a ``dict`` is a membership event as the topic carries it (checked and typed by
  :meth:`MembershipEvent.from_json`);
* a tuple ``("hb", member_id, event_time)`` is a heartbeat, and ``("hb", member_id, event_time,
  {task: lag})`` a Kafka Streams heartbeat with its task lags.

:func:`feed` hands one batch to :func:`streaming.engine.advance`; :class:`ProcessorHarness` hands
batches to :class:`streaming.job.processor.GroupProcessor` through stand-ins of Spark's state
handle and timer values, as Spark's operator does (state bucket, timers, the output rows' JSON).
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from schemas.rows import TableRow

from streaming.alerting.rules import AlertRules
from streaming.config import JobConfig
from streaming.engine import EngineSettings, GroupState, LagReport, MembershipEvent, advance
from streaming.engine.batch import BatchStats
from streaming.engine.codec import decode_state, encode_state

Event = Mapping[str, Any] | tuple


def engine_settings(alert_rules: AlertRules | None = None, **job: Any) -> EngineSettings:
    """The engine's settings from the job's defaults (:class:`JobConfig`), with ``job`` overrides."""
    return JobConfig(**job).engine_settings(alert_rules or AlertRules())


def membership_events(batch: Iterable[Event]) -> list[MembershipEvent]:
    return [MembershipEvent.from_json(e) for e in batch if isinstance(e, Mapping)]


def heartbeats_of(batch: Iterable[Event]) -> tuple[list[str], list[int]]:
    beats = [e for e in batch if isinstance(e, tuple)]
    return [b[1] for b in beats], [b[2] for b in beats]


def lag_reports_of(batch: Iterable[Event]) -> list[LagReport]:
    return [LagReport(b[1], b[2], b[3]) for b in batch if isinstance(b, tuple) and len(b) > 3]


def feed(state: GroupState, batch: Sequence[Event], settings: EngineSettings | None = None, *,
         watermark_ms: int | None = None, collapsed_lags: bool = False) -> tuple[list[TableRow], BatchStats]:
    """One :func:`advance` call with ``batch``.

    ``collapsed_lags``: pass Streams lags as ``heartbeat_progress`` (each member's latest in the
    batch) instead of every report."""
    members, times = heartbeats_of(batch)
    reports = lag_reports_of(batch)
    progress = {"heartbeat_progress": {r.member_id: r.lags for r in reports}} if collapsed_lags else {}
    return advance(state, membership_events(batch), members, times, settings or engine_settings(),
                   watermark_ms=watermark_ms, lag_reports=() if collapsed_lags else reports, **progress)


def roundtrip(state: GroupState) -> GroupState:
    """``state`` through the byte codec, as the state store keeps it between batches."""
    return decode_state(encode_state(state))


def run_story(batches: Iterable[Sequence[Event]], settings: EngineSettings | None = None, *,
              group_id: str = "g", through_codec: bool = True,
              collapsed_lags: bool = False) -> tuple[list[TableRow], GroupState]:
    """Feed ``batches`` in order to a new group; the state goes through the codec between batches
    (``through_codec``), as it does in the job."""
    state = GroupState(group_id=group_id)
    rows: list[TableRow] = []
    for batch in batches:
        out, _ = feed(state, batch, settings, collapsed_lags=collapsed_lags)
        rows.extend(out)
        if through_codec:
            state = roundtrip(state)
    return rows, state


def rows_of(rows: Iterable[TableRow], table: str) -> list[TableRow]:
    return [r for r in rows if r.table == table]


# -- the Spark processor, without Spark ------------------------------------------------------------


class _ValueState:
    def __init__(self):
        self.value = None

    def exists(self):
        return self.value is not None

    def get(self):
        return self.value

    def update(self, value):
        self.value = value

    def clear(self):
        self.value = None


class _Handle:
    """Spark's StatefulProcessorHandle for one key: value states and event-time timers."""

    def __init__(self):
        self.values: dict[str, _ValueState] = {}
        self.timers: set[int] = set()

    def getValueState(self, name, schema, ttl_config=None):
        return self.values.setdefault(name, _ValueState())

    def registerTimer(self, t):
        self.timers.add(t)

    def deleteTimer(self, t):
        self.timers.discard(t)


class _TimerValues:
    def __init__(self, watermark_ms: int):
        self.watermark_ms = watermark_ms

    def getCurrentWatermarkInMs(self):
        return self.watermark_ms

    def getCurrentProcessingTimeInMs(self):
        return 0


class ProcessorHarness:
    """One state bucket of :class:`~streaming.job.processor.GroupProcessor`, driven by hand.

    ``send`` gives it a batch of input rows (as :func:`input_frame` builds them, or as a benchmark
    builds them) and returns its output rows; ``fire`` fires its timer at a watermark, as Spark does
    when the watermark passes it.
    """

    def __init__(self, settings: EngineSettings | None = None):
        from streaming.job.processor import GroupProcessor

        self.processor = GroupProcessor(settings or engine_settings())
        self.handle = _Handle()
        self.processor.init(self.handle)

    def send(self, frame, watermark_ms: int = 0):
        """The processor's output (a pandas DataFrame: table, group_id, payload) for ``frame``."""
        import pandas as pd

        out = list(self.processor.handleInputRows((0,), iter([frame]), _TimerValues(watermark_ms)))
        return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=["table", "group_id", "payload"])

    def fire(self, watermark_ms: int):
        """Fire the bucket's timer if the watermark has reached it; the output, as :meth:`send`."""
        import pandas as pd

        due = [t for t in self.handle.timers if t <= watermark_ms]
        if not due:
            return pd.DataFrame(columns=["table", "group_id", "payload"])
        self.handle.timers.difference_update(due)
        out = list(self.processor.handleExpiredTimer((0,), _TimerValues(watermark_ms), None))
        return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=["table", "group_id", "payload"])

    def bucket(self):
        """The bucket's stored state (:class:`~streaming.job.state_bucket.StateBucket`)."""
        from streaming.job.state_bucket import StateBucket

        stored = self.handle.values["bucket"].get()
        return StateBucket.from_bytes(bytes(stored[0])) if stored is not None else StateBucket()


def input_frame(group_id: str, batch: Sequence[Event], reduce_within_ms: int | None = None):
    """``batch`` as the operator's input rows for one group: a membership event's JSON in
    ``payload``, each member's heartbeats packed into one row (as the job's compaction does), a
    Streams heartbeat with lags as its own row. With ``reduce_within_ms``, the heartbeats are
    reduced as the job reduces them (:mod:`streaming.job.heartbeat_reduction`)."""
    import pandas as pd
    import pyarrow as pa

    from streaming.job.heartbeat_reduction import reduce_member_heartbeats

    rows = []
    for e in batch:
        if isinstance(e, Mapping):
            payload = {"schema_version": 1, "group_id": group_id, **{k: v for k, v in e.items() if v is not None}}
            rows.append({"group_key": group_id, "kind": "membership", "member_id": e.get("member_id"),
                         "event_time": e["event_time"], "reject_reason": None, "payload": json.dumps(payload),
                         "beat_times": None})
        elif len(e) > 3:
            rows.append({"group_key": group_id, "kind": "heartbeat", "member_id": e[1], "event_time": e[2],
                         "reject_reason": None, "payload": json.dumps({"task_lags": e[3]}), "beat_times": None,
                         "beat_weights": None})
    plain = [e for e in batch if isinstance(e, tuple) and len(e) <= 3]
    beats = pa.table({"group_key": pa.array([group_id] * len(plain), pa.string()),
                      "member_id": pa.array([e[1] for e in plain], pa.string()),
                      "event_time": pa.array([e[2] for e in plain], pa.int64())})
    for packed in reduce_member_heartbeats(beats, reduce_within_ms).to_pylist():
        weights = packed["beat_weights"]
        rows.append({"group_key": group_id, "kind": "heartbeat", "member_id": packed["member_id"],
                     "event_time": packed["event_time"], "reject_reason": None, "payload": None,
                     "beat_times": np.array(packed["beat_times"], dtype=np.int64),
                     "beat_weights": None if weights is None else np.array(weights, dtype=np.int64)})
    columns = ["group_key", "kind", "member_id", "event_time", "reject_reason", "payload", "beat_times",
               "beat_weights"]
    return pd.DataFrame(rows, columns=columns)


def output_rows(frame) -> list[tuple[str, dict]]:
    """The processor's output as (table, row) pairs in its order: a JSON row parsed, a block's rows
    (streaming.job.row_blocks) as the dicts their JSON would give (null columns left out)."""
    from streaming.job.row_blocks import BLOCK_TABLES, block_table, decode_block

    blocks = {block_table(t): t for t in BLOCK_TABLES}
    out = []
    for table, payload in zip(frame["table"], frame["payload"]):
        if table in blocks:
            out.extend((blocks[table], {k: v for k, v in row.items() if v is not None})
                       for row in decode_block(payload).to_pylist())
        else:
            out.append((table, json.loads(payload)))
    return out
