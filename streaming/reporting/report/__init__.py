"""A group's story as an HTML page with PNG charts (``rebalance-monitor report``, docs/report.md).

:mod:`.history` reads the group from the tables (DataFusion, no Spark), :mod:`.charts` draws it with
matplotlib, :mod:`.page` lays it out; :func:`write_report` writes the page and the PNGs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from streaming.reporting.report.history import GroupHistory, NoGroupHistoryError, load_group_history
from streaming.reporting.report.window import TimeWindow, TimeWindowError, parse_time

PAGE = "index.html"


@dataclass(frozen=True)
class WrittenReport:
    page: Path
    charts: tuple[Path, ...]


def write_report(history: GroupHistory, out_dir: str | Path) -> WrittenReport:
    """Render the charts and the page into ``out_dir`` (created if needed); PNGs beside index.html."""
    from streaming.reporting.report.charts import render_charts
    from streaming.reporting.report.page import render_page

    directory = Path(out_dir)
    directory.mkdir(parents=True, exist_ok=True)
    charts = render_charts(history)
    paths = []
    for chart in charts:
        path = directory / chart.name
        path.write_bytes(chart.png)
        paths.append(path)
    page = directory / PAGE
    page.write_text(render_page(history, charts), encoding="utf-8")
    return WrittenReport(page=page, charts=tuple(paths))


__all__ = ["GroupHistory", "NoGroupHistoryError", "TimeWindow", "TimeWindowError", "WrittenReport",
           "load_group_history", "parse_time", "write_report"]
