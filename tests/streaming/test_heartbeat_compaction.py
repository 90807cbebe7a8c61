"""compact_heartbeats packs each member's plain heartbeats into one row and loses nothing."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from streaming.job.operator_input import compact_heartbeats
from streaming.job.processor import BucketRows

SCHEMA = pa.schema([pa.field("group_key", pa.string(), nullable=False), ("kind", pa.string()), ("member_id", pa.string()),
                    ("event_time", pa.int64()), ("reject_reason", pa.string()),
                    ("payload", pa.string())])


def _batch(rows):
    return pa.RecordBatch.from_pylist(rows, schema=SCHEMA)


def _row(group, kind, member, t, reason=None, payload=None):
    return {"group_key": group, "kind": kind, "member_id": member, "event_time": t, "reject_reason": reason,
            "payload": payload}


INPUT = [
    _row("g1", "heartbeat", "a", 3_000), _row("g1", "heartbeat", "b", 1_500), _row("g1", "heartbeat", "a", 1_000),
    _row("g1", "membership", "c", 1_200, payload='{"type":"join"}'),
    _row("g2", "heartbeat", "a", 2_000),  # same member id, another group: its own row
    _row("g1", "heartbeat", "a", 2_000),
    _row("g3", "heartbeat", "s1", 2_500, payload='{"task_lags":{"0_1":40}}'),  # Streams progress: a row of its own
    _row("", "heartbeat", None, None, reason="not JSON", payload='{"raw_value":"x"}'),
]


def _compacted(rows, split=None):
    batches = [_batch(rows)] if split is None else [_batch(rows[:split]), _batch(rows[split:])]
    return pa.Table.from_batches(list(compact_heartbeats(iter(batches)))).to_pylist()


def test_a_members_heartbeats_become_one_row_with_their_times_and_the_newest_as_event_time():
    out = _compacted(INPUT)
    packed = {(r["group_key"], r["member_id"]): r for r in out if r["beat_times"] is not None and r["kind"] != "clock"}

    assert sorted(packed) == [("g1", "a"), ("g1", "b"), ("g2", "a")]
    assert sorted(packed["g1", "a"]["beat_times"]) == [1_000, 2_000, 3_000]
    assert packed["g1", "a"]["event_time"] == 3_000
    assert packed["g1", "a"]["kind"] == "heartbeat"
    assert packed["g1", "a"]["reject_reason"] is None and packed["g1", "a"]["payload"] is None


def test_membership_events_streams_heartbeats_and_refused_records_pass_through_unchanged():
    out = _compacted(INPUT)
    unpacked = [{k: v for k, v in r.items() if k not in ("beat_times", "beat_weights")} for r in out
                if r["beat_times"] is None]

    assert sorted(unpacked, key=repr) == sorted([INPUT[3], INPUT[6], INPUT[7]], key=repr)


def test_every_heartbeat_record_is_counted_once_after_unpacking_whatever_the_arrow_batches():
    for split in (None, 2, 5):
        out = pd.DataFrame(_compacted(INPUT, split))
        columns = BucketRows(out)
        assert columns.records.sum() == len(INPUT)
        beats = np.flatnonzero((out["kind"] == "heartbeat") & out["reject_reason"].isna())
        members, times = columns.heartbeats(beats)
        got = sorted(zip(members, times))
        want = sorted((r["member_id"], r["event_time"]) for r in INPUT
                      if r["kind"] == "heartbeat" and r["reject_reason"] is None)
        assert got == want, split
        assert columns.lag_reports(beats) == [("s1", 2_500, {"0_1": 40})]


def test_each_slice_gets_one_clock_row_at_its_newest_heartbeat_and_it_stands_for_no_record():
    """Only the clock rows carry the job's event-time column: the watermark follows the newest
    heartbeat, and no record can fall behind it (Spark would drop it before the processor)."""
    for split, newest in ((None, [3_000]), (2, [3_000, 2_500]), (6, [3_000, 2_500])):
        out = _compacted(INPUT, split)
        clocks = [r for r in out if r["kind"] == "clock"]
        assert [r["event_time"] for r in clocks] == newest, split
        assert all(r["group_key"] == "" and r["member_id"] is None and list(r["beat_times"]) == [] for r in clocks)
        assert BucketRows(pd.DataFrame(out)).records.sum() == len(INPUT)
