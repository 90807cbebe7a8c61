"""Command-line arguments of the job, shared by ``streaming/job/main.py`` and ``rebalance-monitor run``.

Kept apart from the job so that the CLI can parse them without importing PySpark.
"""

from __future__ import annotations

import argparse

from streaming.config import Config, ConfigError, load_config


def add_job_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="TOML file (default conf/rebalance-monitor.toml)")
    parser.add_argument("--available-now", action="store_true",
                        help="process what is in the topics now, then exit (replays, backfills, tests)")
    parser.add_argument("--bootstrap-servers", metavar="HOST:PORT[,...]",
                        help="the Kafka cluster with the input topics (default: the config's kafka.bootstrap_servers)")
    parser.add_argument("--membership-topic", metavar="TOPIC",
                        help="topic of membership events (default: the config's, rebalance.membership)")
    parser.add_argument("--heartbeat-topic", metavar="TOPIC",
                        help="topic of heartbeats (default: the config's, rebalance.heartbeats)")
    parser.add_argument("--output", metavar="PATH",
                        help="root directory (or URI) of the Delta tables (default: the config's, ./data)")
    parser.add_argument("--checkpoint", metavar="PATH",
                        help="checkpoint directory (or URI) of the query (default: the config's, checkpoints/job)")
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
