"""The report's HTML page: one self-contained file (charts inlined as data URIs) in plain HTML.

Every value that comes from the data (group and member ids, reasons, alert texts) is escaped:
ids are free text chosen by the clients.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from html import escape

import pandas as pd

from streaming.reporting.report.charts import Chart, member_keys
from streaming.reporting.report.history import GroupHistory
from streaming.reporting.report.window import format_utc

#: Rows a table on the page shows at most (the charts still show everything).
TABLE_MAX_ROWS = 500
#: Differing partitions listed per compared generation; the count says how many more there are.
DIFFERING_MAX = 20

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
h1 { font-size: 1.6em; } h2 { margin-top: 1.8em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f5f5f5; } td.num { text-align: right; }
td.bad { color: #b00020; font-weight: bold; } td.time, td.key { white-space: nowrap; }
td.id { font-family: ui-monospace, monospace; font-size: 0.9em; } td.key { font-family: ui-monospace, monospace; }
img { max-width: 100%; border: 1px solid #eee; }
div.wide { overflow-x: auto; }  /* a table wider than the page scrolls instead of running off it */
.caption, .note { color: #555; font-size: 0.9em; }
"""


@dataclass(frozen=True)
class Styled:
    """A cell value with a CSS class of the page's style (``id``: a member id; ``bad``: disagreement;
    ``time``: not wrapped) and a tooltip."""

    value: object
    css: str
    title: str | None = None


def _cell(value) -> str:
    css, title = "", None
    if isinstance(value, Styled):
        value, css, title = value.value, value.css, value.title
    if value is None or (isinstance(value, float) and pd.isna(value)) or value is pd.NA:
        return "<td></td>"
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    css = css or ("num" if numeric else "")
    attributes = (f' class="{css}"' if css else "") + (f' title="{escape(title)}"' if title else "")
    return f"<td{attributes}>{escape(str(value))}</td>"


@dataclass(frozen=True)
class Clock:
    """How the page's tables write a time: the time of day alone when everything on the page
    happened on one UTC day (the date is then in the column headers), the full date otherwise, so
    that the tables fit the page."""

    day: str | None = None

    def text(self, epoch_ms) -> str | None:
        if epoch_ms is None or pd.isna(epoch_ms):
            return None
        full = format_utc(int(epoch_ms))
        return full[len("2023-11-14 "):-len(" UTC")] if self.day else full

    def cell(self, epoch_ms) -> Styled | None:
        text = self.text(epoch_ms)
        return None if text is None else Styled(text, "time")

    def header(self, name: str) -> str:
        return f"{name} (UTC, {self.day})" if self.day else f"{name} (UTC)"


def page_clock(history: GroupHistory) -> Clock:
    times = [history.generations["event_time"], history.member_events["event_time"]]
    if history.alerts is not None:
        times += [history.alerts["fired_at"], history.alerts["resolved_at"]]
    if history.checks is not None:
        times.append(history.checks["event_time"])
    days = {format_utc(int(t))[:10] for column in times for t in column if t is not None and not pd.isna(t)}
    return Clock(days.pop() if len(days) == 1 else None)


def _table(headers: list[str] | None, rows: list[list], empty: str) -> str:
    if not rows:
        return f'<p class="note">{escape(empty)}</p>'
    shown = rows[:TABLE_MAX_ROWS]
    head = "<tr>" + "".join(f"<th>{escape(h)}</th>" for h in headers) + "</tr>\n" if headers else ""
    body = "\n".join("<tr>" + "".join(_cell(v) for v in r) + "</tr>" for r in shown)
    more = (f'<p class="note">First {TABLE_MAX_ROWS} of {len(rows)} rows.</p>' if len(rows) > TABLE_MAX_ROWS else "")
    return f'<div class="wide"><table>\n{head}{body}\n</table></div>{more}'


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
        ("live group agreement", agreement_text(history)),
    ]


def agreement_text(history: GroupHistory) -> str:
    """One line on whether the live group agreed with the computed assignments."""
    checks = history.checks
    if checks is None or checks.empty:
        return "not observed live (no assignment_checks rows for the group)"
    agreed = int(checks["agrees"].astype(bool).sum())
    last = checks.iloc[-1]
    verdict = "agreed" if bool(last["agrees"]) else "differed"
    return (f"{agreed} of {len(checks)} compared generations agreed; the latest compared, "
            f"generation {int(last['generation'])}, {verdict}")


def _member(keys: dict[str, str], member_id) -> Styled | None:
    """A member id as the tables show it: its chart key (the member table has the full id, and so
    does the tooltip), or the full id of a member outside the window's charts."""
    if not isinstance(member_id, str):
        return None
    return Styled(keys[member_id], "key", member_id) if member_id in keys else Styled(member_id, "id")


def _generations_table(history: GroupHistory, clock: Clock) -> str:
    keys = member_keys(history)
    headers = ["generation", clock.header("time"), "trigger", "trigger member", "phase", "assignor", "members",
               history.units, "moved", "imbalance", "unassigned"]
    held = history.holdings.groupby("generation")["units"].sum()
    rows = [[int(r.generation), clock.cell(r.event_time), r.trigger, _member(keys, r.trigger_member), r.phase,
             r.assignor, _whole(r.members), int(held.get(r.generation, 0)), _whole(r.moved), _whole(r.imbalance),
             _whole(r.unassigned)]
            for r in history.generations.itertuples(index=False)]
    return _table(headers, rows, "No generations.")


def members_rows(history: GroupHistory, clock: Clock = Clock()) -> list[list]:
    """One row per member, in chart order: key, full member id, static id, client id, the
    generations it is in (first-last), when and how it left (left, expired, replaced by another
    member id of the same static member), and what it holds after the latest generation."""
    keys = member_keys(history)
    holdings = history.holdings
    latest = holdings[holdings["generation"] == history.latest["generation"]]
    held_now = dict(zip(latest["member_id"], latest["units"]))
    instance = {m: i for m, i in zip(holdings["member_id"], holdings["group_instance_id"]) if isinstance(i, str)}
    clients: dict[str, str] = {}
    departures: dict[str, str] = {}
    for r in history.member_events.itertuples(index=False):
        if isinstance(r.group_instance_id, str):
            instance.setdefault(r.member_id, r.group_instance_id)
        if isinstance(getattr(r, "client_id", None), str):
            clients.setdefault(r.member_id, r.client_id)
        if r.event in ("left", "expired"):
            departures[r.member_id] = f"{r.event} at {clock.text(r.event_time)}"
        elif r.event in ("joined", "rejoined"):
            departures.pop(r.member_id, None)
        if r.event == "static_rejoin" and isinstance(r.previous_member_id, str):
            departures[r.previous_member_id] = (f"replaced by {keys.get(r.member_id, r.member_id)} "
                                                f"at {clock.text(r.event_time)}")
    spans = holdings.groupby("member_id")["generation"].agg(["min", "max"])
    rows = []
    for member, key in keys.items():
        generations = None
        if member in spans.index:
            first, last = int(spans.at[member, "min"]), int(spans.at[member, "max"])
            generations = str(first) if first == last else f"{first}–{last}"
        rows.append([Styled(key, "key"), Styled(member, "id"), instance.get(member), clients.get(member),
                     generations, departures.get(member), _whole(held_now[member]) if member in held_now else None])
    return rows


def _members_table(history: GroupHistory, clock: Clock) -> str:
    return _table(["key", "member id", "group instance id", "client id", "generations", clock.header("gone"),
                   f"{history.units} now"], members_rows(history, clock), "No members.")


def _member_events_table(history: GroupHistory, clock: Clock) -> str:
    keys = member_keys(history)
    rows = [[clock.cell(r.event_time), _member(keys, r.member_id), r.event, r.group_instance_id, r.reason,
             _member(keys, r.previous_member_id), "late" if r.late else None]
            for r in history.member_events.itertuples(index=False)]
    return _table([clock.header("time"), "member", "event", "group instance id", "reason", "replaced member", "late"],
                  rows, "No member events in the window.")


def _differences(keys: dict[str, str], differing) -> str:
    """``t0-3: computed m2, actual m1`` for each differing partition (the first DIFFERING_MAX)."""
    if differing is None or len(differing) == 0:
        return ""

    def who(member) -> str:
        return "nobody" if member is None else keys.get(member, member)

    parts = [f"{d['topic']}-{d['partition']}: computed {who(d['computed_member'])}, actual {who(d['actual_member'])}"
             for d in list(differing)[:DIFFERING_MAX]]
    more = len(differing) - DIFFERING_MAX
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def _agreement_section(history: GroupHistory, clock: Clock) -> str:
    intro = escape(agreement_text(history))
    if history.checks is None or history.checks.empty:
        return (f'<p class="note">{intro}. Groups the collector observes in a live cluster '
                "(docs/collector.md) get one row per settled generation in <code>assignment_checks</code>: "
                "whether the assignment the monitor computed is the one the group really holds.</p>")
    keys = member_keys(history)
    rows = []
    for r in history.checks.itertuples(index=False):
        unmatched = [keys.get(m, m) for m in (r.unmatched_members if r.unmatched_members is not None else [])]
        rows.append([int(r.generation), clock.cell(r.event_time),
                     "yes" if r.agrees else Styled("NO", "bad"), _whole(r.members_compared),
                     _whole(r.partitions_compared), _differences(keys, r.differing), ", ".join(unmatched) or None,
                     r.computed_assignor, r.reported_assignor, r.group_state])
    table = _table(["generation", clock.header("time"), "agrees", "members compared", "partitions compared",
                    "differing partitions", "members on one side only", "computed with", "group reports",
                    "group state"], rows, "")
    return f'<p class="note">{intro}.</p>\n{table}'


def _alerts_section(history: GroupHistory, clock: Clock) -> str:
    if history.alerts is None:
        return '<p class="note">The output root has no <code>alerts</code> table (written by a job from before alerting).</p>'
    rows = []
    for r in history.alerts.itertuples(index=False):
        fired, resolved = clock.cell(r.fired_at), clock.cell(r.resolved_at)
        generation = None if pd.isna(r.generation) else int(r.generation)
        rows.append([r.rule, r.subject, r.severity, r.status, r.value, r.threshold, fired, resolved, generation,
                     r.summary])
    return _table(["rule", "subject", "severity", "status", "value", "threshold", clock.header("fired"), clock.header("resolved"),
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
    clock = page_clock(history)
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
<h2>Agreement with the live group</h2>
{_agreement_section(history, clock)}
<h2>Alerts</h2>
{_alerts_section(history, clock)}
<h2>Members</h2>
<p class="note">The charts draw each member under its key; here is its full member id.</p>
{_members_table(history, clock)}
<h2>Generations</h2>
{_generations_table(history, clock)}
<h2>Member events</h2>
{_member_events_table(history, clock)}
</body>
</html>
"""
