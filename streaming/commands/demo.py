"""``rebalance-monitor demo``: the whole pipeline on this machine, end to end, in one command.

Starts the embedded broker unless one already answers, creates the topics, produces a few events
(one of them deliberately malformed), runs the job until they are in Delta, prints what landed,
and stops whatever it started.
"""

from __future__ import annotations

import argparse
import time
import uuid

from .. import broker
from ..config import load_config
from ..kafka_io import ensure_topics, produce


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("demo", help="run the monitor end to end on the embedded broker",
                                   description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=broker.DEFAULT_PORT, help="embedded broker port")
    parser.add_argument("--output", default=None, help="Delta root (default: the config's, ./data)")
    parser.add_argument("--checkpoint", default=None, help="checkpoint directory (default: the config's)")
    parser.set_defaults(handler=_run)


def demo_events(group_id: str, now_ms: int) -> list[dict]:
    run = uuid.uuid4().hex[:8]  # event ids stay unique when the demo runs again
    members = [f"{group_id}-member-{i}" for i in range(3)]
    events = [
        {"schema_version": 1, "event_id": f"{run}-w", "event_time": now_ms, "group_id": group_id,
         "group_type": "consumer", "type": "workload",
         "workload": {"topics": [{"name": "orders", "partitions": 6}]}},
    ]
    for i, member in enumerate(members):
        events.append({"schema_version": 1, "event_id": f"{run}-j{i}", "event_time": now_ms + 100 * (i + 1),
                       "group_id": group_id, "group_type": "consumer", "type": "join", "member_id": member,
                       "client_id": f"client-{i}", "topics": ["orders"], "protocol": "eager",
                       "assignor": "range", "session_timeout_ms": 45000})
    return events


def _run(args: argparse.Namespace) -> int:
    config = load_config().with_overrides(bootstrap_servers=f"127.0.0.1:{args.port}",
                                          output=args.output, checkpoint=args.checkpoint)
    kafka = config.kafka
    started = None
    if not broker.status(args.port).running:
        print(f"starting the embedded Kafka broker on port {args.port} ...", flush=True)
        started = broker.start(args.port)
    try:
        ensure_topics(kafka.bootstrap_servers, [kafka.membership_topic, kafka.heartbeat_topic])
        group = "demo-orders"
        now_ms = int(time.time() * 1000)
        events = demo_events(group, now_ms)
        produce(kafka.bootstrap_servers, kafka.membership_topic, [(group, e) for e in events])
        heartbeats = [{"schema_version": 1, "event_id": f"{e['event_id']}-hb", "event_time": e["event_time"] + 3000,
                       "group_id": group, "member_id": e["member_id"]} for e in events if e.get("member_id")]
        produce(kafka.bootstrap_servers, kafka.heartbeat_topic, [(group, h) for h in heartbeats])
        produce(kafka.bootstrap_servers, kafka.membership_topic, [(group, b'{"schema_version": 1, "event_id": ')])
        print(f"produced {len(events)} membership events, {len(heartbeats)} heartbeats and 1 malformed record",
              flush=True)

        from ..job import run

        print("running the job until everything in the topics is in Delta ...", flush=True)
        if run(config, available_now=True) != 0:
            return 1
        _print_tables(config)
        return 0
    finally:
        if started is not None:
            broker.stop(args.port)
            print("stopped the embedded broker", flush=True)


def _print_tables(config) -> None:
    from pyspark.sql import SparkSession

    from schemas import tables

    spark = SparkSession.getActiveSession()
    events = spark.read.format("delta").load(config.output.table_path(tables.EVENTS))
    rejected = spark.read.format("delta").load(config.output.table_path(tables.REJECTED_EVENTS))
    print(f"\n{tables.EVENTS} ({config.output.table_path(tables.EVENTS)}): {events.count()} rows, latest:")
    (events.orderBy("event_time", ascending=False)
     .select("kind", "group_id", "type", "member_id", "event_time", "source_topic", "source_offset")
     .show(10, truncate=False))
    print(f"{tables.REJECTED_EVENTS}: {rejected.count()} rows, latest:")
    rejected.orderBy("kafka_timestamp", ascending=False).select(
        "source_topic", "source_offset", "reason", "raw_value").show(5, truncate=60)
