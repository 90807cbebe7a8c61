"""``rebalance-monitor run``: the streaming job (see :mod:`streaming.job.main`)."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
import sys

from streaming.config import DEFAULT_CONFIG_FILE
from streaming.job.args import add_job_arguments, config_from_args
from streaming.paths import conf_dir, project_root


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "run", help="run the streaming job (Kafka events in, Delta tables out)",
        description="Run the rebalance-monitor Spark Structured Streaming job in this process.",
    )
    add_job_arguments(parser)
    parser.add_argument("--print-spark-submit", action="store_true",
                        help="print the equivalent spark-submit command line and exit")
    parser.set_defaults(handler=_run)


def spark_submit_command(config, extra: dict[str, str], argv_tail: list[str]) -> list[str]:
    """The spark-submit command line of this job with ``config``: runnable as printed from any shell
    and any directory (absolute paths; SPARK_HOME and the Python interpreters set), with the same
    Spark settings and quiet log as ``run``.

    Settings the driver JVM reads at its start go to spark-submit's own flags: under spark-submit
    that JVM is already running when the job's Python code builds its session.
    """
    import pyspark

    from streaming.job.spark_session import job_spark_conf, session_conf

    # The storage's endpoint and jars, never its credentials: the job reads those at start.
    conf = session_conf(config.spark, job_spark_conf(config, extra))
    python = sys.executable
    master = conf.pop("spark.master", config.spark.master)
    # PYTHONPATH: the driver imports the packages of the checkout whose main.py the line names, not
    # whichever copy the interpreter's site-packages points at (an editable install of another one).
    cmd = ["env", f"SPARK_HOME={Path(pyspark.__file__).parent}", f"PYSPARK_PYTHON={python}",
           f"PYSPARK_DRIVER_PYTHON={python}", f"PYTHONPATH={project_root()}"]
    if master.startswith("local"):  # as run does: this host only (on a cluster the executors must reach it)
        cmd.append("SPARK_LOCAL_IP=127.0.0.1")
    cmd += [str(Path(python).parent / "spark-submit"), "--master", master, "--jars", conf.pop("spark.jars")]
    if "spark.driver.memory" in conf:
        cmd += ["--driver-memory", conf.pop("spark.driver.memory")]
    if "spark.driver.extraJavaOptions" in conf:
        cmd += ["--driver-java-options", conf.pop("spark.driver.extraJavaOptions")]
    for key, value in conf.items():
        cmd += ["--conf", f"{key}={value}"]
    cmd += ["--conf", f"spark.pyspark.python={python}", "--conf", f"spark.pyspark.driver.python={python}",
            str(project_root() / "streaming" / "job" / "main.py"), *argv_tail]
    return cmd


def _job_argv(args: argparse.Namespace, config) -> list[str]:
    """The job's own flags for the spark-submit line: the config file and the paths absolute, so the
    line does the same from any directory; Spark settings are spark-submit's already."""
    argv = ["--config", str(Path(args.config).resolve()) if args.config else str(conf_dir() / DEFAULT_CONFIG_FILE)]
    for flag in ("bootstrap_servers", "membership_topic", "heartbeat_topic"):
        value = getattr(args, flag)
        if value is not None:
            argv += [f"--{flag.replace('_', '-')}", value]
    argv += ["--output", config.output.table_path("").rstrip("/"), "--checkpoint", config.output.checkpoint_path]
    if args.available_now:
        argv.append("--available-now")
    return argv


def _run(args: argparse.Namespace) -> int:
    config, extra = config_from_args(args)  # validates the config even when only printing
    if args.print_spark_submit:
        print(shlex.join(spark_submit_command(config, extra, _job_argv(args, config))))
        return 0
    from streaming.job.main import configure_logging, run

    configure_logging()

    return run(config, args.available_now, extra)
