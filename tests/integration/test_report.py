"""`rebalance-monitor report` on groups the real job wrote (real broker, real Spark, real Delta).

The job runs once for the module over three groups: the eager story of test_job_scenarios.py, the
cooperative one (a rebalance in two generations) and a Streams group whose ids need HTML escaping.
The reports are then written from those tables and checked against them: the charts are real PNGs
inlined in the page and written beside it, and the summary's numbers are the tables' numbers.
"""

from __future__ import annotations

import base64
import io
import subprocess
import sys
import uuid
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests import stories
from tests.integration.jobs import make_config, produce_story, run_available_now

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
START = 1_700_000_000_000  # 2023-11-14T22:13:20Z
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: A Streams group and members whose ids are HTML: the page must show them, not interpret them.
STREAMS_GROUP = 'wordcount<script>&"app"'
P1, P2 = "<p1>", 'p2&"x"'


def streams_story():
    """Two Streams clients share four tasks; the first one leaves."""
    events = [stories.workload(0, partitions=4, topic="0"), stories.join(1_000, P1, topics=("0",))]
    events += stories.heartbeats([P1], 1_500, 5_000)
    events += [stories.join(5_000, P2, topics=("0",))] + stories.heartbeats([P1, P2], 5_500, 9_000)
    events += [stories.leave(9_000, P1)] + stories.heartbeats([P2], 9_500, 14_000)
    return stories.in_time_order(events)


def as_group_type(records, group_type: str):
    """Records of tests.stories (which writes consumer groups) for a Streams or Connect group."""
    membership, beats = records
    return [(key, {**value, "group_type": group_type}) for key, value in membership], beats


def without_alerts(root: str, copy: Path) -> str:
    """A copy of the output root as a job from before the alerts table would have left it."""
    import shutil

    shutil.copytree(root, copy, ignore=lambda directory, names: ["alerts"] if directory == root else [])
    return str(copy)


@pytest.fixture(scope="module")
def job_output(kafka_broker, spark, tmp_path_factory):
    """The job's tables for the three groups (before any alerts table exists)."""
    config = make_config(kafka_broker, tmp_path_factory.mktemp("report"), uuid.uuid4().hex[:10])
    coop = stories.cooperative_story() + stories.heartbeats(["c1", "c2"], 12_000, 32_000)
    produce_story(config, stories.to_records(stories.eager_range_story(), "eager", START))
    produce_story(config, stories.to_records(coop, "coop", START))
    produce_story(config, as_group_type(stories.to_records(streams_story(), STREAMS_GROUP, START), "streams"))
    run_available_now(spark, config)
    return config


def report(*args) -> tuple[int, str]:
    """Run `rebalance-monitor report` in this process (its Spark session is the suite's)."""
    from contextlib import redirect_stderr

    from streaming.cli import main

    err = io.StringIO()
    with redirect_stderr(err):
        code = main(["report", *args])
    return code, err.getvalue()


@pytest.fixture(scope="module")
def reports(job_output, spark, tmp_path_factory):
    """Reports of eager and coop, and of the Streams group from a root without an alerts table."""
    root = job_output.output.root
    out = tmp_path_factory.mktemp("reports")
    assert Path(root, "alerts").is_dir()  # the job writes alerts: eager's member expires
    old_root = without_alerts(root, out / "data-without-alerts")
    code, err = report("--group", STREAMS_GROUP, "--output-root", old_root, "--out", str(out / "streams"))
    assert code == 0, err
    for group in ("eager", "coop"):
        code, err = report("--group", group, "--output", root, "--out", str(out / group))
        assert code == 0, err
    return out


class Page(HTMLParser):
    """The parts of a report page the tests read: images, and the cells of each table."""

    def __init__(self, text: str):
        super().__init__()
        self.images: list[dict] = []
        self.tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.images.append(dict(attrs))
        elif tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)

    @property
    def summary(self) -> dict[str, str]:
        return {row[0]: row[1] for row in self.tables[0] if row and row[0]}


def page(directory: Path) -> tuple[str, Page]:
    text = (directory / "index.html").read_text(encoding="utf-8")
    return text, Page(text)


def png_of(image: dict) -> bytes:
    prefix = "data:image/png;base64,"
    assert image["src"].startswith(prefix)
    return base64.b64decode(image["src"][len(prefix):], validate=True)


def assert_real_chart(data: bytes) -> None:
    import matplotlib.image
    import numpy as np

    assert data[:8] == PNG_SIGNATURE
    pixels = matplotlib.image.imread(io.BytesIO(data), format="png")
    height, width = pixels.shape[:2]
    assert width >= 600 and height >= 150, (width, height)
    # Drawn, not blank: a chart has axes, text and colours.
    assert len(np.unique(pixels.reshape(-1, pixels.shape[-1]), axis=0)) > 20


def tables_say(spark, root: str, group: str) -> dict:
    from pyspark.sql import functions as F

    metrics = spark.read.format("delta").load(f"{root}/balance_metrics").where(F.col("group_id") == group)
    latest = metrics.orderBy(F.col("generation").desc()).first()
    events = spark.read.format("delta").load(f"{root}/member_events").where(F.col("group_id") == group)
    alerts = spark.read.format("delta").load(f"{root}/alerts").where(F.col("group_id") == group)
    episodes = alerts.groupBy("alert_id", "fired_at").agg(F.count_if(F.col("status") == "resolved").alias("resolved"))
    return {"alerts": f"{episodes.count()} ({episodes.where(F.col('resolved') == 0).count()} still firing)",
            "generations": metrics.count(),
            "rebalances": metrics.where(F.col("trigger") != "cooperative_followup").count(),
            "latest": latest.generation, "members now": latest.members, "units now": latest.partitions,
            "moved": metrics.agg(F.sum("moved")).first()[0],
            "expired": events.where(F.col("event") == "expired").count(),
            "left": events.where(F.col("event") == "left").count()}


@pytest.mark.parametrize("group,charts", [("eager", 3), ("coop", 3), ("streams", 4)])
def test_every_chart_is_a_real_png_inlined_in_the_page_and_written_beside_it(reports, group, charts):
    _, parsed = page(reports / group)
    assert len(parsed.images) == charts
    for image in parsed.images:
        data = png_of(image)
        assert_real_chart(data)
        assert (reports / group / image["data-file"]).read_bytes() == data
    assert sorted(p.name for p in (reports / group).glob("*.png")) == sorted(i["data-file"] for i in parsed.images)


@pytest.mark.parametrize("group", ["eager", "coop"])
def test_summary_numbers_are_the_tables_numbers(spark, job_output, reports, group):
    expected = tables_say(spark, job_output.output.root, group)
    summary = page(reports / group)[1].summary
    assert summary["group"] == group
    assert int(summary["generations"]) == expected["generations"]
    assert int(summary["rebalances"]) == expected["rebalances"]
    assert summary["latest generation"].startswith(f"{expected['latest']} at ")
    assert int(summary["members now"]) == expected["members now"]
    assert int(summary["partitions now"]) == expected["units now"]
    assert int(summary["partitions moved"]) == expected["moved"]
    assert int(summary["members expired"]) == expected["expired"]
    assert int(summary["members left"]) == expected["left"]
    assert summary["alerts"] == expected["alerts"]


def test_summary_of_the_scenarios(reports):
    """The same numbers, known from the stories: eager has 5 rebalances, coop one in 2 rounds (+ its first)."""
    eager = page(reports / "eager")[1].summary
    assert (eager["group type"], eager["assignor"], eager["protocol"]) == ("consumer", "range", "eager")
    assert (eager["generations"], eager["rebalances"], eager["members now"]) == ("5", "5", "1")
    assert eager["latest generation"] == "5 at 2023-11-14 22:13:47.500 UTC"
    assert eager["alerts"] == "1 (1 still firing)"  # c expired; no other group's alerts
    coop = page(reports / "coop")[1].summary
    assert (coop["assignor"], coop["protocol"]) == ("cooperative-sticky", "cooperative")
    assert (coop["generations"], coop["rebalances"]) == ("3", "2")


def test_alerts_shown_when_the_table_exists_and_absence_said_plainly(reports):
    parsed = page(reports / "eager")[1]
    alerts = next(t for t in parsed.tables if t[0][:4] == ["rule", "subject", "severity", "status"])
    assert [(r[0], r[1], r[3], r[6], r[7]) for r in alerts[1:]] == [
        ("member_expired", "", "firing", "2023-11-14 22:13:46.500 UTC", "")]  # a group-wide rule: no subject
    streams = page(reports / "streams")[1]
    assert streams.summary["alerts"] == "no alerts table in the output root"


def test_streams_group_counts_tasks_and_escapes_ids(reports):
    text, parsed = page(reports / "streams")
    summary = parsed.summary
    assert summary["group"] == STREAMS_GROUP  # the parser unescapes: the page had it escaped
    assert (summary["group type"], summary["generations"], summary["members now"], summary["tasks now"]) == \
        ("streams", "3", "1", "4")
    titles = [i["alt"] for i in parsed.images]
    assert titles == ["Tasks per member across generations", "Imbalance and moved tasks per rebalance",
                      "Rebalance timeline", "Task placement per member"]
    for raw in (STREAMS_GROUP, P1, P2):
        assert raw not in text
    assert "wordcount&lt;script&gt;&amp;&quot;app&quot;" in text and "&lt;p1&gt;" in text
    members = {row[1] for t in parsed.tables if t[0][:3] == ["time (UTC)", "member", "event"] for row in t[1:]}
    assert members == {P1, P2}


def test_window_keeps_only_its_generations(job_output, tmp_path):
    root = job_output.output.root
    code, err = report("--group", "eager", "--output", root, "--out", str(tmp_path),
                       "--since", "2023-11-14T22:13:25Z", "--until", str(START + 14_000))
    assert code == 0, err
    summary = page(tmp_path)[1].summary
    assert summary["generations"] == "3" and summary["first generation"].startswith("2 at ")
    assert summary["latest generation"] == "4 at 2023-11-14 22:13:34.000 UTC"


def test_unknown_group_is_exit_2_naming_the_group_and_tables(job_output, tmp_path):
    code, err = report("--group", "no-such-group", "--output", job_output.output.root, "--out", str(tmp_path))
    assert code == 2
    assert "no history for group 'no-such-group'" in err
    assert "balance_metrics, assignments and member_events under" in err
    assert not (tmp_path / "index.html").exists()
    code, err = report("--group", "eager", "--output", job_output.output.root, "--out", str(tmp_path),
                       "--since", str(START + 60_000))
    assert code == 2 and "group 'eager' has 5 generation(s)" in err and "but none from 2023-11-14 22:14:20.000 UTC" in err


@pytest.mark.parametrize("flag,value,message", [
    ("--since", "yesterday", "--since: expected an ISO-8601 time or epoch milliseconds"),
    ("--until", "2023-13-01", "--until: expected an ISO-8601 time or epoch milliseconds"),
])
def test_bad_times_are_clear_errors(tmp_path, flag, value, message):
    code, err = report("--group", "eager", "--output", str(tmp_path), flag, value)
    assert code == 2 and message in err and repr(value) in err


def test_window_that_ends_before_it_starts_is_refused(tmp_path):
    code, err = report("--group", "eager", "--output", str(tmp_path), "--since", "2023-11-15", "--until", "2023-11-14")
    assert code == 2 and "--since (2023-11-15 00:00:00.000 UTC) is after --until (2023-11-14 00:00:00.000 UTC)" in err


def test_time_parsing():
    from streaming.report.window import TimeWindow, parse_time

    assert parse_time("1700000000000") == START
    assert parse_time("2023-11-14T22:13:20Z") == START
    assert parse_time("2023-11-14T22:13:20") == START  # no offset: UTC, not the machine's zone
    assert parse_time("2023-11-14T23:13:20+01:00") == START
    assert TimeWindow.parse(None, "1700000000000").sql_condition("t") == f"t <= {START}"


def test_the_cli_starts_without_pyspark_pandas_or_matplotlib():
    code = ("import sys; from streaming.cli import build_parser; build_parser(); "
            "print(sorted(m for m in ('pyspark', 'pandas', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# Pure parts, on histories built here (no Spark): member order, membership spans, large groups.

def synthetic_history(members: int, generations: int, units: int, group_type: str = "streams"):
    import pandas as pd

    from streaming.report.history import GroupHistory
    from streaming.report.window import TimeWindow

    ids = [f"m{i:03d}" for i in range(members)]
    gens = pd.DataFrame([{"generation": g, "event_time": START + g * 1_000, "trigger": "join", "trigger_member": ids[0],
                          "assignor": "range", "protocol": "eager", "group_type": group_type, "phase": "complete",
                          "members": members, "partitions": units, "moved": g % 3, "imbalance": g % 2,
                          "unassigned": 0, "stickiness": 1.0} for g in range(1, generations + 1)])
    holdings = pd.DataFrame([{"generation": g, "member_id": m, "group_instance_id": None, "units": units // members}
                             for g in range(1, generations + 1) for m in ids])
    placements = pd.DataFrame([{"generation": g, "member_id": ids[u % members], "topic": "0", "partition": u}
                               for g in range(1, generations + 1) for u in range(units)])
    events = pd.DataFrame([{"event_time": START + i, "member_id": m, "event": "joined", "group_instance_id": None,
                            "reason": None, "previous_member_id": None, "late": False} for i, m in enumerate(ids)])
    return GroupHistory(group_id="big", window=TimeWindow(), root="/nowhere", generations=gens, holdings=holdings,
                        placements=placements if group_type == "streams" else None, member_events=events,
                        alerts=None)


def test_large_groups_still_render_every_chart():
    from streaming.report.charts import PLACEMENT_MAX_UNITS, TIMELINE_MAX_MEMBER_LANES, render_charts

    history = synthetic_history(TIMELINE_MAX_MEMBER_LANES + 20, 80, PLACEMENT_MAX_UNITS + 50)
    charts = render_charts(history)
    assert [c.name for c in charts] == ["units-per-member.png", "balance.png", "timeline.png", "placement.png"]
    for chart in charts:
        assert_real_chart(chart.png)


def test_membership_spans_follow_joins_leaves_expiries_and_static_rejoins():
    import pandas as pd

    from streaming.report.charts import member_order, membership_spans

    history = synthetic_history(1, 1, 2, group_type="consumer")
    rows = [(100, "a", "joined", None), (300, "a", "left", None), (500, "a", "rejoined", None),
            (200, "s1", "joined", None), (400, "s2", "static_rejoin", "s1"), (250, "old", "expired", None)]
    events = pd.DataFrame([{"event_time": t, "member_id": m, "event": e, "group_instance_id": None, "reason": None,
                            "previous_member_id": p, "late": False} for t, m, e, p in rows])
    holdings = pd.DataFrame([{"generation": 1, "member_id": "z-held-all-along", "group_instance_id": None, "units": 2}])
    from dataclasses import replace

    history = replace(history, member_events=events, holdings=holdings)
    assert member_order(history) == ["z-held-all-along", "a", "s1", "old", "s2"]
    assert membership_spans(history, 0, 1_000) == {
        "z-held-all-along": [(0, 1_000)], "a": [(100, 300), (500, 1_000)], "s1": [(200, 400)],
        "old": [(0, 250)], "s2": [(400, 1_000)]}
