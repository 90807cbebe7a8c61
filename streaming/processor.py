"""The Spark side of the per-group engine: a transformWithStateInPandas processor.

Spark's operator pays a fixed cost for every grouping key in a batch (measured at about 1 ms per key
on 2 cores, docs/benchmarks/tws-probe.md), far more than our Python spends on a group. So the
operator is keyed by a *state bucket* (a hash of the group id, ``job.state_buckets`` of them), and
each bucket holds its groups' states in one state value (:class:`~streaming.state_bucket.StateBucket`):
a bucket costs one read and one write per micro-batch however many groups and heartbeats it had,
and a batch costs one key per bucket, not per group.

Each bucket keeps one event-time timer, at the earliest deadline of its groups; the bucket keeps
those deadlines beside the groups' states so that a firing timer knows which groups are due without
decoding the others. The processor emits rows of the form ``(table, group_id, payload JSON)``; the
sink splits them into the Delta tables.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from typing import Any, Iterator

import numpy as np
import pandas as pd
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import ArrayType, BinaryType, LongType, StringType, StructField, StructType

from schemas import tables
from schemas.events import MEMBERSHIP_FIELDS

from .group_state import EngineSettings, GroupState, Output, advance, next_deadline
from .parse import HEARTBEAT, MEMBERSHIP
from .state_bucket import StateBucket

OUTPUT_SCHEMA = StructType([
    StructField("table", StringType(), False),
    StructField("group_id", StringType(), True),
    StructField("payload", StringType(), False),
])
STATS_TABLE = "_stats"
_BLOB_SCHEMA = StructType([StructField("blob", BinaryType(), False)])
REJECTED_FROM_INPUT = ("group_id", "event_id", "source_topic", "source_partition", "source_offset", "record_key",
                        "raw_value", "event_time", "kafka_timestamp")
MEMBERSHIP_COLUMNS = tuple(f.name for f in MEMBERSHIP_FIELDS)
#: What the operator receives per row: few, narrow, flat columns. Wide rows cost Spark more to move
#: through the Python worker than anything the processor does (bench/tws_probe.py), so a
#: membership event's fields, a refused record's, or a Streams heartbeat's task lags travel as one
#: JSON ``payload`` (null for plain heartbeats, the bulk), built by :func:`narrow_input`. (A map
#: column alone, even all null, cost 1.5 s per 75,000 rows in Spark's Arrow writer.)
#: ``beat_times`` carries the event times of a member's heartbeats packed into one row by
#: :func:`compact_heartbeats` (null on other rows).
INPUT_COLUMNS = ("group_key", "kind", "member_id", "event_time", "reject_reason", "payload", "beat_times")


def narrow_input(keyed):
    """The operator's input before compaction: :data:`INPUT_COLUMNS` but ``beat_times``."""
    from pyspark.sql import functions as F

    refused = F.col("reject_reason").isNotNull()
    # The Kafka record's timestamp is a Spark timestamp; the tables keep epoch milliseconds.
    source = [F.unix_millis(F.col(c)).alias(c) if c == "kafka_timestamp" else F.col(c) for c in REJECTED_FROM_INPUT]
    payload = (F.when(refused, F.to_json(F.struct(*source)))
               .when(F.col("kind") == MEMBERSHIP, F.to_json(F.struct(*[F.col(c) for c in MEMBERSHIP_COLUMNS])))
               .when(F.col("task_lags").isNotNull(), F.to_json(F.struct("task_lags"))))
    return keyed.select("group_key", "kind", "member_id", "event_time", "reject_reason", payload.alias("payload"))


def compacted_input(narrow):
    """``narrow`` with each member's plain heartbeats of an input partition packed into one row.

    Heartbeats are nearly all the traffic, and every row the stateful operator receives costs
    Spark a shuffle write and read and a row-by-row walk in the Python worker's deserialiser
    (bench/tws_probe.py, finding 6). The engine needs only each member's heartbeat times, so a
    member's heartbeats in one Kafka partition's slice of the batch travel as one row whose
    ``beat_times`` lists them and whose ``event_time`` is the newest (what the watermark needs).
    Nothing is lost: the processor unpacks the times, and the engine sorts them itself. Rows with a
    ``payload`` (membership events, refused records, Streams heartbeats with task lags) pass
    through unchanged.
    """
    # A new StructType: StructType.add would change the DataFrame's own cached schema in place.
    schema = StructType([*narrow.schema.fields, StructField("beat_times", ArrayType(LongType()), True)])
    return narrow.mapInArrow(compact_heartbeats, schema)


def uncompacted_input(narrow):
    """``narrow`` with an empty ``beat_times``: the shape of :func:`compacted_input` for records
    that have nothing to pack (the membership topic's)."""
    from pyspark.sql import functions as F

    return narrow.withColumn("beat_times", F.lit(None).cast(ArrayType(LongType())))


def compact_heartbeats(batches):
    """The Arrow side of :func:`compacted_input` (one input partition's record batches)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    beat_times = pa.field("beat_times", pa.list_(pa.int64()))
    for batch in batches:
        table = pa.Table.from_batches([batch])
        # A plain heartbeat: not refused, and no payload (a Streams heartbeat's lags travel there).
        plain_beat = pc.and_(pc.fill_null(pc.equal(table["kind"], HEARTBEAT), False),
                             pc.and_(pc.is_null(table["reject_reason"]), pc.is_null(table["payload"])))
        others = table.filter(pc.invert(plain_beat))
        packed = (table.filter(plain_beat).group_by(["group_key", "member_id"], use_threads=False)
                  .aggregate([("event_time", "list"), ("event_time", "max")]))
        n = packed.num_rows
        columns = {
            "group_key": packed["group_key"],
            "kind": pc.fill_null(pa.nulls(n, table.schema.field("kind").type), HEARTBEAT),
            "member_id": packed["member_id"],
            "event_time": packed["event_time_max"],
            "reject_reason": pa.nulls(n, table.schema.field("reject_reason").type),
            "payload": pa.nulls(n, table.schema.field("payload").type),
            "beat_times": packed["event_time_list"],
        }
        schema = table.schema.append(beat_times)
        # Built against the input's schema: its nullability flags (group_key is never null) must match.
        beats = pa.Table.from_arrays([columns[f.name] for f in schema], schema=schema)
        others = others.append_column(beat_times, pa.nulls(others.num_rows, beat_times.type))
        yield from pa.concat_tables([others, beats]).to_batches()


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
        self.bucket_state = handle.getValueState("bucket", _BLOB_SCHEMA)

    # -- state ----------------------------------------------------------------------------------

    def _load_bucket(self) -> StateBucket:
        stored = self.bucket_state.get()
        return StateBucket.from_bytes(bytes(stored[0])) if stored is not None else StateBucket()

    def _save_bucket(self, bucket: StateBucket) -> None:
        """Persist the bucket and keep its timer at or before its earliest deadline.

        A timer that fires early is harmless (the handler re-arms it), so an existing one stays unless
        the earliest deadline moved before it: active groups, whose deadlines move on with every
        heartbeat, then need no timer calls at all in most batches.
        """
        if not bucket.changed:
            return
        wanted = bucket.earliest_deadline()
        if wanted is not None and (bucket.timer_at is None or wanted < bucket.timer_at):
            if bucket.timer_at is not None:
                self.handle.deleteTimer(bucket.timer_at)
            self.handle.registerTimer(wanted)
            bucket.timer_at = wanted
        self.bucket_state.update((bucket.to_bytes(),))

    def _advance(self, bucket: StateBucket, group_id: str, events: list[dict], beat_members: np.ndarray,
                 beat_times: np.ndarray, watermark: int, progress_reports=None):
        """The engine's :func:`advance` on one group of ``bucket``, its new state kept in the bucket."""
        state = bucket.load(group_id)
        outputs, batch_stats = advance(state, events, beat_members, beat_times, self.settings,
                                       watermark_ms=watermark, progress_reports=progress_reports)
        bucket.save(state, next_deadline(state, self.settings))
        return outputs, batch_stats

    # -- Spark's callbacks ----------------------------------------------------------------------

    def handleInputRows(self, key, rows, timerValues) -> Iterator[pd.DataFrame]:
        frames = list(rows)
        batch = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
        watermark = timerValues.getCurrentWatermarkInMs()
        out: list[tuple[str, str | None, str]] = []
        bucket = self._load_bucket()
        stats = Counter()
        # Columns become NumPy arrays once per bucket; each group is then a set of row positions.
        # (Slicing the DataFrame per group cost more than the engine itself.)
        columns = _Columns(batch)
        # One slice per group, in a stable order (the bucket's rows arrive in no particular order).
        order = np.argsort(columns.group_keys, kind="stable")
        keys_sorted = columns.group_keys[order]
        bounds = np.flatnonzero(keys_sorted[1:] != keys_sorted[:-1]) + 1
        for rows_of_group in np.split(order, bounds):
            out.extend(self._group_rows(str(columns.group_keys[rows_of_group[0]]), columns, rows_of_group,
                                        watermark, bucket, stats))
        self._save_bucket(bucket)
        # One stats row for the bucket, not one per group: the sink only sums them (ingest_metrics).
        out.append((STATS_TABLE, None, json.dumps(stats)))
        yield pd.DataFrame(out, columns=["table", "group_id", "payload"])

    def _group_rows(self, group_id: str, columns: "_Columns", positions: np.ndarray, watermark: int,
                    bucket: StateBucket, stats: Counter) -> list:
        """The group's output rows for the batch; its counts are added to the bucket's ``stats``."""
        out: list[tuple[str, str | None, str]] = []
        refused = columns.refused[positions]
        kinds = columns.kinds[positions]
        if refused.any():
            for i in positions[refused]:
                row = json.loads(columns.payloads[i])
                row["reason"] = columns.reasons[i]
                out.append((tables.REJECTED_EVENTS, row.get("group_id"), json.dumps(row)))
        n_refused = int(refused.sum())
        stats["records"] += int(columns.records[positions].sum())
        stats["rejected"] += n_refused
        if group_id:
            stats["groups"] += 1
        if group_id and n_refused < len(positions):
            # Heartbeats, the bulk, stay arrays: they never become Python dicts.
            membership = positions[(kinds == MEMBERSHIP) & ~refused]
            heartbeats = positions[(kinds == HEARTBEAT) & ~refused]
            events = [json.loads(columns.payloads[i]) for i in membership]
            beat_members, beat_times = columns.heartbeats(heartbeats)
            outputs, batch_stats = self._advance(bucket, group_id, events, beat_members, beat_times, watermark,
                                                 progress_reports=columns.lag_reports(heartbeats))
            out.extend(self._rows(group_id, outputs))
            stats.update(membership_accepted=batch_stats.membership_accepted,
                         heartbeats_accepted=batch_stats.heartbeats_accepted, late=batch_stats.late,
                         unknown_member_heartbeats=batch_stats.unknown_member_heartbeats,
                         rejected=batch_stats.rejected)
        return out

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator[pd.DataFrame]:
        watermark = timerValues.getCurrentWatermarkInMs()
        bucket = self._load_bucket()
        bucket.timer_at = None  # Spark deletes a timer once it has fired
        bucket.changed = True
        rows = []
        for group_id in bucket.due(watermark):
            outputs, _ = self._advance(bucket, group_id, [], [], [], watermark)
            rows.extend(self._rows(group_id, outputs))
        self._save_bucket(bucket)
        if rows:
            yield pd.DataFrame(rows, columns=["table", "group_id", "payload"])

    @staticmethod
    def _rows(group_id: str, outputs: list[Output]) -> list[tuple[str, str, str]]:
        return [(o.table, group_id, json.dumps(o.row, default=_plain)) for o in outputs]

    def close(self) -> None:
        pass


class _Columns:
    """A bucket's input rows as NumPy arrays (see :data:`INPUT_COLUMNS`)."""

    def __init__(self, batch: pd.DataFrame):
        self.group_keys = batch["group_key"].to_numpy(dtype=object)
        self.kinds = batch["kind"].to_numpy(dtype=object)
        self.reasons = batch["reject_reason"].to_numpy(dtype=object)
        self.refused = pd.notna(self.reasons)
        self.payloads = batch["payload"].to_numpy(dtype=object)
        self.member_ids = batch["member_id"].to_numpy(dtype=object)
        # Null only on refused rows, which never reach the engine's time arithmetic.
        self.event_times = batch["event_time"].fillna(-1).to_numpy().astype(np.int64)
        # A packed row (compact_heartbeats) stands for len(beat_times) heartbeat records.
        self.beat_times = batch["beat_times"].to_numpy(dtype=object)
        self.packed = np.fromiter((t is not None and not isinstance(t, float) for t in self.beat_times), bool,
                                  count=len(self.beat_times))
        self.records = np.ones(len(batch), dtype=np.int64)
        self.records[self.packed] = [len(t) for t in self.beat_times[self.packed]]

    def heartbeats(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The heartbeat records of ``rows`` (heartbeat rows), unpacked: (member ids, event times)."""
        if len(rows) == 0:
            return np.empty(0, dtype=object), np.empty(0, dtype=np.int64)
        members = np.repeat(self.member_ids[rows], self.records[rows])
        times = np.concatenate([self.beat_times[i] if self.packed[i] else self.event_times[i:i + 1] for i in rows])
        return members, times.astype(np.int64, copy=False)

    def lag_reports(self, heartbeats: np.ndarray) -> list[tuple[str, int, dict[str, int]]]:
        """Kafka Streams heartbeats' task lags, every report with its time (the engine applies them
        in event time, so the lags a rebalance sees do not depend on batch boundaries)."""
        out = []
        for i in heartbeats:
            payload = self.payloads[i]  # {"task_lags": {...}} on a Streams heartbeat (narrow_input)
            if payload is None or (isinstance(payload, float) and math.isnan(payload)):
                continue
            lags = json.loads(payload)["task_lags"]
            out.append((str(self.member_ids[i]), int(self.event_times[i]), {str(k): int(v) for k, v in lags.items()}))
        return out
