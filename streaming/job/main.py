"""The rebalance-monitor streaming job: Kafka events in, Delta tables out.

Run it with the CLI (``rebalance-monitor run``), or with spark-submit from the repository root
after ``scripts/bootstrap`` (``rebalance-monitor run --print-spark-submit`` prints this line with
the jar list filled in)::

    PYSPARK_PYTHON=.venv/bin/python .venv/bin/spark-submit --master 'local[2]' \\
      --jars "$(.venv/bin/python -c 'from streaming.job.spark_session import spark_jars; print(",".join(spark_jars()))')" \\
      --conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension \\
      --conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog \\
      --conf spark.sql.streaming.stateStore.providerClass=org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider \\
      --conf spark.pyspark.python=.venv/bin/python \\
      streaming/job/main.py --config conf/rebalance-monitor.toml [--available-now]

On a cluster, ship the project's packages with ``--py-files`` (a zip of ``streaming``,
``assignors`` and ``schemas``) and point ``--output``/``--checkpoint`` at shared storage.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import signal
import sys
import threading

from streaming.config import Config
from streaming.job.args import add_job_arguments, config_from_args
from streaming.job.bucket_keys import key_array, state_bucket
from streaming.job.checkpoint_stamp import NEW_CHECKPOINT_ADVICE, check_or_write
from streaming.job.heartbeat_screen import screened_input
from streaming.job.parse import parse_records

log = logging.getLogger("rebalance_monitor.job")


def kafka_sources(spark, config: Config):
    """The two topics, each read by its own Kafka source: (membership, heartbeats).

    Only the heartbeat source is rate-limited (``kafka.max_offsets_per_trigger``): membership
    events are few and are read in full every micro-batch (docs/time.md).
    """
    kafka = config.kafka
    return tuple(spark.readStream.format("kafka").options(**kafka.source_options(topic)).load()
                 for topic in kafka.event_topics)


def parse_sources(spark, config: Config):
    """The two topics read and parsed, every record through the whole parse: (membership, heartbeats)."""
    kafka = config.kafka
    return tuple(parse_records(records, *kafka.event_topics, kafka.max_record_bytes)
                 for records in kafka_sources(spark, config))


def build_stream(spark, config: Config):
    """The streaming DataFrame of parsed records, before any sink."""
    membership, heartbeats = parse_sources(spark, config)
    return membership.unionByName(heartbeats)


def operator_rows(membership_records, heartbeat_records, config: Config):
    """The stateful operator's rows from the two topics' Kafka records (streaming sources in the
    job; a benchmark passes records held in memory): parsed, narrowed, a member's heartbeats packed.

    With ``job.screen_heartbeats``, the heartbeat source's canonical heartbeats skip the parse and
    are packed in the same Python step that recognises them (heartbeat_screen.screened_input).
    """
    from streaming.job.operator_input import compacted_input, narrow_input, uncompacted_input

    kafka = config.kafka
    topics = kafka.event_topics
    membership = narrow_input(parse_records(membership_records, *topics, kafka.max_record_bytes))
    # A member's heartbeats in a batch travel as one row from here on (see compacted_input). The
    # membership topic has nothing to pack, so its tasks stay in the JVM: a Python worker would
    # cost them as much as the heartbeat tasks' packing (0.1-0.4 s a task at 10K events/s).
    # Only the heartbeats that can change a decision travel on; the others are counted (weights).
    reduce_within = config.job.min_session_timeout_ms if config.job.reduce_heartbeats else None
    if config.job.screen_heartbeats:
        heartbeats = screened_input(heartbeat_records, *topics, kafka.max_record_bytes, reduce_within)
    else:
        heartbeats = compacted_input(narrow_input(parse_records(heartbeat_records, *topics, kafka.max_record_bytes)),
                                     reduce_within)
    return uncompacted_input(membership).unionByName(heartbeats)


def build_history(spark, config: Config):
    """Parsed records -> per-group stateful processor -> rows for the tables (table, group, payload)."""
    from pyspark.sql import functions as F

    from streaming.job.operator_input import CLOCK, uncompacted_input
    from streaming.job.processor import OUTPUT_SCHEMA, GroupProcessor

    compacted = operator_rows(*kafka_sources(spark, config), config)
    if config.offsets_topic.enabled:
        from streaming.job.offsets_source import coordinator_rows, metadata_rows

        for rows in (coordinator_rows(spark, config), metadata_rows(spark, config)):
            compacted = compacted.unionByName(uncompacted_input(rows))
    # Spark drops rows behind the watermark before they reach the processor. Only the clock rows
    # (one per slice of heartbeats: its newest event time) have the event-time column, so the
    # watermark trails the stream's newest heartbeat by idle_group_grace_ms as before, and no record
    # is ever dropped: a heartbeat behind it reaches the engine, which applies it (a group is moved on
    # by the watermark, so such a heartbeat changes nothing) and counts it.
    watermarked = (compacted
                   .withColumn("event_ts", F.when(F.col("kind") == CLOCK, F.timestamp_millis(F.col("event_time"))))
                   .withWatermark("event_ts", f"{config.job.idle_group_grace_ms} milliseconds"))
    # Keyed by state bucket, not by group: Spark's per-key cost dominates otherwise (see processor.py).
    # A bucket's key is chosen so that the shuffle gives each task as many buckets (bucket_keys.py).
    buckets = config.job.state_buckets
    bucketed = watermarked.withColumn("state_bucket", state_bucket("group_key", buckets))
    if config.offsets_topic.enabled:
        from streaming.job.offsets_source import TOPIC_METADATA

        # A topic description goes to every bucket: each keeps the catalog its groups are measured by.
        broadcast = (F.col("kind") == TOPIC_METADATA) & F.col("reject_reason").isNull()
        bucketed = watermarked.withColumn("state_bucket", F.explode(
            F.when(broadcast, key_array(buckets)).otherwise(F.array(state_bucket("group_key", buckets)))))
    return bucketed.groupBy("state_bucket").transformWithStateInPandas(
        statefulProcessor=GroupProcessor(config.engine_settings()),
        outputStructType=OUTPUT_SCHEMA, outputMode="Append", timeMode="EventTime")


def start_query(spark, config: Config, available_now: bool = False, alert_dispatcher=None, write=None,
                on_written=None, credentials=None):
    """Start the query; ``alert_dispatcher`` (an AlertDispatcher) gets each batch's alert
    transitions once they are in the alerts table. ``write`` replaces the sink's
    :func:`~streaming.job.sink.write_batch` (same arguments and result), for a benchmark that times
    it; ``on_written(batch_id, rows by table)`` is told what each batch wrote. ``credentials`` of
    the object storage (``[storage]``) are read from where the config says when not given."""
    from streaming.job.sink import DeltaAppender, write_batch
    from streaming.storage import is_object_store

    output, storage = config.output, config.storage
    on_object_store = is_object_store(output.root) or is_object_store(output.checkpoint)
    if on_object_store and credentials is None:
        credentials = storage.load_credentials()
    check_or_write(output.checkpoint_path, config.job.state_buckets, storage, credentials)
    history = build_history(spark, config)
    # Per run: it reads the tables' logs afresh.
    appender = DeltaAppender(output.app_id, storage.delta_options(credentials) if is_object_store(output.root)
                             else None)
    write = write or write_batch

    def sink(batch_df, batch_id: int) -> None:
        written = write(batch_df, batch_id, output, appender, alert_dispatcher)
        if on_written is not None:
            on_written(batch_id, written)

    writer = (history.writeStream.queryName("rebalance-monitor")
              .foreachBatch(sink)
              .option("checkpointLocation", output.checkpoint_path))
    writer = writer.trigger(availableNow=True) if available_now else \
        writer.trigger(processingTime=config.job.trigger_interval)
    return writer.start()


def run(config: Config, available_now: bool = False, extra_spark_conf: dict | None = None) -> int:
    """Run the job until its input is exhausted (``available_now``) or until SIGTERM/SIGINT.

    In order, each step failing in seconds with one line that says what to do: the checkpoint's
    lock (another job on it?), Spark, the Kafka cluster and the input topics
    (:mod:`streaming.job.preflight`), then the query. Nothing is written to the checkpoint before
    the cluster has answered.
    """
    from streaming.job.checkpoint_lock import CheckpointLock
    from streaming.job.preflight import check_reachable, ensure_input_topics
    from streaming.job.spark_session import build_spark_session, job_spark_conf, uses_object_store
    from streaming.storage import apply_secrets_to_spark

    stop = StopRequest()
    # Read once, on the driver, before anything starts: a missing key fails here, naming it.
    credentials = config.storage.load_credentials() if uses_object_store(config) else None
    with CheckpointLock(config.output.checkpoint_path):
        check_reachable(config.kafka)
        spark = build_spark_session(config.spark, extra=job_spark_conf(config, extra_spark_conf))
        apply_secrets_to_spark(spark, config.storage, credentials)
        ensure_input_topics(spark, config.kafka)
        if stop.requested:
            return 0
        publisher = _start_topic_metadata(spark, config)
        dispatcher = None
        if config.alerts.webhook is not None:
            from streaming.alerting.delivery import AlertDispatcher

            dispatcher = AlertDispatcher(config.alerts.webhook, config.alerts.outbox_dir(config.output),
                                         storage=config.storage, credentials=credentials)
        try:
            with _observed(spark, config) as (accounts, metrics):
                for attempt in range(1, START_ATTEMPTS + 1):
                    rc, transient = _run_query(spark, config, available_now, dispatcher, stop,
                                               lambda batch_id, written: accounts.record(batch_id, written, metrics),
                                               credentials)
                    if not transient or attempt == START_ATTEMPTS:
                        return rc
                    # Safe to restart: every batch is idempotent in Delta and the checkpoint says where to resume.
                    log.warning("restarting the query from its checkpoint (attempt %d of %d)", attempt + 1,
                                START_ATTEMPTS)
                return 1
        finally:
            if publisher is not None:
                publisher.close()
            if dispatcher is not None:
                # Give the webhook a moment for what this run produced; the outbox keeps the rest.
                dispatcher.wait_until_delivered(timeout_s=10)
                dispatcher.close()
            if not spark.sparkContext.master.startswith("local["):
                # Executors in other JVMs: let the cluster manager release them now. Left to the
                # JVM's exit, a standalone or local-cluster worker relaunched them while it shut
                # down (dozens of "Failed to launch executor" errors after a clean run).
                spark.stop()


def _start_topic_metadata(spark, config: Config):
    """With the coordinator's log as a source: its topic-metadata topic, and the publisher that
    describes the observed cluster's topics into it (already once when this returns)."""
    if not config.offsets_topic.enabled:
        return None
    from streaming.errors import BrokerUnreachableError
    from streaming.job.preflight import _java_cause, ensure_metadata_topic
    from streaming.job.topic_metadata import publisher

    source = config.offsets_topic
    ensure_metadata_topic(spark, config.kafka, source.metadata_topic)
    described = publisher(spark, config)
    try:
        described.start()
    except Exception as exc:  # a timeout, a refused authentication: one line that says what to check
        described.close()
        raise BrokerUnreachableError(
            f"the observed cluster at {source.bootstrap(config.kafka)} could not be described, or its description "
            f"not written to {source.metadata_topic} ({_java_cause(exc)}): check offsets_topic.bootstrap_servers, "
            "[offsets_topic.options] and the Describe permission on its topics") from None
    return described


@contextlib.contextmanager
def _observed(spark, config: Config):
    """The progress line per batch and the metrics endpoint (streaming/job/progress.py, metrics.py),
    while the job runs. The listener leaves before this process does: Spark's listener bus would
    otherwise call it back after the Python side has gone, and log the failure as an error."""
    from streaming.job.metrics import JobMetrics, serve
    from streaming.job.progress import BatchAccounts, ProgressReporter

    metrics = JobMetrics(config.metrics.groups, config.metrics.max_groups)
    if config.metrics.port:
        serve(metrics, config.metrics.host, config.metrics.port)
    accounts = BatchAccounts()
    reporter = ProgressReporter(accounts, metrics)
    spark.streams.addListener(reporter)
    try:
        yield accounts, metrics
    finally:
        reporter.wait_terminated(timeout_s=15)
        spark.streams.removeListener(reporter)


class StopRequest:
    """SIGTERM and SIGINT ask the job to stop after the micro-batch in flight (installed on the
    main thread only; elsewhere the process's own handlers stay)."""

    def __init__(self) -> None:
        self._event = threading.Event()
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._request)
            signal.signal(signal.SIGINT, self._request)

    def _request(self, signum, _frame) -> None:
        if not self._event.is_set():
            log.warning("%s: stopping after the current micro-batch", signal.Signals(signum).name)
        self._event.set()

    @property
    def requested(self) -> bool:
        return self._event.is_set()


#: Spark gives a Python worker 10 s (not configurable) to start and connect back; on an overloaded
#: machine, importing pandas and PyArrow can take longer. That failure is transient.
TRANSIENT_FAILURES = ("Python worker failed to connect back",)
START_ATTEMPTS = 3


def _run_query(spark, config: Config, available_now: bool, dispatcher, stop: StopRequest,
               on_written, credentials=None) -> tuple[int, bool]:
    """Run the query once; (exit code, whether it failed for a transient reason worth a restart)."""
    query = start_query(spark, config, available_now, dispatcher, on_written=on_written, credentials=credentials)
    from pyspark.errors import StreamingQueryException

    try:
        while query.isActive and not stop.requested:
            query.awaitTermination(1)
    except StreamingQueryException:
        pass  # reported below, from query.exception()
    if query.isActive:
        _stop_between_batches(query)
    error = query.exception()
    if error is not None:
        message = str(error).splitlines()[0]
        if "sources in the checkpoint" in message or "checkpoint" in message.lower():
            message += (f"\nThe checkpoint {config.output.checkpoint_path} was written by a different query. "
                        + NEW_CHECKPOINT_ADVICE)
        log.error("the query failed: %s", message)
        return 1, not stop.requested and any(t in str(error) for t in TRANSIENT_FAILURES)
    return 0, False


def _stop_between_batches(query, timeout_s: float = 120.0) -> None:
    """Stop once the batch in flight (if any) has committed, so a stop leaves nothing to redo."""
    import time

    deadline = time.monotonic() + timeout_s
    while query.isActive and query.status.get("isTriggerActive") and time.monotonic() < deadline:
        time.sleep(0.1)
    query.stop()


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="streaming/job/main.py", description=__doc__.splitlines()[0])
    add_job_arguments(parser)
    return parser.parse_args(argv)


def configure_logging() -> None:
    """The job's own lines at INFO on stderr (one per micro-batch, start and stop); py4j's chatter
    (its callback server starting and stopping) only when it is a problem. Spark's log is set by
    conf/spark-log4j2.properties (WARN)."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)


def main(argv: list[str] | None = None) -> int:
    """spark-submit's entry: the job's errors as one line and exit code 2, like the CLI's."""
    from assignors.errors import RebalanceMonitorError

    configure_logging()
    args = _parse_args(argv)
    try:
        config, extra = config_from_args(args)
        return run(config, args.available_now, extra)
    except RebalanceMonitorError as exc:
        log.error("%s", exc)
        return 2


if __name__ == "__main__":
    sys.exit(main())
