"""The collector against a real broker: real consumer groups (classic ``range`` and KIP-848) are
observed through AdminClient, and what lands in the monitor's topics is their real membership."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from streaming.feeds.collector import HEARTBEAT, LEAVE_REASON, MEMBERSHIP, CollectorSettings
from streaming.cli.collect import (
    RENEW_CLIENT_AFTER_FAILURES, CollectOptions, CollectorRunner, admin_client, read_snapshot,
)
from streaming.feeds.kafka_io import ensure_topics
from tests.conftest import free_port

pytestmark = pytest.mark.integration


def _options(bootstrap: str, group: str, suffix: str, source: str | None = None, timeout_s: float = 10.0):
    return CollectOptions(
        source={"bootstrap.servers": source or bootstrap}, monitor_bootstrap_servers=bootstrap,
        monitor_options={}, membership_topic=f"col-membership-{suffix}", heartbeat_topic=f"col-heartbeats-{suffix}",
        group_pattern=re.compile(re.escape(group)), interval_s=5.0, timeout_s=timeout_s)


def _topic_id_written_by_the_broker(broker_directory: Path, topic: str) -> str:
    metadata = (broker_directory / "data" / f"{topic}-0" / "partition.metadata").read_text()
    return re.search(r"^topic_id: (\S+)$", metadata, re.M).group(1)


def _consumer(bootstrap: str, group: str, topic: str, **extra) -> Consumer:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "log_level": 3, **extra})
    c.subscribe([topic])
    return c


def _poll_until(consumers, done, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for c in consumers:
            c.poll(0.2)
        if done():
            return
    raise AssertionError("the group did not settle in time")


def _owned(value) -> set[tuple[str, int]]:
    return {(p["topic"], p["partition"]) for p in value.get("owned_partitions") or ()}


def _assignment(c: Consumer) -> set[tuple[str, int]]:
    return {(tp.topic, tp.partition) for tp in c.assignment()}


def _read(bootstrap: str, topic: str, expected: int, timeout_s: float = 30.0) -> list:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}", "enable.auto.commit": False,
                  "log_level": 3})
    try:
        partitions = c.list_topics(topic, timeout=10).topics[topic].partitions
        c.assign([TopicPartition(topic, p, 0) for p in partitions])
        out, deadline = [], time.monotonic() + timeout_s
        while len(out) < expected and time.monotonic() < deadline:
            out += [m for m in c.consume(100, timeout=0.5) if m.error() is None]
        return out
    finally:
        c.close()


def test_a_range_group_is_observed_joining_and_losing_a_member(kafka_broker, unique_name):
    bootstrap = kafka_broker.bootstrap_servers
    topic, group = f"col-orders-{unique_name}", f"col-range-{unique_name}"
    ensure_topics(bootstrap, [topic], partitions=6)
    options = _options(bootstrap, group, unique_name)
    ensure_topics(bootstrap, [options.membership_topic, options.heartbeat_topic])
    consumers = [_consumer(bootstrap, group, topic, **{"partition.assignment.strategy": "range",
                                                        "client.id": f"c{i}-{unique_name}"}) for i in range(2)]
    try:
        _poll_until(consumers, lambda: all(len(_assignment(c)) == 3 for c in consumers))
        runner = CollectorRunner(options, CollectorSettings.for_interval(5.0))
        first = runner.step()
        assert first.ok, first.error

        joins = {e.value["member_id"]: e.value for e in first.events
                 if e.kind == MEMBERSHIP and e.value["type"] == "join"}
        assert set(joins) == {c.memberid() for c in consumers}
        for c in consumers:
            join = joins[c.memberid()]
            assert _owned(join) == _assignment(c)  # the real assignment, as the coordinator has it
            assert (join["assignor"], join["protocol"], join["group_type"]) == ("range", "eager", "consumer")
            assert join["group_protocol"] == "classic" and join["topics"] == [topic]
            assert join["client_id"].startswith(("c0-", "c1-"))
        [workload] = [e.value for e in first.events if e.kind == MEMBERSHIP and e.value["type"] == "workload"]
        # The topic id as Kafka itself spells it: the broker writes it beside each partition's log.
        kafka_topic_id = _topic_id_written_by_the_broker(kafka_broker.directory, topic)
        assert workload["workload"]["topics"] == [
            {"name": topic, "partitions": 6, "racks": None, "topic_id": kafka_topic_id}]
        assert sorted(e.value["member_id"] for e in first.events if e.kind == HEARTBEAT) == \
            sorted(c.memberid() for c in consumers)

        # What the job will read: the same events, keyed by the group id.
        produced = _read(bootstrap, options.membership_topic, expected=3)
        assert sorted(json.loads(m.value())["event_id"] for m in produced) == \
            sorted(e.value["event_id"] for e in first.events if e.kind == MEMBERSHIP)
        assert {m.key().decode() for m in produced} == {group}

        gone, survivor = consumers
        gone_id = gone.memberid()
        gone.close()
        consumers = [survivor]
        admin = admin_client(options.source)

        def settled() -> bool:
            if len(_assignment(survivor)) != 6:
                return False
            g = read_snapshot(admin, 0, options.group_pattern, 10).groups.get(group)
            return g is not None and g.state == "STABLE" and len(g.members) == 1 and len(g.members[0].assignment) == 6

        _poll_until(consumers, settled)
        second = runner.step()
        assert second.ok, second.error
        membership = [e.value for e in second.events if e.kind == MEMBERSHIP]
        assert [(v["type"], v["member_id"]) for v in membership] == [("leave", gone_id), ("update", survivor.memberid())]
        assert membership[0]["reason"] == LEAVE_REASON
        assert _owned(membership[1]) == {(topic, p) for p in range(6)} == _assignment(survivor)
        assert [e.value["member_id"] for e in second.events if e.kind == HEARTBEAT] == [survivor.memberid()]
        assert all(e.value["event_time"] == second.time_ms > first.time_ms for e in second.events)
    finally:
        for c in consumers:
            c.close()


def test_the_collector_keeps_one_producer_and_one_admin_client_for_its_lifetime(
        kafka_broker, unique_name, monkeypatch):
    """Polls every second for days: opening clients per poll cost it connections, metadata round
    trips and producer ids, and it could not keep up with short intervals."""
    import confluent_kafka

    import streaming.cli.collect as collect_module

    bootstrap = kafka_broker.bootstrap_servers
    topic, group = f"col-life-{unique_name}", f"col-life-{unique_name}"
    ensure_topics(bootstrap, [topic], partitions=2)
    options = _options(bootstrap, group, unique_name)
    ensure_topics(bootstrap, [options.membership_topic, options.heartbeat_topic])
    created = {"producers": 0, "admins": 0}
    real_producer, real_admin = confluent_kafka.Producer, collect_module.admin_client

    def counting_producer(*args, **kwargs):
        created["producers"] += 1
        return real_producer(*args, **kwargs)

    def counting_admin(*args, **kwargs):
        created["admins"] += 1
        return real_admin(*args, **kwargs)

    monkeypatch.setattr(confluent_kafka, "Producer", counting_producer)
    monkeypatch.setattr(collect_module, "admin_client", counting_admin)
    consumer = _consumer(bootstrap, group, topic, **{"client.id": f"life-{unique_name}"})
    try:
        _poll_until([consumer], lambda: len(_assignment(consumer)) == 2)
        runner = CollectorRunner(options, CollectorSettings.for_interval(1.0))
        results = [runner.step() for _ in range(6)]
        runner.close()
    finally:
        consumer.close()
    assert all(r.ok for r in results), [r.error for r in results]
    # Every poll produced (a heartbeat at least), all through the one producer.
    assert all(any(e.kind == HEARTBEAT for e in r.events) for r in results)
    assert created == {"producers": 1, "admins": 1}
    assert len(_read(bootstrap, options.heartbeat_topic, expected=6)) >= 6


def test_a_kip848_group_is_observed_with_its_type_and_the_cli_runs_once(kafka_broker, unique_name):
    bootstrap = kafka_broker.bootstrap_servers
    topic, group = f"col-kip848-{unique_name}", f"col-consumer-{unique_name}"
    ensure_topics(bootstrap, [topic], partitions=6)
    options = _options(bootstrap, group, unique_name)
    consumer = _consumer(bootstrap, group, topic, **{"group.protocol": "consumer"})
    try:
        _poll_until([consumer], lambda: len(_assignment(consumer)) == 6)
        script = Path(sys.executable).with_name("rebalance-monitor")
        cli = [str(script)] if script.exists() else [sys.executable, "-m", "streaming.cli.main"]
        out = subprocess.run([*cli, "collect", "--bootstrap-servers", bootstrap, "--groups", re.escape(group),
                              "--membership-topic", options.membership_topic,
                              "--heartbeat-topic", options.heartbeat_topic, "--once"],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert "workload 1, join 1, heartbeat 1" in out.stdout

        [join] = [json.loads(m.value()) for m in _read(bootstrap, options.membership_topic, expected=2)
                  if json.loads(m.value())["type"] == "join"]
        assert join["member_id"] == consumer.memberid()
        assert (join["group_protocol"], join["protocol"], join["group_type"]) == ("consumer", "cooperative", "consumer")
        assert join["assignor"] in ("uniform", "server-range")  # the broker's default is uniform
        assert _owned(join) == _assignment(consumer)
        assert {(p["topic"], p["partition"]) for p in join["target_partitions"]} == _assignment(consumer)
        [heartbeat] = [json.loads(m.value()) for m in _read(bootstrap, options.heartbeat_topic, expected=1)]
        assert heartbeat["member_id"] == consumer.memberid() and heartbeat["event_time"] == join["event_time"]
    finally:
        consumer.close()


def test_an_unreachable_cluster_is_a_failed_poll_that_produces_nothing(kafka_broker, unique_name):
    options = _options(kafka_broker.bootstrap_servers, "anything", unique_name,
                       source=f"127.0.0.1:{free_port()}", timeout_s=2.0)
    ensure_topics(kafka_broker.bootstrap_servers, [options.membership_topic, options.heartbeat_topic])
    runner = CollectorRunner(options)
    first_client = runner.admin
    result = runner.step()
    assert not result.ok and result.events == [] and "ListGroups" in result.error
    assert runner.collector.failed_polls == 1
    # After a few failures in a row the collector tries with a new client.
    results = [runner.step() for _ in range(RENEW_CLIENT_AFTER_FAILURES - 1)]
    assert not any(r.ok for r in results) and runner.admin is not first_client
    assert _read(kafka_broker.bootstrap_servers, options.membership_topic, expected=1, timeout_s=3) == []


def test_a_restarted_collector_resumes_from_its_own_events_and_leaves_who_went_meanwhile(kafka_broker, unique_name):
    from tests.integration.real_groups import RealGroup

    bootstrap = kafka_broker.bootstrap_servers
    topic, group_id = f"col-resume-{unique_name}", f"col-resume-{unique_name}"
    ensure_topics(bootstrap, [topic], partitions=6)
    options = _options(bootstrap, group_id, unique_name)
    ensure_topics(bootstrap, [options.membership_topic, options.heartbeat_topic])
    group = RealGroup(bootstrap, group_id, {topic: 6}, strategy="range")
    try:
        group.join(3)
        before = group.settle()
        first = CollectorRunner(options)
        assert first.step().ok
        # The collector goes away; meanwhile a member leaves the real group.
        gone = group.consumers[0]
        gone_id = gone.member_id
        group.leave([gone])
        after = group.settle()

        restarted = CollectorRunner(options)
        assert restarted.resume() == 3
        assert restarted.last_time_ms >= first.last_time_ms
        result = restarted.step()
        assert result.ok and result.time_ms > first.last_time_ms
        membership = [e.value for e in result.events if e.kind == MEMBERSHIP]
        assert [(v["type"], v["member_id"]) for v in membership] == \
            [("leave", gone_id)] + [("update", m) for m in after.members]
        assert all(v["reason"] == "assignment changed" for v in membership[1:])
        assert set(after.members) == set(before.members) - {gone_id}
    finally:
        group.close()
