"""`rebalance-monitor query` without Spark, on Delta tables of real engine rows: output formats,
errors, --list, --spark-sql and the help that names every table and view."""

from __future__ import annotations

import csv
import io
import json
from contextlib import redirect_stderr, redirect_stdout

import pytest

from schemas.tables import TABLES
from streaming.cli.main import build_parser, main
from streaming.reporting.views import VIEW_NAMES
from tests.reporting.tables import engine_rows, scenario_groups, write_tables


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return str(write_tables(tmp_path_factory.mktemp("query"), engine_rows(scenario_groups())))


def query(*args, stdin: str | None = None) -> tuple[int, str, str]:
    """The command in this process, with an empty config file: the defaults, whatever
    conf/rebalance-monitor.toml says today."""
    import sys
    import tempfile

    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdin
    try:
        if stdin is not None:
            sys.stdin = io.StringIO(stdin)
        with tempfile.NamedTemporaryFile(suffix=".toml") as config, redirect_stdout(out), redirect_stderr(err):
            code = main(["query", "--config", config.name, *args])
    finally:
        sys.stdin = saved
    return code, out.getvalue(), err.getvalue()


def subcommand_parser(name: str):
    parser = build_parser()
    return next(a for a in parser._actions if a.dest == "command").choices[name]


def test_help_names_every_table_and_view():
    text = subcommand_parser("query").format_help()
    for name in tuple(TABLES) + VIEW_NAMES:
        assert name in text, name


@pytest.mark.parametrize("command", ["query", "report"])
def test_every_flag_has_help(command):
    for action in subcommand_parser(command)._actions:
        if action.dest in ("help",) or action.help == "==SUPPRESS==":
            continue
        assert action.help and len(action.help) > 10, (command, action.option_strings or action.dest)


def test_table_format(root):
    code, out, err = query("--output", root, "SELECT member_id, partitions, assigned_partitions, event_time "
                                             "FROM current_assignment WHERE group_id = 'coop' ORDER BY member_id")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "+-----------+------------+---------------------+-------------------------+",
        "| member_id | partitions | assigned_partitions | event_time              |",
        "+-----------+------------+---------------------+-------------------------+",
        "| c1        | t0-0, t0-1 | 2                   | 2023-11-14 22:13:26.500 |",
        "| c2        | t0-2       | 1                   | 2023-11-14 22:13:26.500 |",
        "+-----------+------------+---------------------+-------------------------+",
        "(2 rows)"]


def test_csv_and_json_formats(root):
    sql = ("SELECT group_id, generation, agrees, differing, to_timestamp_millis(event_time) AS checked_at "
           "FROM assignment_checks ORDER BY generation")
    code, out, _ = query("--output", root, "--format", "csv", sql)
    assert code == 0
    assert list(csv.reader(io.StringIO(out))) == [
        ["group_id", "generation", "agrees", "differing", "checked_at"],
        ["live", "1", "true", "[]", "2023-11-14 22:13:22.000"],
        ["live", "2", "false", '[{"topic":"t0","partition":3,"computed_member":"b","actual_member":"a"}]',
         "2023-11-14 22:13:26.000"]]
    code, out, _ = query("--output", root, "--format", "json", sql)
    assert code == 0
    assert [json.loads(line) for line in out.splitlines()] == [
        {"group_id": "live", "generation": 1, "agrees": True, "differing": [], "checked_at": "2023-11-14T22:13:22.000Z"},
        {"group_id": "live", "generation": 2, "agrees": False, "checked_at": "2023-11-14T22:13:26.000Z",
         "differing": [{"topic": "t0", "partition": 3, "computed_member": "b", "actual_member": "a"}]}]
    # "Now" is the newest event time written: eager's generation 5 (c's expiry) at 27.5 s; static's
    # generation 1 was at 2 s.
    code, out, _ = query("--output", root, "--format", "json", "SELECT group_id, as_of, open_alert_rules, "
                         "last_rebalance_seconds_ago FROM group_health WHERE group_id IN ('eager', 'static') "
                         "ORDER BY group_id")
    assert [json.loads(line) for line in out.splitlines()] == [
        {"group_id": "eager", "as_of": "2023-11-14T22:13:47.500Z", "open_alert_rules": ["member_expired"],
         "last_rebalance_seconds_ago": 0.0},
        {"group_id": "static", "as_of": "2023-11-14T22:13:47.500Z", "open_alert_rules": [],
         "last_rebalance_seconds_ago": 25.5}]


def test_limit_and_statement_from_standard_input(root):
    code, out, err = query("--output", root, "--limit", "2", "-",
                           stdin="SELECT generation FROM rebalance_history WHERE group_id = 'eager' ORDER BY 1")
    assert code == 0 and out.endswith("(2 rows)\n") and "| 2          |" in out
    assert err == "(first 2 rows; --limit N for more)\n"


@pytest.mark.parametrize("args,says", [
    (["SELECT nope FROM group_health"], "rebalance-monitor query: error: Schema error: No field named nope."),
    (["DROP TABLE assignments"], "rebalance-monitor query: error: only read-only statements run here"),
    ([], "rebalance-monitor query: error: give a SQL statement"),
    (["--limit", "-1", "SELECT 1"], "rebalance-monitor query: error: --limit must not be negative, got -1"),
])
def test_errors_are_exit_2_and_one_line(root, args, says):
    code, out, err = query("--output", root, *args)
    assert (code, out) == (2, "")
    assert err.startswith(says) and err.count("\n") == 1


def test_missing_output_directory(tmp_path):
    code, _, err = query("SELECT 1", "--output", str(tmp_path / "absent"))
    assert code == 2
    assert err.strip() == (f"rebalance-monitor query: error: output directory {tmp_path / 'absent'} "
                           "does not exist (run the job first, or point --output at its Delta root)")


def test_list_prints_every_name_with_its_columns(root):
    code, out, _ = query("--output", root, "--list")
    assert code == 0
    blocks = {block.splitlines()[0]: block.splitlines()[1:] for block in out.strip().split("\n\n")}
    assert [head.split(" ")[0] for head in blocks] == list(TABLES) + list(VIEW_NAMES)
    assert "rejected_events (table) (not written yet: empty)" in blocks
    for table, fields in TABLES.items():
        head = next(h for h in blocks if h.split(" ")[0] == table)
        assert [line.split()[0] for line in blocks[head]] == [f.name for f in fields]
    assert "  partitions  array<struct<topic:string,partition:int>>" in blocks["assignments (table)"]
    assert "  as_of  timestamp" in blocks["group_health (view)"]


def test_spark_sql_script_registers_every_name(root):
    code, out, _ = query("--output", root, "--spark-sql")
    assert code == 0
    statements = [s for s in out.split(";\n") if s.strip()]
    created = [s.split()[5] for s in statements]  # CREATE OR REPLACE TEMPORARY VIEW <name> AS ...
    assert sorted(created) == sorted(tuple(TABLES) + VIEW_NAMES)
    assert f"assignments AS SELECT * FROM delta.`{root}/assignments`" in out
    assert "rejected_events AS SELECT CAST(NULL AS STRING) AS `group_id`" in out  # not written yet


@pytest.mark.parametrize("command,doc", [("query", "docs/sql.md"), ("report", "docs/report.md")])
def test_every_flag_is_in_the_docs(command, doc):
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / doc).read_text()
    for action in subcommand_parser(command)._actions:
        if action.option_strings and action.help != "==SUPPRESS==" and action.dest != "help":
            assert f"`{action.option_strings[0]}" in text, (doc, action.option_strings[0])


def test_docs_name_every_table_and_view():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "sql.md").read_text()
    names = text.split("## Names", 1)[1].split("## Plain", 1)[0]
    for name in tuple(TABLES) + VIEW_NAMES:
        assert f"`{name}`" in names, name
