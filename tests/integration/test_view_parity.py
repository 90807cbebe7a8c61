"""The same tables and views through Spark SQL and through `query`'s engine (DataFusion), over the
same Delta tables the real job wrote: same names, same columns, same rows.

The views have one definition each (streaming/reporting/views.py); Spark's session gets them from
`rebalance-monitor query --spark-sql`, the script docs/sql.md gives `spark-sql` users, and
DataFusion from streaming/reporting/history_sql.py. The groups cover every kind the job records:
consumer groups eager, cooperative and static, a Kafka Streams and a Kafka Connect group, a group a
collector observed live whose assignment once differs (assignment_checks), an expiry (alerts), and
a malformed record (rejected_events).
"""

from __future__ import annotations

import datetime as dt
import io
import uuid
from contextlib import redirect_stdout

import pytest

from schemas.tables import TABLES
from streaming.feeds.kafka_io import produce
from streaming.reporting.views import VIEW_NAMES
from tests import stories
from tests.integration.test_query import EXPECTED, documented_examples, example_sql
from tests.integration.jobs import make_config, produce_story, run_available_now

pytestmark = pytest.mark.integration

START = 1_700_000_000_000
#: What docs/sql.md tells spark-sql users to write for DataFusion's function of the same meaning.
SPARK_SPELLING = {"to_timestamp_millis(": "timestamp_millis("}


@pytest.fixture(scope="module")
def job_output(kafka_broker, spark, tmp_path_factory):
    config = make_config(kafka_broker, tmp_path_factory.mktemp("parity"), uuid.uuid4().hex[:10])
    live = [e for e in stories.real_range_group() if not (isinstance(e, dict) and e["event_time"] == 5_500)]
    live += [stories.collector_observation(5_500, "update", "a", (0, 1, 2, 3)),
             stories.collector_observation(5_500, "update", "b", (4, 5))]
    consumer_groups = {
        "eager": stories.eager_range_story() + stories.heartbeats(["a"], 32_000, 95_000),
        "coop": stories.cooperative_story() + stories.heartbeats(["c1", "c2"], 12_000, 95_000),
        "static": stories.static_bounce_story() + stories.heartbeats(["a2", "b"], 14_000, 95_000),
        "live": stories.in_time_order(live),
    }
    for group, story in consumer_groups.items():
        produce_story(config, stories.to_records(story, group, START))
    produce_story(config, stories.task_group_records(stories.streams_scale_out_story(), "streams", START, "streams"))
    produce_story(config, stories.task_group_records(stories.connect_bounce_story(), "connect", START, "connect"))
    produce(config.kafka.bootstrap_servers, config.kafka.membership_topic, [("eager", b"{oops")])
    run_available_now(spark, config)
    return config


@pytest.fixture(scope="module")
def engines(job_output, spark):
    """(Spark session with the names registered by the --spark-sql script, DataFusion's session)."""
    from streaming.cli.main import main
    from streaming.reporting.history_sql import open_history_sql

    script = io.StringIO()
    with redirect_stdout(script):
        assert main(["query", "--output", job_output.output.root, "--spark-sql"]) == 0
    for statement in script.getvalue().split(";\n"):
        if statement.strip():
            spark.sql(statement)
    return spark, open_history_sql(job_output.output)


def plain(value):
    """A value as both engines' rows can be compared: timestamps as epoch ms (Spark gives them in
    microseconds with a time zone, DataFusion in milliseconds without), nested values alike."""
    if isinstance(value, dt.datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
        return round(aware.timestamp() * 1000)
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def spark_rows(spark, sql: str) -> tuple[list[str], list[dict]]:
    from streaming.reporting.history_sql import without_views

    table = spark.sql(sql).toArrow()
    import pyarrow as pa

    table = table.cast(pa.schema([pa.field(f.name, without_views(f.type)) for f in table.schema]))
    return table.column_names, [plain(r) for r in table.to_pylist()]


def datafusion_rows(history, sql: str) -> tuple[list[str], list[dict]]:
    table = history.query(sql)
    return table.column_names, [plain(r) for r in table.to_pylist()]


def same_rows(a: list[dict], b: list[dict]) -> bool:
    key = repr
    return sorted(a, key=key) == sorted(b, key=key)


@pytest.mark.parametrize("name", list(TABLES) + list(VIEW_NAMES))
def test_every_table_and_view_gives_the_same_rows_in_both_engines(engines, name):
    spark, history = engines
    spark_columns, spark_result = spark_rows(spark, f"SELECT * FROM {name}")
    df_columns, df_result = datafusion_rows(history, f"SELECT * FROM {name}")
    assert spark_columns == df_columns
    assert len(spark_result) == len(df_result)
    assert same_rows(spark_result, df_result)


def test_the_views_have_rows_of_every_kind(engines):
    """The comparison means something: every view has rows, from every group."""
    _, history = engines
    groups = {"eager", "coop", "static", "live", "streams", "connect"}
    for view in ("current_assignment", "rebalance_history", "group_health"):
        assert {r["group_id"] for r in history.query(f"SELECT group_id FROM {view}").to_pylist()} == groups, view
    assert history.query("SELECT * FROM open_alerts").num_rows > 0
    assert {r["agrees"] for r in history.query("SELECT agrees FROM assignment_checks").to_pylist()} == {True, False}
    assert history.query("SELECT * FROM rejected_events").num_rows == 1


@pytest.mark.parametrize("name", list(TABLES) + list(VIEW_NAMES))
def test_every_table_and_view_has_the_same_column_types_in_both_engines(engines, name):
    from streaming.cli.query import sql_type

    spark, history = engines
    spark_types = [sql_type(f.type) for f in spark.sql(f"SELECT * FROM {name} LIMIT 0").toArrow().schema]
    assert spark_types == [sql_type(f.type) for f in history.schema(name)]


@pytest.mark.parametrize("question", list(EXPECTED))
def test_documented_questions_give_the_same_rows_in_spark_sql(engines, question):
    """docs/sql.md's examples, in Spark SQL as docs/sql.md tells spark-sql users to write them."""
    spark, history = engines
    sql = example_sql(question)
    spark_sql = sql
    for ours, theirs in SPARK_SPELLING.items():
        spark_sql = spark_sql.replace(ours, theirs)
    spark_columns, spark_result = spark_rows(spark, spark_sql)
    df_columns, df_result = datafusion_rows(history, sql)
    assert spark_columns == df_columns and spark_result == df_result  # the examples ORDER BY: same order


def test_every_documented_question_is_compared():
    assert set(documented_examples()) == set(EXPECTED)
