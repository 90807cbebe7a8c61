"""The rebalance-monitor streaming job: Kafka events in, Delta tables out.

Run it with the CLI (``rebalance-monitor run``), or with spark-submit from the repository root
after ``scripts/bootstrap`` (``rebalance-monitor run --print-spark-submit`` prints this line with
the jar list filled in)::

    spark-submit --master 'local[2]' \\
      --jars "$(.venv/bin/python -c 'from streaming.spark import spark_jars; print(",".join(spark_jars()))')" \\
      --conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension \\
      --conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog \\
      --conf spark.sql.streaming.stateStore.providerClass=org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider \\
      --conf spark.pyspark.python=.venv/bin/python \\
      streaming/job.py --config conf/rebalance-monitor.toml [--available-now]

On a cluster, ship the project's packages with ``--py-files`` (a zip of ``streaming``,
``assignors`` and ``schemas``) and point ``--output``/``--checkpoint`` at shared storage.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading

from streaming.config import Config, ConfigError, load_config
from streaming.parse import parse_records
from streaming.sinks import write_parsed_batch

log = logging.getLogger("rebalance_monitor.job")


def build_stream(spark, config: Config):
    """The streaming DataFrame of parsed records, before any sink."""
    records = spark.readStream.format("kafka").options(**config.kafka.source_options()).load()
    return parse_records(records, config.kafka.membership_topic, config.kafka.heartbeat_topic,
                         config.kafka.max_record_bytes)


def start_query(spark, config: Config, available_now: bool = False):
    parsed = build_stream(spark, config)
    output = config.output

    def sink(batch_df, batch_id: int) -> None:
        write_parsed_batch(batch_df, batch_id, output)

    writer = (parsed.writeStream.queryName("rebalance-monitor")
              .foreachBatch(sink)
              .option("checkpointLocation", output.checkpoint_path))
    writer = writer.trigger(availableNow=True) if available_now else \
        writer.trigger(processingTime=config.job.trigger_interval)
    return writer.start()


def run(config: Config, available_now: bool = False, extra_spark_conf: dict | None = None) -> int:
    """Run the job until its input is exhausted (``available_now``) or until SIGTERM/SIGINT."""
    from streaming.spark import build_spark_session

    spark = build_spark_session(config.spark, extra=extra_spark_conf)
    query = start_query(spark, config, available_now)
    stop_requested = threading.Event()

    def request_stop(signum, _frame):
        log.warning("signal %s: stopping after the current micro-batch", signum)
        stop_requested.set()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, request_stop)
        signal.signal(signal.SIGINT, request_stop)
    while query.isActive and not stop_requested.is_set():
        query.awaitTermination(1)
    if query.isActive:
        query.stop()
    if query.exception() is not None:
        log.error("query failed: %s", query.exception())
        return 1
    return 0


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="streaming/job.py", description=__doc__.splitlines()[0])
    add_job_arguments(parser)
    return parser.parse_args(argv)


def add_job_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="TOML file (default conf/rebalance-monitor.toml)")
    parser.add_argument("--available-now", action="store_true",
                        help="process what is in the topics now, then exit (replays, backfills, tests)")
    parser.add_argument("--bootstrap-servers")
    parser.add_argument("--membership-topic")
    parser.add_argument("--heartbeat-topic")
    parser.add_argument("--output", help="root directory (or URI) of the Delta tables")
    parser.add_argument("--checkpoint", help="checkpoint directory (or URI) of the query")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="extra Spark setting; repeatable")


def config_from_args(args: argparse.Namespace) -> tuple[Config, dict[str, str]]:
    config = load_config(args.config).with_overrides(
        bootstrap_servers=args.bootstrap_servers, membership_topic=args.membership_topic,
        heartbeat_topic=args.heartbeat_topic, output=args.output, checkpoint=args.checkpoint)
    extra = {}
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--conf {item!r}: expected KEY=VALUE")
        extra[key.strip()] = value
    return config, extra


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = _parse_args(argv)
    config, extra = config_from_args(args)
    return run(config, args.available_now, extra)


if __name__ == "__main__":
    sys.exit(main())
