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


def _written(emitted, table=tables.ASSIGNMENTS) -> list[dict]:
    output = pa.table({"table": [t for t, _, _ in emitted], "group_id": [g for _, g, _ in emitted],
                       "payload": [p for _, _, p in emitted]})
    return dict(output_tables(output, batch_id=0))[table].to_pylist()


def test_a_generation_of_partition_lists_crosses_to_the_table_as_one_block_unchanged():
    import numpy as np

    from schemas.partition_list import PartitionList
    from streaming.job.processor import output_rows

    rows = [_assignment("m1", PartitionList(["a", "b"], np.array([1, 0, 1]), np.array([7, 0, 2]))),
            _assignment("m2", PartitionList([], np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))),
            _assignment("m3", PartitionList(["c"], np.array([0]), np.array([2**31 - 1])))]
    emitted = output_rows(rows, min_block_items=0)
    assert [(t, g) for t, g, _ in emitted] == [("assignments:arrow", "g")]
    written = _written(emitted)
    assert [r["partitions"] for r in written] == [
        [{"topic": "b", "partition": 7}, {"topic": "a", "partition": 0}, {"topic": "b", "partition": 2}], [],
        [{"topic": "c", "partition": 2**31 - 1}]]
    assert [(r["member_id"], r["generation"], r["assignor"], r["group_instance_id"]) for r in written] == [
        ("m1", 2, "cooperative-sticky", None), ("m2", 2, "cooperative-sticky", None),
        ("m3", 2, "cooperative-sticky", None)]


def test_rows_of_other_kinds_cross_in_blocks_too_and_keep_their_order():
    import numpy as np

    from schemas.partition_list import PartitionList
    from schemas.rows import RevocationRow
    from streaming.job.processor import output_rows

    plain = [{"topic": "t", "partition": 4}]
    revoked = RevocationRow(group_id="g", generation=2, event_time=1_000, member_id="m9", topic="a", partition=1,
                            reason="moved", unit="partition", unit_id="a-1")
    rows = [_assignment("m1", PartitionList(["a"], np.array([0]), np.array([1]))),
            _assignment("m2", None),  # no partitions at all: null in the table
            _assignment("m3", plain),  # a plain list (Streams and Connect rows)
            revoked,
            _assignment("m4", PartitionList(["a"], np.array([0]), np.array([0])))]
    emitted = output_rows(rows, min_block_items=0)
    assert [t for t, _, _ in emitted] == ["assignments:arrow", "revocations", "assignments:arrow"]
    # Another writer's JSON row of the table is read as before, ahead of the blocks.
    emitted.append((tables.ASSIGNMENTS, "g", '{"group_id": "g", "generation": 2, "event_time": 1000, '
                    '"member_id": "m5", "partitions": [{"topic": "u", "partition": 9}]}'))
    written = _written(emitted)
    assert [(r["member_id"], r["partitions"]) for r in written] == [
        ("m5", [{"topic": "u", "partition": 9}]), ("m1", [{"topic": "a", "partition": 1}]), ("m2", None),
        ("m3", plain), ("m4", [{"topic": "a", "partition": 0}])]
    output = pa.table({"table": [t for t, _, _ in emitted], "payload": [p for _, _, p in emitted]})
    assert dict(output_tables(output, batch_id=0))[tables.ASSIGNMENTS].schema.field("partitions").type == \
        pa.list_(pa.struct([("topic", pa.string()), ("partition", pa.int32())]))
    assert [r["unit_id"] for r in _written(emitted, tables.REVOCATIONS)] == ["a-1"]


def test_small_generations_stay_json_rows_and_read_as_their_blocks_would():
    import numpy as np

    from schemas.partition_list import PartitionList
    from streaming.job.processor import output_rows
    from streaming.job.row_blocks import MIN_BLOCK_ITEMS, worth_a_block
    from streaming.testing import output_rows as read_output

    rows = [_assignment("m1", PartitionList(["a", "b"], np.array([1, 0]), np.array([7, 0]))),
            _assignment("m2", [{"topic": "t", "partition": 4}]), _assignment("m3", None)]
    as_json, as_block = output_rows(rows), output_rows(rows, min_block_items=0)
    assert [t for t, _, _ in as_json] == ["assignments"] * 3 and [t for t, _, _ in as_block] == ["assignments:arrow"]
    assert _written(as_json) == _written(as_block)

    def frame(emitted):
        return {"table": [t for t, _, _ in emitted], "payload": [p for _, _, p in emitted]}

    assert read_output(frame(as_json)) == read_output(frame(as_block))
    assert [row["member_id"] for _, row in read_output(frame(as_block))] == ["m1", "m2", "m3"]
    # Rows and partitions both count towards a block: 3 rows + 3 partitions.
    assert worth_a_block(rows, 6) and not worth_a_block(rows, 7)
    big = [_assignment(f"m{i}", PartitionList(["a"], np.zeros(50, dtype=np.int64), np.arange(50)))
           for i in range(MIN_BLOCK_ITEMS // 51 + 1)]
    assert [t for t, _, _ in output_rows(big)] == ["assignments:arrow"]


def test_a_partition_list_reads_like_the_list_of_dicts_it_stands_for():
    import numpy as np

    from schemas.partition_list import PartitionList

    plain = [{"topic": "b", "partition": 7}, {"topic": "a", "partition": 0}]
    held = PartitionList(["a", "b"], np.array([1, 0]), np.array([7, 0]))
    assert held == plain and plain == held and list(held) == plain and held != plain[:1]
    assert len(held) == 2 and held[1] == plain[1] and held[-1:] == plain[-1:]
    assert repr(held) == repr(plain)
    with pytest.raises(TypeError):
        hash(held)


def test_a_partition_number_beyond_the_column_type_is_refused_not_wrapped():
    import numpy as np

    from schemas.arrow import table_arrow_schema
    from schemas.partition_list import PartitionList, partitions_array

    list_type = table_arrow_schema(tables.ASSIGNMENTS).field("partitions").type
    with pytest.raises(pa.ArrowInvalid, match="not in range"):
        partitions_array([PartitionList(["a"], np.array([0]), np.array([2**31]))], list_type)


def test_lists_sharing_their_topic_names_make_the_same_column_as_lists_with_their_own():
    import numpy as np

    from schemas.arrow import table_arrow_schema
    from schemas.partition_list import PartitionList, partitions_array

    list_type = table_arrow_schema(tables.ASSIGNMENTS).field("partitions").type
    names = ["a", "b", "c"]  # one generation's topics, shared by every member's list
    topic, partition = np.array([2, 0, 0, 1]), np.array([5, 1, 0, 9])
    shared = [PartitionList(names, topic[0:2], partition[0:2]), PartitionList(names, topic[2:2], partition[2:2]),
              PartitionList(names, topic[2:4], partition[2:4])]
    own = [PartitionList(["c", "a"], np.array([0, 1]), np.array([5, 1])), PartitionList([], topic[:0], partition[:0]),
           PartitionList(["b", "a"], np.array([1, 0]), np.array([0, 9]))]
    column = partitions_array(shared, list_type)
    assert column.equals(partitions_array(own, list_type))
    assert column.to_pylist() == [list(held) for held in shared]
