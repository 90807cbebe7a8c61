"""The per-batch progress line and the Prometheus metrics, from Spark's progress JSON and the rows
the sink wrote (no Spark here: the inputs are what Spark and the sink hand over)."""

from __future__ import annotations

import json

import pyarrow as pa
from prometheus_client import generate_latest

from schemas import tables
from schemas.arrow import table_arrow_schema
from streaming.job.metrics import JobMetrics
from streaming.job.progress import BatchAccounts, batch_progress, progress_line

PROGRESS = {
    "name": "rebalance-monitor", "batchId": 12, "batchDuration": 1420, "inputRowsPerSecond": 2500.0,
    "processedRowsPerSecond": 3521.1,
    "sources": [
        {"description": "KafkaV2[Subscribe[rebalance.membership]]", "numInputRows": 12,
         "endOffset": json.dumps({"rebalance.membership": {"0": 40, "1": 32}}),
         "latestOffset": json.dumps({"rebalance.membership": {"0": 40, "1": 32}})},
        {"description": "KafkaV2[Subscribe[rebalance.heartbeats]]", "numInputRows": 4988,
         "endOffset": json.dumps({"rebalance.heartbeats": {"0": 5000, "1": 4000}}),
         "latestOffset": json.dumps({"rebalance.heartbeats": {"0": 5100, "1": 4000}})},
    ],
}


def _table(name: str, rows: list[dict]) -> pa.Table:
    schema = table_arrow_schema(name)
    return pa.Table.from_pylist([{f: r.get(f) for f in schema.names} for r in rows], schema=schema)


def _written():
    ingest = _table(tables.INGEST_METRICS, [{"batch_id": 12, "records": 5000, "membership_accepted": 12,
                                              "heartbeats_accepted": 4986, "late": 3, "rejected": 2,
                                              "unknown_member_heartbeats": 0, "groups": 37,
                                              "max_event_time": 1_000, "event_time_lag_ms": 1_300}])
    balance = _table(tables.BALANCE_METRICS, [
        {"group_id": g, "generation": gen, "event_time": 1_000 + gen, "rebalances_last_hour": gen, "members": 3,
         "partitions": 12, "imbalance": 1} for g, gen in (("orders", 4), ("orders", 5), ("batch-1", 1))])
    alerts = _table(tables.ALERTS, [{"group_id": "orders", "status": "firing", "rule": "imbalance"}])
    return {tables.INGEST_METRICS: ingest, tables.BALANCE_METRICS: balance, tables.ALERTS: alerts}


def test_the_progress_line_says_what_each_topic_gave_what_became_of_it_and_how_far_behind_the_job_is():
    accounts = BatchAccounts()
    accounts.record(12, _written())
    p = batch_progress(PROGRESS, accounts.take(12))
    assert progress_line(p) == (
        "batch 12: read 5,000 (rebalance.heartbeats 4,988, rebalance.membership 12); accepted 4,998, rejected 2, "
        "late 3; 37 groups, 3 generations; 1.42 s; lag 100 records, 1.3 s of event time")
    assert p.lag_by_topic == {"rebalance.membership": 0, "rebalance.heartbeats": 100}
    assert accounts.take(12) == {}  # reported once


def test_metrics_carry_the_job_health_and_kafka_named_group_series_within_the_group_cap():
    metrics = JobMetrics(group_patterns=["orders", "batch-*"], max_groups=1)
    accounts = BatchAccounts()
    accounts.record(12, _written(), metrics)
    metrics.on_progress(batch_progress(PROGRESS, accounts.take(12)))
    text = generate_latest(metrics.registry).decode()
    assert 'rebalance_monitor_input_records_total{topic="rebalance.heartbeats"} 4988.0' in text
    assert 'rebalance_monitor_lag_records{topic="rebalance.heartbeats"} 100.0' in text
    assert "rebalance_monitor_rejected_records_total 2.0" in text
    assert "rebalance_monitor_batches_total 1.0" in text
    # One group at most: the most recently rebalanced of those matching the patterns (orders at
    # event time 1005 is newer than batch-1 at 1001).
    assert 'rebalance_monitor_rebalance_total{group_id="orders"} 2.0' in text
    assert 'rebalance_monitor_rebalance_rate_per_hour{group_id="orders"} 5.0' in text
    assert 'rebalance_monitor_assigned_partitions{group_id="orders"} 12.0' in text
    assert 'rebalance_monitor_open_alerts{group_id="orders"} 1.0' in text
    assert 'group_id="batch-1"' not in text
    other = JobMetrics(group_patterns=["payments-*"])
    other.on_rows(_written()[tables.BALANCE_METRICS].to_pylist(), [])
    assert "group_id=" not in generate_latest(other.registry).decode()
