#!/usr/bin/env python3
"""Where the job's parse spends its time: ``parse_records`` against ``from_json``, step by step.

Issue 20's floor query (bench/latency_floor.py) reads with one ``from_json`` and, on the
throughput workload, runs faster than the job's read and parse alone. This benchmark splits the
job's parse into its steps on the same records, held in memory (no Kafka), each step timed as a
Spark batch job into the ``noop`` sink; the baseline in the same run is ``from_json`` of the same
fields:

* ``cast``: the record value as a string, nothing parsed (the floor under everything);
* ``from_json``: the heartbeat fields with ``from_json`` (the floor query's parse; the baseline);
* ``envelope``: the job's first step (UTF-8 check and repair, JSON to VARIANT, topic to kind);
* ``typed``: the envelope plus every field read from the VARIANT with its type;
* ``parse_records``: the whole parse, every refusal rule included (what the job runs).

Records: heartbeats of the throughput workload's simulation (99.5 % of its records), on the
heartbeat topic.

A second table times the job's whole read side (both topics parsed, narrowed, heartbeats packed:
``streaming.job.main.operator_rows``) on batches the size of the latency scenario's, two Kafka
partitions per topic as there, against the floor query's read side (``floor_rows``: ``from_json``
and the same packing) in the same run. At these sizes a batch's fixed costs (per task and per
query) outweigh its records. Writes ``bench/results/parse.json`` and ``docs/benchmarks/parse.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from streaming.feeds.simulator import HEARTBEAT, Simulation, SimulationConfig  # noqa: E402

RESULTS = REPO / "bench" / "results" / "parse.json"
MARKDOWN = REPO / "docs" / "benchmarks" / "parse.md"
MEMBERSHIP_TOPIC, HEARTBEAT_TOPIC = "membership", "heartbeats"


def simulated_values(heartbeats: int, membership: int = 0) -> tuple[list[bytes], list[bytes]]:
    """Record values of the throughput workload's simulation: ``heartbeats`` heartbeats and
    ``membership`` membership events (fewer if the simulation has fewer)."""
    sim = Simulation(SimulationConfig(groups=1_000, members=10, topics=2, partitions=6, churn_per_minute=0.5,
                                      heartbeat_interval_ms=1_000, cooperative_share=0.5, seed=7,
                                      start_time_ms=1_767_225_600_000, group_prefix="tp"))
    beats: list[bytes] = []
    events: list[bytes] = []
    for batch in sim.batches(8_192):
        for kind, _key, value, _bad in batch:
            (beats if kind == HEARTBEAT else events).append(value)
        if len(beats) >= heartbeats and len(events) >= membership:
            break
    return beats[:heartbeats], events[:membership]


def heartbeat_values(count: int) -> list[bytes]:
    """``count`` heartbeat record values of the throughput workload's simulation."""
    return simulated_values(count)[0]


def steps(records):
    """The parse's steps as DataFrames over ``records`` (Kafka source rows), by name."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructField, StructType

    from schemas.events import HEARTBEAT_FIELDS
    from schemas.spark import spark_type
    from streaming.job.heartbeat_screen import parse_screened
    from streaming.job.operator_input import narrow_input
    from streaming.job.parse import parse_records

    value = F.col("value").cast("string")
    heartbeat_schema = StructType([StructField(f.name, spark_type(f.type)) for f in HEARTBEAT_FIELDS])
    envelope = records.select(
        "topic", "partition", "offset", "timestamp", F.col("key").cast("string").alias("record_key"),
        F.expr("make_valid_utf8(cast(value AS STRING))").alias("raw_value"),
        F.expr("is_valid_utf8(cast(value AS STRING))").alias("valid_utf8"),
        F.when(F.col("topic") == HEARTBEAT_TOPIC, F.lit("heartbeat")).alias("kind"),
    ).withColumn("v", F.expr("try_parse_json(raw_value)"))
    typed = envelope.select("*", *[F.expr(f"try_variant_get(v, '$.{f.name}', '{spark_type(f.type).simpleString()}')")
                                   .alias(f.name) for f in HEARTBEAT_FIELDS]).drop("v")
    return {
        "cast": records.select(value.alias("value")),
        "from_json": records.select(F.from_json(value, heartbeat_schema).alias("e")).select("e.*"),
        "envelope": envelope,  # the VARIANT kept as a column, so Spark cannot prune its parse away
        "typed": typed,
        "parse_records": parse_records(records, MEMBERSHIP_TOPIC, HEARTBEAT_TOPIC, 1_048_576),
        # What the stateful operator's input needs of the parse, without and with the screen.
        "narrow": narrow_input(parse_records(records, MEMBERSHIP_TOPIC, HEARTBEAT_TOPIC, 1_048_576)),
        "screened": narrow_input(parse_screened(records, MEMBERSHIP_TOPIC, HEARTBEAT_TOPIC, 1_048_576)),
    }



def kafka_records(spark, values: list[bytes], topic: str, partitions: int = 2):
    """``values`` as Kafka source rows of ``topic`` (keyed by group, as the simulator keys them),
    held in memory in ``partitions`` partitions."""
    from pyspark.sql.types import (BinaryType, IntegerType, LongType, StringType, StructField, StructType,
                                   TimestampType)

    schema = StructType([StructField("key", BinaryType()), StructField("value", BinaryType()),
                         StructField("topic", StringType()), StructField("partition", IntegerType()),
                         StructField("offset", LongType()), StructField("timestamp", TimestampType())])
    now = dt.datetime.now(dt.timezone.utc)
    rows = [(json.loads(v)["group_id"].encode(), v, topic, i % partitions, i, now) for i, v in enumerate(values)]
    records = spark.createDataFrame(rows, schema).repartition(partitions).cache()
    records.count()
    return records


def _median_write(frame, repeats: int) -> tuple[float, list[float]]:
    """Seconds to write ``frame`` to the ``noop`` sink: median of ``repeats`` after one warm-up."""
    frame.write.format("noop").mode("overwrite").save()  # code generation and JIT warm-up
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        frame.write.format("noop").mode("overwrite").save()
        times.append(time.perf_counter() - started)
    return statistics.median(times), times


def measure(spark, count: int, repeats: int) -> dict:
    values = heartbeat_values(count)
    records = kafka_records(spark, values, HEARTBEAT_TOPIC)
    result = {"records": len(values), "mean_value_bytes": round(statistics.fmean(len(v) for v in values)),
              "repeats": repeats, "steps": {}}
    for name, frame in steps(records).items():
        median, times = _median_write(frame, repeats)
        result["steps"][name] = {"seconds": [round(t, 3) for t in times], "median_s": round(median, 3),
                                 "records_per_s": round(len(values) / median),
                                 "us_per_record_core": round(median * 2 / len(values) * 1e6, 2)}
        print(f"[parse] {name}: {result['steps'][name]}", flush=True)
    records.unpersist()
    return result


#: Live batches of the latency scenario (bench/job.py): at 1,000 and 10,000 events/s a batch holds
#: about 1.7 s of records, 0.2-0.3 % of them membership events.
LIVE_BATCHES = {"1K events/s": (1_700, 4), "10K events/s": (17_000, 40)}


def _driver_costs(spark, build, repeats: int) -> tuple[float, float]:
    """What the driver spends on a new execution of the frame ``build`` makes, before any task:
    planning (analysis, optimization, physical plan) and whole-stage code generation (the source
    Spark generates for each execution; compiling it is cached). Medians, seconds. A streaming
    query pays both again for every micro-batch."""
    explain_codegen = spark._jvm.org.apache.spark.sql.execution.ExplainMode.fromString("codegen")
    planning, codegen = [], []
    for _ in range(repeats):
        execution = build()._jdf.queryExecution()
        started = time.perf_counter()
        execution.executedPlan()
        planning.append(time.perf_counter() - started)
        started = time.perf_counter()
        execution.explainString(explain_codegen)
        codegen.append(time.perf_counter() - started)
    return round(statistics.median(planning), 3), round(statistics.median(codegen), 3)


def measure_live_batches(spark, repeats: int) -> dict:
    """The job's read side and the floor's on batches of the latency scenario's size."""
    import dataclasses

    from bench.latency_floor import floor_rows
    from streaming.config import Config
    from streaming.job.main import operator_rows

    config = Config()
    unscreened = dataclasses.replace(config, job=dataclasses.replace(config.job, screen_heartbeats=False))
    most_beats, most_events = max(LIVE_BATCHES.values())
    all_beats, all_events = simulated_values(most_beats, most_events)
    out = {}
    for name, (beats, events) in LIVE_BATCHES.items():
        membership = kafka_records(spark, all_events[:events], config.kafka.membership_topic)
        heartbeats = kafka_records(spark, all_beats[:beats], config.kafka.heartbeat_topic)
        builders = {"job": lambda: operator_rows(membership, heartbeats, config),
                    "job_unscreened": lambda: operator_rows(membership, heartbeats, unscreened),
                    "floor": lambda: floor_rows(membership, heartbeats)}
        out[name] = {"heartbeats": beats, "membership_events": events, "repeats": repeats, "read": {}}
        for what, build in builders.items():
            median, times = _median_write(build(), repeats)
            planning, codegen = _driver_costs(spark, build, repeats)
            out[name]["read"][what] = {"seconds": [round(t, 3) for t in times], "median_s": round(median, 3),
                                       "planning_s": planning, "codegen_s": codegen}
            print(f"[parse] {name} {what}: {median:.3f} s (driver: planning {planning} s, code generation "
                  f"{codegen} s)", flush=True)
        membership.unpersist()
        heartbeats.unpersist()
    return out


def markdown(results: dict) -> str:
    r = results["result"]
    base = r["steps"]["from_json"]["median_s"]
    lines = [
        "# The job's parse, step by step",
        "",
        f"Generated by `bench/parse.py` on {results['generated_at']} (commit {results['commit']}). "
        f"{r['records']:,} heartbeat records of the throughput workload (mean {r['mean_value_bytes']} bytes), "
        "held in memory as Kafka source rows (2 partitions); each step written to Spark's `noop` sink, once to "
        f"warm up and then {r['repeats']} times (median shown). Spark `local[2]`, the job's session settings. "
        "Baseline: `from_json` of the heartbeat fields, the floor query's parse (bench/latency_floor.py).",
        "",
        "| step | what it adds | median s | records/s | us per record per core | x from_json |",
        "|---|---|---:|---:|---:|---:|",
    ]
    what = {"cast": "the value as a string, nothing parsed",
            "from_json": "`from_json` of the heartbeat fields (baseline)",
            "envelope": "UTF-8 check and repair, JSON to VARIANT, topic to kind",
            "typed": "the envelope + each field read from the VARIANT with its type",
            "parse_records": "the job's whole parse: + every refusal rule",
            "narrow": "the parse narrowed to what the stateful operator reads (the job without the screen)",
            "screened": "the same, canonical heartbeats read by the screen (heartbeat_screen.py)"}
    for name, s in r["steps"].items():
        lines.append(f"| {name} | {what[name]} | {s['median_s']} | {s['records_per_s']:,} | "
                     f"{s['us_per_record_core']} | {s['median_s'] / base:.2f} |")
    live = results.get("live_batches")
    if live:
        repeats = next(iter(live.values()))["repeats"]
        lines += [
            "",
            "## The read side on a live batch",
            "",
            "Both topics as the job reads them (2 Kafka partitions each, as in the latency scenario), from "
            "the records to the stateful operator's input rows (`streaming.job.main.operator_rows`: parse, "
            "narrow, heartbeats packed and reduced), against the floor query's read side "
            "(`bench/latency_floor.py` `floor_rows`: `from_json` of five fields, the same packing). "
            f"Median of {repeats} writes to `noop` after a warm-up.",
            "",
            "The driver's share is measured apart on new executions of the same plans: planning (analysis, "
            "optimization, physical plan) and whole-stage code generation (Spark generates the source anew "
            "for every execution, and a streaming query for every micro-batch; compiling it is cached).",
            "",
            "| batch | heartbeats | membership events | read | s | x floor | driver planning s | driver code generation s |",
            "|---|---:|---:|---|---:|---:|---:|---:|",
        ]
        labels = {"job": "the job", "job_unscreened": "the job without the screen", "floor": "the floor"}
        for name, b in live.items():
            floor = b["read"]["floor"]["median_s"]
            for what, r in b["read"].items():
                lines.append(f"| {name} | {b['heartbeats']:,} | {b['membership_events']} | {labels[what]} | "
                             f"{r['median_s']} | {r['median_s'] / floor:.2f} | {r['planning_s']} | {r['codegen_s']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--live-repeats", type=int, default=9, help="writes per live-batch measurement")
    parser.add_argument("--no-write", action="store_true", help="print, do not write the result files")
    args = parser.parse_args(argv)
    import subprocess

    from streaming.job.spark_session import build_spark_session

    spark = build_spark_session()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=REPO).stdout.strip()
    results = {"command": "bench/parse.py " + " ".join(argv if argv is not None else sys.argv[1:]),
               "generated_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "commit": commit,
               "result": measure(spark, args.records, args.repeats),
               "live_batches": measure_live_batches(spark, args.live_repeats)}
    if args.no_write:
        print(json.dumps(results, indent=2))
        return 0
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    MARKDOWN.write_text(markdown(results))
    print(f"wrote {RESULTS.relative_to(REPO)} and {MARKDOWN.relative_to(REPO)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
