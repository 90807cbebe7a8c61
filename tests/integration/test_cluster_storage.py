"""The job beyond one machine: executors in their own JVMs (``local-cluster``, a standalone master
and worker), the Delta tables, the checkpoint and the alert outbox on S3-compatible storage
(s3proxy), reached with the credentials of ``[storage]``.

The slow parts (s3proxy, the standalone cluster) start once per module; every job runs as its own
process, as an operator runs it, so each can be killed."""

from __future__ import annotations

import collections
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from schemas import tables
from streaming.alerting.delivery.payload import AlertTransition, webhook_message
from streaming.config import parse_config
from streaming.storage import Location
from tests.integration import cluster
from tests.integration.jobs import ALL_TABLES, MEASURED, make_config, run_available_now, simulate_into
from tests.integration.test_alert_delivery import Receiver, wait_until
from tests.integration.test_job_scenarios import produce_scenario

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
LOCAL_CLUSTER = "local-cluster[2,1,1024]"  # two executor JVMs, one core and 1 GB each


@pytest.fixture(scope="module", autouse=True)
def _spark_work_dirs_removed():
    """``local-cluster`` and the standalone worker leave each application's executor directory (its
    jars and logs, about 50 MB) under the pyspark install; remove the ones this module made."""
    import shutil

    import pyspark

    work = Path(pyspark.__file__).parent / "work"
    before = set(work.iterdir()) if work.exists() else set()
    yield
    for app in (set(work.iterdir()) if work.exists() else set()) - before:
        shutil.rmtree(app, ignore_errors=True)


@pytest.fixture(scope="module")
def object_store(tmp_path_factory):
    store = cluster.start_object_store(tmp_path_factory.mktemp("s3proxy"))
    try:
        yield store
    finally:
        cluster.stop(store.process)


def _delta_rows(root: str, storage_options: dict | None) -> dict[str, list]:
    """Every history table under ``root`` read with delta-rs, as sorted rows without measured
    columns (as tests/integration/jobs.history does with Spark)."""
    from deltalake import DeltaTable

    out = {}
    for table in ALL_TABLES:
        if table == tables.INGEST_METRICS:
            continue  # per micro-batch by design: other batching, other rows
        path = f"{root.rstrip('/')}/{table}"
        rows = []
        if DeltaTable.is_deltatable(path, storage_options=storage_options):
            rows = DeltaTable(path, storage_options=storage_options).to_pyarrow_table().to_pylist()
        out[table] = sorted(tuple(sorted((k, repr(v)) for k, v in r.items() if k not in MEASURED)) for r in rows)
    return out


def _ingest(root: str, storage_options: dict | None) -> list[dict]:
    from deltalake import DeltaTable

    path = f"{root.rstrip('/')}/{tables.INGEST_METRICS}"
    return DeltaTable(path, storage_options=storage_options).to_pyarrow_table().to_pylist()


def _assert_same_history(got: dict, expected: dict, what: str) -> None:
    assert len(expected[tables.BALANCE_METRICS]) > 0
    for table in expected:
        extra = sorted(set(got[table]) - set(expected[table]))
        missing = sorted(set(expected[table]) - set(got[table]))
        assert not extra and not missing, f"{table} {what}: extra {extra[:2]}, missing {missing[:2]}"
        assert got[table] == expected[table], f"{table} {what}: duplicated rows"


def _write_config(path: Path, kafka, storage_toml: str, extra: str = "") -> Path:
    path.write_text(f"""
[kafka]
bootstrap_servers = "{kafka.bootstrap_servers}"
membership_topic = "{kafka.membership_topic}"
heartbeat_topic = "{kafka.heartbeat_topic}"
max_offsets_per_trigger = {kafka.max_offsets_per_trigger}

[job]
trigger_interval = "0 seconds"

[metrics]
port = 0

{storage_toml}
{extra}
""")
    return path


def _job(config_file: Path, log: Path, env: dict, *flags: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "streaming.cli.main", "run", "--available-now",
                             "--config", str(config_file), "--conf", f"spark.master={LOCAL_CLUSTER}", *flags],
                            cwd=REPO, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def _no_secret_anywhere(object_store, prefix: str, log_text: str) -> None:
    """The secret key is in no log line and in no file the job wrote (tables' logs, checkpoint)."""
    secret = object_store.credentials.secret_access_key
    assert secret not in log_text
    filesystem = object_store.storage(prefix).arrow_filesystem(object_store.credentials)
    from pyarrow import fs

    written = [i for i in filesystem.get_file_info(fs.FileSelector(f"{cluster.BUCKET}/{prefix}", recursive=True))
               if i.type == fs.FileType.File and not i.path.endswith(".parquet") and i.size < 10_000_000]
    assert any("_delta_log" in i.path for i in written) and any("/offsets/" in i.path for i in written)
    for info in written:
        with filesystem.open_input_stream(info.path) as stream:
            assert secret.encode() not in stream.read(), info.path


def test_a_scenario_on_local_cluster_with_tables_and_checkpoint_on_s3_equals_the_local_run(
        spark, kafka_broker, object_store, tmp_path, unique_name):
    local = make_config(kafka_broker, tmp_path / "local", unique_name)
    produce_scenario(local)
    run_available_now(spark, local)  # the reference: local mode, local disk

    prefix = f"scenario-{unique_name}"
    config_file = _write_config(tmp_path / "cluster.toml", local.kafka, object_store.toml(prefix))
    log = tmp_path / "job.log"
    job = _job(config_file, log, object_store.env())
    assert job.wait(900) == 0, log.read_text()[-4000:]

    storage = object_store.storage(prefix)
    options = storage.delta_options(object_store.credentials)
    _assert_same_history(_delta_rows(f"{storage.uri}/data", options), _delta_rows(local.output.root, None),
                         "on local-cluster and S3 against local mode")
    assert sum(r["records"] for r in _ingest(f"{storage.uri}/data", options)) == \
        sum(r["records"] for r in _ingest(local.output.root, None))
    checkpoint = Location(f"{storage.uri}/checkpoints/job", storage, object_store.credentials)
    assert checkpoint.read_bytes("rebalance-monitor-state.json") is not None  # the stamp, beside Spark's files
    assert checkpoint.list("commits")
    _no_secret_anywhere(object_store, prefix, log.read_text())

    # `query` reads the same tables on S3 with the same config, and a view agrees with the local run.
    sql = "SELECT group_id, rebalance_total FROM group_health ORDER BY group_id"
    answers = []
    for config_args in (["--config", str(config_file)], ["--output", local.output.root]):
        done = subprocess.run([sys.executable, "-m", "streaming.cli.main", "query", *config_args, "--format", "json",
                               sql], cwd=REPO, env=object_store.env(), capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        answers.append([json.loads(line) for line in done.stdout.splitlines()])
    assert answers[0] == answers[1] and {r["group_id"] for r in answers[0]} == {"eager", "coop", "static"}


STORM_RULE = """
[alerts.rebalance_storm]
generations = 3
window_ms = 30000
"""
WEBHOOK = """
[alerts.webhook]
url = "{url}"
backoff_initial_ms = 100
backoff_max_ms = 1000
"""


def _batches(checkpoint: Location, kind: str) -> int:
    return len([name for name, _ in checkpoint.list(kind) if name.isdigit()])


def _kill_mid_batch(job: subprocess.Popen, checkpoint: Location, after_commits: int, log: Path,
                    timeout_s: float = 600) -> int:
    """SIGKILL the job (its whole process group: driver, executors, Python workers) while a batch is
    in flight, once at least ``after_commits`` batches are committed; returns the committed count."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert job.poll() is None, f"the job ended before it could be killed:\n{log.read_text()[-3000:]}"
        committed, planned = _batches(checkpoint, "commits"), _batches(checkpoint, "offsets")
        if committed >= after_commits and planned > committed:
            _kill_tree(job.pid)
            job.wait(30)
            return committed
        time.sleep(0.1)
    _kill_tree(job.pid)
    raise AssertionError(f"no batch in flight after {after_commits} commits within {timeout_s} s")


def _kill_tree(pid: int) -> None:
    """SIGKILL the job and everything it started, as if its host died: the Python driver, Spark's
    JVM (in a session of its own, see spark_session._launch_own_jvm), the executor JVMs that JVM
    launched and their Python workers. Left alone, the executors would notice the lost driver only
    seconds later, still writing the batch in flight while the next driver starts."""
    tree = [pid]
    for parent in tree:
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == parent:
                tree.append(int(stat.parent.name))
    for member in tree:
        try:
            os.kill(member, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _expected_deliveries(alert_rows: list[dict]) -> collections.Counter:
    out = collections.Counter()
    for row in alert_rows:
        alert = webhook_message(row["group_id"], [AlertTransition.from_row(row)], receiver="x",
                                static_labels={})["alerts"][0]
        out[(alert["fingerprint"], alert["status"], alert["startsAt"])] += 1
    return out


def test_sigkill_of_the_driver_on_local_cluster_and_s3_loses_and_repeats_nothing(
        spark, kafka_broker, object_store, tmp_path, unique_name):
    crashed = make_config(kafka_broker, tmp_path / "crashed", unique_name)
    simulate_into(crashed, "--groups", "4", "--members", "2-5", "--partitions", "3-8", "--churn-per-minute", "6",
                  "--session-timeout-ms", "10000", "--static-share", "0.3", "--cooperative-share", "0.5",
                  "--crash-share", "0.5", "--bad-share", "0.01", "--duration", "150",
                  "--start-time-ms", "1700000000000", "--seed", "11")
    receiver = Receiver()
    try:
        prefix = f"crash-{unique_name}"
        kafka = replace(crashed.kafka, max_offsets_per_trigger=80)
        config_file = _write_config(tmp_path / "job.toml", kafka, object_store.toml(prefix),
                                    STORM_RULE + WEBHOOK.format(url=receiver.url))
        storage = object_store.storage(prefix)
        checkpoint = Location(f"{storage.uri}/checkpoints/job", storage, object_store.credentials)
        log = tmp_path / "job.log"
        job = _job(config_file, log, object_store.env())
        killed_at = _kill_mid_batch(job, checkpoint, 3, log)
        assert _batches(checkpoint, "offsets") > killed_at  # a batch was in flight
        final = _job(config_file, log, object_store.env())
        assert final.wait(900) == 0, log.read_text()[-4000:]

        # The same topics, read by an uninterrupted job in local mode on the local disk.
        alerts = parse_config(tomllib.loads(STORM_RULE)).alerts
        uninterrupted = replace(make_config(kafka_broker, tmp_path / "uninterrupted", unique_name), alerts=alerts)
        run_available_now(spark, uninterrupted)

        options = storage.delta_options(object_store.credentials)
        crashed_history = _delta_rows(f"{storage.uri}/data", options)
        _assert_same_history(crashed_history, _delta_rows(uninterrupted.output.root, None), "after a SIGKILL")
        assert len(crashed_history[tables.REJECTED_EVENTS]) > 0
        ingest = _ingest(f"{storage.uri}/data", options)
        assert len({r["batch_id"] for r in ingest}) == len(ingest)

        # Every alert transition in the table reached the webhook exactly once, across the kills.
        from deltalake import DeltaTable

        alert_rows = DeltaTable(f"{storage.uri}/data/{tables.ALERTS}", storage_options=options) \
            .to_pyarrow_table().to_pylist()
        expected = _expected_deliveries(alert_rows)
        assert sum(expected.values()) >= 3, "the input must raise alerts for this test to mean anything"
        wait_until(lambda: sum(receiver.transitions().values()) >= sum(expected.values()),
                   "every alert delivered", timeout_s=120)
        time.sleep(2)  # a late duplicate would arrive now
        assert receiver.transitions() == expected
        outbox = Location(f"{storage.uri}/checkpoints/job-alert-outbox", storage, object_store.credentials)
        names = [name for name, _ in outbox.list()]
        assert len([n for n in names if n.startswith("t-")]) == sum(expected.values())
        assert len([n for n in names if n.startswith("d-")]) == sum(expected.values())
        _no_secret_anywhere(object_store, prefix, log.read_text())
    finally:
        receiver.stop()


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    spark_cluster = cluster.start_standalone(tmp_path_factory.mktemp("standalone"))
    try:
        yield spark_cluster
    finally:
        spark_cluster.stop()


def test_the_documented_spark_submit_line_runs_a_simulated_workload_on_a_standalone_cluster(
        kafka_broker, object_store, standalone, tmp_path, unique_name):
    config = make_config(kafka_broker, tmp_path, unique_name)
    simulate_into(config, "--groups", "3", "--members", "2-4", "--partitions", "3-6", "--churn-per-minute", "4",
                  "--duration", "60", "--start-time-ms", "1700000000000", "--seed", "3")
    prefix = f"standalone-{unique_name}"
    config_file = _write_config(tmp_path / "job.toml", config.kafka, object_store.toml(prefix))
    # As docs/deploy.md says: print the line, then run it as printed.
    printed = subprocess.run([sys.executable, "-m", "streaming.cli.main", "run", "--print-spark-submit",
                              "--available-now", "--config", str(config_file),
                              "--conf", f"spark.master={standalone.url}"],
                             cwd=REPO, env=object_store.env(), capture_output=True, text=True, timeout=120)
    assert printed.returncode == 0, printed.stderr
    line = printed.stdout.strip()
    assert f"--master {standalone.url}" in line
    assert object_store.credentials.secret_access_key not in line
    assert object_store.credentials.access_key_id not in line
    log = tmp_path / "submit.log"
    with log.open("wb") as out:
        submitted = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=object_store.env(), stdout=out,
                                   stderr=subprocess.STDOUT, timeout=900)
    assert submitted.returncode == 0, log.read_text()[-4000:]

    storage = object_store.storage(prefix)
    options = storage.delta_options(object_store.credentials)
    ingest = _ingest(f"{storage.uri}/data", options)
    produced = _count_records(config)
    assert sum(r["records"] for r in ingest) == produced > 0  # every record, to the end
    assert len(_delta_rows(f"{storage.uri}/data", options)[tables.BALANCE_METRICS]) > 3
    assert object_store.credentials.secret_access_key not in log.read_text()
    # The executors wrote the operator's state to the checkpoint on S3, signed with the driver's
    # keys: the worker that launched them has none in its environment.
    assert "AWS_SECRET_ACCESS_KEY" not in os.environ
    from pyarrow import fs

    state = storage.arrow_filesystem(object_store.credentials).get_file_info(
        fs.FileSelector(f"{cluster.BUCKET}/{prefix}/checkpoints/job/state", recursive=True))
    assert any(i.type == fs.FileType.File for i in state)


def _count_records(config) -> int:
    from tests.integration.test_job_scenarios import read_all_records

    return sum(len(r) for r in read_all_records(config))
