"""Writing a micro-batch of the processor's output to the Delta tables, idempotently.

Every table write carries ``txnAppId`` (stable, from config) and ``txnVersion`` (the batch id). If
the job dies after some tables committed and Spark replays the batch, Delta skips the tables that
already have this version and writes the rest: no duplicates, no gaps. The tables are written
concurrently (one Spark job each), which keeps a batch's latency near that of its slowest table.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from schemas import tables
from schemas.spark import table_schema

from .config import OutputConfig
from .processor import STATS_TABLE

OUTPUT_TABLES = (tables.ASSIGNMENTS, tables.REVOCATIONS, tables.BALANCE_METRICS, tables.MEMBER_EVENTS,
                 tables.REJECTED_EVENTS, tables.ASSIGNMENT_CHECKS, tables.ALERTS)
_STATS_COLUMNS = ("records", "membership_accepted", "heartbeats_accepted", "late", "rejected",
                  "unknown_member_heartbeats")


def append_idempotent(df: DataFrame, path: str, app_id: str, batch_id: int) -> None:
    # mergeSchema: a release that adds columns to a table keeps appending to the tables of the
    # previous one (old rows read the new columns as null).
    (df.write.format("delta").mode("append")
       .option("txnAppId", app_id).option("txnVersion", batch_id)
       .option("mergeSchema", "true")
       .save(path))


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


def write_batch(batch: DataFrame, batch_id: int, output: OutputConfig, alert_dispatcher=None) -> None:
    batch = batch.persist()
    try:
        present = {r["table"] for r in batch.select("table").distinct().collect()}
        jobs = [(t, _table_rows(batch, t)) for t in OUTPUT_TABLES if t in present]
        if STATS_TABLE in present:
            jobs.append((tables.INGEST_METRICS, _ingest_row(batch, batch_id)))
        with ThreadPoolExecutor(max_workers=max(1, len(jobs))) as pool:
            futures = [pool.submit(append_idempotent, df, output.table_path(t), output.app_id, batch_id)
                       for t, df in jobs]
            for future in futures:
                future.result()
        if alert_dispatcher is not None and tables.ALERTS in present:
            # After the table commit and before the batch commit: a crash in between replays the
            # batch, and the dispatcher's outbox ignores transitions it already holds.
            alert_dispatcher.submit(r.asDict() for r in _table_rows(batch, tables.ALERTS).collect())
    finally:
        batch.unpersist()
