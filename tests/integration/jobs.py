"""Helpers for end-to-end tests: topics, a config per test, running the job, reading the tables."""

from __future__ import annotations

from schemas import tables
from streaming.config import Config, JobConfig
from streaming.feeds.kafka_io import ensure_topics, produce
from streaming.job.main import start_query

ALL_TABLES = tuple(tables.TABLES)
#: Columns that are measurements, not history: they may differ between two runs over the same events.
MEASURED = {"assignor_ms"}


def make_config(kafka_broker, tmp_path, name: str, partitions: int = 2) -> Config:
    config = Config().with_overrides(
        bootstrap_servers=kafka_broker.bootstrap_servers,
        membership_topic=f"membership-{name}", heartbeat_topic=f"heartbeats-{name}",
        output=str(tmp_path / "data"), checkpoint=str(tmp_path / "checkpoint"))
    ensure_topics(config.kafka.bootstrap_servers, [config.kafka.membership_topic, config.kafka.heartbeat_topic],
                  partitions=partitions)
    return config


def produce_story(config: Config, records: tuple[list, list]) -> None:
    membership, beats = records
    produce(config.kafka.bootstrap_servers, config.kafka.membership_topic, membership)
    produce(config.kafka.bootstrap_servers, config.kafka.heartbeat_topic, beats)


def simulate_into(config: Config, *options: str) -> None:
    """``rebalance-monitor simulate --rate 0`` with ``options`` into ``config``'s broker and topics."""
    from streaming.cli.main import main as cli

    assert cli(["simulate", "--bootstrap-servers", config.kafka.bootstrap_servers,
                "--membership-topic", config.kafka.membership_topic,
                "--heartbeat-topic", config.kafka.heartbeat_topic, "--rate", "0", *options]) == 0


def run_available_now(spark, config: Config, timeout_s: float = 300) -> None:
    query = start_query(spark, config, available_now=True)
    assert query.awaitTermination(timeout_s), f"the query did not finish within {timeout_s} s"
    assert query.exception() is None, query.exception()


def read(spark, config: Config, table: str) -> list[dict]:
    from pyspark.sql.utils import AnalysisException

    try:
        df = spark.read.format("delta").load(config.output.table_path(table))
    except AnalysisException:  # a table nobody wrote to yet
        return []
    return [r.asDict(recursive=True) for r in df.collect()]


def history(spark, config: Config) -> dict[str, list]:
    """Every history table as a sorted list of rows without measured columns (for equality)."""
    out = {}
    for table in ALL_TABLES:
        if table == tables.INGEST_METRICS:
            continue  # per micro-batch by design: different batching, different rows
        rows = [tuple(sorted((k, repr(v)) for k, v in r.items() if k not in MEASURED)) for r in read(spark, config, table)]
        out[table] = sorted(rows)
    return out


def with_job(config: Config, **job) -> Config:
    from dataclasses import replace

    return replace(config, job=replace(config.job, **job)) if job else config


__all__ = ["ALL_TABLES", "JobConfig", "make_config", "produce_story", "run_available_now", "read", "history"]
