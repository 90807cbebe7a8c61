"""Alerts through the real job: events on the real broker, the Spark query, the ``alerts`` Delta
table, and delivery to a real webhook receiver on loopback, including after a restart."""

from __future__ import annotations

import tomllib
from dataclasses import replace

import pytest

from schemas import tables
from streaming.alerting.delivery import AlertDispatcher
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
        from streaming.job.main import start_query

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
    from streaming.reporting.views import register_views

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


EVERY_RULE = """
[alerts.imbalance]
enabled = false
[alerts.rebalance_storm]
enabled = false
[alerts.member_flapping]
enabled = false
[alerts.member_expired]
enabled = false
[alerts.unassigned_partitions]
enabled = false
[alerts.streams_not_caught_up]
enabled = false
[alerts.connect_lost_work]
enabled = false

# Each rule on for the group built to trip it, and every rule on for the calm group.
[[alerts.overrides]]
groups = ["imb-*", "calm"]
imbalance = { enabled = true }
[[alerts.overrides]]
groups = ["storm-*", "calm"]
rebalance_storm = { enabled = true, generations = 3, window_ms = 20000 }
[[alerts.overrides]]
groups = ["flap-*", "calm"]
member_flapping = { enabled = true, changes = 3, window_ms = 60000 }
[[alerts.overrides]]
groups = ["exp-*", "calm"]
member_expired = { enabled = true }
[[alerts.overrides]]
groups = ["unas-*", "calm"]
unassigned_partitions = { enabled = true, duration_ms = 300 }
[[alerts.overrides]]
groups = ["st-*", "calm"]
streams_not_caught_up = { enabled = true, duration_ms = 10000 }
[[alerts.overrides]]
groups = ["cn-*", "calm"]
connect_lost_work = { enabled = true }
"""


def _every_rule_stories():
    s = stories
    lopsided = [{"event_id": "w", "event_time": 0, "type": "workload", "workload": {"topics": [
        {"name": "t0", "partitions": 6, "racks": None}, {"name": "t1", "partitions": 1, "racks": None}]}},
        s.join(0, "a", topics=("t0", "t1")), s.join(0, "b", topics=("t1",))] + s.heartbeats(["a", "b"], 0, 60_000)
    flapping = [s.workload(0), s.join(0, "steady")] + s.heartbeats(["steady"], 0, 100_000)
    for i in range(3):  # the same client.id under a new member id each time, as a restarting consumer
        t = 1_000 + 4_000 * i
        flapping += [dict(s.join(t, f"f{i}"), client_id="flaky", host="/10.0.0.9"), s.leave(t + 2_000, f"f{i}")]
    obs = s.collector_observation
    live = [s.workload(0), obs(1_000, "join", "a", range(6)), obs(5_000, "join", "b", (), state="PREPARING_REBALANCE"),
            obs(5_500, "update", "a", (0, 1, 2, 3)), obs(5_500, "update", "b", (4, 5)),
            obs(9_000, "update", "a", (0, 1, 2)), obs(9_000, "update", "b", (3, 4, 5))]
    live += s.heartbeats(["a", "b"], 1_000, 12_000, every=500)
    tasks = ("0_0", "0_1", "0_2", "0_3")
    restoring = [s.streams_workload(0, end_offsets={t: 5_000 for t in tasks}), s.streams_join(1_000, "s1", "p1")]
    restoring += s.heartbeats(["s1"], 1_500, 30_000)
    restoring += [s.hb_lags(8_000, "s1", {t: 3_000 for t in tasks}), s.hb_lags(15_000, "s1", {t: 50 for t in tasks[:3]}),
                  s.hb_lags(18_000, "s1", {"0_3": 100})]
    lost = [s.connect_workload(0), s.connect_join(1_000, "w1"), s.leave(10_000, "w1")] + s.heartbeats(["w1"], 1_500, 10_000)
    # The calm group heartbeats longest: it carries the stream's time (the watermark) past the
    # Connect delay and its grace, which only the watermark can move a memberless group through.
    calm = [s.workload(0), s.join(0, "a"), s.join(0, "b")] + s.heartbeats(["a", "b"], 0, 150_000)
    consumer = {"imb-lopsided": lopsided, "storm-churn": [s.workload(0), s.join(0, "a")] + churn(3)
                + s.heartbeats(["a"], 0, 60_000), "flap-client": flapping, "exp-eager": s.eager_range_story(),
                "unas-coop": s.cooperative_story(), "dis-live": live, "calm": calm}
    records = [s.to_records(s.in_time_order(story), group, START) for group, story in consumer.items()]
    records.append(s.task_group_records(s.in_time_order(restoring), "st-restore", START, "streams"))
    records.append(s.task_group_records(s.in_time_order(lost), "cn-lost", START, "connect"))
    return records


def test_every_rule_fires_on_the_group_built_to_trip_it_and_the_calm_group_stays_quiet(
        spark, kafka_broker, tmp_path, unique_name):
    base = make_config(kafka_broker, tmp_path, unique_name)
    config = replace(base, alerts=parse_config(tomllib.loads(EVERY_RULE)).alerts)
    for records in _every_rule_stories():
        produce_story(config, records)
    run_available_now(spark, config)

    rows = read(spark, config, tables.ALERTS)
    got = sorted((r["group_id"], r["rule"], r["status"], r["fired_at"] - START,
                  None if r["resolved_at"] is None else r["resolved_at"] - START) for r in rows)
    assert got == sorted([
        ("imb-lopsided", "imbalance", "firing", 1_000, None),
        # Both members' heartbeats stop at 59 s: they expire at 69 s, and a group with no
        # members is not unbalanced.
        ("imb-lopsided", "imbalance", "resolved", 1_000, 70_000),
        ("storm-churn", "rebalance_storm", "firing", 6_000, None),
        ("storm-churn", "rebalance_storm", "resolved", 6_000, 26_000),
        ("flap-client", "member_flapping", "firing", 7_000, None),
        ("flap-client", "member_flapping", "resolved", 7_000, 65_000),
        ("exp-eager", "member_expired", "firing", 26_500, None),
        ("unas-coop", "unassigned_partitions", "firing", 6_300, None),
        ("unas-coop", "unassigned_partitions", "resolved", 6_300, 6_500),
        ("dis-live", "assignment_disagreement", "firing", 6_000, None),
        ("dis-live", "assignment_disagreement", "resolved", 6_000, 9_000),
        ("st-restore", "streams_not_caught_up", "firing", 12_000, None),
        ("st-restore", "streams_not_caught_up", "resolved", 12_000, 18_000),
        ("cn-lost", "connect_lost_work", "firing", 101_000, None),
    ])
    flapping = next(r for r in rows if r["rule"] == "member_flapping")
    assert flapping["subject"] == "flaky@/10.0.0.9"
