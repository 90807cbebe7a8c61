"""``rebalance-monitor simulate`` against a real broker: what lands in the topics is exactly what the
seeded simulator generates for the same flags, keyed by group id, in order per group."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from streaming.feeds.simulator import HEARTBEAT, MEMBERSHIP, SimulationConfig, simulate

pytestmark = pytest.mark.integration

START_MS = 1_767_225_600_000


def _cli() -> list[str]:
    script = Path(sys.executable).with_name("rebalance-monitor")  # the installed entry point
    return [str(script)] if script.exists() else [sys.executable, "-m", "streaming.cli.main"]


def _read_all(bootstrap: str, topics: list[str], expected: int, timeout_s: float = 90.0) -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topics[0]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        metadata = consumer.list_topics(timeout=30)
        consumer.assign([TopicPartition(t, p, 0) for t in topics for p in metadata.topics[t].partitions])
        messages, deadline = [], time.monotonic() + timeout_s
        while len(messages) < expected and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=10_000, timeout=1.0):
                assert msg.error() is None, msg.error()
                messages.append(msg)
        # Anything beyond the expected count would be a duplicate or a stray: give it a moment to show.
        messages += [m for m in consumer.consume(num_messages=10_000, timeout=2.0) if m.error() is None]
        return messages
    finally:
        consumer.close()


def _simulate(bootstrap: str, topics: tuple[str, str], *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([*_cli(), "simulate", "--bootstrap-servers", bootstrap, "--membership-topic", topics[0],
                           "--heartbeat-topic", topics[1], *flags],
                          capture_output=True, text=True, timeout=180)


def test_simulate_produces_exactly_the_seeded_records_keyed_by_group(kafka_broker, unique_name):
    topics = (f"sim-membership-{unique_name}", f"sim-heartbeats-{unique_name}")
    flags = ["--groups", "3", "--members", "2-3", "--churn-per-minute", "6", "--static-share", "0.5",
             "--crash-share", "0.34", "--bad-share", "0.05", "--duration", "90", "--seed", "7",
             "--start-time-ms", str(START_MS), "--rate", "5000"]
    done = _simulate(kafka_broker.bootstrap_servers, topics, *flags)
    assert done.returncode == 0, done.stderr

    config = SimulationConfig(groups=3, members=(2, 3), churn_per_minute=6, static_share=0.5, crash_share=0.34,
                              bad_share=0.05, seed=7, start_time_ms=START_MS)
    expected = list(simulate(config, end_time_ms=START_MS + 90_000))
    topic_of = {MEMBERSHIP: topics[0], HEARTBEAT: topics[1]}
    want = Counter((topic_of[r.topic_kind], r.key, r.value) for r in expected)
    assert any(r.bad == "oversized" for r in expected), "the run should push an oversized record through"

    messages = _read_all(kafka_broker.bootstrap_servers, list(topics), len(expected))
    got = Counter((m.topic(), m.key().decode(), m.value()) for m in messages)
    assert sum(got.values()) == len(expected)
    assert Counter(t for t, _, _ in got.elements()) == Counter(t for t, _, _ in want.elements())
    assert got == want

    per_group = defaultdict(list)
    for m in messages:
        try:
            event = json.loads(m.value())
        except ValueError:
            continue  # the malformed bad records
        if isinstance(event.get("group_id"), str):
            assert m.key().decode() == event["group_id"]
        if isinstance(event.get("event_time"), int):
            per_group[(m.topic(), m.partition(), event.get("group_id"))].append(event["event_time"])
    # A group's records sit in one partition per topic, in event-time order.
    assert per_group and all(times == sorted(times) for times in per_group.values())

    summary = done.stdout
    assert f"membership records: {sum(1 for r in expected if r.topic_kind == MEMBERSHIP)} to {topics[0]}" in summary
    assert f"heartbeat records: {sum(1 for r in expected if r.topic_kind == HEARTBEAT)} to {topics[1]}" in summary
    assert f"bad records (included above): {sum(1 for r in expected if r.bad)} " in summary
    assert re.search(r"produced \d+ records in [\d.]+ s: [\d,]+ records/s \(target 5,000/s\)", summary), summary


def test_simulate_stops_after_exactly_the_requested_number_of_events(kafka_broker, unique_name):
    topics = (f"sim-events-m-{unique_name}", f"sim-events-h-{unique_name}")
    done = _simulate(kafka_broker.bootstrap_servers, topics, "--groups", "200", "--members", "5",
                     "--heartbeat-interval-ms", "1000", "--events", "20000", "--rate", "0", "--seed", "1")
    assert done.returncode == 0, done.stderr
    rate = re.search(r"produced 20000 records in [\d.]+ s: ([\d,]+) records/s \(target unlimited\)", done.stdout)
    assert rate, done.stdout
    messages = _read_all(kafka_broker.bootstrap_servers, list(topics), 20_000)
    assert len(messages) == 20_000
    assert Counter(m.topic() for m in messages)[topics[1]] > 15_000  # heartbeats are the bulk
    assert all(m.key().decode() == json.loads(m.value())["group_id"] for m in messages)


def test_simulate_refuses_one_topic_for_both_kinds_by_name(kafka_broker, unique_name):
    topics = (f"sim-same-{unique_name}", f"sim-same-{unique_name}")
    done = _simulate(kafka_broker.bootstrap_servers, topics, "--events", "10")
    assert done.returncode == 2
    assert "--membership-topic and --heartbeat-topic must differ" in done.stderr
    assert "Traceback" not in done.stderr
