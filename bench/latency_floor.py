"""The floor: the least a transformWithStateInPandas job does with these records.

A join's or a leave's generation is decided when its group's clock (newest heartbeat) is
``coalesce_ms + allowed_lateness_ms`` past it. This query keeps exactly that decision and the
job's architecture, and nothing else:

Kafka (the job's two topics and source options) -> ``from_json`` of the five fields a job needs
(group, member, time, type, subscription) -> the operator's input shape, a member's heartbeats
packed into one row per input partition and clock rows for the watermark (the job's own
``compacted_input``, without the reduction) -> the job's watermark and state-bucket key ->
``transformWithStateInPandas`` in event-time mode, one ``ValueState`` per bucket (each group's
clock and pending changes, a join with its subscription, pickled) -> rows ``(group_id,
trigger_member, generation)`` -> one Delta append per batch with delta-rs, as the job's sink does.

No validation, no engine, no assignor, no other table: what it takes is Spark's, the operator's and
the packing's own, a floor under the job's. ``bench/job.py`` runs it beside the job: under the
latency scenario's traffic and probes (``floor_10k_per_s``), on the huge group's two rounds
(``--scenario big-group``) and on the 3 million records (``--scenario throughput``).

Beside it, the **JVM floor** (:func:`jvm_decided_changes`): the same sources and ``from_json``, then
no Python at all: Spark's own stateful aggregation keeps each group's clock (newest event time) and
newest join, and the batch's sink writes the groups whose newest join the clock has passed by the
same wait. It keeps less than a job must (only the newest join), so it is no job; it is what the
operator's own machinery costs when it runs in the JVM, the measurement behind "what it would take"
(issue 20): a stateful operator without the Python worker.
"""

from __future__ import annotations

import json
import pickle
import sys
from typing import Iterator

import pandas as pd
from pyspark import cloudpickle
from pyspark.sql import functions as F
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import ArrayType, BinaryType, LongType, StringType, StructField, StructType

from streaming.config import Config
from streaming.job.bucket_keys import state_bucket
from streaming.job.main import kafka_sources
from streaming.job.operator_input import CLOCK, compacted_input, uncompacted_input
from streaming.job.parse import HEARTBEAT, MEMBERSHIP

# Spark pickles the processor into its Python workers, which cannot import this module by name
# (bench/ is not a package on their path): ship the module's code by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

EVENT_SCHEMA = StructType([
    StructField("group_id", StringType()),
    StructField("member_id", StringType()),
    StructField("event_time", LongType()),
    StructField("type", StringType()),
    # A join's subscription: any job must read it and keep it (the huge group's joins list 100 topics).
    StructField("topics", ArrayType(StringType())),
])
OUTPUT_SCHEMA = StructType([
    StructField("group_id", StringType()),
    StructField("trigger_member", StringType()),
    StructField("generation", LongType()),
])
_BLOB = StructType([StructField("blob", BinaryType(), False)])


class ChangeDecider(StatefulProcessor):
    """Per bucket: each group's clock and pending joins and leaves; a change is decided once the
    clock is ``wait_ms`` past it (the job's coalescing window plus its allowed lateness)."""

    def __init__(self, wait_ms: int):
        self.wait_ms = wait_ms

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.state = handle.getValueState("bucket", _BLOB)

    def handleInputRows(self, key, rows, timerValues) -> Iterator[pd.DataFrame]:
        stored = self.state.get()
        groups: dict = pickle.loads(bytes(stored[0])) if stored is not None else {}
        batch = pd.concat(list(rows), ignore_index=True)
        # A packed heartbeat row's event_time is its newest beat: enough for the group's clock.
        beats = batch[batch["kind"] == HEARTBEAT]
        for group_id, clock in beats.groupby("group_key")["event_time"].max().items():
            entry = groups.setdefault(group_id, {"clock": 0, "pending": [], "generation": 0})
            entry["clock"] = max(entry["clock"], int(clock))
        changes = batch[batch["kind"] == MEMBERSHIP]
        for group_id, member, event_time, payload in zip(changes["group_key"], changes["member_id"],
                                                          changes["event_time"], changes["payload"]):
            change = json.loads(payload)
            if change["type"] in ("join", "leave"):
                entry = groups.setdefault(group_id, {"clock": 0, "pending": [], "generation": 0})
                entry["pending"].append((member, int(event_time), change.get("topics")))
        out = []
        for group_id, entry in groups.items():
            due = [p for p in entry["pending"] if p[1] + self.wait_ms <= entry["clock"]]
            if due:
                entry["generation"] += 1
                out.extend((group_id, member, entry["generation"]) for member, *_ in due)
                entry["pending"] = [p for p in entry["pending"] if p[1] + self.wait_ms > entry["clock"]]
        self.state.update((pickle.dumps(groups),))
        yield pd.DataFrame(out, columns=["group_id", "trigger_member", "generation"])

    def close(self) -> None:
        pass


def _events(records):
    """Kafka records as the floors read them: ``from_json`` of :data:`EVENT_SCHEMA`, records that
    name a group."""
    return (records.select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e")).select("e.*")
            .where(F.col("group_id").isNotNull()))


def floor_rows(membership_records, heartbeat_records):
    """The floor's operator input from the two topics' Kafka records (streaming sources here; a
    benchmark passes records held in memory): ``from_json`` of five fields, heartbeats packed."""
    membership, heartbeats = (
        _events(records)
        .select(F.col("group_id").alias("group_key"),
                F.when(F.col("type").isNull(), F.lit(HEARTBEAT)).otherwise(F.lit(MEMBERSHIP)).alias("kind"),
                "member_id", "event_time", F.lit(None).cast("string").alias("reject_reason"),
                F.when(F.col("type").isNotNull(), F.to_json(F.struct("type", "topics"))).alias("payload"))
        for records in (membership_records, heartbeat_records))
    return uncompacted_input(membership).unionByName(compacted_input(heartbeats))


def decided_changes(spark, config: Config):
    """The floor query's rows: the job's sources, operator input shape (a member's heartbeats
    packed, clock rows for the watermark), watermark and bucket key; the minimal processor."""
    job = config.job
    rows = floor_rows(*kafka_sources(spark, config))
    # As in the job: only clock rows carry event time, so the watermark trails the newest heartbeat
    # and a membership event (read in full every batch, far ahead) cannot move it.
    return (rows.withColumn("event_ts", F.when(F.col("kind") == CLOCK, F.timestamp_millis("event_time")))
            .withWatermark("event_ts", f"{job.idle_group_grace_ms} milliseconds")
            .withColumn("state_bucket", state_bucket("group_key", job.state_buckets))
            .groupBy("state_bucket")
            .transformWithStateInPandas(statefulProcessor=ChangeDecider(job.coalesce_ms + job.allowed_lateness_ms),
                                        outputStructType=OUTPUT_SCHEMA, outputMode="Append", timeMode="EventTime"))


def jvm_decided_changes(spark, config: Config):
    """The JVM floor's stateful part: per group, its clock and its newest join (member and time),
    kept by Spark's own aggregation (update mode: each batch, the groups it changed)."""
    membership, heartbeats = (_events(records) for records in kafka_sources(spark, config))
    joined = F.col("type") == "join"
    return (membership.unionByName(heartbeats).groupBy("group_id")
            .agg(F.max("event_time").alias("clock"),
                 F.max_by(F.when(joined, F.col("member_id")), F.when(joined, F.col("event_time"))).alias("joiner"),
                 F.max(F.when(joined, F.col("event_time"))).alias("joined_at")))


def start_floor_query(spark, config: Config, timings: dict[int, dict], available_now: bool = False):
    """Start the floor query; ``timings[batch_id]`` gets its compute and sink times, as the job's.
    ``available_now``: read what the topics hold and stop (the throughput scenario)."""
    return _start(decided_changes(spark, config).writeStream.queryName("floor"), config, timings, available_now)


def start_jvm_floor_query(spark, config: Config, timings: dict[int, dict], available_now: bool = False):
    """Start the JVM floor (:func:`jvm_decided_changes`); its sink writes, for each group the batch
    changed whose clock is the job's wait past its newest join, a row naming that join."""
    wait_ms = config.job.coalesce_ms + config.job.allowed_lateness_ms

    def decided(batch):
        return (batch.where(F.col("joined_at") + wait_ms <= F.col("clock"))
                .select("group_id", F.col("joiner").alias("trigger_member"), F.lit(1).cast("long").alias("generation")))

    writer = jvm_decided_changes(spark, config).writeStream.queryName("jvm-floor").outputMode("update")
    return _start(writer, config, timings, available_now, decided)


def _start(writer, config: Config, timings: dict[int, dict], available_now: bool, select=None):
    """``writer`` started with the floors' sink: each batch's rows (``select`` of them) appended to
    Delta with delta-rs, its compute and sink times in ``timings[batch_id]``."""
    import time

    from deltalake import write_deltalake

    path = config.output.table_path("balance_metrics")

    def sink(batch, batch_id):
        t0 = time.perf_counter()
        rows = (select(batch) if select is not None else batch).toArrow()
        t1 = time.perf_counter()
        if rows.num_rows:
            write_deltalake(path, rows, mode="append")
        timings[batch_id] = {"compute_ms": round((t1 - t0) * 1000),
                             "sink_ms": round((time.perf_counter() - t1) * 1000), "output_rows": rows.num_rows}

    writer = writer.foreachBatch(sink).option("checkpointLocation", config.output.checkpoint_path)
    trigger = {"availableNow": True} if available_now else {"processingTime": config.job.trigger_interval}
    return writer.trigger(**trigger).start()
