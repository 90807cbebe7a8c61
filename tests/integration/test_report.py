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
#: A Streams group whose id is HTML: the page must show it, not interpret it.
STREAMS_GROUP = 'wordcount<script>&"app"'
#: Per group of the module: (directory of its report, its unit's plural as the page says it).
GROUPS = {"eager": "partitions", "coop": "partitions", "streams": "active tasks", "connect": "tasks"}


def without_alerts(root: str, copy: Path) -> str:
    """A copy of the output root as a job from before the alerts table would have left it."""
    import shutil

    shutil.copytree(root, copy, ignore=lambda directory, names: ["alerts"] if directory == root else [])
    return str(copy)


@pytest.fixture(scope="module")
def job_output(kafka_broker, spark, tmp_path_factory):
    """The job's tables for four groups: consumer eager and cooperative, Kafka Streams, Kafka Connect."""
    config = make_config(kafka_broker, tmp_path_factory.mktemp("report"), uuid.uuid4().hex[:10])
    # The Streams and Connect stories run to 90 s of event time: the consumer groups' members keep
    # heartbeating as long, so that only the stories' own expiries happen.
    coop = stories.cooperative_story() + stories.heartbeats(["c1", "c2"], 12_000, 95_000)
    eager = stories.eager_range_story() + stories.heartbeats(["a"], 32_000, 95_000)
    produce_story(config, stories.to_records(eager, "eager", START))
    produce_story(config, stories.to_records(coop, "coop", START))
    produce_story(config, stories.task_group_records(stories.streams_scale_out_story(), STREAMS_GROUP, START,
                                                     "streams"))
    produce_story(config, stories.task_group_records(stories.connect_bounce_story(), "connect", START, "connect"))
    run_available_now(spark, config)
    return config


def report(*args) -> tuple[int, str]:
    """Run `rebalance-monitor report` in this process (its Spark session is the suite's), with an
    empty config file: the defaults, whatever conf/rebalance-monitor.toml says today."""
    import tempfile
    from contextlib import redirect_stderr

    from streaming.cli.main import main

    err = io.StringIO()
    with tempfile.NamedTemporaryFile(suffix=".toml") as config, redirect_stderr(err):
        code = main(["report", "--config", config.name, *args])
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
    for group in ("eager", "coop", "connect"):
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
    """The summary's numbers, straight from the job's tables."""
    from pyspark.sql import functions as F

    def table(name):
        return spark.read.format("delta").load(f"{root}/{name}").where(F.col("group_id") == group)

    metrics = table("balance_metrics")
    latest = metrics.orderBy(F.col("generation").desc()).first()
    units = {"streams": "active_tasks", "connect": "tasks"}.get(latest.group_type, "partitions")
    held = table("assignments").where(F.col("generation") == latest.generation).agg(F.sum(F.size(units))).first()[0]
    events = table("member_events")
    episodes = table("alerts").groupBy("alert_id", "fired_at").agg(
        F.count_if(F.col("status") == "resolved").alias("resolved")) if Path(root, "alerts").is_dir() else None
    return {"generations": str(metrics.count()),
            "rebalances": str(metrics.where(F.col("trigger") != "cooperative_followup").count()),
            "latest generation": str(latest.generation), "group type": latest.group_type,
            "members now": str(latest.members), "units now": str(held or 0),
            "moved": str(metrics.agg(F.sum("moved")).first()[0]),
            "members expired": str(events.where(F.col("event") == "expired").count()),
            "members left": str(events.where(F.col("event") == "left").count()),
            "alerts": "no alerts table in the output root" if episodes is None else
            f"{episodes.count()} ({episodes.where(F.col('resolved') == 0).count()} still firing)"}


@pytest.mark.parametrize("group", ["eager", "coop", "connect"])
def test_summary_numbers_are_the_tables_numbers(spark, job_output, reports, group):
    expected = tables_say(spark, job_output.output.root, group)
    units = GROUPS[group]
    summary = page(reports / group)[1].summary
    assert summary["group"] == group
    assert summary["latest generation"].split(" at ")[0] == expected.pop("latest generation")
    assert summary[f"{units} now"] == expected.pop("units now")
    assert summary[f"{units} moved"] == expected.pop("moved")
    assert {k: summary[k] for k in expected} == expected


def test_streams_summary_numbers_are_the_tables_numbers(spark, reports):
    """The Streams report was written from a copy of the root without the alerts table."""
    root = next(reports.glob("data-without-alerts"))
    expected = tables_say(spark, str(root), STREAMS_GROUP)
    summary = page(reports / "streams")[1].summary
    assert summary["group"] == STREAMS_GROUP and summary["group type"] == "streams"
    assert summary["latest generation"].split(" at ")[0] == expected.pop("latest generation")
    assert summary["active tasks now"] == expected.pop("units now")
    assert summary["active tasks moved"] == expected.pop("moved")
    assert {k: summary[k] for k in expected} == expected


def test_summary_of_the_scenarios(reports):
    """Numbers known from the stories: eager has 5 rebalances, coop one in 2 rounds (+ its first)."""
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


@pytest.mark.parametrize("group,unit", [("streams", "Active task"), ("connect", "Task")])
def test_streams_and_connect_groups_are_drawn_in_tasks(reports, group, unit):
    parsed = page(reports / group)[1]
    assert [i["alt"] for i in parsed.images] == [
        f"{unit}s per member across generations", f"Imbalance and moved {unit.lower()}s per rebalance",
        "Rebalance timeline", f"{unit} placement per member"]


def test_group_ids_are_escaped(reports):
    text, parsed = page(reports / "streams")
    assert STREAMS_GROUP not in text
    assert "wordcount&lt;script&gt;&amp;&quot;app&quot;" in text
    assert parsed.summary["group"] == STREAMS_GROUP  # what a browser shows


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
    from streaming.reporting.report.window import TimeWindow, parse_time

    assert parse_time("1700000000000") == START
    assert parse_time("2023-11-14T22:13:20Z") == START
    assert parse_time("2023-11-14T22:13:20") == START  # no offset: UTC, not the machine's zone
    assert parse_time("2023-11-14T23:13:20+01:00") == START
    assert TimeWindow.parse(None, "1700000000000").sql_condition("t") == f"t <= {START}"


def test_the_cli_starts_without_pyspark_pandas_or_matplotlib():
    code = ("import sys; from streaming.cli.main import build_parser; build_parser(); "
            "print(sorted(m for m in ('pyspark', 'pandas', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# Pure parts, on histories built here (no Spark): member order, membership spans, large groups.

def synthetic_history(members: int, generations: int, units: int, group_type: str = "streams"):
    import pandas as pd

    from streaming.reporting.report.history import UNITS, GroupHistory
    from streaming.reporting.report.window import TimeWindow

    ids = [f"m{i:03d}" for i in range(members)]
    gens = pd.DataFrame([{"generation": g, "event_time": START + g * 1_000, "trigger": "join", "trigger_member": ids[0],
                          "assignor": "range", "protocol": "eager", "group_type": group_type, "phase": "complete",
                          "members": members, "partitions": units, "moved": g % 3, "imbalance": g % 2,
                          "unassigned": 0, "stickiness": 1.0} for g in range(1, generations + 1)])
    holdings = pd.DataFrame([{"generation": g, "member_id": m, "group_instance_id": None, "units": units // members}
                             for g in range(1, generations + 1) for m in ids])
    placements = pd.DataFrame([{"generation": g, "member_id": ids[u % members], "unit_id": f"0_{u}", "kind": "active"}
                               for g in range(1, generations + 1) for u in range(units)])
    events = pd.DataFrame([{"event_time": START + i, "member_id": m, "event": "joined", "group_instance_id": None,
                            "reason": None, "previous_member_id": None, "late": False} for i, m in enumerate(ids)])
    return GroupHistory(group_id="big", window=TimeWindow(), root="/nowhere", generations=gens, holdings=holdings,
                        placements=placements if group_type == "streams" else None, member_events=events,
                        alerts=None, unit_columns=UNITS[group_type])


def test_large_groups_still_render_every_chart():
    from streaming.reporting.report.charts import PLACEMENT_MAX_UNITS, TIMELINE_MAX_MEMBER_LANES, render_charts

    history = synthetic_history(TIMELINE_MAX_MEMBER_LANES + 20, 80, PLACEMENT_MAX_UNITS + 50)
    charts = render_charts(history)
    assert [c.name for c in charts] == ["units-per-member.png", "balance.png", "timeline.png", "placement.png"]
    for chart in charts:
        assert_real_chart(chart.png)


def test_membership_spans_follow_joins_leaves_expiries_and_static_rejoins():
    import pandas as pd

    from streaming.reporting.report.charts import member_order, membership_spans

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
