"""The one place a SparkSession is made: local mode by default, Kafka and Delta jars wired.

The jars come from ``scripts/bootstrap`` as plain files and go to Spark as an explicit list, so a
session never resolves anything over the network. Jars that PySpark already ships (Scala, Hadoop,
Jackson, logging) are left out of the list: Spark's own copies are the ones that match it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Callable, Mapping

from streaming.config import Config, SparkConfig
from streaming.errors import SparkSetupError
from streaming.paths import conf_dir, jar_dir, project_root
from streaming.storage import is_object_store

_VERSIONED_JAR = re.compile(r"^(?P<artifact>.+?)-\d[^-]*(?:-[^-]+)?\.jar$")

# Settings every session of the project needs; conf/ and callers may add to them but these are
# what makes the job work at all (Delta, the RocksDB store that transformWithState requires).
REQUIRED_CONF: Mapping[str, str] = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.sql.streaming.stateStore.providerClass":
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
}

DEFAULT_CONF: Mapping[str, str] = {
    # In local mode the driver JVM runs the tasks too; the largest group's state (10,000 members,
    # 500,000 partitions) and Delta's log replay need more than Spark's 1g.
    "spark.driver.memory": "4g",
    "spark.sql.shuffle.partitions": "2",
    "spark.ui.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    # Deep regex recursion on the stream thread overflowed the default stack at query stop.
    "spark.driver.extraJavaOptions": "-Xss64m",
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    "spark.ui.showConsoleProgress": "false",
    # Delta rebuilds table state with this many tasks; its default of 50 is slow on 2 cores.
    "spark.databricks.delta.snapshotPartitions": "2",
    # Fewer, larger Arrow batches into the stateful operator's Python worker: 10-40 % faster than
    # the default 10,000 rows in paired runs (docs/benchmarks/tws-probe.md).
    "spark.sql.execution.arrow.maxRecordsPerBatch": "100000",
    # Streaming queries cannot use adaptive execution; Spark disables it for them with two warnings
    # at every start. Off from the start, nothing to warn about.
    "spark.sql.adaptive.enabled": "false",
}


def _artifact(jar_name: str) -> str:
    m = _VERSIONED_JAR.match(jar_name)
    return m.group("artifact") if m else jar_name


def spark_jars() -> list[str]:
    """Absolute paths of the Kafka-source and Delta jars Spark does not already ship."""
    directory = jar_dir("spark")
    jars = sorted(directory.glob("*.jar"))
    if not any(j.name.startswith("delta-spark_") for j in jars):
        raise SparkSetupError(f"the Spark Kafka/Delta jars are missing from {directory}: run scripts/bootstrap first")
    import pyspark

    shipped = {_artifact(p.name) for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    return [str(j) for j in jars if _artifact(j.name) not in shipped]


def object_store_jars() -> list[str]:
    """Absolute paths of Hadoop's ``s3a`` file system and the AWS SDK it needs (``scripts/bootstrap``)."""
    directory = jar_dir("s3")
    jars = sorted(directory.glob("*.jar"))
    if not any(j.name.startswith("hadoop-aws-") for j in jars):
        raise SparkSetupError(f"the s3a jars (hadoop-aws and the AWS SDK) are missing from {directory}: "
                              f"run scripts/bootstrap first")
    import pyspark

    shipped = {_artifact(p.name) for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    return [str(j) for j in jars if _artifact(j.name) not in shipped]


def uses_object_store(config: Config) -> bool:
    """Whether the tables, the checkpoint or the alert outbox are on object storage."""
    places = [config.output.root, config.output.checkpoint, config.alerts.outbox or ""]
    return any(is_object_store(p) for p in places)


def job_spark_conf(config: Config, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The job's own Spark settings on top of ``[spark.conf]``: for object storage, the ``s3a``
    settings of ``[storage]`` (never a credential: see :mod:`streaming.storage`) and its jars; then
    ``extra`` (``--conf``), which wins.

    The ``s3a`` jars go on the class path of the driver and of every executor rather than in
    ``spark.jars``: the AWS SDK is about 700 MB, which ``spark.jars`` would copy to every executor of
    every application, and Hadoop looks file systems up in the class path it started with."""
    conf: dict[str, str] = {}
    if uses_object_store(config):
        conf.update(config.storage.spark_conf())
        class_path = os.pathsep.join(object_store_jars())
        conf["spark.driver.extraClassPath"] = class_path
        conf["spark.executor.extraClassPath"] = class_path
    conf.update(extra or {})
    return conf


def session_conf(config: SparkConfig | None = None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The full Spark conf a session of this project gets (defaults < conf/ < extra < required)."""
    config = config or SparkConfig()
    conf = dict(DEFAULT_CONF)
    conf.update(config.conf)
    conf.update(extra or {})
    java_opts = conf.get("spark.driver.extraJavaOptions", "")
    log_conf = conf_dir() / "spark-log4j2.properties"
    if "log4j2.configurationFile" not in java_opts and log_conf.exists():
        conf["spark.driver.extraJavaOptions"] = f"{java_opts} -Dlog4j2.configurationFile={log_conf}".strip()
    conf.update(REQUIRED_CONF)
    conf["spark.jars"] = ",".join(spark_jars())
    return conf


def build_spark_session(config: SparkConfig | None = None, app_name: str = "rebalance-monitor",
                        extra: Mapping[str, str] | None = None):
    """Create (or return the process's existing) SparkSession with the project's setup."""
    # Python workers of transformWithState must run this interpreter, whose site-packages has
    # pyarrow and protobuf; the one first on PATH may not (stack facts, gotcha 1).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # The job talks to Kafka and its own executors on this host only, unless told otherwise.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    config = config or SparkConfig()
    builder = SparkSession.builder.appName(app_name)
    settings = session_conf(config, extra)
    # Under spark-submit (PySpark's gateway port is set), its --master decides, not the config.
    under_spark_submit = "PYSPARK_GATEWAY_PORT" in os.environ or bool(os.environ.get("SPARK_SUBMIT_OPTS"))
    if not under_spark_submit and "spark.master" not in (extra or {}):
        builder = builder.master(config.master)
        settings["spark.master"] = config.master
    for key, value in settings.items():
        builder = builder.config(key, value)
    _launch_own_jvm({**settings, "spark.app.name": app_name})
    session = builder.getOrCreate()
    if not session.sparkContext.master.startswith("local["):
        _ship_project_code(session)
    return session


def _ship_project_code(session) -> None:
    """Executors in their own JVMs (a cluster, or ``local-cluster``) run the project's Python code in
    their own Python workers: give them this driver's copy of it, so driver and executors never run
    two versions of the processor (an image or a virtualenv on the executors may hold another, or
    none). A zip of ``assignors``, ``schemas`` and ``streaming``, first on the workers' path."""
    import tempfile
    import zipfile

    root = project_root()
    target = Path(tempfile.mkdtemp(prefix="rebalance-monitor-code-")) / "rebalance_monitor_code.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for package in ("assignors", "schemas", "streaming"):
            for source in sorted((root / package).rglob("*.py")):
                archive.write(source, source.relative_to(root).as_posix())
            for data in sorted((root / package).rglob("*.json")):  # JSON Schemas and other package data
                archive.write(data, data.relative_to(root).as_posix())
    session.sparkContext.addPyFile(str(target))


def _launch_own_jvm(settings: Mapping[str, str]) -> None:
    """Start Spark's JVM (the py4j gateway) in a session of its own, as PySpark would but for that.

    A service manager stops a job by signalling its whole process group (systemd's default
    KillMode, ``timeout``, ``kill -- -PGID``). In the same group, the JVM died with the signal while
    the Python side was still stopping the query between batches, and the job exited 1 with a py4j
    traceback. In its own session only the Python process gets the signal, stops the query after
    the batch in flight, and exits 0. The JVM still ends with its parent: PySpark's gateway exits
    when its standard input (a pipe from this process) closes, even after a SIGKILL.

    Under spark-submit the JVM is the parent and already runs; PySpark then connects to it.
    """
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    conf = SparkConf(loadDefaults=False)
    for key, value in settings.items():
        conf.set(key, value)
    with SparkContext._lock:
        SparkContext._gateway = launch_gateway(
            conf, popen_kwargs={"start_new_session": True, "stderr": subprocess.PIPE})
        SparkContext._jvm = SparkContext._gateway.jvm
    threading.Thread(target=forward_jvm_stderr, args=(SparkContext._gateway.proc.stderr, _write_to_stderr),
                     name="jvm-stderr", daemon=True).start()


def _write_to_stderr(data: bytes) -> None:
    # File descriptor 2 as it is at each write, not a Python stream object: whoever redirects
    # stderr later (a test runner's capture, a daemoniser) gets the lines.
    os.write(2, data)


#: Lines the JVM writes that say nothing to a user of the job, and that no log setting turns off:
#: the JDK's note on the vector module Spark 4.2 enables, and pyspark's transformWithState driver
#: worker, which ``print``s four lines (each followed by a blank one) at every query start.
_CHATTER = (b"WARNING: Using incubator modules: jdk.incubator.vector",
            b"Starting Streaming TransformWithStateInPandas Python worker",
            b"Streaming TransformWithStateInPandas Python worker ")


def forward_jvm_stderr(source: IO[bytes], write: Callable[[bytes], object]) -> None:
    """Copy the JVM's standard error to ``write`` line by line, without :data:`_CHATTER` and the
    blank line each of pyspark's prints adds. Runs until the JVM closes its end, and keeps reading
    whatever ``write`` does: a JVM whose stderr pipe is full stops at its next log line."""
    after_chatter = False
    for line in iter(source.readline, b""):
        if line.startswith(_CHATTER):
            after_chatter = True
            continue
        if after_chatter and not line.strip():
            after_chatter = False
            continue
        after_chatter = False
        try:
            write(line)
        except (OSError, ValueError):
            pass  # nowhere to show it; draining the pipe matters more
