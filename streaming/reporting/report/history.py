"""One group's history, read from the job's tables and views into small pandas frames.

The tables are read with DataFusion (:mod:`streaming.reporting.history_sql`), not Spark, so a
report takes a second or two. Everything the report draws is here, already filtered to the group
and the time window; the charts and the page never run SQL. The ``alerts`` table is optional: the
report shows it when the output root has one and says so when it does not (a root written before
the job had alerts). So is ``assignment_checks``: only groups the collector observes have rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from schemas.tables import ALERTS, ASSIGNMENT_CHECKS, ASSIGNMENTS, BALANCE_METRICS, MEMBER_EVENTS

from streaming.engine.generation import COOPERATIVE_FOLLOWUP
from streaming.errors import NoGroupHistoryError
from streaming.reporting.history_sql import HistorySql, sql_string, to_pandas
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
FOLLOWUP_TRIGGER = COOPERATIVE_FOLLOWUP


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
    #: assignment_checks of the group (one row per compared generation), or None when the output
    #: root has no such table (no group there was observed live by the collector).
    checks: pd.DataFrame | None = None

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


_GENERATIONS_SQL = """
SELECT group_id, generation, event_time_ms AS event_time, trigger, trigger_member, assignor, protocol,
       group_type, phase, members, partitions, moved, imbalance, unassigned, stickiness
FROM rebalance_history
"""

_HOLDINGS_SQL = """
SELECT group_id, event_time, generation, member_id, group_instance_id,
       CASE WHEN {column} IS NULL THEN 0 ELSE CAST(cardinality({column}) AS INT) END AS units
FROM {table}
"""

#: One unnested array of assignments as (unit_id, kind) rows; partitions get Kafka's spelling t0-3.
_PLACEMENTS_SQL = """
SELECT group_id, event_time, generation, member_id, {unit_id} AS unit_id, '{kind}' AS kind
FROM (SELECT group_id, event_time, generation, member_id, unnest({column}) AS unit FROM {table}) units
"""
_PARTITION_ID = "concat(unit['topic'], '-', CAST(unit['partition'] AS VARCHAR))"

_MEMBER_EVENTS_SQL = f"""
SELECT group_id, event_time, member_id, event, group_instance_id, client_id, reason, previous_member_id, late
FROM {MEMBER_EVENTS}
WHERE member_id IS NOT NULL
"""

_CHECKS_SQL = f"""
SELECT group_id, generation, event_time, agrees, members_compared, partitions_compared, differing,
       unmatched_members, computed_assignor, reported_assignor, group_state
FROM {ASSIGNMENT_CHECKS}
"""

#: The alerts table's columns the report shows, in this order (others are ignored).
ALERT_COLUMNS = ("alert_id", "rule", "subject", "severity", "status", "value", "threshold",
                 "fired_at", "resolved_at", "generation", "summary")


def unit_columns(group_type: str, assignment_columns: list[str]) -> UnitColumns:
    """The group type's units, or partitions when the table predates the Streams/Connect columns."""
    units = UNITS.get(group_type, CONSUMER_UNITS)
    needed = [units.count] + [column for column, _ in units.placed]
    return units if all(c in assignment_columns for c in needed) else CONSUMER_UNITS


def load_group_history(history: HistorySql, group_id: str, window: TimeWindow) -> GroupHistory:
    """Read the group's history from the tables and views (streaming.reporting.history_sql)."""
    group = f"group_id = {sql_string(group_id)}"

    def frame(sql: str, *order: str) -> pd.DataFrame:
        # The group id is free text: it goes in as a quoted literal (sql_string), never as SQL.
        rows = history.query(f"SELECT * FROM ({sql}) q WHERE {group} AND {window.sql_condition('event_time')} "
                             f"ORDER BY {', '.join(order)}")
        return to_pandas(rows).drop(columns="group_id")

    generations = frame(_GENERATIONS_SQL, "generation")
    if generations.empty:
        raise NoGroupHistoryError(_no_history_message(history, group_id, window))
    group_type = str(generations.iloc[-1]["group_type"] or "consumer")
    units = unit_columns(group_type, history.schema(ASSIGNMENTS).names)
    holdings = frame(_HOLDINGS_SQL.format(column=units.count, table=ASSIGNMENTS), "generation", "member_id")
    placements = None
    if group_type in PLACEMENT_GROUP_TYPES:  # one row per unit and generation: only where it is drawn
        placements = pd.concat([
            frame(_PLACEMENTS_SQL.format(table=ASSIGNMENTS, column=column, kind=kind,
                                         unit_id=_PARTITION_ID if column == "partitions" else "unit"),
                  "generation", "unit_id") for column, kind in units.placed], ignore_index=True)
        placements = placements.drop(columns="event_time")
    checks = None
    if ASSIGNMENT_CHECKS not in history.registered.missing:
        checks = frame(_CHECKS_SQL, "generation", "event_time")
    return GroupHistory(
        group_id=group_id, window=window, root=history.output.table_path(""), generations=generations,
        holdings=holdings.drop(columns="event_time"), placements=placements,
        member_events=frame(_MEMBER_EVENTS_SQL, "event_time", "member_id", "event"),
        alerts=_load_alerts(history, group_id, window), unit_columns=units, checks=checks)


def _no_history_message(history: HistorySql, group_id: str, window: TimeWindow) -> str:
    tables = f"{BALANCE_METRICS}, {ASSIGNMENTS} and {MEMBER_EVENTS} under {history.output.table_path('')}"
    total = history.query(f"SELECT count(*) AS n FROM {BALANCE_METRICS} WHERE group_id = {sql_string(group_id)}")
    total = total.column("n")[0].as_py()
    if total:
        return (f"group {group_id!r} has {total} generation(s) in {tables}, "
                f"but none {window.describe()}")
    return f"no history for group {group_id!r}: it has no generations in {tables}"


def _load_alerts(history: HistorySql, group_id: str, window: TimeWindow) -> pd.DataFrame | None:
    """The group's alert episodes that fired in the window or were open in it; None without the table.

    The table has a row when an episode fires and another when it resolves (same alert_id and
    fired_at): an episode is shown once, resolved if it has a resolved row by the window's end.
    """
    if ALERTS in history.registered.missing:  # no alerts table where the job writes (written by an older job)
        return None
    present = set(history.schema(ALERTS).names)
    columns = ", ".join(name if name in present else f"NULL AS {name}" for name in ALERT_COLUMNS)
    rows = to_pandas(history.query(f"SELECT {columns} FROM {ALERTS} WHERE group_id = {sql_string(group_id)}"))
    for name in ("fired_at", "resolved_at"):  # a table from before the times were epoch ms
        if pd.api.types.is_datetime64_any_dtype(rows[name]):
            rows[name] = rows[name].map(lambda t: None if pd.isna(t) else int(t.timestamp() * 1000))
    if window.until_ms is not None:  # what the window's end knows: later resolutions not yet
        rows = rows[rows["fired_at"].isna() | (rows["fired_at"] <= window.until_ms)]
        rows = rows[rows["resolved_at"].isna() | (rows["resolved_at"] <= window.until_ms)]
    rows = rows.assign(_resolved=rows["status"] == "resolved")
    episodes = rows.sort_values(["alert_id", "fired_at", "_resolved"]).groupby(
        ["alert_id", "fired_at"], dropna=False, sort=False).tail(1)  # the resolved row, when there is one
    if window.since_ms is not None:
        episodes = episodes[episodes["resolved_at"].isna() | (episodes["resolved_at"] >= window.since_ms)]
    return episodes.drop(columns="_resolved").sort_values(["fired_at", "alert_id"]).reset_index(drop=True)
