"""The long-running job: it keeps processing new events and shuts down cleanly on SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from schemas import tables
from tests import stories
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
