"""The long-running job: it keeps processing new events and shuts down cleanly on SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from schemas import tables
from tests import stories
from tests.conftest import free_port
from tests.integration.jobs import make_config, produce_story, read

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def test_running_job_processes_new_events_and_stops_cleanly_on_sigterm(spark, kafka_broker, tmp_path, unique_name):
    config = make_config(kafka_broker, tmp_path, unique_name)
    job = subprocess.Popen(
        [sys.executable, "-m", "streaming.cli.main", "run", "--bootstrap-servers", config.kafka.bootstrap_servers,
         "--membership-topic", config.kafka.membership_topic, "--heartbeat-topic", config.kafka.heartbeat_topic,
         "--output", config.output.root, "--checkpoint", config.output.checkpoint],
        cwd=REPO, stdout=(tmp_path / "job.log").open("wb"), stderr=subprocess.STDOUT)
    try:
        # Events produced while the job is already running reach the tables.
        produce_story(config, stories.to_records(stories.eager_range_story(), "live", 1_700_000_000_000))
        deadline = time.monotonic() + 240
        rows = []
        while time.monotonic() < deadline and len(rows) < 5:
            time.sleep(2)
            rows = read(spark, config, tables.BALANCE_METRICS)
        assert [r["generation"] for r in sorted(rows, key=lambda r: r["generation"])] == [1, 2, 3, 4, 5]

        job.send_signal(signal.SIGTERM)
        assert job.wait(120) == 0, (tmp_path / "job.log").read_text()[-2000:]
    finally:
        if job.poll() is None:
            job.kill()
    # Whatever it wrote before it stopped is complete: a restart has nothing left to redo.
    commits = sorted(int(p.name) for p in (Path(config.output.checkpoint_path) / "commits").iterdir() if p.name.isdigit())
    offsets = sorted(int(p.name) for p in (Path(config.output.checkpoint_path) / "offsets").iterdir() if p.name.isdigit())
    assert commits and commits[-1] == offsets[-1]


def test_run_refuses_a_checkpoint_an_older_version_wrote_and_says_what_to_do(kafka_broker, tmp_path, unique_name):
    config = make_config(kafka_broker, tmp_path, unique_name)
    offsets = Path(config.output.checkpoint_path) / "offsets"
    offsets.mkdir(parents=True)
    (offsets / "0").write_text("v1\n")  # Spark's files, but no rebalance-monitor stamp
    done = subprocess.run(
        [sys.executable, "-m", "streaming.cli.main", "run", "--available-now",
         "--bootstrap-servers", config.kafka.bootstrap_servers, "--membership-topic", config.kafka.membership_topic,
         "--heartbeat-topic", config.kafka.heartbeat_topic, "--output", config.output.root,
         "--checkpoint", config.output.checkpoint],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "older rebalance-monitor" in done.stderr and "new --checkpoint" in done.stderr
    assert not (Path(config.output.root) / tables.ASSIGNMENTS).exists()


def _run_command(config, *extra: str) -> list[str]:
    return [sys.executable, "-m", "streaming.cli.main", "run", "--bootstrap-servers", config.kafka.bootstrap_servers,
            "--membership-topic", config.kafka.membership_topic, "--heartbeat-topic", config.kafka.heartbeat_topic,
            "--output", config.output.root, "--checkpoint", config.output.checkpoint, *extra]


def _topics_exist(bootstrap: str, topics: list[str], timeout_s: float) -> bool:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if set(topics) <= set(admin.list_topics(timeout=10).topics):
            return True
        time.sleep(1)
    return False


def test_run_creates_its_missing_topics_refuses_a_second_job_and_stops_on_a_group_sigterm(
        spark, kafka_broker, tmp_path, unique_name):
    """The README's order (start a broker, then run) on a cluster without the topics; a second job
    on the same checkpoint; then SIGTERM to the whole process group, as systemd and timeout do."""
    from dataclasses import replace

    from streaming.config import Config

    config = Config().with_overrides(
        bootstrap_servers=kafka_broker.bootstrap_servers, membership_topic=f"fresh-m-{unique_name}",
        heartbeat_topic=f"fresh-h-{unique_name}", output=str(tmp_path / "data"),
        checkpoint=str(tmp_path / "checkpoint"))
    topics = [config.kafka.membership_topic, config.kafka.heartbeat_topic]
    log_path = tmp_path / "job.log"
    metrics_port = free_port()
    toml = tmp_path / "job.toml"
    toml.write_text(f"[metrics]\nport = {metrics_port}\n")
    # Its own process group, so that the signal below reaches it (and everything it started) only.
    job = subprocess.Popen(_run_command(config, "--config", str(toml)), cwd=REPO, stdout=log_path.open("wb"),
                           stderr=subprocess.STDOUT, start_new_session=True)
    try:
        assert _topics_exist(config.kafka.bootstrap_servers, topics, 240), log_path.read_text()[-2000:]
        produce_story(config, stories.to_records(stories.eager_range_story(), "fresh", 1_700_000_000_000))
        deadline = time.monotonic() + 240
        rows = []
        while time.monotonic() < deadline and len(rows) < 5:
            time.sleep(2)
            rows = read(spark, replace(config), tables.BALANCE_METRICS)
        assert len(rows) == 5, log_path.read_text()[-2000:]
        # The job says what each batch did, and serves its metrics.
        assert " batch " in log_path.read_text() and " generations; " in log_path.read_text()
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as response:
            metrics = response.read().decode()
        assert 'rebalance_monitor_rebalance_total{group_id="fresh"} 5.0' in metrics
        assert "rebalance_monitor_batches_total" in metrics

        second = subprocess.run(_run_command(config), cwd=REPO, capture_output=True, text=True, timeout=60)
        assert second.returncode == 2, second.stderr[-2000:]
        assert f"checkpoint {config.output.checkpoint_path} is in use by another rebalance-monitor job (pid " \
               f"{job.pid}" in second.stderr
        assert len(second.stderr.strip().splitlines()) == 1, second.stderr  # one line, no trace

        os.killpg(job.pid, signal.SIGTERM)
        assert job.wait(120) == 0, log_path.read_text()[-3000:]
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
    output = log_path.read_text()
    assert "Traceback" not in output and "Py4J" not in output, output[-3000:]
    assert "SIGTERM: stopping after the current micro-batch" in output
    # Quiet otherwise: no pyspark worker prints, no blank lines, no Spark warning about AQE.
    assert "Python worker" not in output and "Disabling AQE" not in output, output[-3000:]
    assert "" not in output.splitlines(), output[-3000:]


def test_run_against_a_broker_that_does_not_answer_fails_in_seconds_naming_it(tmp_path, unique_name):
    from streaming.config import Config

    config = Config().with_overrides(bootstrap_servers="127.0.0.1:1", output=str(tmp_path / "data"),
                                     checkpoint=str(tmp_path / "checkpoint"))
    started = time.monotonic()
    done = subprocess.run(_run_command(config), cwd=REPO, capture_output=True, text=True, timeout=600)
    took = time.monotonic() - started
    assert done.returncode == 2, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if "error" in line.lower()]
    assert errors == ["rebalance-monitor run: error: no Kafka broker answered at 127.0.0.1:1 within 15 s "
                      "(127.0.0.1:1: Connection refused): check kafka.bootstrap_servers and that the cluster is up"], done.stderr[-3000:]
    assert took < 30  # the configured 15 s and the interpreter's start, not Spark's
    assert "Traceback" not in done.stderr and "at org.apache" not in done.stderr
    assert not Path(config.output.checkpoint_path).exists()  # nothing left behind
    print(f"failed after {took:.0f} s (Spark's start-up included)")


def test_the_printed_spark_submit_line_runs_as_printed_from_another_directory(spark, kafka_broker, tmp_path,
                                                                              unique_name):
    config = make_config(kafka_broker, tmp_path, unique_name)
    produce_story(config, stories.to_records(stories.eager_range_story(), "submitted", 1_700_000_000_000))
    printed = subprocess.run(_run_command(config, "--available-now", "--print-spark-submit"), cwd=REPO,
                             capture_output=True, text=True, timeout=120)
    assert printed.returncode == 0, printed.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # A login shell's environment, not this virtualenv's: no SPARK_HOME, no PYSPARK_PYTHON, no PATH entry.
    done = subprocess.run(["bash", "-c", printed.stdout.strip()], cwd=elsewhere, capture_output=True, text=True,
                          timeout=900, env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr[-3000:]
    rows = read(spark, config, tables.BALANCE_METRICS)
    assert sorted(r["generation"] for r in rows) == [1, 2, 3, 4, 5]
    # Quiet: the job's own lines (start, one per batch, stop), not Spark's INFO log, and no error.
    lines = (done.stdout + done.stderr).splitlines()
    assert any(" batch 0: read " in line for line in lines), lines[-20:]
    assert len(lines) < 40, "\n".join(lines[:80])
    assert not any(" INFO " in line and "rebalance_monitor" not in line for line in lines), "\n".join(lines[:80])
    assert not any(" ERROR " in line or "Traceback" in line for line in lines), "\n".join(lines[:80])
