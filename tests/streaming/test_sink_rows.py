"""The sink's reading of the processor's output rows, without Delta: what it accepts and refuses."""

from __future__ import annotations

import pyarrow as pa
import pytest

from schemas import tables
from streaming.errors import MonitorError
from streaming.job.sink import output_tables


def test_a_row_with_a_column_its_table_does_not_have_fails_the_batch_naming_the_column():
    row = '{"group_id": "g", "generation": 3, "event_time": 1000, "member_id": "m1", "partitons": []}'
    output = pa.table({"table": [tables.ASSIGNMENTS], "group_id": ["g"], "payload": [row]})
    with pytest.raises(MonitorError, match="rows for table assignments do not fit its schema: unknown column"
                                           r"\(s\) partitons"):
        dict(output_tables(output, batch_id=0))


def test_a_nan_the_processor_writes_reaches_the_table_as_nan():
    # Python's json.dumps writes NaN for a float NaN (not strict JSON); the sink must read it.
    nan_row = '{"group_id": "g", "generation": 1, "stickiness": NaN, "members": 2}'
    output = pa.table({"table": [tables.BALANCE_METRICS], "group_id": ["g"], "payload": [nan_row]})
    rows = dict(output_tables(output, batch_id=0))[tables.BALANCE_METRICS].to_pylist()
    assert len(rows) == 1
    assert (rows[0]["group_id"], rows[0]["generation"], rows[0]["members"]) == ("g", 1, 2)
    assert rows[0]["stickiness"] != rows[0]["stickiness"]  # NaN


def test_the_ingest_row_keeps_the_newest_event_time_of_its_buckets_and_the_lag_behind_the_clock():
    import json
    import time

    from streaming.job.processor import STATS_TABLE

    stats = [{"records": 3, "heartbeats_accepted": 3, "groups": 1, "max_event_time": 1_000},
             {"records": 2, "heartbeats_accepted": 2, "groups": 1, "max_event_time": 4_000},
             {"records": 1, "rejected": 1}]
    output = pa.table({"table": [STATS_TABLE] * 3, "group_id": [None] * 3, "payload": [json.dumps(s) for s in stats]})
    before = int(time.time() * 1000)
    (row,) = dict(output_tables(output, batch_id=3))[tables.INGEST_METRICS].to_pylist()
    assert (row["records"], row["heartbeats_accepted"], row["rejected"], row["groups"]) == (6, 5, 1, 2)
    assert row["max_event_time"] == 4_000
    assert before - 4_000 <= row["event_time_lag_ms"] <= int(time.time() * 1000) - 4_000
