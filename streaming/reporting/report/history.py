"""One group's history, read with Spark SQL from the job's tables and views into small pandas frames.

Everything the report draws is here, already filtered to the group and the time window; the
charts and the page never touch Spark. The ``alerts`` table is optional: the report shows it when
the output root has one and says so when it does not (a root written before the job had alerts).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from schemas.tables import ALERTS, ASSIGNMENTS, BALANCE_METRICS, MEMBER_EVENTS

from streaming.config import OutputConfig
from streaming.errors import NoGroupHistoryError
from streaming.reporting.report.window import TimeWindow


@dataclass(frozen=True)
class UnitColumns:
    """What a group's members hold, and where ``assignments`` keeps it.

    ``count`` is what the per-member charts count, the same unit ``balance_metrics`` measures
    imbalance and moves in (Kafka Streams: active tasks; Kafka Connect: connector tasks).
    ``placed`` are the (column, kind) arrays the placement chart draws.
    """

    singular: str
    plural: str
    count: str
    placed: tuple[tuple[str, str], ...]


CONSUMER_UNITS = UnitColumns("partition", "partitions", "partitions", (("partitions", "partition"),))
UNITS = {
    "consumer": CONSUMER_UNITS,
    "streams": UnitColumns("active task", "active tasks", "active_tasks", (("active_tasks", "active"),)),
    "connect": UnitColumns("task", "tasks", "tasks", (("connectors", "connector"), ("tasks", "task"))),
}
#: Group types whose report also shows where each unit is placed, generation by generation.
PLACEMENT_GROUP_TYPES = ("streams", "connect")
#: The round that completes a cooperative rebalance: a generation, but not a new rebalance.
FOLLOWUP_TRIGGER = "cooperative_followup"


@dataclass(frozen=True)
class GroupHistory:
    """A group's story within a window; times are epoch ms of event time."""

    group_id: str
    window: TimeWindow
    root: str
    #: One row per generation (rebalance_history's columns), by generation.
    generations: pd.DataFrame
    #: One row per (generation, member): ``units`` held after that generation.
    holdings: pd.DataFrame
    #: One row per (generation, member, unit_id, kind); only for Streams and Connect groups.
    placements: pd.DataFrame | None
    #: member_events of the group (joins, leaves, expiries, ...), by time.
    member_events: pd.DataFrame
    #: Alert episodes of the group (one row each), or None when the output root has no alerts table.
    alerts: pd.DataFrame | None
    unit_columns: UnitColumns = CONSUMER_UNITS

    @property
    def latest(self) -> pd.Series:
        return self.generations.iloc[-1]

    @property
    def group_type(self) -> str:
        return str(self.latest["group_type"] or "consumer")

    @property
    def unit(self) -> str:
        """What one unit of the group is called (partition, active task, task)."""
        return self.unit_columns.singular

    @property
    def units(self) -> str:
        return self.unit_columns.plural

    @property
    def units_now(self) -> int:
        """Units held after the latest generation (from the assignments, as the charts count them)."""
        latest = self.holdings[self.holdings["generation"] == self.latest["generation"]]
        return int(latest["units"].sum())

    @property
    def rebalance_count(self) -> int:
        """Rebalances: generations that a change opened (a cooperative follow-up round completes one)."""
        return int((self.generations["trigger"] != FOLLOWUP_TRIGGER).sum())


# The group filter is applied with the DataFrame API, not spliced into the SQL: a group id is free
# text. (Named SQL parameters, spark.sql(sql, args=...), failed here with UNBOUND_SQL_PARAMETER
# on PySpark 4.2 over these temporary views.)
_GENERATIONS_SQL = """
SELECT group_id, generation, event_time_ms AS event_time, trigger, trigger_member, assignor, protocol,
       group_type, phase, members, partitions, moved, imbalance, unassigned, stickiness
FROM rebalance_history
"""

_HOLDINGS_SQL = """
SELECT group_id, event_time, generation, member_id, group_instance_id,
       CASE WHEN {column} IS NULL THEN 0 ELSE size({column}) END AS units
FROM {table}
"""

#: One exploded array of assignments as (unit_id, kind) rows; partitions get Kafka's spelling t0-3.
_PLACEMENTS_SQL = """
SELECT group_id, event_time, generation, member_id, {unit_id} AS unit_id, '{kind}' AS kind
FROM {table} LATERAL VIEW explode({column}) exploded AS unit
"""

_MEMBER_EVENTS_SQL = f"""
SELECT group_id, event_time, member_id, event, group_instance_id, reason, previous_member_id, late
FROM {MEMBER_EVENTS}
WHERE member_id IS NOT NULL
"""

#: The alerts table's columns the report shows, in this order (others are ignored).
ALERT_COLUMNS = ("alert_id", "rule", "subject", "severity", "status", "value", "threshold",
                 "fired_at", "resolved_at", "generation", "summary")


def unit_columns(group_type: str, assignment_columns: list[str]) -> UnitColumns:
    """The group type's units, or partitions when the table predates the Streams/Connect columns."""
    units = UNITS.get(group_type, CONSUMER_UNITS)
    needed = [units.count] + [column for column, _ in units.placed]
    return units if all(c in assignment_columns for c in needed) else CONSUMER_UNITS


def load_group_history(spark, output: OutputConfig, group_id: str, window: TimeWindow) -> GroupHistory:
    """Read the group's history; the tables and views must be registered (streaming.reporting.views)."""
    from pyspark.sql import functions as F

    def frame(sql: str, *order: str) -> pd.DataFrame:
        df = spark.sql(sql).where(F.col("group_id") == F.lit(group_id)).where(window.sql_condition("event_time"))
        return df.drop("group_id").orderBy(*order).toPandas()

    generations = frame(_GENERATIONS_SQL, "generation")
    if generations.empty:
        raise NoGroupHistoryError(_no_history_message(spark, output, group_id, window))
    group_type = str(generations.iloc[-1]["group_type"] or "consumer")
    units = unit_columns(group_type, spark.table(ASSIGNMENTS).columns)
    holdings = frame(_HOLDINGS_SQL.format(column=units.count, table=ASSIGNMENTS), "generation", "member_id")
    placements = None
    if group_type in PLACEMENT_GROUP_TYPES:  # one row per unit and generation: only where it is drawn
        placements = pd.concat([
            frame(_PLACEMENTS_SQL.format(
                table=ASSIGNMENTS, column=column, kind=kind,
                unit_id="concat(unit.topic, '-', unit.partition)" if column == "partitions" else "unit"),
                "generation", "unit_id") for column, kind in units.placed], ignore_index=True)
        placements = placements.drop(columns="event_time")
    return GroupHistory(
        group_id=group_id, window=window, root=output.table_path(""), generations=generations,
        holdings=holdings.drop(columns="event_time"), placements=placements,
        member_events=frame(_MEMBER_EVENTS_SQL, "event_time", "member_id", "event"),
        alerts=_load_alerts(spark, output, group_id, window), unit_columns=units)


def _no_history_message(spark, output: OutputConfig, group_id: str, window: TimeWindow) -> str:
    from pyspark.sql import functions as F

    tables = f"{BALANCE_METRICS}, {ASSIGNMENTS} and {MEMBER_EVENTS} under {output.table_path('')}"
    total = spark.table(BALANCE_METRICS).where(F.col("group_id") == F.lit(group_id)).count()
    if total:
        return (f"group {group_id!r} has {total} generation(s) in {tables}, "
                f"but none {window.describe()}")
    return f"no history for group {group_id!r}: it has no generations in {tables}"


def _load_alerts(spark, output: OutputConfig, group_id: str, window: TimeWindow) -> pd.DataFrame | None:
    """The group's alert episodes that fired in the window or were open in it; None without the table.

    The table has a row when an episode fires and another when it resolves (same alert_id and
    fired_at): an episode is shown once, resolved if it has a resolved row by the window's end.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T
    from pyspark.sql.utils import AnalysisException

    try:
        df = spark.read.format("delta").load(output.table_path(ALERTS))
    except AnalysisException:  # no alerts table where the job writes (written by an older job)
        return None
    columns = []
    for name in ALERT_COLUMNS:
        if name not in df.columns:
            columns.append(F.lit(None).alias(name))
        elif name in ("fired_at", "resolved_at") and isinstance(df.schema[name].dataType,
                                                                  (T.TimestampType, T.TimestampNTZType)):
            columns.append(F.unix_millis(F.col(name)).alias(name))  # the report's times are epoch ms
        else:
            columns.append(F.col(name))
    rows = df.where(F.col("group_id") == F.lit(group_id)).select(*columns).toPandas()
    if window.until_ms is not None:  # what the window's end knows: later resolutions not yet
        rows = rows[rows["fired_at"].isna() | (rows["fired_at"] <= window.until_ms)]
        rows = rows[rows["resolved_at"].isna() | (rows["resolved_at"] <= window.until_ms)]
    rows = rows.assign(_resolved=rows["status"] == "resolved")
    episodes = rows.sort_values(["alert_id", "fired_at", "_resolved"]).groupby(
        ["alert_id", "fired_at"], dropna=False, sort=False).tail(1)  # the resolved row, when there is one
    if window.since_ms is not None:
        episodes = episodes[episodes["resolved_at"].isna() | (episodes["resolved_at"] >= window.since_ms)]
    return episodes.drop(columns="_resolved").sort_values(["fired_at", "alert_id"]).reset_index(drop=True)
