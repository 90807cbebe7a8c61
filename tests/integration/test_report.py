"""`rebalance-monitor report` on groups the real job wrote (real broker, real Spark, real Delta).

The job runs once for the module over five groups: the eager story of test_job_scenarios.py, the
cooperative one (a rebalance in two generations), a Streams group whose ids need HTML escaping, a
Connect group, and a group a collector observed live whose assignment once differed. The reports
are then written from those tables (without Spark, as the command does) and checked against them:
the charts are real PNGs inlined in the page and written beside it, and the summary's numbers are
the tables' numbers (read back with Spark). The page's parts without the job: tests/reporting/.
"""

from __future__ import annotations

import base64
import io
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
GROUPS = {"eager": "partitions", "coop": "partitions", "streams": "active tasks", "connect": "tasks",
          "live": "partitions"}


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
    # The second observation of the live group disagrees: it kept partition 3 on a.
    live = [e for e in stories.real_range_group() if not (isinstance(e, dict) and e["event_time"] == 5_500)]
    live += [stories.collector_observation(5_500, "update", "a", (0, 1, 2, 3)),
             stories.collector_observation(5_500, "update", "b", (4, 5))]
    produce_story(config, stories.to_records(stories.in_time_order(live), "live", START))
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
    code, err = report("--group", STREAMS_GROUP, "--output", old_root, "--report-dir", str(out / "streams"))
    assert code == 0, err
    for group in ("eager", "coop", "connect", "live"):
        code, err = report("--group", group, "--output", root, "--report-dir", str(out / group))
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
            f"{episodes.count()} ({episodes.where(F.col('resolved') == 0).count()} still firing)",
            "live group agreement": _agreement(table("assignment_checks") if Path(root, "assignment_checks").is_dir()
                                               else None)}


def _agreement(checks) -> str:
    from pyspark.sql import functions as F

    if checks is None or checks.count() == 0:
        return "not observed live (no assignment_checks rows for the group)"
    last = checks.orderBy(F.col("generation").desc(), F.col("event_time").desc()).first()
    return (f"{checks.where(F.col('agrees')).count()} of {checks.count()} compared generations agreed; "
            f"the latest compared, generation {last.generation}, {'agreed' if last.agrees else 'differed'}")


@pytest.mark.parametrize("group", ["eager", "coop", "connect", "live"])
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
        ("member_expired", "", "firing", "22:13:46.500", "")]  # a group-wide rule: no subject
    assert alerts[0][6] == "fired (UTC, 2023-11-14)"
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
    code, err = report("--group", "eager", "--output", root, "--report-dir", str(tmp_path),
                       "--since", "2023-11-14T22:13:25Z", "--until", str(START + 14_000))
    assert code == 0, err
    summary = page(tmp_path)[1].summary
    assert summary["generations"] == "3" and summary["first generation"].startswith("2 at ")
    assert summary["latest generation"] == "4 at 2023-11-14 22:13:34.000 UTC"


def test_the_live_group_agreement_comes_from_the_jobs_assignment_checks(reports):
    parsed = page(reports / "live")[1]
    checks = next(t for t in parsed.tables if t[0][:3] == ["generation", "time (UTC, 2023-11-14)", "agrees"])
    assert [(r[0], r[2]) for r in checks[1:]] == [("1", "yes"), ("2", "NO")]
    assert checks[2][5].startswith("t0-3: computed m") and ", actual m" in checks[2][5]
