"""The sink on real Delta tables: a replayed batch writes only the tables that miss it, and the
tables read back in Spark with the schema the job defines."""

from __future__ import annotations

import json

import pyarrow as pa

from schemas import tables
from schemas.spark import table_schema
from streaming.job.processor import STATS_TABLE
from streaming.job.sink import DeltaAppender, batch_marker, output_tables


def _rows(batch_id: int, n: int = 3) -> pa.Table:
    return pa.table({"batch": pa.array([batch_id] * n, pa.int64()), "i": pa.array(range(n), pa.int64())})


def _count(spark, path: str) -> int:
    return spark.read.format("delta").load(path).count()


def test_a_replayed_batch_is_written_only_to_the_tables_that_do_not_hold_it(spark, tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    first_run = DeltaAppender("job-1")
    for batch_id in (0, 1):
        assert first_run.append_once(_rows(batch_id), a, batch_id)
        assert first_run.append_once(_rows(batch_id), b, batch_id)
    # Batch 2 reaches table a; the job dies before table b commits.
    assert first_run.append_once(_rows(2), a, 2)

    second_run = DeltaAppender("job-1")
    wrote = {path: second_run.append_once(_rows(2), path, 2) for path in (a, b)}

    assert wrote == {a: False, b: True}
    assert _count(spark, a) == _count(spark, b) == 9
    assert sorted(r["batch"] for r in spark.read.format("delta").load(b).select("batch").distinct().collect()) == [0, 1, 2]


def test_the_batch_marker_is_delta_s_own_transaction_and_other_writers_do_not_disturb_it(spark, tmp_path):
    path = str(tmp_path / "t")
    run = DeltaAppender("job-1")
    for batch_id in range(3):
        run.append_once(_rows(batch_id), path, batch_id)
    # Commits the job did not make: a plain Spark append, and another job's batch through Spark's
    # txnAppId/txnVersion options, which record the same marker.
    spark.createDataFrame([(99, 0)], "batch long, i long").write.format("delta").mode("append").save(path)
    (spark.createDataFrame([(98, 0)], "batch long, i long").write.format("delta").mode("append")
     .option("txnAppId", "job-2").option("txnVersion", 50).save(path))

    assert DeltaAppender("job-1").last_batch(path) == 2
    assert DeltaAppender("job-2").last_batch(path) == 50
    assert DeltaAppender("job-3").last_batch(path) == -1
    assert DeltaAppender("job-1").last_batch(str(tmp_path / "missing")) == -1
    # Spark honours the marker too: its own replay of batch 2 of job-1 writes nothing.
    before = _count(spark, path)
    (spark.createDataFrame([(2, 0)], "batch long, i long").write.format("delta").mode("append")
     .option("txnAppId", "job-1").option("txnVersion", 2).save(path))
    assert _count(spark, path) == before
    # And the history says which batch each of the job's commits holds.
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").select("userMetadata").collect()
    assert batch_marker("job-1", 1) in [r["userMetadata"] for r in history]


def test_the_processor_output_becomes_typed_rows_and_an_ingest_row(spark, tmp_path):
    assignment = {"group_id": "g", "generation": 3, "event_time": 1000, "member_id": "m1",
                  "partitions": [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 1}]}
    output = pa.table({
        "table": [tables.ASSIGNMENTS, STATS_TABLE, STATS_TABLE],
        "group_id": ["g", None, None],
        # One stats row per state bucket, each counting the groups it advanced.
        "payload": [json.dumps(assignment),
                    json.dumps({"records": 5, "heartbeats_accepted": 4, "heartbeats_reduced": 3,
                                "membership_accepted": 1, "groups": 1}),
                    json.dumps({"records": 2, "rejected": 2, "groups": 1})],
    })
    written = dict(output_tables(output, batch_id=7))
    assert set(written) == {tables.ASSIGNMENTS, tables.INGEST_METRICS}

    run = DeltaAppender("job-1")
    for table, data in written.items():
        run.append_once(data, str(tmp_path / table), 7)
    rows = spark.read.format("delta").load(str(tmp_path / tables.ASSIGNMENTS))
    assert rows.schema == table_schema(tables.ASSIGNMENTS)
    row = rows.collect()[0]
    assert (row["group_id"], row["generation"], row["member_id"]) == ("g", 3, "m1")
    assert [(p["topic"], p["partition"]) for p in row["partitions"]] == [("t", 0), ("t", 1)]
    assert row["assignor"] is None
    ingest = spark.read.format("delta").load(str(tmp_path / tables.INGEST_METRICS)).collect()[0].asDict()
    assert ingest == {"batch_id": 7, "records": 7, "membership_accepted": 1, "heartbeats_accepted": 4,
                      "heartbeats_reduced": 3, "late": 0,
                      "rejected": 2, "unknown_member_heartbeats": 0, "groups": 2,
                      "max_event_time": None, "event_time_lag_ms": None}  # no bucket said its newest time
