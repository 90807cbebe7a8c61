"""The report's HTML page: one self-contained file (charts inlined as data URIs) in plain HTML.

Every value that comes from the data (group and member ids, reasons, alert texts) is escaped:
ids are free text chosen by the clients.
"""

from __future__ import annotations

import base64
from html import escape

import pandas as pd

from streaming.reporting.report.charts import Chart
from streaming.reporting.report.history import GroupHistory
from streaming.reporting.report.window import format_utc

#: Rows a table on the page shows at most (the charts still show everything).
TABLE_MAX_ROWS = 500

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
h1 { font-size: 1.6em; } h2 { margin-top: 1.8em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f5f5f5; } td.num { text-align: right; }
img { max-width: 100%; border: 1px solid #eee; }
.caption, .note { color: #555; font-size: 0.9em; }
"""


def _cell(value) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)) or value is pd.NA:
        return "<td></td>"
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    return f'<td class="num">{escape(str(value))}</td>' if numeric else f"<td>{escape(str(value))}</td>"


def _table(headers: list[str] | None, rows: list[list], empty: str) -> str:
    if not rows:
        return f'<p class="note">{escape(empty)}</p>'
    shown = rows[:TABLE_MAX_ROWS]
    head = "<tr>" + "".join(f"<th>{escape(h)}</th>" for h in headers) + "</tr>\n" if headers else ""
    body = "\n".join("<tr>" + "".join(_cell(v) for v in r) + "</tr>" for r in shown)
    more = (f'<p class="note">First {TABLE_MAX_ROWS} of {len(rows)} rows.</p>' if len(rows) > TABLE_MAX_ROWS else "")
    return f"<table>\n{head}{body}\n</table>{more}"


def _whole(value) -> int | None:
    """An integer column as int, or None where the job left it null (not every group type fills it)."""
    return None if value is None or pd.isna(value) else int(value)


def _distinct_in_order(values) -> str:
    seen = [v for v in dict.fromkeys(values) if isinstance(v, str)]
    return " → ".join(seen) if seen else "-"


def summary_rows(history: GroupHistory) -> list[tuple[str, object]]:
    """The summary as (label, value) pairs: what the page's first table shows."""
    g, latest, events = history.generations, history.latest, history.member_events
    counts = events["event"].value_counts()
    alerts = history.alerts
    if alerts is None:
        alert_text = "no alerts table in the output root"
    else:
        firing = int((alerts["status"] == "firing").sum())
        alert_text = f"{len(alerts)} ({firing} still firing)"
    return [
        ("group", history.group_id),
        ("group type", history.group_type),
        ("assignor", _distinct_in_order(g["assignor"])),
        ("protocol", _distinct_in_order(g["protocol"])),
        ("window", history.window.describe()),
        ("first generation", f"{int(g['generation'].iloc[0])} at {format_utc(int(g['event_time'].iloc[0]))}"),
        ("latest generation", f"{int(latest['generation'])} at {format_utc(int(latest['event_time']))}"),
        ("generations", len(g)),
        ("rebalances", history.rebalance_count),
        ("members now", _whole(latest["members"])),
        (f"{history.units} now", history.units_now),
        (f"{history.units} moved", int(g["moved"].fillna(0).sum())),
        ("largest imbalance", _whole(g["imbalance"].max())),
        ("members joined", int(counts.get("joined", 0) + counts.get("rejoined", 0) + counts.get("static_rejoin", 0))),
        ("members left", int(counts.get("left", 0))),
        ("members expired", int(counts.get("expired", 0))),
        ("alerts", alert_text),
    ]


def _generations_table(history: GroupHistory) -> str:
    headers = ["generation", "time (UTC)", "trigger", "trigger member", "phase", "assignor", "members",
               history.units, "moved", "imbalance", "unassigned"]
    held = history.holdings.groupby("generation")["units"].sum()
    rows = [[int(r.generation), format_utc(int(r.event_time)), r.trigger, r.trigger_member, r.phase, r.assignor,
             _whole(r.members), int(held.get(r.generation, 0)), _whole(r.moved), _whole(r.imbalance),
             _whole(r.unassigned)]
            for r in history.generations.itertuples(index=False)]
    return _table(headers, rows, "No generations.")


def _member_events_table(history: GroupHistory) -> str:
    rows = [[format_utc(int(r.event_time)), r.member_id, r.event, r.group_instance_id, r.reason,
             r.previous_member_id, "late" if r.late else None]
            for r in history.member_events.itertuples(index=False)]
    return _table(["time (UTC)", "member", "event", "group instance id", "reason", "replaced member", "late"],
                  rows, "No member events in the window.")


def _alerts_section(history: GroupHistory) -> str:
    if history.alerts is None:
        return '<p class="note">The output root has no <code>alerts</code> table (written by a job from before alerting).</p>'
    rows = []
    for r in history.alerts.itertuples(index=False):
        fired = None if pd.isna(r.fired_at) else format_utc(int(r.fired_at))
        resolved = None if pd.isna(r.resolved_at) else format_utc(int(r.resolved_at))
        generation = None if pd.isna(r.generation) else int(r.generation)
        rows.append([r.rule, r.subject, r.severity, r.status, r.value, r.threshold, fired, resolved, generation,
                     r.summary])
    return _table(["rule", "subject", "severity", "status", "value", "threshold", "fired (UTC)", "resolved (UTC)",
                   "generation", "summary"], rows, "No alerts for this group in the window.")


def _chart_section(chart: Chart) -> str:
    data = base64.b64encode(chart.png).decode("ascii")
    return (f"<h2>{escape(chart.title)}</h2>\n"
            f'<p class="caption">{escape(chart.caption)} (<a href="{escape(chart.name)}">{escape(chart.name)}</a>)</p>\n'
            f'<img src="data:image/png;base64,{data}" alt="{escape(chart.title)}" '
            f'data-file="{escape(chart.name)}">')


def render_page(history: GroupHistory, charts: list[Chart]) -> str:
    summary = _table(None, [list(row) for row in summary_rows(history)], "")
    group = escape(history.group_id)
    sections = "\n".join(_chart_section(c) for c in charts)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Rebalance report: {group}</title>
<style>{_STYLE}</style>
</head>
<body>
<h1>Rebalance report: <code>{group}</code></h1>
<p class="note">From the Delta tables under <code>{escape(history.root)}</code>, {escape(history.window.describe())}.
Times are event times in UTC.</p>
<h2>Summary</h2>
{summary}
{sections}
<h2>Alerts</h2>
{_alerts_section(history)}
<h2>Generations</h2>
{_generations_table(history)}
<h2>Member events</h2>
{_member_events_table(history)}
</body>
</html>
"""
