"""The Spark side of the per-group engine: a transformWithStateInPandas processor.

One state per group (a single value: the engine's state as compressed bytes) and one event-time
timer per group. Every call into the state store is a round trip between the Python worker and the
JVM, and those round trips, not our Python, dominate the cost of a group, so a group with events
costs one read and one write per micro-batch however many heartbeats it had, and its timer is
touched only when it must move earlier. The processor emits rows of the form
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
from schemas.events import MEMBERSHIP_FIELDS

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
                        "raw_value", "event_time", "kafka_timestamp")
_MEMBERSHIP_COLUMNS = tuple(f.name for f in MEMBERSHIP_FIELDS)
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
        stored = self.group.get()  # None when the group is new: no separate exists() round trip
        return decode_state(bytes(stored[0])) if stored is not None else GroupState(group_id=group_id)

    def _save_and_reschedule(self, state: GroupState) -> None:
        """Persist the state, keeping the timer at or before the group's earliest deadline.

        A timer that fires early is harmless (the handler re-arms it), so an existing one stays
        unless the deadline moved before it: an active group, whose deadlines move on with every
        heartbeat, then needs no timer calls at all in most batches.
        """
        wanted = next_deadline(state, self.settings)
        if wanted is not None and (state.timer_at is None or wanted < state.timer_at):
            if state.timer_at is not None:
                self.handle.deleteTimer(state.timer_at)
            self.handle.registerTimer(wanted)
            state.timer_at = wanted
        self.group.update((encode_state(state),))

    def handleInputRows(self, key, rows, timerValues) -> Iterator[pd.DataFrame]:
        group_id = key[0]
        frames = list(rows)
        batch = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
        out: list[tuple[str, str | None, str]] = []

        # Column arrays and masks instead of DataFrame filtering: heartbeats, the bulk, never
        # become Python dicts.
        refused = batch["reject_reason"].notna().to_numpy()
        kinds = batch["kind"].to_numpy()
        if refused.any():
            for record in batch[refused].to_dict("records"):
                row = _record(record, _REJECTED_FROM_INPUT)
                row["reason"] = record["reject_reason"]
                out.append((tables.REJECTED_EVENTS, row["group_id"], json.dumps(row)))
        n_refused = int(refused.sum())
        stats = {"records": len(batch), "rejected": n_refused}

        if group_id and n_refused < len(batch):
            is_membership = (kinds == MEMBERSHIP) & ~refused
            is_heartbeat = (kinds == HEARTBEAT) & ~refused
            events = ([_record(r, _MEMBERSHIP_COLUMNS) for r in batch[is_membership].to_dict("records")]
                      if is_membership.any() else [])
            state = self._load(group_id)
            outputs, batch_stats = advance(
                state, events, batch["member_id"].to_numpy(dtype=object)[is_heartbeat],
                batch["event_time"].to_numpy()[is_heartbeat].astype(np.int64), self.settings,
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
        state.timer_at = None  # Spark deletes a timer once it has fired
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
