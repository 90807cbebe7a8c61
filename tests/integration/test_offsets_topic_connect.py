"""Issue 17: Kafka Connect clusters recorded by the job from the coordinator's log, end to end.

A copy of the log stands in for ``__consumer_offsets``: the real records two Kafka Connect 4.1.1
clusters' coordinator wrote (the decoder's captured fixture: eager and ``sessioned``, two workers,
connectors of 3 and 2 tasks, the second worker joining then leaving), produced at their own times
(shifted to end a minute ago, spacing kept: the 8 s delay round depends on it). The real job reads
it (Spark's Kafka source, real Delta tables) and the tables are compared with Kafka's own decoding
of the same records.
"""

from __future__ import annotations

import time

import pytest

from schemas import tables
from streaming.coordinator_log import decode
from streaming.feeds.kafka_io import ensure_topics
from tests.coordinator_log.fixture import load
from tests.integration.jobs import run_available_now
from tests.integration.test_offsets_topic_source import _config, _describe_topics
from tests.streaming.test_coordinator_connect import EAGER, MAX_DELAY_MS, SESSIONED, _kafkas_holdings

pytestmark = pytest.mark.integration


def _produce_at_their_times(bootstrap: str, topic: str, records: list[dict]) -> dict[str, dict[int, int]]:
    """Produce the records, each at its value's currentStateTimestamp shifted so that the newest is
    a minute old; group -> generation -> the timestamp it got."""
    from confluent_kafka import Producer

    stamps = [decode(r["key"], r["value"]).value.current_state_timestamp for r in records]
    shift = int(time.time() * 1000) - 60_000 - max(stamps)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    produced: dict[str, dict[int, int]] = {}
    for r, stamp in zip(records, stamps):
        producer.produce(topic, key=r["key"], value=r["value"], timestamp=stamp + shift)
        record = decode(r["key"], r["value"])
        produced.setdefault(record.group_id, {})[record.value.generation] = stamp + shift
    assert producer.flush(60) == 0
    return produced


def _delta_rows(config, table: str) -> list[dict]:
    """The table's rows, read with delta-rs ([] if nothing was written to it): a Spark read of each
    table (tests.integration.jobs.read) would double the test's time for the same rows."""
    from deltalake import DeltaTable

    path = config.output.table_path(table)
    return DeltaTable(path).to_pyarrow_table().to_pylist() if DeltaTable.is_deltatable(path) else []


def test_connect_clusters_every_generation_its_workers_and_the_checks(kafka_broker, spark, tmp_path, unique_name):
    bootstrap = kafka_broker.bootstrap_servers
    copy = f"offsets-copy-{unique_name}"
    ensure_topics(bootstrap, [copy], partitions=1)  # a group's records share a partition, as in the log
    config = _config(kafka_broker, tmp_path, unique_name, topic=copy)
    records = [r for r in load() if r["source"] in (f"captured: {EAGER}", f"captured: {SESSIONED}")]
    produced = _produce_at_their_times(bootstrap, copy, records)
    _describe_topics(spark, config)
    run_available_now(spark, config)

    written = {table: _delta_rows(config, table) for table in (
        tables.BALANCE_METRICS, tables.ASSIGNMENTS, tables.ASSIGNMENT_CHECKS, tables.REVOCATIONS)}

    def rows(table: str, group_id: str) -> list[dict]:
        return sorted((r for r in written[table] if r["group_id"] == group_id),
                      key=lambda r: (r["generation"], r.get("member_id") or "", r.get("unit_id") or ""))

    assert [r for r in _delta_rows(config, tables.REJECTED_EVENTS) if r["source_topic"] == copy] == []
    for group_id, assignor in ((EAGER, "connect-eager"), (SESSIONED, "connect-incremental")):
        expected = _kafkas_holdings(group_id)
        metrics = {m["generation"]: m for m in rows(tables.BALANCE_METRICS, group_id)}
        # Every generation the coordinator wrote, at its record's time; the last one Empty.
        assert {g: m["event_time"] for g, m in metrics.items()} == {g: t for g, t in produced[group_id].items() if g}
        assert sorted(metrics) == sorted(expected) + [max(expected) + 1]
        assert {(m["group_type"], m["unit"], m["assignor"]) for m in metrics.values()} == {
            ("connect", "task", assignor)}
        held: dict[int, dict] = {}
        for a in rows(tables.ASSIGNMENTS, group_id):
            held.setdefault(a["generation"], {})[a["member_id"]] = (set(a["connectors"]), set(a["tasks"]))
        assert held == expected
        checks = rows(tables.ASSIGNMENT_CHECKS, group_id)
        assert [c["generation"] for c in checks] == sorted(expected)
        assert all(c["agrees"] and c["differing_units"] == [] and c["partitions_compared"] == 0 for c in checks), checks
        assert [c["units_compared"] for c in checks] == [
            sum(len(cs) + len(ts) for cs, ts in expected[g].values()) for g in sorted(expected)]

    metrics = {m["generation"]: m for m in rows(tables.BALANCE_METRICS, SESSIONED)}
    assert [(g, metrics[g]["trigger"], metrics[g]["phase"]) for g in (6, 7, 8, 9)] == [
        (6, "join", "revocation"), (7, "cooperative_followup", "followup"), (8, "leave", "complete"),
        (9, "scheduled_rebalance", "complete")]
    assert (metrics[8]["lost_pending"], metrics[8]["delay_ms"], metrics[8]["scheduled_rebalance_at"]) == (
        3, MAX_DELAY_MS, metrics[8]["event_time"] + MAX_DELAY_MS)
    revocations = rows(tables.REVOCATIONS, SESSIONED)
    assert [(r["generation"], r["unit"], r["reason"], r["to_member"]) for r in revocations if r["generation"] == 6] == [
        (6, "connector", "balance", None), (6, "task", "balance", None), (6, "task", "balance", None)]
