"""Writing a micro-batch of the processor's output to the Delta tables, idempotently.

Each table's commit for batch N carries ``userMetadata`` = ``{"app_id": ..., "batch_id": N}``, so a
table's own log says which batches it holds. If the job dies after some tables committed batch N
and Spark replays it, :class:`BatchLedger` finds N in those tables' logs and writes only the others:
no duplicates, no gaps.

Why not Delta's ``txnAppId``/``txnVersion`` options, which do the same? To look up the recorded
version Delta 4.4 reconstructs the table's whole snapshot state (``Snapshot.setTransactions`` ->
``computedState``: three Spark jobs) on *every* write, although a version can only be already
present in the first batch a run executes. On 2 cores that cost 0.4-0.8 s per table and batch, the
largest part of the sink (docs/benchmarks/job.md). The ledger reads each table's recent commits once
per run, then knows.

The tables are written concurrently (one Spark job each), which keeps a batch's latency near that
of its slowest table.
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from schemas import tables
from schemas.spark import table_schema

from .config import OutputConfig
from .processor import STATS_TABLE

OUTPUT_TABLES = (tables.ASSIGNMENTS, tables.REVOCATIONS, tables.BALANCE_METRICS, tables.MEMBER_EVENTS,
                 tables.REJECTED_EVENTS, tables.ASSIGNMENT_CHECKS, tables.ALERTS)
_STATS_COLUMNS = ("records", "membership_accepted", "heartbeats_accepted", "late", "rejected",
                  "unknown_member_heartbeats")
#: How many of a table's latest commits the ledger reads to find this job's last batch. Commits by
#: others (OPTIMIZE, VACUUM, a manual fix) may come after it; a run that starts behind more than
#: this many foreign commits would re-check nothing older, so keep it generous.
LEDGER_LOOKBACK_COMMITS = 1000


def batch_marker(app_id: str, batch_id: int) -> str:
    """The ``userMetadata`` of a table commit that holds batch ``batch_id`` of job ``app_id``."""
    return json.dumps({"app_id": app_id, "batch_id": batch_id}, separators=(",", ":"))


def last_committed_batch(spark: SparkSession, path: str, app_id: str,
                         lookback: int = LEDGER_LOOKBACK_COMMITS) -> int:
    """The highest batch id of ``app_id`` in the table at ``path`` (-1: none, or no table yet)."""
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, path):
        return -1
    table = DeltaTable.forPath(spark, path)
    # A job commits its batches in increasing order, so its newest commit usually is the table's
    # newest one: look at a few commits first, and further back only if none of them is ours.
    for depth in sorted({min(20, lookback), lookback}):
        batches = [_batch_of(row["userMetadata"], app_id)
                   for row in table.history(depth).select("userMetadata").collect()]
        ours = [b for b in batches if b is not None]
        if ours or len(batches) < depth:
            return max(ours, default=-1)
    return -1


def _batch_of(user_metadata: str | None, app_id: str) -> int | None:
    try:
        marker = json.loads(user_metadata or "")
    except ValueError:
        return None  # a commit that is not ours
    if isinstance(marker, dict) and marker.get("app_id") == app_id and isinstance(marker.get("batch_id"), int):
        return marker["batch_id"]
    return None


class BatchLedger:
    """Per table, the last batch id it holds. One ledger per query run: a run starts by reading each
    table's log (lazily, on the table's first write), then records its own commits."""

    def __init__(self, app_id: str):
        self.app_id = app_id
        self._last: dict[str, int] = {}
        self._lock = threading.Lock()  # tables are written from a thread pool

    def holds(self, spark: SparkSession, path: str, batch_id: int) -> bool:
        with self._lock:
            known = self._last.get(path)
        if known is None:
            known = last_committed_batch(spark, path, self.app_id)
            with self._lock:
                self._last[path] = known
        return batch_id <= known

    def record(self, path: str, batch_id: int) -> None:
        with self._lock:
            self._last[path] = max(batch_id, self._last.get(path, -1))


def append_once(df: DataFrame, path: str, ledger: BatchLedger, batch_id: int) -> bool:
    """Append ``df`` as batch ``batch_id`` unless the table holds it already; whether it wrote."""
    if ledger.holds(df.sparkSession, path, batch_id):
        return False
    # mergeSchema: a release that adds columns to a table keeps appending to the tables of the
    # previous one (old rows read the new columns as null).
    (df.write.format("delta").mode("append")
       .option("userMetadata", batch_marker(ledger.app_id, batch_id))
       .option("mergeSchema", "true")
       .save(path))
    ledger.record(path, batch_id)
    return True


def _table_rows(batch: DataFrame, table: str) -> DataFrame:
    schema = table_schema(table)
    return (batch.filter(F.col("table") == table)
            .select(F.from_json("payload", schema).alias("r")).select("r.*"))


def _ingest_row(batch: DataFrame, batch_id: int) -> DataFrame:
    stats_schema = "struct<" + ",".join(f"{c}:bigint" for c in _STATS_COLUMNS) + ">"
    stats = batch.filter(F.col("table") == STATS_TABLE).select(
        "group_id", F.from_json("payload", stats_schema).alias("s"))
    return stats.agg(
        F.lit(batch_id).cast("long").alias("batch_id"),
        *[F.coalesce(F.sum(f"s.{c}"), F.lit(0)).cast("long").alias(c) for c in _STATS_COLUMNS],
        F.count_distinct(F.when(F.col("group_id") != "", F.col("group_id"))).cast("long").alias("groups"),
    ).select(*[f.name for f in tables.TABLES[tables.INGEST_METRICS]])


def write_batch(batch: DataFrame, batch_id: int, output: OutputConfig, ledger: BatchLedger,
                alert_dispatcher=None) -> None:
    batch = batch.persist()
    try:
        present = {r["table"] for r in batch.select("table").distinct().collect()}
        jobs = [(t, _table_rows(batch, t)) for t in OUTPUT_TABLES if t in present]
        if STATS_TABLE in present:
            jobs.append((tables.INGEST_METRICS, _ingest_row(batch, batch_id)))
        with ThreadPoolExecutor(max_workers=max(1, len(jobs))) as pool:
            futures = [pool.submit(append_once, df, output.table_path(t), ledger, batch_id) for t, df in jobs]
            for future in futures:
                future.result()
        if alert_dispatcher is not None and tables.ALERTS in present:
            # After the table commit and before the batch commit: a crash in between replays the
            # batch, and the dispatcher's outbox ignores transitions it already holds.
            alert_dispatcher.submit(r.asDict() for r in _table_rows(batch, tables.ALERTS).collect())
    finally:
        batch.unpersist()
