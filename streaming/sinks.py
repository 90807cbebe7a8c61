"""Writing a micro-batch to the Delta tables, idempotently.

Every table write carries ``txnAppId`` (stable, from config) and ``txnVersion`` (the batch id). If
the job dies after some tables committed and Spark replays the batch, Delta skips the tables that
already have this version and writes the rest: no duplicates, no gaps.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from schemas import tables

from .config import OutputConfig


def append_idempotent(df: DataFrame, path: str, app_id: str, batch_id: int) -> None:
    (df.write.format("delta").mode("append")
       .option("txnAppId", app_id).option("txnVersion", batch_id)
       .option("mergeSchema", "false")
       .save(path))


def write_parsed_batch(parsed: DataFrame, batch_id: int, output: OutputConfig) -> None:
    """The walking skeleton's sink: valid events to ``events``, refused ones to ``rejected_events``."""
    parsed = parsed.persist()
    try:
        valid = parsed.filter(F.col("reason").isNull()).drop("reason", "raw_value", "record_key")
        rejected = parsed.filter(F.col("reason").isNotNull()).select(*tables.REJECTED_COLUMNS)
        append_idempotent(valid, output.table_path(tables.EVENTS), output.app_id, batch_id)
        append_idempotent(rejected, output.table_path(tables.REJECTED_EVENTS), output.app_id, batch_id)
    finally:
        parsed.unpersist()

