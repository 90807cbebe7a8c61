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


def _assignment(member_id, partitions):
    from schemas.rows import AssignmentRow

    return AssignmentRow(group_id="g", generation=2, event_time=1_000, member_id=member_id, partitions=partitions,
                         assignor="cooperative-sticky", protocol="cooperative", trigger="join", phase="complete",
                         group_type="consumer")


def test_assignment_rows_cross_to_the_table_in_their_compact_form_unchanged():
    import numpy as np

    from schemas.partition_list import COMPACT_KEY, PartitionList
    from streaming.job.processor import output_row

    plain = [{"topic": "b", "partition": 7}, {"topic": "a", "partition": 0}, {"topic": "b", "partition": 2}]
    rows = [_assignment("m1", PartitionList(["a", "b"], np.array([1, 0, 1]), np.array([7, 0, 2]))),
            _assignment("m2", PartitionList([], np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))),
            _assignment("m3", None),  # no partitions column at all: null in the table
            _assignment("m4", plain),  # a plain list (Streams and Connect rows) takes the same form
            _assignment("m5", [{"topic": "c", "partition": 2**31 - 1}])]
    emitted = [output_row(r) for r in rows]
    assert all('"partitions"' not in payload for _, _, payload in emitted)
    assert COMPACT_KEY in emitted[0][2]
    # Another writer's row with a plain list is read as it is.
    emitted.append((tables.ASSIGNMENTS, "g", '{"group_id": "g", "generation": 2, "event_time": 1000, '
                    '"member_id": "m6", "partitions": [{"topic": "t", "partition": 4}]}'))
    output = pa.table({"table": [t for t, _, _ in emitted], "group_id": [g for _, g, _ in emitted],
                       "payload": [p for _, _, p in emitted]})
    written = dict(output_tables(output, batch_id=0))[tables.ASSIGNMENTS]
    assert written.schema.field("partitions").type == pa.list_(pa.struct([("topic", pa.string()),
                                                                          ("partition", pa.int32())]))
    assert [r["partitions"] for r in written.to_pylist()] == [
        plain, [], None, plain, [{"topic": "c", "partition": 2**31 - 1}], [{"topic": "t", "partition": 4}]]
    assert [r["member_id"] for r in written.to_pylist()] == ["m1", "m2", "m3", "m4", "m5", "m6"]


def test_a_partition_list_reads_like_the_list_of_dicts_it_stands_for():
    import numpy as np

    from schemas.partition_list import PartitionList, expand_json

    plain = [{"topic": "b", "partition": 7}, {"topic": "a", "partition": 0}]
    held = PartitionList(["a", "b"], np.array([1, 0]), np.array([7, 0]))
    assert held == plain and plain == held and list(held) == plain and held != plain[:1]
    assert len(held) == 2 and held[1] == plain[1] and held[-1:] == plain[-1:]
    assert repr(held) == repr(plain)
    assert expand_json(held.compact() | {"topic": [1, 0], "partition": [7, 0]}) == plain
    with pytest.raises(TypeError):
        hash(held)
