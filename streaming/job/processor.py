"""The Spark side of the per-group engine: a transformWithStateInPandas processor, a thin adapter.

Rows in (:mod:`streaming.job.operator_input`), the engine (:func:`streaming.engine.advance`) per
group, rows out: ``(table, group_id, payload JSON)``, which the sink splits into the Delta tables (a
huge generation's ``assignments`` rows travel as one Arrow block instead: streaming.job.row_blocks).

Spark's operator pays a fixed cost for every grouping key in a batch (measured at about 1 ms per key
on 2 cores, docs/benchmarks/tws-probe.md), far more than our Python spends on a group. So the
operator is keyed by a *state bucket* (a hash of the group id, ``job.state_buckets`` of them), and
each bucket holds its groups' states in one state value (:class:`~streaming.job.state_bucket.StateBucket`):
a bucket costs one read and one write per micro-batch however many groups and heartbeats it had,
and a batch costs one key per bucket, not per group.

Each bucket keeps one event-time timer, at the earliest deadline of its groups; the bucket keeps
those deadlines beside the groups' states so that a firing timer knows which groups are due without
decoding the others.
"""

from __future__ import annotations

import gc
import itertools
import json
import math
import time
from collections import Counter
from contextlib import contextmanager
from operator import attrgetter
from typing import Any, Iterator

import numpy as np
import orjson
import pandas as pd
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import BinaryType, StringType, StructField, StructType

from schemas.partition_list import PartitionList
from schemas.rows import RejectedEventRow, TableRow

from streaming.engine import EngineSettings, LagReport, MembershipEvent, advance, next_deadline
from streaming.engine.coordinator_events import ConsumerGroupRecord, CoordinatorGeneration
from streaming.engine.heartbeats import plain_list
from streaming.errors import InvalidEventError
from streaming.job.offsets_source import COORDINATOR, TOPIC_METADATA
from streaming.job.operator_input import CLOCK
from streaming.job.parse import HEARTBEAT, MEMBERSHIP
from streaming.job.row_blocks import BLOCK_TABLES, MIN_BLOCK_ITEMS, block_table, encode_block, worth_a_block
from streaming.job.state_bucket import StateBucket

OUTPUT_SCHEMA = StructType([
    StructField("table", StringType(), False),
    StructField("group_id", StringType(), True),
    StructField("payload", StringType(), False),
])
#: The processor's per-bucket counts travel as rows of this pseudo-table; the sink sums them into
#: the batch's ingest_metrics row.
STATS_TABLE = "_stats"
_BLOB_SCHEMA = StructType([StructField("blob", BinaryType(), False)])
_COLUMNS = ["table", "group_id", "payload"]


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
    if isinstance(value, PartitionList):  # an assignments row's partitions: already plain dicts
        return list(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, pd.Timestamp):
        return None if pd.isna(value) else int(value.value // 1_000_000)
    if value is pd.NaT:
        return None
    return value


#: JSON in and out with orjson, not the standard library: about six times faster on a huge group's
#: rows (10,000 assignment rows holding 500,000 partitions, before they travelled as a block:
#: json.dumps 0.33 s, orjson 0.05 s). Integer dict keys become strings as json.dumps makes them,
#: and datetimes (a pandas Timestamp is one) go to :func:`_plain` as with json.dumps, rather than
#: becoming ISO strings.
_ORJSON_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATETIME


def output_row(row: TableRow) -> tuple[str, str | None, str]:
    """A table row as the operator emits it: (table, group id, payload JSON)."""
    payload = orjson.dumps(row.to_json(), default=_plain, option=_ORJSON_OPTIONS)
    return row.TABLE, row.get("group_id"), payload.decode()


def output_rows(rows: list[TableRow], min_block_items: int = MIN_BLOCK_ITEMS) -> list[tuple[str, str | None, str]]:
    """The engine's rows as the operator emits them, in their order: each run of consecutive rows of
    a table in :data:`~streaming.job.row_blocks.BLOCK_TABLES` as one block if it is large (a huge
    group's generation: an ``assignments`` row per member), every other row as its JSON."""
    out: list[tuple[str, str | None, str]] = []
    for table, run in itertools.groupby(rows, key=attrgetter("TABLE")):
        run = list(run)
        if table in BLOCK_TABLES and worth_a_block(run, min_block_items):
            out.append((block_table(table), run[0].get("group_id"), encode_block(run)))
        else:
            out.extend(output_row(row) for row in run)
    return out


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

    def _advance(self, bucket: StateBucket, group_id: str, events: list[MembershipEvent], beat_members: np.ndarray,
                 beat_times: np.ndarray, watermark: int, lag_reports=(), recorded=(), weights=None):
        """The engine's :func:`advance` on one group of ``bucket``, its new state kept in the bucket."""
        state = bucket.load(group_id)
        rows, batch_stats = advance(state, events, beat_members, beat_times, self.settings, watermark_ms=watermark,
                                    stopwatch=time.perf_counter, lag_reports=lag_reports,
                                    coordinator_generations=recorded, topic_catalog=bucket.catalog,
                                    heartbeat_weights=weights)
        bucket.save(state, next_deadline(state, self.settings))
        if state.coordinator_backlog:
            bucket.waiting.add(group_id)
        else:
            bucket.waiting.discard(group_id)
        return rows, batch_stats

    def _describe_topics(self, bucket: StateBucket, columns: "BucketRows") -> bool:
        """Add this batch's topic descriptions to the bucket's catalog, oldest first; True if any."""
        rows = np.flatnonzero((columns.kinds == TOPIC_METADATA) & ~columns.refused)
        # json, not orjson: these are the metadata topic's raw values, read as they always were
        # (orjson refuses NaN and turns integers beyond 64 bits into floats; Spark's to_json, which
        # wrote every other payload, writes neither).
        descriptions = sorted((json.loads(columns.payloads[i]) for i in rows), key=lambda d: d["event_time"])
        applied = [bucket.catalog.apply(d) for d in descriptions]
        bucket.changed = bucket.changed or any(applied)
        return any(applied)

    # -- Spark's callbacks ----------------------------------------------------------------------

    def handleInputRows(self, key, rows, timerValues) -> Iterator[pd.DataFrame]:
        with _collector_paused():
            out = self._bucket_rows(rows, timerValues)
        yield pd.DataFrame(out, columns=_COLUMNS)

    def _bucket_rows(self, rows, timerValues) -> list[tuple[str, str | None, str]]:
        frames = list(rows)
        batch = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
        watermark = timerValues.getCurrentWatermarkInMs()
        out: list[tuple[str, str | None, str]] = []
        bucket = self._load_bucket()
        stats = Counter()
        # Columns become NumPy arrays once per bucket; each group is then a set of row positions.
        # (Slicing the DataFrame per group cost more than the engine itself.)
        columns = BucketRows(batch)
        described = self._describe_topics(bucket, columns)
        # One slice per group, in a stable order (the bucket's rows arrive in no particular order).
        order = np.argsort(columns.group_keys, kind="stable")
        keys_sorted = columns.group_keys[order]
        bounds = np.flatnonzero(keys_sorted[1:] != keys_sorted[:-1]) + 1
        for rows_of_group in np.split(order, bounds):
            out.extend(self._group_rows(str(columns.group_keys[rows_of_group[0]]), columns, rows_of_group,
                                        watermark, bucket, stats))
        if described:  # recorded generations that waited for these descriptions
            for group_id in sorted(bucket.waiting - set(columns.group_keys.tolist())):
                rows, _ = self._advance(bucket, group_id, [], [], [], watermark)
                out.extend(output_rows(rows))
        self._save_bucket(bucket)
        accepted = ~columns.refused & (columns.kinds != CLOCK) & (columns.kinds != TOPIC_METADATA)
        if accepted.any():  # for the job's lag in event time (ingest_metrics, the progress line)
            stats["max_event_time"] = int(columns.event_times[accepted].max())
        # One stats row for the bucket, not one per group: the sink only sums them (ingest_metrics).
        out.append((STATS_TABLE, None, orjson.dumps(stats).decode()))
        return out

    def _group_rows(self, group_id: str, columns: "BucketRows", positions: np.ndarray, watermark: int,
                    bucket: StateBucket, stats: Counter) -> list:
        """The group's output rows for the batch; its counts are added to the bucket's ``stats``."""
        out: list[tuple[str, str | None, str]] = []
        refused = columns.refused[positions]
        kinds = columns.kinds[positions]
        for i in positions[refused]:
            out.append(output_row(columns.refused_row(i, columns.reasons[i])))
        n_refused = int(refused.sum())
        stats["records"] += int(columns.records[positions].sum())
        stats["rejected"] += n_refused
        if group_id:
            stats["groups"] += 1
        if group_id and n_refused < len(positions):
            # Heartbeats, the bulk, stay arrays: they never become Python objects.
            membership = positions[(kinds == MEMBERSHIP) & ~refused]
            heartbeats = positions[(kinds == HEARTBEAT) & ~refused]
            recorded = [_recorded(orjson.loads(columns.payloads[i])) for i in positions[(kinds == COORDINATOR) & ~refused]]
            events = []
            for i in membership:
                try:
                    events.append(MembershipEvent.from_json(orjson.loads(columns.payloads[i])))
                except InvalidEventError as exc:  # the parser checks the same rules: never expected
                    out.append(output_row(columns.refused_row(i, str(exc), membership_payload=True)))
                    stats["rejected"] += 1
            beat_members, beat_times = columns.heartbeats(heartbeats)
            rows, batch_stats = self._advance(bucket, group_id, events, beat_members, beat_times, watermark,
                                              lag_reports=columns.lag_reports(heartbeats), recorded=recorded,
                                              weights=columns.heartbeat_weights(heartbeats))
            stats["heartbeats_reduced"] += int(columns.reduced[heartbeats].sum())
            out.extend(output_rows(rows))
            stats.update(membership_accepted=batch_stats.membership_accepted,
                         heartbeats_accepted=batch_stats.heartbeats_accepted, late=batch_stats.late,
                         unknown_member_heartbeats=batch_stats.unknown_member_heartbeats,
                         rejected=batch_stats.rejected)
        return out

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator[pd.DataFrame]:
        watermark = timerValues.getCurrentWatermarkInMs()
        with _collector_paused():
            bucket = self._load_bucket()
            bucket.timer_at = None  # Spark deletes a timer once it has fired
            bucket.changed = True
            out = []
            for group_id in bucket.due(watermark):
                rows, _ = self._advance(bucket, group_id, [], [], [], watermark)
                out.extend(output_rows(rows))
            self._save_bucket(bucket)
        if out:
            yield pd.DataFrame(out, columns=_COLUMNS)

    def close(self) -> None:
        pass


@contextmanager
def _collector_paused():
    """Python's cyclic garbage collector off while a bucket is worked on.

    A huge group's state is millions of small objects (partitions, members), and allocating them
    triggers full collections that walk all of them again: with the collector on, decoding,
    advancing and encoding a 10,000-member, 500,000-partition group took 5.9 s, without it 3.2 s.
    Nearly everything a bucket allocates is freed by reference counting; the few cycles wait for the
    collector's next run after the bucket.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _recorded(payload: dict) -> CoordinatorGeneration | ConsumerGroupRecord:
    """A coordinator row's payload (streaming.job.offsets_source) as the engine's input."""
    return (ConsumerGroupRecord if "record_type" in payload else CoordinatorGeneration).from_json(payload)


class BucketRows:
    """A bucket's input rows (:data:`~streaming.job.operator_input.INPUT_COLUMNS`) as NumPy arrays."""

    def __init__(self, batch: pd.DataFrame):
        self.group_keys = batch["group_key"].to_numpy(dtype=object)
        self.kinds = batch["kind"].to_numpy(dtype=object)
        self.reasons = batch["reject_reason"].to_numpy(dtype=object)
        self.refused = pd.notna(self.reasons)
        self.payloads = batch["payload"].to_numpy(dtype=object)
        self.member_ids = batch["member_id"].to_numpy(dtype=object)
        # Null only on refused rows, which never reach the engine's time arithmetic.
        self.event_times = batch["event_time"].fillna(-1).to_numpy().astype(np.int64)
        # A packed row (compact_heartbeats) stands for len(beat_times) heartbeat records, or for the
        # sum of its beat_weights when the reduction dropped some (heartbeat_reduction.py).
        self.beat_times = batch["beat_times"].to_numpy(dtype=object)
        self.packed = np.fromiter((t is not None and not isinstance(t, float) for t in self.beat_times), bool,
                                  count=len(self.beat_times))
        weights = batch["beat_weights"].to_numpy(dtype=object) if "beat_weights" in batch else None
        self.beat_weights = weights
        self.weighted = (np.zeros(len(batch), dtype=bool) if weights is None else
                         np.fromiter((w is not None and not isinstance(w, float) for w in weights), bool,
                                     count=len(weights)))
        self.records = np.ones(len(batch), dtype=np.int64)
        self.records[self.packed] = [len(t) for t in self.beat_times[self.packed]]
        #: Heartbeat records the reduction dropped, per row (counted as accepted all the same).
        self.reduced = np.zeros(len(batch), dtype=np.int64)
        if self.weighted.any():
            kept = self.records[self.weighted]  # a weighted row is never empty: its member's newest beat
            starts = np.concatenate(([0], np.cumsum(kept)[:-1]))
            self.records[self.weighted] = np.add.reduceat(np.concatenate(weights[self.weighted]), starts)
            self.reduced[self.weighted] = self.records[self.weighted] - kept
        self.records[self.kinds == CLOCK] = 0  # a clock row carries time, no record (operator_input)
        # A topic description reaches every bucket: it is counted as no group's record.
        self.records[self.kinds == TOPIC_METADATA] = 0

    def refused_row(self, i: int, reason: str, membership_payload: bool = False) -> RejectedEventRow:
        """Row ``i`` as a rejected_events row. A refused record's payload holds its source columns
        (narrow_input); a membership event the engine refuses has only its own JSON."""
        data = orjson.loads(self.payloads[i])
        if membership_payload:
            return RejectedEventRow(group_id=data.get("group_id"), event_id=data.get("event_id"),
                                    event_time=data.get("event_time"), raw_value=self.payloads[i], reason=reason)
        return RejectedEventRow(**data, reason=reason)

    def heartbeats(self, rows: np.ndarray) -> tuple[list[str], list[int]]:
        """The heartbeats of ``rows`` (heartbeat rows), unpacked: (member ids, event times).

        Plain lists, which the engine works in: a group has a few rows here (one per member), where
        NumPy's repeat and concatenate cost more than this loop."""
        members: list[str] = []
        times: list[int] = []
        for i in rows.tolist():
            if self.packed[i]:
                beats = plain_list(self.beat_times[i], int)
                times.extend(beats)
                members.extend([self.member_ids[i]] * len(beats))
            else:
                times.append(int(self.event_times[i]))
                members.append(self.member_ids[i])
        return members, times

    def heartbeat_weights(self, rows: np.ndarray) -> list[int] | None:
        """How many heartbeat records each of :meth:`heartbeats` stands for; None: one each (nothing
        of ``rows`` was reduced)."""
        if not self.weighted[rows].any():
            return None
        weights: list[int] = []
        for i in rows.tolist():
            if self.weighted[i]:
                weights.extend(plain_list(self.beat_weights[i], int))
            else:
                weights.extend([1] * (len(self.beat_times[i]) if self.packed[i] else 1))
        return weights

    def lag_reports(self, heartbeats: np.ndarray) -> list[LagReport]:
        """Kafka Streams heartbeats' task lags, every report with its time (the engine applies them
        in event time, so the lags a rebalance sees do not depend on batch boundaries)."""
        out = []
        for i in heartbeats:
            payload = self.payloads[i]  # {"task_lags": {...}} on a Streams heartbeat (narrow_input)
            if payload is None or (isinstance(payload, float) and math.isnan(payload)):
                continue
            lags = orjson.loads(payload)["task_lags"]
            out.append(LagReport(str(self.member_ids[i]), int(self.event_times[i]),
                                 {str(k): int(v) for k, v in lags.items()}))
        return out
