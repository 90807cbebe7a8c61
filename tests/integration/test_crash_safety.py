"""Killing the job with SIGKILL mid-batch and restarting it from the checkpoint loses nothing and
duplicates nothing: the tables end identical to an uninterrupted run over the same input."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from schemas import tables
from tests.integration.jobs import history, make_config, read, run_available_now, simulate_into

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
KILLS = 3


def _batches(checkpoint: Path, kind: str) -> int:
    d = checkpoint / kind
    return len([p for p in d.iterdir() if p.name.isdigit()]) if d.exists() else 0


def _write_config(path: Path, config, max_offsets: int) -> Path:
    path.write_text(f"""
[kafka]
bootstrap_servers = "{config.kafka.bootstrap_servers}"
membership_topic = "{config.kafka.membership_topic}"
heartbeat_topic = "{config.kafka.heartbeat_topic}"
max_offsets_per_trigger = {max_offsets}

[output]
root = "{config.output.root}"
checkpoint = "{config.output.checkpoint}"

[job]
trigger_interval = "0 seconds"
""")
    return path


def _start_job(config_file: Path, log: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "streaming.cli.main", "run", "--available-now",
                             "--config", str(config_file)],
                            cwd=REPO, stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True)


def _kill_mid_batch(job: subprocess.Popen, checkpoint: Path, after_commits: int, timeout_s: float = 300) -> int:
    """SIGKILL the job while a batch is in flight (planned, not yet committed) once at least
    ``after_commits`` batches are committed in total; returns the committed count at the kill."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert job.poll() is None, "the job ended before it could be killed: make the input larger"
        committed, planned = _batches(checkpoint, "commits"), _batches(checkpoint, "offsets")
        if committed >= after_commits and planned > committed:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait(30)
            return committed
        time.sleep(0.05)
    os.killpg(job.pid, signal.SIGKILL)
    raise AssertionError(f"no batch in flight after {after_commits} commits within {timeout_s} s")


def test_sigkill_at_several_points_then_restart_gives_the_uninterrupted_history(
        spark, kafka_broker, tmp_path, unique_name):
    crashed = make_config(kafka_broker, tmp_path / "crashed", unique_name)
    simulate_into(crashed, "--groups", "4", "--members", "2-5", "--partitions", "3-8", "--churn-per-minute", "4",
                  "--session-timeout-ms", "10000", "--static-share", "0.3", "--cooperative-share", "0.5",
                  "--crash-share", "0.5", "--bad-share", "0.01", "--duration", "150",
                  "--start-time-ms", "1700000000000", "--seed", "7")

    config_file = _write_config(tmp_path / "job.toml", crashed, max_offsets=60)
    checkpoint = Path(crashed.output.checkpoint_path)
    log = tmp_path / "job.log"
    kills = []
    for k in range(KILLS):
        job = _start_job(config_file, log)
        kills.append(_kill_mid_batch(job, checkpoint, after_commits=(k + 1) * 3))
    assert kills == sorted(kills) and len(set(kills)) == KILLS, kills
    final = _start_job(config_file, log)
    assert final.wait(600) == 0, log.read_text()[-3000:]

    # The same topics, read by an uninterrupted job in large batches.
    uninterrupted = make_config(kafka_broker, tmp_path / "uninterrupted", unique_name)
    run_available_now(spark, uninterrupted)

    crashed_history, clean_history = history(spark, crashed), history(spark, uninterrupted)
    assert len(clean_history[tables.BALANCE_METRICS]) > 10  # the input really rebalanced
    assert len(clean_history[tables.REJECTED_EVENTS]) > 0
    for table in clean_history:
        extra = sorted(set(crashed_history[table]) - set(clean_history[table]))
        missing = sorted(set(clean_history[table]) - set(crashed_history[table]))
        assert not extra and not missing, f"{table} after {KILLS} kills: extra {extra[:2]}, missing {missing[:2]}"
        assert crashed_history[table] == clean_history[table], f"{table}: duplicated rows after {KILLS} kills"
    # No batch was written twice: every table's rows are distinct events, and ingest counts add up.
    ingest = read(spark, crashed, tables.INGEST_METRICS)
    assert len({r["batch_id"] for r in ingest}) == len(ingest)
    assert sum(r["records"] for r in ingest) == sum(r["records"] for r in read(spark, uninterrupted,
                                                                                  tables.INGEST_METRICS))
