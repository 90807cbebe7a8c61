"""``rebalance-monitor demo``: the whole pipeline on this machine, end to end, in one command.

Starts the embedded broker unless one already answers, simulates a few minutes of traffic from a
handful of groups (consumer groups eager and cooperative, static members that bounce, members that
crash, a Kafka Streams application and a Kafka Connect cluster, a few malformed records), plays a
few real librdkafka consumer groups on the broker (recorded from the coordinator's own log,
``__consumer_offsets``), runs the job until everything is in Delta, prints what landed with a few
SQL queries, and stops whatever it started.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

from streaming import broker
from streaming.config import load_config

#: Eight groups of a few members need far less than the 4g the job asks for by default (sized for a
#: 10,000-member group): with 4g the demo's driver grew to 2.3 GB, measured.
DEMO_DRIVER_MEMORY = "1g"

SUMMARY_QUERIES = (
    ("Generations per group and what triggered them",
     """SELECT group_id, group_type, assignor, protocol, count(*) AS generations,
               concat_ws(',', collect_list(trigger)) AS triggers
        FROM (SELECT * FROM balance_metrics ORDER BY generation)
        GROUP BY group_id, group_type, assignor, protocol ORDER BY group_id"""),
    ("Latest generation of each group: balance and movement",
     """SELECT group_id, generation, trigger, trigger_member, members, partitions, min_per_member,
               max_per_member, imbalance, moved, unassigned, round(assignor_ms, 2) AS assignor_ms
        FROM balance_metrics
        QUALIFY row_number() OVER (PARTITION BY group_id ORDER BY generation DESC) = 1
        ORDER BY group_id"""),
    ("Members the monitor expired (no heartbeat within the session timeout)",
     """SELECT group_id, member_id, from_unixtime(event_time / 1000) AS expired_at, reason
        FROM member_events WHERE event = 'expired' ORDER BY event_time"""),
    ("Alerts (fired and resolved in event time; docs/alerts.md)",
     """SELECT group_id, rule, subject, severity, status, from_unixtime(fired_at / 1000) AS fired,
               from_unixtime(resolved_at / 1000) AS resolved, value, threshold
        FROM alerts ORDER BY fired_at, status"""),
    ("Real groups, recorded from the coordinator's log: each generation and the project's assignor's check",
     """SELECT b.group_id, b.generation, b.trigger, b.phase, b.members, b.moved, b.unassigned, c.agrees
        FROM balance_metrics b LEFT JOIN assignment_checks c USING (group_id, generation)
        WHERE b.group_id LIKE 'demo-real-%' ORDER BY b.group_id, b.generation"""),
    ("Refused records, by reason",
     """SELECT reason, count(*) AS records FROM rejected_events GROUP BY reason ORDER BY records DESC"""),
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("demo", help="run the monitor end to end on the embedded broker",
                                   description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=broker.DEFAULT_PORT, help="embedded broker port")
    parser.add_argument("--output", default=None, help="Delta root (default: the config's, ./data)")
    parser.add_argument("--checkpoint", default=None, help="checkpoint directory (default: the config's)")
    parser.add_argument("--groups", type=int, default=8, help="simulated groups (a quarter Streams, a quarter Connect)")
    parser.add_argument("--minutes", type=float, default=3.0, help="simulated minutes of traffic")
    parser.add_argument("--driver-memory", default=DEMO_DRIVER_MEMORY, metavar="SIZE",
                        help=f"the Spark driver's heap for the demo (default {DEMO_DRIVER_MEMORY}; the job's "
                             "own default is sized for groups of 10,000 members)")
    parser.add_argument("--real-groups", action=argparse.BooleanOptionalAction, default=True,
                        help="also play real consumer groups, recorded from __consumer_offsets (default: on)")
    parser.add_argument("--keep", action="store_true",
                        help="keep what earlier demos left (topics, checkpoint, tables) instead of starting clean")
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    config = load_config().with_overrides(bootstrap_servers=f"127.0.0.1:{args.port}",
                                          output=args.output, checkpoint=args.checkpoint)
    config = replace(config, spark=replace(
        config.spark, conf={**config.spark.conf, "spark.driver.memory": args.driver_memory}))
    kafka = config.kafka
    started = None
    if not broker.status(args.port).running and not broker.port_in_use(args.port):
        print(f"starting the embedded Kafka broker on port {args.port} ...", flush=True)
        started = broker.start(args.port)
    try:
        if not args.keep:
            _start_clean(config)
        from streaming.cli.main import main as cli

        duration_s = args.minutes * 60
        start_ms = int(time.time() * 1000 - duration_s * 1000)
        print(f"simulating {args.minutes:g} minutes of {args.groups} groups ...", flush=True)
        rc = cli(["simulate", "--bootstrap-servers", kafka.bootstrap_servers,
                  "--membership-topic", kafka.membership_topic, "--heartbeat-topic", kafka.heartbeat_topic,
                  "--groups", str(args.groups), "--members", "3-6", "--topics", "2", "--partitions", "4-12",
                  "--churn-per-minute", "3", "--session-timeout-ms", "10000", "--static-share", "0.3",
                  "--cooperative-share", "0.5", "--crash-share", "0.5", "--bad-share", "0.005",
                  "--streams-share", "0.25", "--connect-share", "0.25",
                  "--rate", "0", "--duration", str(duration_s), "--start-time-ms", str(start_ms),
                  "--seed", str(start_ms % 1000)])
        if rc != 0:
            return rc
        config = _with_real_groups(config, args.real_groups)

        from streaming.job.main import configure_logging, run

        configure_logging()
        print("running the job until everything in the topics is in Delta ...", flush=True)
        if run(config, available_now=True) != 0:
            return 1
        _print_summary(config)
        return 0
    finally:
        if started is not None:
            broker.stop(args.port)
            print("stopped the embedded broker", flush=True)


def _with_real_groups(config, enabled: bool):
    """Play a few real librdkafka groups (range, cooperative-sticky) on the broker and turn the
    offsets-topic source on, from where the log ended before they started."""
    if not enabled:
        return config
    from dataclasses import replace

    from streaming.feeds.live_groups import offsets_topic_end, play

    kafka = config.kafka
    start = offsets_topic_end(kafka.bootstrap_servers)
    print("playing real consumer groups (range, cooperative-sticky) on the broker ...", flush=True)
    play(kafka.bootstrap_servers, f"demo-real-{int(time.time())}")
    return replace(config, offsets_topic=replace(config.offsets_topic, enabled=True, starting_offsets=start,
                                                 metadata_interval_s=0))


def _start_clean(config) -> None:
    """Remove what an earlier demo left: its topics on the embedded broker, the checkpoint and the
    tables. Otherwise a second demo read the first one's events again (one group showed as both a
    Streams and a consumer group, generations went on from 10 to 20)."""
    import shutil
    from pathlib import Path

    from schemas.tables import TABLES
    from streaming.feeds.kafka_io import delete_topics

    kafka = config.kafka
    deleted = delete_topics(kafka.bootstrap_servers, [kafka.membership_topic, kafka.heartbeat_topic,
                                                      config.offsets_topic.metadata_topic])
    root = Path(config.output.table_path("x")).parent
    tables = [t for t in TABLES if (root / t).exists()]
    for table in tables:
        shutil.rmtree(root / table)
    checkpoint = Path(config.output.checkpoint_path)
    for path in (checkpoint, checkpoint.parent / f"{checkpoint.name}.lock",
                 checkpoint.parent / f"{checkpoint.name}-alert-outbox"):
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    print(f"starting clean: removed {len(deleted)} topic(s), {len(tables)} table(s) under {root} and the "
          f"checkpoint {checkpoint} (--keep keeps them; make clean-state removes them too)", flush=True)


def _print_summary(config) -> None:
    from pyspark.sql import SparkSession

    from streaming.reporting.views import register_views

    spark = SparkSession.getActiveSession()
    register_views(spark, config.output)
    print(f"\nDelta tables under {config.output.table_path('')}")
    for title, sql in SUMMARY_QUERIES:
        print(f"\n== {title}")
        spark.sql(sql).show(20, truncate=False)
    print("\nMore: rebalance-monitor query \"SELECT * FROM group_health\"; "
          "rebalance-monitor report --group <group_id> --report-dir report")
