"""The Spark side of the per-group engine: a transformWithStateInPandas processor.

One state per group (a single value: the engine's state as compressed bytes, so each group costs
one state read and one write per micro-batch however many heartbeats it had) and one event-time
timer per group at its earliest deadline. The processor emits rows of the form
``(table, group_id, payload JSON)``; the sink splits them into the Delta tables.
"""

from __future__ import annotations

import json
import math
from typing import Any, Iterator

import numpy as np
import pandas as pd
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import BinaryType, StringType, StructField, StructType

from schemas import tables

from .group_state import EngineSettings, GroupState, Output, advance, next_deadline
from .parse import HEARTBEAT, MEMBERSHIP
from .state_codec import decode_state, encode_state

OUTPUT_SCHEMA = StructType([
    StructField("table", StringType(), False),
    StructField("group_id", StringType(), True),
    StructField("payload", StringType(), False),
])
STATS_TABLE = "_stats"
_STATE_SCHEMA = StructType([StructField("blob", BinaryType(), False)])
_REJECTED_FROM_INPUT = ("group_id", "event_id", "source_topic", "source_partition", "source_offset", "record_key",
                        "raw_value", "reason", "event_time", "kafka_timestamp")
#: Integer columns that pandas turns into floats when a batch has a null among them.
_INTEGER_FIELDS = frozenset({"event_time", "generation", "session_timeout_ms", "schema_version",
                             "source_partition", "source_offset", "kafka_timestamp"})


def _record(row: dict, columns) -> dict:
    """One input row as plain Python, with integer fields as ints whatever pandas made of them."""
    out = {}
    for c in columns:
        v = _plain(row.get(c))
        out[c] = int(v) if c in _INTEGER_FIELDS and v is not None else v
    return out


def _plain(value: Any) -> Any:
    """pandas/NumPy/Arrow values as plain JSON-able Python (NaN and NaT become None)."""
    if value is None:
        return None
    if isinstance(value, float):
        return None if math.isnan(value) else value
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, np.floating):
        return None if np.isnan(value) else float(value)
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, pd.Timestamp):
        return None if pd.isna(value) else int(value.value // 1_000_000)
    if value is pd.NaT:
        return None
    return value


class GroupProcessor(StatefulProcessor):
    def __init__(self, settings: EngineSettings):
        self.settings = settings

    def init(self, handle: StatefulProcessorHandle) -> None:  # also runs on the driver: no side effects
        self.handle = handle
        self.group = handle.getValueState("group", _STATE_SCHEMA)

    def _load(self, group_id: str) -> GroupState:
        if self.group.exists():
            return decode_state(bytes(self.group.get()[0]))
        return GroupState(group_id=group_id)

    def _save_and_reschedule(self, state: GroupState) -> None:
        self.group.update((encode_state(state),))
        wanted = next_deadline(state, self.settings)
        current = list(self.handle.listTimers())
        if current == ([wanted] if wanted is not None else []):
            return
        for t in current:
            self.handle.deleteTimer(t)
        if wanted is not None:
            self.handle.registerTimer(wanted)

    def handleInputRows(self, key, rows, timerValues) -> Iterator[pd.DataFrame]:
        group_id = key[0]
        batch = pd.concat(list(rows), ignore_index=True)
        out: list[tuple[str, str | None, str]] = []

        rejected = batch[batch["reason"].notna()]
        for record in rejected.to_dict("records"):
            row = _record(record, _REJECTED_FROM_INPUT)
            out.append((tables.REJECTED_EVENTS, row["group_id"], json.dumps(row)))
        valid = batch[batch["reason"].isna()]
        stats = {"records": len(batch), "rejected": len(rejected)}

        if group_id and len(valid):
            membership = valid[valid["kind"] == MEMBERSHIP]
            heartbeats = valid[valid["kind"] == HEARTBEAT]
            events = [_record(r, r.keys()) for r in membership.to_dict("records")]
            state = self._load(group_id)
            outputs, batch_stats = advance(
                state, events, heartbeats["member_id"].to_numpy(dtype=object),
                heartbeats["event_time"].to_numpy(dtype=np.int64), self.settings,
                watermark_ms=timerValues.getCurrentWatermarkInMs())
            self._save_and_reschedule(state)
            out.extend(self._rows(group_id, outputs))
            stats.update(membership_accepted=batch_stats.membership_accepted,
                         heartbeats_accepted=batch_stats.heartbeats_accepted, late=batch_stats.late,
                         unknown_member_heartbeats=batch_stats.unknown_member_heartbeats)
            stats["rejected"] += batch_stats.rejected
        out.append((STATS_TABLE, group_id, json.dumps(stats)))
        yield pd.DataFrame(out, columns=["table", "group_id", "payload"])

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator[pd.DataFrame]:
        group_id = key[0]
        state = self._load(group_id)
        outputs, batch_stats = advance(state, [], [], [], self.settings,
                                       watermark_ms=timerValues.getCurrentWatermarkInMs())
        self._save_and_reschedule(state)
        rows = self._rows(group_id, outputs)
        if rows:
            yield pd.DataFrame(rows, columns=["table", "group_id", "payload"])

    @staticmethod
    def _rows(group_id: str, outputs: list[Output]) -> list[tuple[str, str, str]]:
        return [(o.table, group_id, json.dumps(o.row, default=_plain)) for o in outputs]

    def close(self) -> None:
        pass
