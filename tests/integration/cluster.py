"""For the cluster tests: S3-compatible storage (s3proxy, in memory) and a standalone Spark master
and worker, each a JVM started from the jars ``scripts/bootstrap`` resolved and stopped at the end,
even when the test process is killed (as the broker is)."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from streaming.broker import _die_with_parent_hook, _java
from streaming.paths import jar_dir
from streaming.storage import Credentials, StorageConfig
from tests.conftest import free_port

BUCKET = "monitor"


@dataclass
class ObjectStore:
    """s3proxy on 127.0.0.1 with its in-memory backend, checking AWS signatures against one key."""
    process: subprocess.Popen
    port: int
    credentials: Credentials
    log: Path

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def storage(self, prefix: str) -> StorageConfig:
        return StorageConfig(uri=f"s3a://{BUCKET}/{prefix}", endpoint=self.endpoint, path_style=True)

    def toml(self, prefix: str) -> str:
        return (f'[storage]\nuri = "s3a://{BUCKET}/{prefix}"\nendpoint = "{self.endpoint}"\npath_style = true\n'
                f'credentials = "environment"\n')

    def env(self) -> dict[str, str]:
        """The job's environment with the storage's credentials (``credentials = "environment"``)."""
        return {**os.environ, "AWS_ACCESS_KEY_ID": self.credentials.access_key_id,
                "AWS_SECRET_ACCESS_KEY": self.credentials.secret_access_key}


def s3proxy_jar() -> Path:
    jars = sorted(jar_dir("s3proxy").glob("s3proxy-*-jar-with-dependencies.jar"))
    if not jars:
        raise AssertionError(f"s3proxy is missing from {jar_dir('s3proxy')}: run scripts/bootstrap first")
    return jars[-1]


def start_object_store(directory: Path, timeout_s: float = 60.0) -> ObjectStore:
    """s3proxy with the ``transient`` (in-memory) backend: its file-system backends cannot hold the
    directory markers Hadoop's s3a writes. Signatures are checked (``aws-v2-or-v4``), so a client
    that did not get the credentials fails instead of passing unnoticed."""
    port = free_port()
    credentials = Credentials(f"AKID{secrets.token_hex(6).upper()}", secrets.token_urlsafe(30))
    properties = directory / "s3proxy.properties"
    properties.write_text("\n".join([
        f"s3proxy.endpoint=http://127.0.0.1:{port}", "s3proxy.authorization=aws-v2-or-v4",
        f"s3proxy.identity={credentials.access_key_id}", f"s3proxy.credential={credentials.secret_access_key}",
        "jclouds.provider=transient", "jclouds.identity=unused", "jclouds.credential=unused", ""]))
    log = directory / "s3proxy.log"
    with open(log, "ab") as out:
        process = subprocess.Popen([_java(), "-Xmx512m", "-jar", str(s3proxy_jar()), "--properties", str(properties)],
                                   stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=directory,
                                   start_new_session=True, preexec_fn=_die_with_parent_hook())
    store = ObjectStore(process, port, credentials, log)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            urllib.request.urlopen(store.endpoint, timeout=2)
        except urllib.error.HTTPError:
            break  # an S3 error answer (403 without a signature): it serves
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                stop(process)
                raise AssertionError(f"s3proxy did not start: {log.read_text()[-2000:]}")
            time.sleep(0.3)
            continue
        break
    from pyarrow import fs

    # S3's CreateBucket, through PyArrow: the job never creates buckets (an operator's decision).
    fs.S3FileSystem(access_key=credentials.access_key_id, secret_key=credentials.secret_access_key,
                    region="us-east-1", scheme="http", endpoint_override=f"127.0.0.1:{port}",
                    allow_bucket_creation=True).create_dir(BUCKET)
    return store


def stop(process: subprocess.Popen, timeout_s: float = 20.0) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


@dataclass
class StandaloneCluster:
    master: subprocess.Popen
    worker: subprocess.Popen
    port: int
    ui_port: int

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def stop(self) -> None:
        stop(self.worker)
        stop(self.master)


def start_standalone(directory: Path, cores: int = 2, memory: str = "3g", timeout_s: float = 120.0):
    """A standalone master and one worker from the pip install's ``bin/spark-class`` (the wheel has no
    ``sbin/start-*.sh``); returns once the worker has registered with the master."""
    import pyspark

    spark_home = Path(pyspark.__file__).parent
    port, ui_port = free_port(), free_port()
    env = {**os.environ, "SPARK_HOME": str(spark_home), "SPARK_LOCAL_IP": "127.0.0.1"}

    def launch(name: str, *args: str) -> subprocess.Popen:
        with open(directory / f"{name}.log", "ab") as out:
            return subprocess.Popen([str(spark_home / "bin" / "spark-class"), *args], env=env, cwd=directory,
                                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True, preexec_fn=_die_with_parent_hook())

    master = launch("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                    "--webui-port", str(ui_port))
    worker = launch("worker", "org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}",
                    "--host", "127.0.0.1", "--cores", str(cores), "--memory", memory,
                    "--webui-port", str(free_port()), "--work-dir", str(directory / "work"))
    cluster = StandaloneCluster(master, worker, port, ui_port)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as answer:
                if json.load(answer).get("aliveworkers", 0) >= 1:
                    return cluster
        except OSError:
            pass
        if master.poll() is not None or worker.poll() is not None:
            break
        time.sleep(0.5)
    cluster.stop()
    logs = "\n".join((directory / f"{n}.log").read_text()[-1500:] for n in ("master", "worker"))
    raise AssertionError(f"the standalone cluster did not come up within {timeout_s} s:\n{logs}")
