"""Kafka Streams and Kafka Connect groups through the real job: their events (Streams task lags in
heartbeats) on the real broker, the Spark query, the Delta tables; the job's rows equal what the
engine computes alone from the same events, including the timers (probing and scheduled rebalances)."""

from __future__ import annotations

import pytest

from schemas import tables
from streaming.engine import GroupState, LagReport, MembershipEvent, advance
from tests import stories
from tests.integration.jobs import MEASURED, make_config, produce_story, read, run_available_now

pytestmark = pytest.mark.integration

START = 1_700_000_000_000
GROUPS = {"app-streams": ("streams", stories.streams_scale_out_story),
          "connect-cluster": ("connect", stories.connect_bounce_story)}


def _engine_rows(config, records, group_id):
    """The engine alone, one batch: heartbeats (with their lags) and membership events."""
    membership, beats = records
    lags = [LagReport(b["member_id"], b["event_time"], b["task_lags"]) for _, b in beats if "task_lags" in b]
    out, _ = advance(GroupState(group_id=group_id), [MembershipEvent.from_json(e) for _, e in membership],
                     [b["member_id"] for _, b in beats], [b["event_time"] for _, b in beats],
                     config.engine_settings(), lag_reports=lags)
    return out


def _canonical(rows):
    return sorted(repr(sorted((k, v) for k, v in r.items() if k not in MEASURED)) for r in rows)


def test_streams_and_connect_generations_land_in_the_tables_as_the_engine_computes_them(
        spark, kafka_broker, tmp_path, unique_name):
    config = make_config(kafka_broker, tmp_path, unique_name)
    records = {}
    for group_id, (group_type, story) in GROUPS.items():
        records[group_id] = stories.task_group_records(story(), group_id, START, group_type)
        produce_story(config, records[group_id])
    run_available_now(spark, config)

    for table in (tables.ASSIGNMENTS, tables.BALANCE_METRICS, tables.REVOCATIONS):
        written = read(spark, config, table)
        for group_id in GROUPS:
            expected = [o.as_dict() for o in _engine_rows(config, records[group_id], group_id) if o.table == table]
            columns = set().union(*(e.keys() for e in expected))
            got = [{k: v for k, v in r.items() if k in columns} for r in written if r["group_id"] == group_id]
            assert _canonical(got) == _canonical(expected), (table, group_id)

    metrics = {(r["group_id"], r["generation"]): r for r in read(spark, config, tables.BALANCE_METRICS)}
    triggers = {g: [metrics[k]["trigger"] for k in sorted(metrics) if k[0] == g] for g in GROUPS}
    # The Streams app's probing rebalance and the Connect cluster's scheduled rebalance came from
    # the job's event-time timers.
    assert "probing_rebalance" in triggers["app-streams"]
    assert "scheduled_rebalance" in triggers["connect-cluster"]
    streams_last = max((r for r in read(spark, config, tables.ASSIGNMENTS) if r["group_id"] == "app-streams"),
                       key=lambda r: r["generation"])
    assert streams_last["active_tasks"] and streams_last["partitions"] == [] and streams_last["connectors"] is None

