"""``rebalance-monitor run``: the streaming job (see :mod:`streaming.job.main`)."""

from __future__ import annotations

import argparse
import logging
import shlex
from pathlib import Path
import sys

from streaming.job.args import add_job_arguments, config_from_args


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "run", help="run the streaming job (Kafka events in, Delta tables out)",
        description="Run the rebalance-monitor Spark Structured Streaming job in this process.",
    )
    add_job_arguments(parser)
    parser.add_argument("--print-spark-submit", action="store_true",
                        help="print the equivalent spark-submit command line and exit")
    parser.set_defaults(handler=_run)


def spark_submit_command(argv_tail: list[str]) -> list[str]:
    from streaming.paths import project_root
    from streaming.job.spark_session import REQUIRED_CONF, spark_jars

    cmd = [str(Path(sys.executable).parent / "spark-submit"), "--master", "local[2]", "--jars", ",".join(spark_jars())]
    for key, value in REQUIRED_CONF.items():
        cmd += ["--conf", f"{key}={value}"]
    cmd += ["--conf", f"spark.pyspark.python={sys.executable}",
            "--conf", f"spark.pyspark.driver.python={sys.executable}",
            str(project_root() / "streaming" / "job" / "main.py"), *argv_tail]
    return cmd


def _job_argv(args: argparse.Namespace) -> list[str]:
    """The job's own flags, as given, for the spark-submit line."""
    argv = []
    for flag in ("config", "bootstrap_servers", "membership_topic", "heartbeat_topic", "output", "checkpoint"):
        value = getattr(args, flag)
        if value is not None:
            argv += [f"--{flag.replace('_', '-')}", value]
    if args.available_now:
        argv.append("--available-now")
    for item in args.conf:
        argv += ["--conf", item]
    return argv


def _run(args: argparse.Namespace) -> int:
    config, extra = config_from_args(args)  # validates the config even when only printing
    if args.print_spark_submit:
        tail = _job_argv(args)
        print(shlex.join(spark_submit_command(tail)))
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from streaming.job.main import run

    return run(config, args.available_now, extra)
