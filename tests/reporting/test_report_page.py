"""`rebalance-monitor report` without Spark: the page and charts from Delta tables of real engine
rows (tests/reporting/tables.py) and from histories built here, checked as a reader would read
them: numbers that do not overlap, legends off the bars, axes that fit the data, full member ids."""

from __future__ import annotations

import io
import subprocess
import sys
import tempfile
from contextlib import redirect_stderr
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from streaming.reporting.report.history import UNITS, GroupHistory
from streaming.reporting.report.window import TimeWindow
from tests.reporting.tables import START, engine_rows, scenario_groups, write_tables

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return str(write_tables(tmp_path_factory.mktemp("report"), engine_rows(scenario_groups())))


def report(*args) -> tuple[int, str]:
    """The command in this process, with an empty config file (the defaults)."""
    from streaming.cli.main import main

    err = io.StringIO()
    with tempfile.NamedTemporaryFile(suffix=".toml") as config, redirect_stderr(err):
        code = main(["report", "--config", config.name, *args])
    return code, err.getvalue()


class Page(HTMLParser):
    """The tables of a report page: each a list of rows of cell texts, under the h2 before it."""

    def __init__(self, text: str):
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self._section = ""
        self._heading: list[str] | None = None
        self._cell: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        if tag == "h2":
            self._heading = []
        elif tag == "table":
            self.tables[self._section] = []
        elif tag == "tr":
            self.tables[self._section].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag == "h2":
            self._section = "".join(self._heading)
            self._heading = None
        elif tag in ("td", "th") and self._cell is not None:
            self.tables[self._section][-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data):
        if self._heading is not None:
            self._heading.append(data)
        if self._cell is not None:
            self._cell.append(data)


def page_of(directory: Path) -> tuple[str, Page]:
    text = (directory / "index.html").read_text(encoding="utf-8")
    return text, Page(text)


# -- the page, from Delta tables --------------------------------------------------------------------


def test_agreement_with_the_live_group_is_a_section_of_its_own(root, tmp_path):
    code, err = report("--group", "live", "--output", root, "--report-dir", str(tmp_path))
    assert code == 0, err
    text, page = page_of(tmp_path)
    summary = dict(page.tables["Summary"])
    assert summary["live group agreement"] == ("1 of 2 compared generations agreed; the latest compared, "
                                               "generation 2, differed")
    checks = page.tables["Agreement with the live group"]
    assert [row[:3] for row in checks[1:]] == [["1", "22:13:22.000", "yes"], ["2", "22:13:26.000", "NO"]]
    assert checks[0][1] == "time (UTC, 2023-11-14)"
    keys = {row[1]: row[0] for row in page.tables["Members"][1:]}  # member id -> key
    assert checks[2][5] == f"t0-3: computed {keys['b']}, actual {keys['a']}"
    assert '<td class="bad">NO</td>' in text


def test_a_group_nobody_observed_live_says_so(root, tmp_path):
    code, _ = report("--group", "eager", "--output", root, "--report-dir", str(tmp_path))
    assert code == 0
    text, page = page_of(tmp_path)
    assert dict(page.tables["Summary"])["live group agreement"] == (
        "not observed live (no assignment_checks rows for the group)")
    assert "Agreement with the live group" not in page.tables  # a note, no table


def test_members_table_resolves_every_key_to_the_full_member_id(root, tmp_path):
    code, _ = report("--group", "static", "--output", root, "--report-dir", str(tmp_path))
    assert code == 0
    members = page_of(tmp_path)[1].tables["Members"]
    assert members[0] == ["key", "member id", "group instance id", "client id", "generations",
                          "gone (UTC, 2023-11-14)", "partitions now"]
    assert [(r[0], r[1], r[2], r[4], r[5], r[6]) for r in members[1:]] == [
        ("m1", "a", "i-a", "1", "replaced by m3 at 22:13:28.000", "3"),
        ("m2", "b", "i-b", "1", "", "3"),
        ("m3", "a2", "i-a", "", "", "")]
    generations = page_of(tmp_path)[1].tables["Generations"]
    assert generations[1][3] == "m1"  # the trigger member by its key; the full id is its tooltip


def test_old_flag_names_still_work_and_say_their_new_names(root, tmp_path):
    code, err = report("--group", "eager", "--output-root", root, "--out", str(tmp_path))
    assert code == 0, err
    assert (tmp_path / "index.html").is_file()
    assert err.splitlines()[:2] == ["rebalance-monitor report: --out is deprecated, use --report-dir",
                                    "rebalance-monitor report: --output-root is deprecated, use --output"]
    code, err = report("--group", "eager", "--output", root, "--out", str(tmp_path), "--report-dir", str(tmp_path))
    assert code == 2 and "--out is the old name of --report-dir: give --report-dir only" in err


def test_no_flag_is_taken_for_another_by_its_prefix(root, tmp_path):
    """--out is not an abbreviation of --output: the page directory is never read as the Delta root."""
    with pytest.raises(SystemExit):
        report("--group", "eager", "--outp", root)


def test_unknown_group_is_exit_2_naming_the_group_and_tables(root, tmp_path):
    code, err = report("--group", "no-such-group", "--output", root, "--report-dir", str(tmp_path))
    assert code == 2
    assert f"no history for group 'no-such-group': it has no generations in balance_metrics, assignments " \
           f"and member_events under {root}" in err
    assert not (tmp_path / "index.html").exists()
    code, err = report("--group", "eager", "--output", root, "--report-dir", str(tmp_path),
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
    from streaming.reporting.report.window import parse_time

    assert parse_time("1700000000000") == START
    assert parse_time("2023-11-14T22:13:20Z") == START
    assert parse_time("2023-11-14T22:13:20") == START  # no offset: UTC, not the machine's zone
    assert parse_time("2023-11-14T23:13:20+01:00") == START
    assert TimeWindow.parse(None, "1700000000000").sql_condition("t") == f"t <= {START}"


def test_the_cli_starts_without_pyspark_pandas_matplotlib_or_pyarrow():
    code = ("import sys; from streaming.cli.main import build_parser; build_parser(); "
            "print(sorted(m for m in ('pyspark', 'pandas', 'matplotlib', 'pyarrow', 'deltalake') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_report_reads_without_spark(root, tmp_path):
    code = (f"import sys; from streaming.cli.main import main; "
            f"rc = main(['report', '--group', 'coop', '--output', {root!r}, '--report-dir', {str(tmp_path)!r}]); "
            f"print(rc, 'pyspark' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0", "False"]


# -- the charts, from histories built here ------------------------------------------------------------


def synthetic_history(members: int, generations: int, units: int, group_type: str = "streams",
                      spacing_ms: int = 1_000, member_id=lambda i: f"m{i:03d}") -> GroupHistory:
    ids = [member_id(i) for i in range(members)]
    triggers = ["join", "cooperative_followup", "leave", "expiry"]
    gens = pd.DataFrame([{"generation": g, "event_time": START + g * spacing_ms, "trigger": triggers[g % 4],
                          "trigger_member": None if g % 4 == 1 else ids[g % members], "assignor": "range",
                          "protocol": "eager", "group_type": group_type, "phase": "complete", "members": members,
                          "partitions": units, "moved": g % 3, "imbalance": g % 2, "unassigned": 0,
                          "stickiness": 1.0} for g in range(1, generations + 1)])
    holdings = pd.DataFrame([{"generation": g, "member_id": m, "group_instance_id": None, "units": units // members}
                             for g in range(1, generations + 1) for m in ids])
    placements = pd.DataFrame([{"generation": g, "member_id": ids[u % members], "unit_id": f"0_{u}", "kind": "active"}
                               for g in range(1, generations + 1) for u in range(units)])
    events = pd.DataFrame([{"event_time": START + i, "member_id": m, "event": "joined", "group_instance_id": None,
                            "reason": None, "previous_member_id": None, "late": False} for i, m in enumerate(ids)])
    return GroupHistory(group_id="big", window=TimeWindow(), root="/nowhere", generations=gens, holdings=holdings,
                        placements=placements if group_type == "streams" else None, member_events=events,
                        alerts=None, unit_columns=UNITS[group_type])


def boxes(fig, gid: str | None = None):
    """Window extents of the figure's visible texts (with ``gid``, only those)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    return [t.get_window_extent(renderer) for t in fig.findobj(lambda a: hasattr(a, "get_text"))
            if t.get_visible() and t.get_text() and (gid is None or t.get_gid() == gid)]


def drawn(chart, history):
    """The figure a chart function draws, before it becomes PNG bytes (close it after use)."""
    from streaming.reporting.report import charts

    figures = []
    real_png = charts._png
    charts._png = lambda fig: figures.append(fig) or b""
    try:
        chart(history)
    finally:
        charts._png = real_png
    return figures[0]


def overlapping(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


@pytest.mark.parametrize("generations,spacing_ms", [(40, 1_000), (60, 300), (35, 50)])
def test_timeline_numbers_never_overlap_each_other_or_the_title(generations, spacing_ms):
    import matplotlib.pyplot as plt

    from streaming.reporting.report.charts import draw_timeline

    fig = draw_timeline(synthetic_history(6, generations, 12, "consumer", spacing_ms=spacing_ms))
    try:
        labels = boxes(fig, "generation-label")
        title = next(t.get_window_extent() for t in fig.findobj(lambda a: hasattr(a, "get_text"))
                     if t.get_text().startswith("Rebalance timeline"))
        assert len(labels) >= min(generations, 20)  # most are numbered even when close together
        for i, box in enumerate(labels):
            assert not overlapping(box, title)
            for other in labels[i + 1:]:
                assert not overlapping(box, other)
    finally:
        plt.close(fig)


def test_timeline_names_each_generation_it_could_not_number():
    import matplotlib.pyplot as plt

    from streaming.reporting.report.charts import TIMELINE_LABEL_ROWS, draw_timeline

    crowded = TIMELINE_LABEL_ROWS + 3  # more generations in one millisecond than rows for their numbers
    fig = draw_timeline(synthetic_history(2, crowded, 4, "consumer", spacing_ms=0))
    try:
        title = next(t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text"))
                     if t.get_text().startswith("Rebalance timeline"))
        numbered = len(boxes(fig, "generation-label"))
        assert numbered == TIMELINE_LABEL_ROWS
        assert f"no room to number generations {', '.join(str(g) for g in range(numbered + 1, crowded + 1))}" in title
    finally:
        plt.close(fig)


def test_member_lanes_use_keys_and_distinguishing_parts_not_cut_ids():
    from streaming.reporting.report.charts import member_labels

    ids = lambda i: f"consumer-orders-{i}-9b10827a-c0fe-40c6-ae14-7773a491{i:04d}"  # noqa: E731
    history = synthetic_history(3, 2, 6, "consumer", member_id=ids)
    assert member_labels(history) == {ids(0): "m1  0-9b10827a-c0…", ids(1): "m2  1-9b10827a-c0…",
                                      ids(2): "m3  2-9b10827a-c0…"}


def test_stagger_puts_each_label_in_the_first_row_with_room():
    from streaming.reporting.report.charts import stagger

    assert stagger([(0, 10), (5, 15), (8, 20), (16, 30), (30, 40)], rows=2, gap=2) == [0, 1, None, 0, 1]


def test_balance_legend_covers_no_bar():
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    from streaming.reporting.report.charts import balance_per_rebalance

    fig = drawn(balance_per_rebalance, synthetic_history(4, 12, 8, "consumer"))
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        legends = [ax.get_legend().get_window_extent(renderer) for ax in fig.axes if ax.get_legend()]
        bars = [p.get_window_extent(renderer) for ax in fig.axes for p in ax.patches if isinstance(p, Rectangle)
                and p.get_height() > 0]
        assert legends and bars
        assert not any(overlapping(legend, bar) for legend in legends for bar in bars)
    finally:
        plt.close(fig)


def test_one_generation_gets_an_axis_from_zero():
    import matplotlib.pyplot as plt

    from streaming.reporting.report.charts import balance_per_rebalance

    history = synthetic_history(2, 1, 4, "consumer")
    fig = drawn(balance_per_rebalance, replace(history, generations=history.generations.assign(moved=0, imbalance=0)))
    try:
        for ax in fig.axes:
            low, high = ax.get_ylim()
            assert low == 0 and high >= 1, (low, high)
            assert all(float(t).is_integer() for t in ax.get_yticks() if low <= t <= high)
            assert ax.get_xlim() == (-0.5, 0.5)  # the one bar, not a wide empty axis
    finally:
        plt.close(fig)


@pytest.mark.parametrize("chart", ["units_per_member", "unit_placement"])
def test_heatmaps_fill_their_axes(chart):
    """One cell per generation from edge to edge: no strip of the grey that means "not a member"."""
    import matplotlib.pyplot as plt

    from streaming.reporting.report import charts

    fig = drawn(getattr(charts, chart), synthetic_history(3, 7, 6))
    try:
        assert fig.axes[0].get_xlim() == (-0.5, 6.5)
    finally:
        plt.close(fig)


def test_large_groups_still_render_every_chart():
    from streaming.reporting.report.charts import PLACEMENT_MAX_UNITS, TIMELINE_MAX_MEMBER_LANES, render_charts

    history = synthetic_history(TIMELINE_MAX_MEMBER_LANES + 20, 80, PLACEMENT_MAX_UNITS + 50)
    charts = render_charts(history)
    assert [c.name for c in charts] == ["units-per-member.png", "balance.png", "timeline.png", "placement.png"]
    for chart in charts:
        assert chart.png[:8] == b"\x89PNG\r\n\x1a\n" and len(chart.png) > 10_000


def test_membership_spans_follow_joins_leaves_expiries_and_static_rejoins():
    from streaming.reporting.report.charts import member_order, membership_spans

    history = synthetic_history(1, 1, 2, group_type="consumer")
    rows = [(100, "a", "joined", None), (300, "a", "left", None), (500, "a", "rejoined", None),
            (200, "s1", "joined", None), (400, "s2", "static_rejoin", "s1"), (250, "old", "expired", None)]
    events = pd.DataFrame([{"event_time": t, "member_id": m, "event": e, "group_instance_id": None, "reason": None,
                            "previous_member_id": p, "late": False} for t, m, e, p in rows])
    holdings = pd.DataFrame([{"generation": 1, "member_id": "z-held-all-along", "group_instance_id": None, "units": 2}])
    history = replace(history, member_events=events, holdings=holdings)
    # In the order they first show up: the member held in generation 1 (at START + 1 s) comes last.
    assert member_order(history) == ["a", "s1", "old", "s2", "z-held-all-along"]
    assert membership_spans(history, 0, 1_000) == {
        "z-held-all-along": [(0, 1_000)], "a": [(100, 300), (500, 1_000)], "s1": [(200, 400)],
        "old": [(0, 250)], "s2": [(400, 1_000)]}
