"""SQL over the history: the job's tables under stable names, and ready views in Kafka's words.

:func:`register_views` registers every table of ``schemas/tables.py`` as a temporary view of the
same name (a table the job has not written yet becomes an empty view with the right columns, so
every name and every view below always resolves), then the ready views:

- ``current_assignment``: the latest generation of each group, one row per member with its
  partitions and ``assigned_partitions`` (Kafka's assigned-partitions);
- ``rebalance_history``: one row per generation with its event time as a timestamp, what and who
  triggered it, how much moved and how balanced the result was;
- ``open_alerts``: alert episodes that fired and have not resolved;
- ``group_health``: one row per group with its latest numbers, its open alerts, and Kafka's rebalance metrics
  (rebalance-total, rebalance-rate-per-hour, last-rebalance-seconds-ago,
  failed-rebalance-total), measured in event time up to the newest event time in the tables,
  never the wall clock, so the same history always gives the same answer.

docs/sql.md documents the columns and example questions.
"""

from __future__ import annotations

from dataclasses import dataclass

from schemas.tables import ALERTS, ASSIGNMENTS, BALANCE_METRICS, MEMBER_EVENTS, REJECTED_EVENTS, TABLES

from streaming.config import OutputConfig
from streaming.reporting.tables_sql import register_tables

HOUR_MS = 3_600_000
#: The reason the engine gives a rebalance whose assignor failed (in rejected_events; streaming/engine/generation.py).
FAILED_REBALANCE_REASON = "rebalance at % failed:%"

#: The latest generation of each group, from balance_metrics (a generation in which every member
#: left has metrics but no assignment rows, and must still count as the latest).
_LATEST = f"""
SELECT * FROM {BALANCE_METRICS}
QUALIFY row_number() OVER (PARTITION BY group_id ORDER BY generation DESC) = 1
"""

#: "Now" for the views: the newest event time the job has written (never the wall clock).
_CLOCK = f"""
SELECT max(event_time) AS now_ms FROM (
  SELECT event_time FROM {BALANCE_METRICS} UNION ALL SELECT event_time FROM {MEMBER_EVENTS})
"""

#: Alert episodes (alert_id, fired_at) with a firing row and no resolved row yet.
_OPEN_ALERTS = f"""
SELECT alert_id, rule, group_id, subject, severity, timestamp_millis(fired_at) AS fired_time, fired_at,
       value, threshold, generation, summary, description
FROM {ALERTS}
WHERE status = 'firing'
  AND NOT EXISTS (SELECT 1 FROM {ALERTS} r
                  WHERE r.status = 'resolved' AND r.alert_id = {ALERTS}.alert_id AND r.fired_at = {ALERTS}.fired_at)
"""

VIEWS: dict[str, str] = {
    "open_alerts": _OPEN_ALERTS,
    "current_assignment": f"""
SELECT a.group_id, a.generation, timestamp_millis(a.event_time) AS event_time,
       a.event_time AS event_time_ms, a.member_id, a.group_instance_id, a.partitions,
       size(a.partitions) AS assigned_partitions, a.assignor, a.protocol, a.phase, a.group_type
FROM {ASSIGNMENTS} a
JOIN ({_LATEST}) l ON a.group_id = l.group_id AND a.generation = l.generation
""",
    "rebalance_history": f"""
SELECT group_id, generation, timestamp_millis(event_time) AS event_time, event_time AS event_time_ms,
       trigger, trigger_member, assignor, protocol, group_type, phase, members, partitions, moved,
       imbalance, unassigned, stickiness,
       event_time - rebalance_started_at AS rebalance_latency_ms,
       event_time - lag(event_time) OVER (PARTITION BY group_id ORDER BY generation) AS since_previous_ms
FROM {BALANCE_METRICS}
""",
    "group_health": f"""
WITH clock AS ({_CLOCK}),
latest AS ({_LATEST}),
totals AS (
  SELECT b.group_id, count(*) AS rebalance_total,
         count_if(b.event_time > c.now_ms - {HOUR_MS}) AS rebalance_rate_per_hour
  FROM {BALANCE_METRICS} b CROSS JOIN clock c
  GROUP BY b.group_id),
failures AS (
  SELECT r.group_id, count(*) AS failed_rebalance_total
  FROM {REJECTED_EVENTS} r
  WHERE r.group_id IS NOT NULL AND r.reason LIKE '{FAILED_REBALANCE_REASON}'
  GROUP BY r.group_id),
expiries AS (
  SELECT e.group_id, count(*) AS members_expired_last_hour
  FROM {MEMBER_EVENTS} e CROSS JOIN clock c
  WHERE e.event = 'expired' AND e.event_time > c.now_ms - {HOUR_MS}
  GROUP BY e.group_id),
open_alerts AS (
  SELECT group_id, count(*) AS open_alerts, array_sort(collect_set(rule)) AS open_alert_rules
  FROM ({_OPEN_ALERTS}) GROUP BY group_id),
grps AS (SELECT group_id FROM totals UNION SELECT group_id FROM failures)
SELECT g.group_id, l.group_type, l.assignor, l.protocol,
       l.generation, timestamp_millis(l.event_time) AS last_rebalance_time,
       l.trigger AS last_trigger, l.trigger_member AS last_trigger_member, l.phase,
       l.members, l.partitions AS assigned_partitions, l.imbalance, l.unassigned,
       coalesce(t.rebalance_total, 0) AS rebalance_total,
       coalesce(t.rebalance_rate_per_hour, 0) AS rebalance_rate_per_hour,
       CAST(c.now_ms - l.event_time AS DOUBLE) / 1000 AS last_rebalance_seconds_ago,
       coalesce(f.failed_rebalance_total, 0) AS failed_rebalance_total,
       coalesce(x.members_expired_last_hour, 0) AS members_expired_last_hour,
       coalesce(o.open_alerts, 0) AS open_alerts, coalesce(o.open_alert_rules, array()) AS open_alert_rules,
       timestamp_millis(c.now_ms) AS as_of
FROM grps g CROSS JOIN clock c
LEFT JOIN latest l ON l.group_id = g.group_id
LEFT JOIN totals t ON t.group_id = g.group_id
LEFT JOIN failures f ON f.group_id = g.group_id
LEFT JOIN expiries x ON x.group_id = g.group_id
LEFT JOIN open_alerts o ON o.group_id = g.group_id
""",
}


@dataclass(frozen=True)
class Registered:
    """What :func:`register_views` made: tables read from Delta, tables not written yet (empty), views."""

    tables: tuple[str, ...]
    missing: tuple[str, ...]
    views: tuple[str, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(TABLES) + self.views


def register_views(spark, output: OutputConfig) -> Registered:
    """Register the tables (empty stand-ins for the ones not written yet) and the ready views."""
    from schemas.spark import table_schema

    written = register_tables(spark, output)
    missing = tuple(t for t in TABLES if t not in written)
    for table in missing:
        spark.createDataFrame([], table_schema(table)).createOrReplaceTempView(table)
    for name, sql in VIEWS.items():
        spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW {name} AS {sql}")
    return Registered(tables=tuple(written), missing=missing, views=tuple(VIEWS))
