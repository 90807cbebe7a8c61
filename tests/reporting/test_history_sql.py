"""The tables and views read without Spark (streaming/reporting/history_sql.py), on Delta tables of
real engine rows (tests/reporting/tables.py): names, stand-ins, read-only refusals, quoting."""

from __future__ import annotations

import pytest

from schemas.arrow import table_arrow_schema
from schemas.tables import TABLES
from streaming.config import OutputConfig
from streaming.errors import QueryError
from streaming.reporting.history_sql import open_history_sql, sql_string
from streaming.reporting.views import VIEW_NAMES
from tests.reporting.tables import START, engine_rows, scenario_groups, write_tables


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return write_tables(tmp_path_factory.mktemp("history"), engine_rows(scenario_groups()))


@pytest.fixture(scope="module")
def history(root):
    return open_history_sql(OutputConfig(root=str(root)))


def rows(history, sql: str) -> list[dict]:
    return history.query(sql).to_pylist()


def table_versions(root) -> dict[str, int]:
    from deltalake import DeltaTable

    return {t: DeltaTable(str(root / t)).version() for t in TABLES if (root / t).is_dir()}


def test_every_table_and_view_resolves(history):
    assert history.names == tuple(TABLES) + VIEW_NAMES
    # The scenario writes no rejected record and no ingest metrics (those come from the job).
    assert set(history.registered.missing) == {"rejected_events", "ingest_metrics"}
    for name in history.names:
        history.query(f"SELECT * FROM {name}")


def test_a_table_not_written_yet_has_the_columns_and_types_of_the_written_one(tmp_path):
    """The stand-in of an unwritten table reads exactly like the table once the job writes it."""
    from deltalake import write_deltalake

    from streaming.cli.query import sql_type

    empty = open_history_sql(OutputConfig(root=str(tmp_path)))
    assert empty.registered.tables == () and empty.registered.missing == tuple(TABLES)
    for table in TABLES:
        write_deltalake(str(tmp_path / table), table_arrow_schema(table).empty_table())
    written = open_history_sql(OutputConfig(root=str(tmp_path)))
    assert written.registered.missing == ()
    for name in written.names:
        stand_in = [(f.name, sql_type(f.type)) for f in empty.schema(name)]
        assert stand_in == [(f.name, sql_type(f.type)) for f in written.schema(name)], name
        assert empty.query(f"SELECT * FROM {name}").num_rows == 0


def test_views_answer_from_the_engine_rows(history):
    assert rows(history, "SELECT group_id, generation, trigger, trigger_member FROM rebalance_history "
                         "WHERE group_id = 'eager' ORDER BY generation") == [
        {"group_id": "eager", "generation": g, "trigger": t, "trigger_member": m}
        for g, t, m in ((1, "join", "a"), (2, "join", "b"), (3, "join", "c"), (4, "leave", "b"), (5, "expiry", "c"))]
    assert rows(history, "SELECT member_id, assigned_partitions FROM current_assignment "
                         "WHERE group_id = 'coop' ORDER BY member_id") == [
        {"member_id": "c1", "assigned_partitions": 2}, {"member_id": "c2", "assigned_partitions": 1}]
    health = {r["group_id"]: r for r in rows(history, "SELECT * FROM group_health")}
    assert sorted(health) == ["coop", "eager", "live", "static"]
    assert (health["eager"]["open_alerts"], health["eager"]["open_alert_rules"]) == (1, ["member_expired"])
    assert (health["coop"]["open_alerts"], health["coop"]["open_alert_rules"]) == (0, [])
    assert health["eager"]["rebalance_total"] == 5 and health["eager"]["members_expired_last_hour"] == 1


def test_a_failed_rebalance_counts_in_group_health(tmp_path):
    """The engine's reason for a rebalance whose assignor failed, in rejected_events, and nothing else."""
    import pyarrow as pa
    from deltalake import write_deltalake

    failure = {"group_id": "broken", "event_time": START, "reason": f"rebalance at {START} failed: no members"}
    write_deltalake(str(tmp_path / "rejected_events"),
                    pa.Table.from_pylist([failure], schema=table_arrow_schema("rejected_events")))
    history = open_history_sql(OutputConfig(root=str(tmp_path)))
    assert rows(history, "SELECT group_id, rebalance_total, failed_rebalance_total, generation FROM group_health") == [
        {"group_id": "broken", "rebalance_total": 0, "failed_rebalance_total": 1, "generation": None}]


@pytest.mark.parametrize("sql", [
    "SELECT 1", "  select 1", "(SELECT 1)", "-- a comment\nSELECT 2", "/* a comment */ SELECT 3",
    "WITH x AS (SELECT 1 AS n) SELECT n FROM x", "VALUES (1), (2)", "SHOW TABLES", "DESCRIBE group_health",
    "EXPLAIN SELECT * FROM group_health", "EXPLAIN ANALYZE SELECT count(*) FROM assignments", "SELECT 1;",
])
def test_read_only_statements_run(history, sql):
    history.query(sql)


@pytest.mark.parametrize("sql,says", [
    ("INSERT INTO alerts SELECT * FROM alerts", "got INSERT"),
    ("DELETE FROM assignments", "got DELETE"),
    ("UPDATE assignments SET member_id = 'x'", "got UPDATE"),
    ("DROP TABLE assignments", "got DROP"),
    ("CREATE VIEW mine AS SELECT 1", "got CREATE"),
    ("CREATE EXTERNAL TABLE e STORED AS CSV LOCATION '/etc/passwd'", "got CREATE"),
    ("SET datafusion.execution.batch_size = 1", "got SET"),
    ("EXPLAIN ANALYZE INSERT INTO alerts SELECT * FROM alerts", "EXPLAIN of INSERT"),
    ("WITH x AS (SELECT 1) INSERT INTO alerts SELECT * FROM alerts", "not implemented"),
    ("SELECT 1; DROP TABLE assignments", "single SQL statement"),
    ("", "got nothing"),
])
def test_statements_that_write_are_refused_with_one_line(root, history, sql, says):
    before = table_versions(root)
    with pytest.raises(QueryError) as refused:
        history.query(sql)
    message = str(refused.value)
    assert says in message and "\n" not in message
    assert table_versions(root) == before
    assert set(history.names) <= {r["table_name"] for r in rows(history, "SHOW TABLES")}


def test_copy_to_a_file_is_refused_and_writes_nothing(history, tmp_path):
    target = tmp_path / "copy.parquet"
    for sql in (f"COPY (SELECT * FROM assignments) TO '{target}'",
                f"EXPLAIN ANALYZE COPY (SELECT * FROM assignments) TO '{target}'"):
        with pytest.raises(QueryError, match="read-only"):
            history.query(sql)
    assert not target.exists()


@pytest.mark.parametrize("sql,says", [
    ("SELECT nope FROM group_health", "No field named nope"),
    ("SELECT * FROM no_such_table", "not found"),
    ("SELEC 1", "SELEC"),
    ("SELECT CAST(group_id AS INT) FROM assignments", "Cannot cast string"),
])
def test_bad_statements_are_one_line_errors(history, sql, says):
    with pytest.raises(QueryError) as failed:
        history.query(sql)
    assert says in str(failed.value) and "\n" not in str(failed.value)


@pytest.mark.parametrize("group_id", ["it's", "a\\'b", "x' OR '1'='1", 'wordcount<script>&"app"', "ünïcode"])
def test_free_text_is_quoted_as_one_literal(tmp_path, group_id):
    import pyarrow as pa
    from deltalake import write_deltalake

    events = [{"group_id": g, "event_time": START, "member_id": "m", "event": "joined", "late": False,
               "generation_before": 0} for g in (group_id, "other", "x")]
    write_deltalake(str(tmp_path / "member_events"),
                    pa.Table.from_pylist(events, schema=table_arrow_schema("member_events")))
    history = open_history_sql(OutputConfig(root=str(tmp_path)))
    assert rows(history, f"SELECT group_id FROM member_events WHERE group_id = {sql_string(group_id)}") == [
        {"group_id": group_id}]


def test_a_missing_output_directory_is_named(tmp_path):
    with pytest.raises(QueryError, match="does not exist"):
        open_history_sql(OutputConfig(root=str(tmp_path / "absent")))
