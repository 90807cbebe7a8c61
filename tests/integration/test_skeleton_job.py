"""The job end to end: real broker, real Spark streaming query, real Delta tables."""

from __future__ import annotations

import pytest

from schemas import tables
from streaming.config import Config
from streaming.job import start_query
from streaming.kafka_io import ensure_topics, produce

pytestmark = pytest.mark.integration


def _event(i: int, **extra) -> dict:
    event = {"schema_version": 1, "event_id": f"e{i}", "event_time": 1_000 + i, "group_id": "g1",
             "group_type": "consumer", "type": "join", "member_id": f"m{i}", "topics": ["t"],
             "owned_partitions": [], "protocol": "eager", "assignor": "range"}
    event.update(extra)
    return event


@pytest.fixture
def job_config(kafka_broker, tmp_path, unique_name) -> Config:
    config = Config().with_overrides(
        bootstrap_servers=kafka_broker.bootstrap_servers,
        membership_topic=f"membership-{unique_name}", heartbeat_topic=f"heartbeats-{unique_name}",
        output=str(tmp_path / "data"), checkpoint=str(tmp_path / "checkpoint"))
    ensure_topics(config.kafka.bootstrap_servers, [config.kafka.membership_topic, config.kafka.heartbeat_topic],
                  partitions=2)
    return config


def _run_available_now(spark, config: Config) -> None:
    query = start_query(spark, config, available_now=True)
    assert query.awaitTermination(180), "the query did not finish within 180 s"
    assert query.exception() is None


def _read(spark, config: Config, table: str):
    return spark.read.format("delta").load(config.output.table_path(table))


def test_events_land_in_delta_and_bad_records_are_kept_with_a_reason(spark, job_config):
    kafka = job_config.kafka
    produce(kafka.bootstrap_servers, kafka.membership_topic, [("g1", _event(i)) for i in range(3)])
    produce(kafka.bootstrap_servers, kafka.membership_topic, [
        ("g1", b"{not json"),
        ("g1", _event(7, group_id="")),
        ("g1", _event(8, assignor="fancy")),
    ])
    produce(kafka.bootstrap_servers, kafka.heartbeat_topic, [
        ("g1", {"schema_version": 1, "event_id": "h1", "event_time": 5_000, "group_id": "g1", "member_id": "m0"}),
    ])

    _run_available_now(spark, job_config)

    events = _read(spark, job_config, tables.EVENTS)
    rows = {(r.kind, r.event_id, r.member_id) for r in events.collect()}
    assert rows == {("membership", "e0", "m0"), ("membership", "e1", "m1"), ("membership", "e2", "m2"),
                    ("heartbeat", "h1", "m0")}

    rejected = {r.raw_value: r for r in _read(spark, job_config, tables.REJECTED_EVENTS).collect()}
    assert len(rejected) == 3
    assert rejected["{not json"].reason == "not valid JSON"
    assert rejected["{not json"].source_topic == kafka.membership_topic
    assert rejected["{not json"].source_offset is not None
    reasons = sorted(r.reason for r in rejected.values())
    assert "field group_id must not be empty" in reasons
    assert any(r.startswith("field assignor: unknown value 'fancy'") for r in reasons)


def test_a_second_run_over_the_same_checkpoint_writes_nothing_twice(spark, job_config):
    kafka = job_config.kafka
    produce(kafka.bootstrap_servers, kafka.membership_topic, [("g1", _event(i)) for i in range(4)])
    _run_available_now(spark, job_config)
    _run_available_now(spark, job_config)
    assert _read(spark, job_config, tables.EVENTS).count() == 4

    produce(kafka.bootstrap_servers, kafka.membership_topic, [("g1", _event(10)), ("g1", b"[]")])
    _run_available_now(spark, job_config)
    assert _read(spark, job_config, tables.EVENTS).count() == 5
    assert [r.reason for r in _read(spark, job_config, tables.REJECTED_EVENTS).collect()] == ["not a JSON object"]
