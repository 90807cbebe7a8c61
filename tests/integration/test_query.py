"""SQL over the history: docs/sql.md's example questions and `rebalance-monitor query`, on the
scenario groups of test_job_scenarios.py (real broker, real streaming job, real Delta).

The job runs once for the module; every question is then answered from the same tables, the way
`query` answers it (DataFusion, no Spark). tests/integration/test_view_parity.py asks Spark SQL the
same questions over the same kind of tables; tests/reporting/ checks the command without the job.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from streaming.feeds.kafka_io import produce
from tests import stories
from tests.integration.jobs import make_config, produce_story, run_available_now

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "sql.md"
START = 1_700_000_000_000  # 2023-11-14T22:13:20Z


def ts(offset_ms: int) -> str:
    """The JSON form of START + offset_ms as a timestamp (UTC)."""
    from datetime import datetime, timezone

    t = datetime.fromtimestamp((START + offset_ms) / 1000, tz=timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def tp(*partitions):
    return [{"topic": "t0", "partition": p} for p in partitions]


@pytest.fixture(scope="module")
def history(kafka_broker, spark, tmp_path_factory):
    """The three scenario groups of test_job_scenarios.py, through the job."""
    config = make_config(kafka_broker, tmp_path_factory.mktemp("query"), uuid.uuid4().hex[:10])
    coop = stories.cooperative_story() + stories.heartbeats(["c1", "c2"], 12_000, 32_000)
    static = stories.static_bounce_story() + stories.heartbeats(["a2", "b"], 14_000, 32_000)
    for group, story in (("eager", stories.eager_range_story()), ("coop", coop), ("static", static)):
        produce_story(config, stories.to_records(story, group, START))
    produce(config.kafka.bootstrap_servers, config.kafka.membership_topic, [("eager", b"{oops")])
    run_available_now(spark, config)
    return config


def ask(history, sql: str) -> list[dict]:
    """The rows `query --format json` prints for ``sql`` over the job's tables."""
    from streaming.cli.query import run_sql
    from streaming.reporting.history_sql import open_history_sql

    text, truncated = run_sql(open_history_sql(history.output), sql, "json")
    assert not truncated
    return [json.loads(line) for line in text.splitlines()]


def documented_examples() -> dict[str, str]:
    """docs/sql.md's questions (### headings under "Questions and their SQL") and their SQL."""
    text = DOC.read_text().split("## Questions and their SQL", 1)[1]
    return {m.group(1).strip(): m.group(2).strip()
            for m in re.finditer(r"^### (.+?)\n.*?```sql\n(.*?)```", text, flags=re.S | re.M)}


# What each documented question returns on the scenario: (group standing in for 'orders', rows).
EXPECTED = {
    "Which groups rebalanced most in the last hour?": (None, [
        {"group_id": "eager", "rebalance_rate_per_hour": 5, "rebalance_total": 5, "last_rebalance_seconds_ago": 0.0},
        {"group_id": "coop", "rebalance_rate_per_hour": 3, "rebalance_total": 3, "last_rebalance_seconds_ago": 21.0},
        {"group_id": "static", "rebalance_rate_per_hour": 1, "rebalance_total": 1, "last_rebalance_seconds_ago": 25.5},
    ]),
    "Which member triggered each rebalance of a group?": ("eager", [
        {"generation": 1, "event_time": ts(2_000), "trigger": "join", "trigger_member": "a"},
        {"generation": 2, "event_time": ts(6_000), "trigger": "join", "trigger_member": "b"},
        {"generation": 3, "event_time": ts(10_000), "trigger": "join", "trigger_member": "c"},
        {"generation": 4, "event_time": ts(14_000), "trigger": "leave", "trigger_member": "b"},
        {"generation": 5, "event_time": ts(27_500), "trigger": "expiry", "trigger_member": "c"},
    ]),
    "How many partitions moved in each rebalance?": (None, [
        {"group_id": g, "generation": n, "trigger": t, "moved": m, "since_previous_ms": d} for g, n, t, m, d in (
            ("coop", 1, "join", 0, None), ("coop", 2, "join", 1, 4_000),
            ("coop", 3, "cooperative_followup", 0, 500),
            ("eager", 1, "join", 0, None), ("eager", 2, "join", 3, 4_000), ("eager", 3, "join", 3, 4_000),
            ("eager", 4, "leave", 2, 4_000), ("eager", 5, "expiry", 3, 13_500),
            ("static", 1, "join", 0, None))
    ]),
    "Which partitions moved in one generation, and to whom?": ("eager", [
        {"from_member": "a", "topic": "t0", "partition": 2, "to_member": "b", "reason": "moved"},
        {"from_member": "b", "topic": "t0", "partition": 4, "to_member": "c", "reason": "moved"},
        {"from_member": "b", "topic": "t0", "partition": 5, "to_member": "c", "reason": "moved"},
    ]),
    "Which groups are unbalanced now (imbalance above N, here 0)?": (None, [
        {"group_id": "coop", "generation": 3, "imbalance": 1, "members": 2, "assigned_partitions": 3},
    ]),
    "Which generations were ever unbalanced (imbalance above N, here 0)?": (None, [
        {"group_id": "coop", "generation": 2, "phase": "revocation", "imbalance": 2},
        {"group_id": "coop", "generation": 3, "phase": "followup", "imbalance": 1},
    ]),
    "Which members expired?": (None, [
        {"group_id": "eager", "member_id": "c", "expired_at": ts(26_500), "reason": "no heartbeat for 10000 ms"},
    ]),
    "What is a group's current assignment?": ("coop", [
        {"member_id": "c1", "assigned_partitions": 2, "partitions": tp(0, 1)},
        {"member_id": "c2", "assigned_partitions": 1, "partitions": tp(2)},
    ]),
}


def example_sql(question: str) -> str:
    group, _ = EXPECTED[question]
    sql = documented_examples()[question]
    return sql.replace("'orders'", f"'{group}'") if group else sql


def test_every_documented_question_is_checked():
    assert set(documented_examples()) == set(EXPECTED)


@pytest.mark.parametrize("question", list(EXPECTED))
def test_documented_question_returns_what_the_scenario_implies(history, question):
    assert ask(history, example_sql(question)) == EXPECTED[question][1]


def test_group_health_in_full(history):
    rows = ask(history, "SELECT * FROM group_health ORDER BY group_id")
    common = {"group_type": "consumer", "failed_rebalance_total": 0, "as_of": ts(27_500)}
    assert rows == [
        {"group_id": "coop", "assignor": "cooperative-sticky", "protocol": "cooperative", "generation": 3,
         "last_rebalance_time": ts(6_500), "last_trigger": "cooperative_followup", "last_trigger_member": None,
         "phase": "followup", "members": 2, "assigned_partitions": 3, "imbalance": 1, "unassigned": 0,
         "rebalance_total": 3, "rebalance_rate_per_hour": 3, "last_rebalance_seconds_ago": 21.0,
         "members_expired_last_hour": 0, "open_alerts": 0, "open_alert_rules": [], **common},
        {"group_id": "eager", "assignor": "range", "protocol": "eager", "generation": 5,
         "last_rebalance_time": ts(27_500), "last_trigger": "expiry", "last_trigger_member": "c",
         "phase": "complete", "members": 1, "assigned_partitions": 6, "imbalance": 0, "unassigned": 0,
         "rebalance_total": 5, "rebalance_rate_per_hour": 5, "last_rebalance_seconds_ago": 0.0,
         "members_expired_last_hour": 1, "open_alerts": 1, "open_alert_rules": ["member_expired"], **common},
        {"group_id": "static", "assignor": "range", "protocol": "eager", "generation": 1,
         "last_rebalance_time": ts(2_000), "last_trigger": "join", "last_trigger_member": "a",
         "phase": "complete", "members": 2, "assigned_partitions": 6, "imbalance": 0, "unassigned": 0,
         "rebalance_total": 1, "rebalance_rate_per_hour": 1, "last_rebalance_seconds_ago": 25.5,
         "members_expired_last_hour": 0, "open_alerts": 0, "open_alert_rules": [], **common},
    ]
    # The static member's rename is no rebalance: its current assignment keeps the old member id
    # of generation 1 (the job writes assignments per generation).
    assert ask(history, "SELECT member_id, group_instance_id, assigned_partitions FROM current_assignment "
                      "WHERE group_id = 'static' ORDER BY member_id") == [
        {"member_id": "a", "group_instance_id": "i-a", "assigned_partitions": 3},
        {"member_id": "b", "group_instance_id": "i-b", "assigned_partitions": 3}]


def test_every_view_column_is_documented(history):
    from streaming.reporting.history_sql import open_history_sql
    from streaming.reporting.views import VIEW_NAMES

    doc = DOC.read_text()
    tables_sql = open_history_sql(history.output)
    for view in VIEW_NAMES:
        section = doc.split(f"### `{view}`", 1)[1].split("\n### ", 1)[0]
        for column in tables_sql.schema(view).names:
            assert f"`{column}`" in section, f"{view}.{column} is not in docs/sql.md"


def _cli(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "streaming.cli.main", "query", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def test_cli_json_and_csv(history):
    root = history.output.root
    question = "Which member triggered each rebalance of a group?"
    done = _cli(example_sql(question), "--format", "json", "--output", root)
    assert done.returncode == 0, done.stderr
    assert [json.loads(line) for line in done.stdout.splitlines()] == EXPECTED[question][1]
    assert done.stderr == ""

    done = _cli("SELECT * FROM current_assignment WHERE group_id = 'coop' ORDER BY member_id",
                "--format", "csv", "--output", root)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == ("group_id,generation,event_time,event_time_ms,member_id,group_instance_id,partitions,"
                        "assigned_partitions,assignor,protocol,phase,group_type")
    assert lines[1:] == [
        'coop,3,2023-11-14 22:13:26.500,1700000006500,c1,,"[{""topic"":""t0"",""partition"":0},'
        '{""topic"":""t0"",""partition"":1}]",2,cooperative-sticky,cooperative,followup,consumer',
        'coop,3,2023-11-14 22:13:26.500,1700000006500,c2,,"[{""topic"":""t0"",""partition"":2}]",1,'
        'cooperative-sticky,cooperative,followup,consumer']


def test_cli_bad_sql_is_exit_code_2_and_one_line(history):
    done = _cli("SELECT nope FROM group_health", "--output", history.output.root)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("rebalance-monitor query: error: Schema error: No field named nope.")


def test_cli_missing_output_directory(tmp_path):
    done = _cli("SELECT 1", "--output", str(tmp_path / "absent"))
    assert done.returncode == 2
    assert done.stderr.strip() == (f"rebalance-monitor query: error: output directory {tmp_path / 'absent'} "
                                   "does not exist (run the job first, or point --output at its Delta root)")
