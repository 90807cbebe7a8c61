"""SQL over the history: the job's tables under stable names, and ready views in Kafka's words.

Every table of ``schemas/tables.py`` is available under its own name (a table the job has not
written yet is an empty stand-in with the right columns, so every name and every view below always
resolves), and the ready views:

- ``current_assignment``: the latest generation of each group, one row per member with its
  partitions and ``assigned_partitions`` (Kafka's assigned-partitions);
- ``rebalance_history``: one row per generation with its event time as a timestamp, what and who
  triggered it, how much moved and how balanced the result was;
- ``open_alerts``: alert episodes that fired and have not resolved;
- ``group_health``: one row per group with its latest numbers, its open alerts, and Kafka's rebalance metrics
  (rebalance-total, rebalance-rate-per-hour, last-rebalance-seconds-ago,
  failed-rebalance-total), measured in event time up to the newest event time in the tables,
  never the wall clock, so the same history always gives the same answer.

Each view has ONE definition, written in the SQL that both engines that read the tables accept:
Spark SQL (the job's session, ``spark-sql``) and DataFusion (inside the ``deltalake`` package;
``rebalance-monitor query`` and ``report`` read with it, without starting Spark). The two spellings
that differ between them are a :class:`Dialect`'s. tests/integration/test_view_parity.py runs every
view through both over the same Delta tables and compares the rows.

docs/sql.md documents the columns and example questions.
"""

from __future__ import annotations

from dataclasses import dataclass

from schemas.events import FieldType, translate_type
from schemas.tables import ALERTS, ASSIGNMENTS, BALANCE_METRICS, MEMBER_EVENTS, REJECTED_EVENTS, TABLES

from streaming.config import OutputConfig

HOUR_MS = 3_600_000
#: The reason the engine gives a rebalance whose assignor failed (in rejected_events; streaming/engine/generation.py).
FAILED_REBALANCE_REASON = "rebalance at % failed:%"


@dataclass(frozen=True)
class Dialect:
    """What Spark SQL and DataFusion spell differently, as far as the views and the empty
    stand-ins of unwritten tables need it."""

    name: str
    #: The function from epoch milliseconds to a timestamp.
    timestamp_millis: str
    #: An empty array, to stand for "no open alert rules".
    empty_array: str
    #: How a view is created for the session only (Spark: a temporary view; DataFusion's views
    #: live in the session anyway).
    create_view: str
    #: How an identifier is quoted (column names like ``partition`` are keywords somewhere).
    quote: str
    #: A typed NULL: ``{}`` is the type.
    typed_null: str
    #: Type names of the atoms of schemas/events.py's type language, and of its composites.
    atoms: dict[str, str]
    array: str
    struct: str
    struct_field: str
    map: str

    def timestamp(self, epoch_ms: str) -> str:
        return f"{self.timestamp_millis}({epoch_ms})"

    def type_of(self, t: FieldType) -> str:
        return translate_type(
            t, self.atoms, self.array.format,
            self.map.format,
            lambda fields: self.struct.format(", ".join(self.struct_field.format(n, ft) for n, ft in fields)))

    def identifier(self, name: str) -> str:
        return f"{self.quote}{name}{self.quote}"


SPARK = Dialect(
    "spark", timestamp_millis="timestamp_millis", empty_array="array()",
    create_view="CREATE OR REPLACE TEMPORARY VIEW", quote="`",
    typed_null="CAST(NULL AS {})",
    atoms={"string": "STRING", "int": "INT", "long": "BIGINT", "double": "DOUBLE", "boolean": "BOOLEAN"},
    array="ARRAY<{}>", struct="STRUCT<{}>", struct_field="`{}`: {}", map="MAP<STRING, {}>")
#: DataFusion as the ``deltalake`` package embeds it; types in Arrow's names (``arrow_cast``).
DATAFUSION = Dialect(
    "datafusion", timestamp_millis="to_timestamp_millis", empty_array="make_array()",
    create_view="CREATE OR REPLACE VIEW", quote='"',
    typed_null="arrow_cast(NULL, '{}')",
    atoms={"string": "Utf8", "int": "Int32", "long": "Int64", "double": "Float64", "boolean": "Boolean"},
    array="List({})", struct="Struct({})", struct_field='"{}": {}', map="Map(Utf8, {})")


def stand_in(table: str, d: Dialect) -> str:
    """A SELECT with the table's columns and types and no rows: a table the job has not written
    yet (no rejected record so far, say), so that every name and every view resolves."""
    columns = ", ".join(f"{d.typed_null.format(d.type_of(f.type))} AS {d.identifier(f.name)}" for f in TABLES[table])
    return f"SELECT {columns} WHERE false"


def view_definitions(d: Dialect) -> dict[str, str]:
    """The ready views, name -> SELECT, in the dialect ``d``; in the order they must be created."""
    # The latest generation of each group, from balance_metrics (a generation in which every member
    # left has metrics but no assignment rows, and must still count as the latest).
    latest = f"""
SELECT * FROM {BALANCE_METRICS}
QUALIFY row_number() OVER (PARTITION BY group_id ORDER BY generation DESC) = 1
"""
    # "Now" for the views: the newest event time the job has written (never the wall clock).
    clock = f"""
SELECT max(event_time) AS now_ms FROM (
  SELECT event_time FROM {BALANCE_METRICS} UNION ALL SELECT event_time FROM {MEMBER_EVENTS}) times
"""
    # Alert episodes (alert_id, fired_at) with a firing row and no resolved row yet.
    open_alerts = f"""
SELECT alert_id, rule, group_id, subject, severity, {d.timestamp("fired_at")} AS fired_time, fired_at,
       value, threshold, generation, summary, description
FROM {ALERTS} f
WHERE status = 'firing'
  AND NOT EXISTS (SELECT 1 FROM {ALERTS} r
                  WHERE r.status = 'resolved' AND r.alert_id = f.alert_id AND r.fired_at = f.fired_at)
"""
    return {
        "open_alerts": open_alerts,
        "current_assignment": f"""
SELECT a.group_id, a.generation, {d.timestamp("a.event_time")} AS event_time,
       a.event_time AS event_time_ms, a.member_id, a.group_instance_id, a.partitions,
       CAST(cardinality(a.partitions) AS INT) AS assigned_partitions, a.assignor, a.protocol, a.phase,
       a.group_type
FROM {ASSIGNMENTS} a
JOIN ({latest}) l ON a.group_id = l.group_id AND a.generation = l.generation
""",
        "rebalance_history": f"""
SELECT group_id, generation, {d.timestamp("event_time")} AS event_time, event_time AS event_time_ms,
       trigger, trigger_member, assignor, protocol, group_type, phase, members, partitions, moved,
       imbalance, unassigned, stickiness,
       event_time - rebalance_started_at AS rebalance_latency_ms,
       event_time - lag(event_time) OVER (PARTITION BY group_id ORDER BY generation) AS since_previous_ms
FROM {BALANCE_METRICS}
""",
        "group_health": f"""
WITH clock AS ({clock}),
latest AS ({latest}),
totals AS (
  SELECT b.group_id, count(*) AS rebalance_total,
         count(CASE WHEN b.event_time > c.now_ms - {HOUR_MS} THEN 1 END) AS rebalance_rate_per_hour
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
alerting AS (
  SELECT group_id, count(*) AS open_alerts, array_sort(array_agg(DISTINCT rule)) AS open_alert_rules
  FROM ({open_alerts}) o GROUP BY group_id),
grps AS (SELECT group_id FROM totals UNION SELECT group_id FROM failures)
SELECT g.group_id, l.group_type, l.assignor, l.protocol,
       l.generation, {d.timestamp("l.event_time")} AS last_rebalance_time,
       l.trigger AS last_trigger, l.trigger_member AS last_trigger_member, l.phase,
       l.members, l.partitions AS assigned_partitions, l.imbalance, l.unassigned,
       coalesce(t.rebalance_total, 0) AS rebalance_total,
       coalesce(t.rebalance_rate_per_hour, 0) AS rebalance_rate_per_hour,
       CAST(c.now_ms - l.event_time AS DOUBLE) / 1000 AS last_rebalance_seconds_ago,
       coalesce(f.failed_rebalance_total, 0) AS failed_rebalance_total,
       coalesce(x.members_expired_last_hour, 0) AS members_expired_last_hour,
       coalesce(o.open_alerts, 0) AS open_alerts, coalesce(o.open_alert_rules, {d.empty_array}) AS open_alert_rules,
       {d.timestamp("c.now_ms")} AS as_of
FROM grps g CROSS JOIN clock c
LEFT JOIN latest l ON l.group_id = g.group_id
LEFT JOIN totals t ON t.group_id = g.group_id
LEFT JOIN failures f ON f.group_id = g.group_id
LEFT JOIN expiries x ON x.group_id = g.group_id
LEFT JOIN alerting o ON o.group_id = g.group_id
""",
    }


#: The ready views' names, in the order they are created.
VIEW_NAMES: tuple[str, ...] = tuple(view_definitions(SPARK))
#: Every name a statement can read: the tables of schemas/tables.py, then the views.
NAMES: tuple[str, ...] = tuple(TABLES) + VIEW_NAMES


@dataclass(frozen=True)
class Registered:
    """What was registered: tables read from Delta, tables not written yet (empty), views."""

    tables: tuple[str, ...]
    missing: tuple[str, ...]
    views: tuple[str, ...] = VIEW_NAMES

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(TABLES) + self.views


def view_statements(d: Dialect, missing: tuple[str, ...] | list[str] = ()) -> list[str]:
    """CREATE VIEW statements, in dialect ``d``, for the stand-ins of the ``missing`` tables and then
    the ready views (the tables that exist are the caller's to register)."""
    return ([f"{d.create_view} {table} AS {stand_in(table, d)}" for table in missing]
            + [f"{d.create_view} {name} AS {sql.strip()}" for name, sql in view_definitions(d).items()])


def spark_sql_script(output: OutputConfig, written: tuple[str, ...] | list[str]) -> str:
    """Spark SQL that gives a ``spark-sql`` session the same names as ``rebalance-monitor query``:
    the ``written`` tables by path under the output root, stand-ins for the others, the views."""
    tables = [f"{SPARK.create_view} {table} AS SELECT * FROM delta.`{output.table_path(table)}`"
              for table in written]
    missing = [t for t in TABLES if t not in written]
    return "".join(f"{statement};\n" for statement in tables + view_statements(SPARK, missing))


def register_views(spark, output: OutputConfig) -> Registered:
    """Register the tables and the ready views in a Spark session (the demo and the tests use it);
    a table not written yet becomes an empty view with its columns."""
    from streaming.reporting.tables_sql import register_tables

    written = register_tables(spark, output)
    missing = tuple(t for t in TABLES if t not in written)
    for statement in view_statements(SPARK, missing):
        spark.sql(statement)
    return Registered(tables=tuple(written), missing=missing)
