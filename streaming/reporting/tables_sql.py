"""The job's Delta tables under stable SQL names, for queries, the demo and reports."""

from __future__ import annotations

from schemas.tables import TABLES

from streaming.config import OutputConfig


def register_tables(spark, output: OutputConfig) -> list[str]:
    """Register every table that exists as a temporary view of the same name; returns the names."""
    from pyspark.sql.utils import AnalysisException

    registered = []
    for table in TABLES:
        try:
            spark.read.format("delta").load(output.table_path(table)).createOrReplaceTempView(table)
        except AnalysisException:  # not written yet: the job has not produced such rows
            continue
        registered.append(table)
    return registered
