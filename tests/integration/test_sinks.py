"""The sink's batch ledger on real Delta tables: a replayed batch writes only the tables that miss it."""

from __future__ import annotations

from streaming.sinks import BatchLedger, append_once, batch_marker, last_committed_batch


def _rows(spark, batch_id: int, n: int = 3):
    return spark.createDataFrame([(batch_id, i) for i in range(n)], "batch long, i long")


def _count(spark, path: str) -> int:
    return spark.read.format("delta").load(path).count()


def test_a_replayed_batch_is_written_only_to_the_tables_that_do_not_hold_it(spark, tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    first_run = BatchLedger("job-1")
    for batch_id in (0, 1):
        assert append_once(_rows(spark, batch_id), a, first_run, batch_id)
        assert append_once(_rows(spark, batch_id), b, first_run, batch_id)
    # Batch 2 reaches table a; the job dies before table b commits.
    assert append_once(_rows(spark, 2), a, first_run, 2)

    second_run = BatchLedger("job-1")
    wrote = {path: append_once(_rows(spark, 2), path, second_run, 2) for path in (a, b)}

    assert wrote == {a: False, b: True}
    assert _count(spark, a) == _count(spark, b) == 9
    assert sorted(r["batch"] for r in spark.read.format("delta").load(b).select("batch").distinct().collect()) == [0, 1, 2]


def test_the_ledger_finds_the_jobs_last_batch_behind_commits_of_others(spark, tmp_path):
    path = str(tmp_path / "t")
    run = BatchLedger("job-1")
    for batch_id in range(3):
        append_once(_rows(spark, batch_id), path, run, batch_id)
    # Commits the job did not make: an unmarked append, another job's batch, unrelated metadata.
    _rows(spark, 99).write.format("delta").mode("append").save(path)
    _rows(spark, 98).write.format("delta").mode("append").option("userMetadata", batch_marker("job-2", 50)).save(path)
    _rows(spark, 97).write.format("delta").mode("append").option("userMetadata", "nightly fix").save(path)

    assert last_committed_batch(spark, path, "job-1") == 2
    assert last_committed_batch(spark, path, "job-2") == 50
    assert last_committed_batch(spark, path, "job-3") == -1
    assert last_committed_batch(spark, str(tmp_path / "missing"), "job-1") == -1


def test_the_ledger_looks_further_back_when_the_latest_commits_are_not_the_jobs(spark, tmp_path):
    path = str(tmp_path / "t")
    append_once(_rows(spark, 7, 1), path, BatchLedger("job-1"), 7)
    for _ in range(4):
        _rows(spark, 0, 1).write.format("delta").mode("append").save(path)

    assert last_committed_batch(spark, path, "job-1", lookback=3) == -1  # beyond the lookback
    assert last_committed_batch(spark, path, "job-1", lookback=10) == 7
    assert not BatchLedger("job-1").holds(spark, path, 8)
    assert BatchLedger("job-1").holds(spark, path, 7)
