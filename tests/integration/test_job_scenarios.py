"""The job end to end on scenario groups: real broker, real Spark streaming query, real Delta."""

from __future__ import annotations

from dataclasses import replace

import pytest

from schemas import tables
from streaming.feeds.kafka_io import produce
from tests import stories
from tests.integration.jobs import history, make_config, produce_story, read, run_available_now

pytestmark = pytest.mark.integration

START = 1_700_000_000_000


@pytest.fixture
def scenario_config(kafka_broker, tmp_path, unique_name):
    config = make_config(kafka_broker, tmp_path, unique_name)
    produce_scenario(config)
    return config


def produce_scenario(config):
    """The scenario groups' events (and two refused records) into the config's topics."""
    # The stream's event time runs to 32 s (the eager story's end); the other groups' members keep
    # heartbeating until then, or they would rightly expire.
    coop = stories.cooperative_story() + stories.heartbeats(["c1", "c2"], 12_000, 32_000)
    static = stories.static_bounce_story() + stories.heartbeats(["a2", "b"], 14_000, 32_000)
    for group, story in (("eager", stories.eager_range_story()), ("coop", coop), ("static", static)):
        produce_story(config, stories.to_records(story, group, START))
    # Refused records travel with the rest and must all land in rejected_events.
    produce(config.kafka.bootstrap_servers, config.kafka.membership_topic,
            [("eager", b"{oops"), ("eager", {"schema_version": 1, "event_id": "x", "event_time": START,
                                             "group_id": "eager", "type": "join", "member_id": "m",
                                             "assignor": "fancy"})])


def read_all_records(config):
    """Every record in the test's two topics, read back with a plain consumer."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": config.kafka.bootstrap_servers, "group.id": "count",
                         "enable.auto.commit": False})
    counts = []
    try:
        for topic in (config.kafka.membership_topic, config.kafka.heartbeat_topic):
            partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
            for p in partitions:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                counts.append(range(low, high))
    finally:
        consumer.close()
    return counts


def _gen(rows, group):
    out = {}
    for r in rows:
        if r["group_id"] == group:
            out.setdefault(r["generation"], {})[r["member_id"]] = [p["partition"] for p in r["partitions"]]
    return out


def test_scenario_groups_produce_exactly_the_expected_rows(spark, scenario_config):
    config = scenario_config
    run_available_now(spark, config)

    assignments = read(spark, config, tables.ASSIGNMENTS)
    assert _gen(assignments, "eager") == {
        1: {"a": [0, 1, 2, 3, 4, 5]},
        2: {"a": [0, 1, 2], "b": [3, 4, 5]},
        3: {"a": [0, 1], "b": [2, 3], "c": [4, 5]},
        4: {"a": [0, 1, 2], "c": [3, 4, 5]},
        5: {"a": [0, 1, 2, 3, 4, 5]},
    }
    assert _gen(assignments, "coop") == {1: {"c1": [0, 1, 2]}, 2: {"c1": [0, 1], "c2": []},
                                         3: {"c1": [0, 1], "c2": [2]}}
    assert _gen(assignments, "static") == {1: {"a": [0, 1, 2], "b": [3, 4, 5]}}
    assert len(assignments) == 9 + 5 + 2

    metrics = sorted(read(spark, config, tables.BALANCE_METRICS), key=lambda r: (r["group_id"], r["generation"]))
    assert [(m["group_id"], m["generation"], m["trigger"], m["trigger_member"], m["event_time"] - START,
             m["members"], m["partitions"], m["imbalance"], m["moved"], m["unassigned"], m["phase"],
             m["rebalances_last_hour"]) for m in metrics] == [
        ("coop", 1, "join", "c1", 2_000, 1, 3, 0, 0, 0, "complete", 1),
        ("coop", 2, "join", "c2", 6_000, 2, 2, 2, 1, 1, "revocation", 2),
        ("coop", 3, "cooperative_followup", None, 6_500, 2, 3, 1, 0, 0, "followup", 3),
        ("eager", 1, "join", "a", 2_000, 1, 6, 0, 0, 0, "complete", 1),
        ("eager", 2, "join", "b", 6_000, 2, 6, 0, 3, 0, "complete", 2),
        ("eager", 3, "join", "c", 10_000, 3, 6, 0, 3, 0, "complete", 3),
        ("eager", 4, "leave", "b", 14_000, 2, 6, 0, 2, 0, "complete", 4),
        ("eager", 5, "expiry", "c", 27_500, 1, 6, 0, 3, 0, "complete", 5),
        ("static", 1, "join", "a", 2_000, 2, 6, 0, 0, 0, "complete", 1),
    ]

    revocations = sorted((r["group_id"], r["generation"], r["member_id"], r["partition"], r["to_member"], r["reason"])
                         for r in read(spark, config, tables.REVOCATIONS))
    assert revocations == sorted([
        ("coop", 2, "c1", 2, "c2", "moved"),
        ("eager", 2, "a", 3, "b", "moved"), ("eager", 2, "a", 4, "b", "moved"), ("eager", 2, "a", 5, "b", "moved"),
        ("eager", 3, "a", 2, "b", "moved"), ("eager", 3, "b", 4, "c", "moved"), ("eager", 3, "b", 5, "c", "moved"),
        ("eager", 4, "b", 2, "a", "member_left"), ("eager", 4, "b", 3, "c", "member_left"),
        ("eager", 5, "c", 3, "a", "member_left"), ("eager", 5, "c", 4, "a", "member_left"),
        ("eager", 5, "c", 5, "a", "member_left"),
    ])

    events = sorted((r["group_id"], r["event_time"] - START, r["member_id"], r["event"], r["previous_member_id"])
                    for r in read(spark, config, tables.MEMBER_EVENTS))
    assert events == sorted([
        ("eager", 0, None, "workload_changed", None), ("eager", 1_000, "a", "joined", None),
        ("eager", 5_000, "b", "joined", None), ("eager", 9_000, "c", "joined", None),
        ("eager", 13_000, "b", "left", None), ("eager", 26_500, "c", "expired", None),
        ("coop", 0, None, "workload_changed", None), ("coop", 1_000, "c1", "joined", None),
        ("coop", 5_000, "c2", "joined", None),
        ("static", 0, None, "workload_changed", None), ("static", 1_000, "a", "joined", None),
        ("static", 1_000, "b", "joined", None), ("static", 8_000, "a2", "static_rejoin", "a"),
    ])

    # The client's own words survive: a leave's reason is the member's, an expiry's the monitor's.
    reasons = {(r["group_id"], r["event"]): r["reason"] for r in read(spark, config, tables.MEMBER_EVENTS)}
    assert reasons[("eager", "left")] == "the consumer is being closed"
    assert reasons[("eager", "expired")] == "no heartbeat for 10000 ms"

    rejected = sorted(r["reason"] for r in read(spark, config, tables.REJECTED_EVENTS))
    assert rejected == ["field assignor: unknown value 'fancy' (expected one of range, roundrobin, sticky, "
                        "cooperative-sticky, uniform, server-range, streams-ha, connect-eager, connect-incremental)",
                        "not valid JSON"]

    ingest = read(spark, config, tables.INGEST_METRICS)
    consumed = sum(r["records"] for r in ingest)
    produced = sum(len(r) for r in read_all_records(config))
    assert consumed == produced
    assert sum(r["membership_accepted"] + r["heartbeats_accepted"] + r["rejected"] for r in ingest) == consumed


def test_the_same_topics_in_small_micro_batches_give_the_same_history(spark, scenario_config, tmp_path):
    whole = scenario_config
    run_available_now(spark, whole)
    small = replace(whole, kafka=replace(whole.kafka, max_offsets_per_trigger=25),
                    output=replace(whole.output, root=str(tmp_path / "data-small"),
                                   checkpoint=str(tmp_path / "checkpoint-small")))
    run_available_now(spark, small, timeout_s=600)
    assert len(read(spark, small, tables.INGEST_METRICS)) > len(read(spark, whole, tables.INGEST_METRICS))
    small_history, whole_history = history(spark, small), history(spark, whole)
    for table in whole_history:
        only_small = sorted(set(small_history[table]) - set(whole_history[table]))
        only_whole = sorted(set(whole_history[table]) - set(small_history[table]))
        assert not only_small and not only_whole, f"{table}: only in small batches {only_small[:3]}, only in one batch {only_whole[:3]}"
        assert small_history[table] == whole_history[table]
