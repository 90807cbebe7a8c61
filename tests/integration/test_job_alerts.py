"""Alerts through the real job: events on the real broker, the Spark query, the ``alerts`` Delta
table, and delivery to a real webhook receiver on loopback, including after a restart."""

from __future__ import annotations

import tomllib
from dataclasses import replace

import pytest

from schemas import tables
from streaming.alert_delivery import AlertDispatcher
from streaming.config import parse_config
from tests import stories
from tests.conftest import free_port
from tests.integration.jobs import make_config, produce_story, read, run_available_now
from tests.integration.test_alert_delivery import Receiver, wait_until
from tests.streaming.test_alerts import churn

pytestmark = pytest.mark.integration

START = 1_700_000_000_000
RULES = """
[alerts.rebalance_storm]
generations = 3
window_ms = 20000
[alerts.member_flapping]
enabled = false
[[alerts.overrides]]
groups = "tolerant-*"
rebalance_storm = { generations = 100 }
"""


def _config(kafka_broker, tmp_path, name, url):
    base = make_config(kafka_broker, tmp_path, name)
    alerts = parse_config(tomllib.loads(RULES + f'[alerts.webhook]\nurl = "{url}"\nbackoff_initial_ms = 100\n'
                                        'backoff_max_ms = 500\n')).alerts
    return replace(base, alerts=alerts)


def _stories(config):
    """The same churn in two groups: one fires a storm, one is exempt by override; a calm group;
    and a lopsided one whose imbalance never clears."""
    storm = [stories.workload(0), stories.join(0, "a")] + churn(3) + stories.heartbeats(["a"], 0, 60_000)
    calm = [stories.workload(0), stories.join(0, "a"), stories.join(0, "b")] + \
        stories.heartbeats(["a", "b"], 0, 60_000)
    lopsided = [{"event_id": "w", "event_time": 0, "type": "workload", "workload": {"topics": [
        {"name": "t0", "partitions": 6, "racks": None}, {"name": "t1", "partitions": 1, "racks": None}]}},
        stories.join(0, "a", topics=("t0", "t1")), stories.join(0, "b", topics=("t1",))]
    lopsided += stories.heartbeats(["a", "b"], 0, 60_000)
    for group, story in (("stormy", storm), ("tolerant-etl", storm), ("calm", calm), ("lopsided", lopsided)):
        produce_story(config, stories.to_records(stories.in_time_order(story), group, START))


def test_rules_fire_and_resolve_in_the_table_and_reach_the_webhook_after_a_restart(
        spark, kafka_broker, tmp_path, unique_name):
    # First run: the receiver is down (nothing listens on the port).
    port = free_port()
    config = _config(kafka_broker, tmp_path, unique_name, f"http://127.0.0.1:{port}/alerts")
    _stories(config)
    outbox = config.alerts.outbox_dir(config.output)
    dispatcher = AlertDispatcher(config.alerts.webhook, outbox)
    try:
        from streaming.job import start_query

        query = start_query(spark, config, available_now=True, alert_dispatcher=dispatcher)
        assert query.awaitTermination(300) and query.exception() is None
        assert dispatcher.stats().delivered == 0 and dispatcher.stats().pending == 3
    finally:
        dispatcher.close(timeout_s=5)

    rows = sorted(read(spark, config, tables.ALERTS), key=lambda r: (r["group_id"], r["status"]))
    # The override exempts tolerant-etl from the storm, and calm is calm.
    assert [(r["group_id"], r["rule"], r["status"], r["fired_at"] - START) for r in rows] == [
        ("lopsided", "imbalance", "firing", 1_000),
        ("stormy", "rebalance_storm", "firing", 6_000), ("stormy", "rebalance_storm", "resolved", 6_000)]
    storm = rows[1:]
    assert storm[1]["resolved_at"] - START == 26_000 and storm[0]["alert_id"] == storm[1]["alert_id"]
    assert storm[0]["threshold"] == 3.0 and storm[0]["severity"] == "critical"
    assert (rows[0]["value"], rows[0]["threshold"], rows[0]["severity"]) == (7.0, 2.0, "warning")

    # The views: the storm is over, the imbalance is still open.
    from streaming.views import register_views

    register_views(spark, config.output)
    health = {r["group_id"]: (r["open_alerts"], r["open_alert_rules"]) for r in
              spark.sql("SELECT group_id, open_alerts, open_alert_rules FROM group_health").collect()}
    assert health == {"lopsided": (1, ["imbalance"]), "stormy": (0, []), "tolerant-etl": (0, []), "calm": (0, [])}

    # Second run: the receiver is up; a new dispatcher on the same outbox delivers both
    # transitions, once each, and re-running the job (nothing new to read) adds nothing.
    receiver = Receiver(port=port)
    try:
        again = AlertDispatcher(config.alerts.webhook, outbox)
        try:
            run_available_now(spark, config)
            wait_until(lambda: again.stats().delivered == 3, "all three transitions delivered", timeout_s=180)
        finally:
            again.close(timeout_s=5)
        delivered = receiver.alerts()
        assert sorted((a["labels"]["alertname"], a["labels"]["group_id"], a["status"]) for a in delivered) == [
            ("imbalance", "lopsided", "firing"),
            ("rebalance_storm", "stormy", "firing"), ("rebalance_storm", "stormy", "resolved")]
        storm = [a for a in delivered if a["labels"]["alertname"] == "rebalance_storm"]
        assert len({a["fingerprint"] for a in storm}) == 1
        assert {a["startsAt"] for a in storm} == {"2023-11-14T22:13:26Z"}
    finally:
        receiver.stop()
