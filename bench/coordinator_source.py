"""The offsets-topic source end to end: records per second decoded and folded, against a stateless copy.

Not a test: it measures. Usage::

    .venv/bin/python bench/coordinator_source.py [--generations 200] [--commits-per-generation 2000]
        [--groups 50] [--repeat 2]

The input is a copy of ``__consumer_offsets`` as a production cluster holds it: real records of the
decoder's fixture (``bench/coordinator_log.py``'s realistic mix: each classic generation record
comes with a KIP-848 epoch's records and ``--commits-per-generation`` real offset commits), spread
over ``--groups`` group ids (each group's records in one partition, in order, as in the real log),
on the embedded broker. Two Spark queries read it, available-now, in the same run, interleaved:

- ``job``: the rebalance-monitor job with the offsets-topic source (offset commits dropped in SQL,
  the rest decoded before the shuffle, folded per group by the engine, every table written to Delta);
- ``stateless copy``: the same Kafka source, the topic's key and value appended to a Delta table as
  they are (what reading the topic costs with no decoding and no state).

Each run starts from a new checkpoint and new tables; wall time from the query's start to its end;
a first round of both warms Spark, the JVM and the Python workers up and is not counted.
Results: ``bench/results/coordinator_source.json`` (the latest run only), with the load average.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.coordinator_log import realistic_mix  # noqa: E402
from streaming.coordinator_log import is_offset_commit  # noqa: E402

RESULTS = REPO / "bench" / "results" / "coordinator_source.json"
PARTITIONS = 3


def _renamed(key: bytes, group_id: str) -> bytes:
    length = int.from_bytes(key[2:4], "big")
    name = group_id.encode()
    return key[:2] + len(name).to_bytes(2, "big") + name + key[4 + length:]


def produce_copy(bootstrap: str, topic: str, mix, groups: int) -> int:
    """The mix under ``groups`` group ids, each group in one partition (the log's layout)."""
    from confluent_kafka import Producer

    from streaming.feeds.kafka_io import ensure_topics

    ensure_topics(bootstrap, [topic], partitions=PARTITIONS)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1_000_000,
                         "compression.type": "lz4"})
    n = 0
    generation = -1
    for key, value in mix:
        if key[:2] == b"\x00\x02":
            generation += 1
        group_id = f"bench-group-{generation % groups}"
        if 3 <= key[1] <= 8 and key[0] == 0:  # a KIP-848 group's records: a group of its own
            group_id += "-kip848"
        while True:
            try:
                producer.produce(topic, value, _renamed(key, group_id),
                                 partition=zlib.crc32(group_id.encode()) % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
        n += 1
    producer.flush(120)
    return n


def run_job(spark, config) -> float:
    from streaming.job.main import start_query

    started = time.perf_counter()
    query = start_query(spark, config, available_now=True)
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(query.exception())
    return time.perf_counter() - started


def run_copy(spark, config, table: Path, checkpoint: Path) -> float:
    source = config.offsets_topic
    spark.conf.set("spark.sql.streaming.kafka.useDeprecatedOffsetFetching", "true")
    started = time.perf_counter()
    query = (spark.readStream.format("kafka").options(**source.source_options(config.kafka)).load()
             .select("key", "value", "partition", "offset", "timestamp")
             .writeStream.format("delta").option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start(str(table)))
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(query.exception())
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--generations", type=int, default=200)
    parser.add_argument("--commits-per-generation", type=int, default=2000)
    parser.add_argument("--groups", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--bootstrap-servers", default=None, help="a running broker (default: start one)")
    args = parser.parse_args()

    from streaming import broker
    from streaming.config import Config
    from streaming.job.topic_metadata import publisher
    from streaming.job.spark_session import build_spark_session
    from streaming.source_config import OffsetsTopicConfig
    from tests.conftest import free_port

    work = Path(tempfile.mkdtemp(prefix="bench-coordinator-source-"))
    port = None
    if args.bootstrap_servers is None:
        port = free_port()
        bootstrap = broker.start(port, work / "kafka").bootstrap_servers
    else:
        bootstrap = args.bootstrap_servers
    try:
        name = f"{int(time.time())}"
        mix = realistic_mix(args.commits_per_generation, args.generations)
        topic = f"offsets-copy-{name}"
        records = produce_copy(bootstrap, topic, mix, args.groups)
        commits = sum(1 for key, _ in mix if is_offset_commit(key))
        source = OffsetsTopicConfig(enabled=True, topic=topic, metadata_topic=f"topic-metadata-{name}",
                                    metadata_interval_s=0, max_offsets_per_trigger=0)
        base = replace(Config().with_overrides(bootstrap_servers=bootstrap, membership_topic=f"m-{name}",
                                               heartbeat_topic=f"h-{name}"), offsets_topic=source)
        from streaming.feeds.kafka_io import ensure_topics

        ensure_topics(bootstrap, [f"m-{name}", f"h-{name}", source.metadata_topic], partitions=1)
        spark = build_spark_session(extra={"spark.sql.shuffle.partitions": "2"})
        described = publisher(spark, base, interval_s=0)
        described.start()
        described.close()
        load_before = os.getloadavg()[0]
        times: dict[str, list[float]] = {"job": [], "stateless_copy": []}
        warmup: dict[str, float] = {}
        rows_written = None
        for i in range(args.repeat + 1):  # the first round warms Spark, the JVM and the Python workers up
            run_dir = work / f"run-{i}"
            config = base.with_overrides(output=str(run_dir / "data"), checkpoint=str(run_dir / "checkpoint"))
            job_s = run_job(spark, config)
            if rows_written is None:
                metrics = spark.read.format("delta").load(config.output.table_path("balance_metrics")).count()
                checks = spark.read.format("delta").load(config.output.table_path("assignment_checks")).count()
                rows_written = {"balance_metrics": metrics, "assignment_checks": checks}
            copy_s = run_copy(spark, config, run_dir / "copy", run_dir / "copy-checkpoint")
            if i == 0:
                warmup = {"job": round(job_s, 2), "stateless_copy": round(copy_s, 2)}
            else:
                times["job"].append(job_s)
                times["stateless_copy"].append(copy_s)
            shutil.rmtree(run_dir, ignore_errors=True)
        spark.stop()
        median = {k: statistics.median(v) for k, v in times.items()}
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                                text=True).stdout.strip()
        result = {
            "meta": {"date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "commit": commit,
                     "python": platform.python_version(), "machine": f"{platform.machine()}, {os.cpu_count()} cores",
                     "load_average_before": round(load_before, 2),
                     "load_average_after": round(os.getloadavg()[0], 2), "repeat": args.repeat,
                     "spark_master": "local[2]", "shuffle_partitions": 2},
            "input": {"records": records, "offset_commits": commits, "group_records": records - commits,
                      "groups": args.groups, "generations": args.generations,
                      "commits_per_generation": args.commits_per_generation, "partitions": PARTITIONS},
            "seconds": {k: [round(t, 2) for t in v] for k, v in times.items()},
            "warmup_seconds_not_counted": warmup,
            "records_per_s": {k: round(records / t) for k, t in median.items()},
            "job_over_stateless_copy": round(median["stateless_copy"] / median["job"], 3),
            "job_rows": rows_written,
        }
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(result, indent=2) + "\n")
        print(json.dumps(result, indent=2))
    finally:
        if port is not None:
            broker.stop(port, work / "kafka")
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
