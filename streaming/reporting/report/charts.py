"""The report's charts as PNG bytes, drawn with matplotlib's Agg backend from a GroupHistory.

Pure rendering: no Spark, no files. Members are always listed in the same order (the generation,
or time, in which each first appears, then member id), so the same history always gives the same
picture and a member keeps its row from chart to chart. Times are UTC.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from datetime import datetime, timezone

import matplotlib

matplotlib.use("Agg")  # no display: the report runs on servers and in CI

import matplotlib.dates as mdates  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.colors import ListedColormap  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from streaming.reporting.report.history import GroupHistory  # noqa: E402

DPI = 100
WIDTH_IN = 11.0
#: Above this many cells a heatmap drops its numbers: they would be unreadable.
ANNOTATE_MAX_CELLS = 600
#: Above this many members the timeline has one lane per kind of event instead of one per member.
TIMELINE_MAX_MEMBER_LANES = 40
#: Above this many generations the timeline's lines go unlabelled (the page's table has them all).
TIMELINE_MAX_LABELS = 40
#: Rows of the placement chart: more units than this are cut (the title says so).
PLACEMENT_MAX_UNITS = 150
EVENT_STYLES = {  # member_events.event -> (marker, colour, legend label)
    "joined": ("^", "#2ca02c", "joined"),
    "rejoined": ("^", "#98df8a", "rejoined"),
    "static_rejoin": ("D", "#17becf", "static rejoin"),
    "updated": ("o", "#1f77b4", "updated"),
    "left": ("v", "#ff7f0e", "left"),
    "expired": ("X", "#d62728", "expired"),
    "leave_of_unknown_member": ("x", "#7f7f7f", "leave of unknown member"),
}


@dataclass(frozen=True)
class Chart:
    """One rendered chart: file name (without directory), title, caption, and the PNG itself."""

    name: str
    title: str
    caption: str
    png: bytes


def render_charts(history: GroupHistory) -> list[Chart]:
    """Every chart the group's history calls for, in the page's order."""
    charts = [units_per_member(history), balance_per_rebalance(history), rebalance_timeline(history)]
    if history.placements is not None:
        charts.append(unit_placement(history))
    return charts


def member_order(history: GroupHistory) -> list[str]:
    """Members by the generation they first appear in, then by the time of their first event, then id."""
    first: dict[str, tuple] = {}
    for row in history.holdings.itertuples(index=False):
        first.setdefault(row.member_id, (0, int(row.generation), row.member_id))
    for row in history.member_events.itertuples(index=False):
        first.setdefault(row.member_id, (1, int(row.event_time), row.member_id))
    return sorted(first, key=first.__getitem__)


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def _utc(epoch_ms) -> datetime:
    return datetime.fromtimestamp(int(epoch_ms) / 1000, tz=timezone.utc)


def _short(text: str, width: int = 28) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _generation_axis(ax, generations: list[int]) -> None:
    step = max(1, len(generations) // 30)
    ax.set_xticks(range(0, len(generations), step))
    ax.set_xticklabels([str(g) for g in generations[::step]])
    ax.set_xlabel("generation")


def units_per_member(history: GroupHistory) -> Chart:
    units = history.units
    generations = [int(g) for g in history.generations["generation"]]
    members = member_order(history)
    held = history.holdings.pivot_table(index="member_id", columns="generation", values="units", aggfunc="sum")
    matrix = held.reindex(index=[m for m in members if m in held.index], columns=generations)
    rows = list(matrix.index)
    height = min(30.0, max(2.5, 0.35 * len(rows) + 1.8))
    fig, ax = plt.subplots(figsize=(WIDTH_IN, height))
    values = np.ma.masked_invalid(matrix.to_numpy(dtype=float))
    image = ax.imshow(values, aspect="auto", cmap="viridis", interpolation="nearest",
                      vmin=0, vmax=max(1.0, float(np.nanmax(matrix.to_numpy(dtype=float), initial=0))))
    ax.set_facecolor("#f0f0f0")  # a member absent from a generation: grey, not 0
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([_short(m) for m in rows], fontsize=8 if len(rows) < 40 else 6)
    _generation_axis(ax, generations)
    if values.size <= ANNOTATE_MAX_CELLS:
        for (i, j), v in np.ndenumerate(matrix.to_numpy(dtype=float)):
            if not np.isnan(v):
                ax.text(j, i, str(int(v)), ha="center", va="center", fontsize=8,
                        color="white" if v < 0.6 * image.norm.vmax else "black")
    fig.colorbar(image, ax=ax, label=units, pad=0.01)
    ax.set_title(f"{units.capitalize()} per member across generations (grey: not a member)")
    return Chart("units-per-member.png", f"{units.capitalize()} per member across generations",
                 f"How many {units} each member holds after each generation; members in the order they "
                 f"first appear. Grey: the member is not in that generation.", _png(fig))


def balance_per_rebalance(history: GroupHistory) -> Chart:
    units = history.units
    g = history.generations
    generations = [int(x) for x in g["generation"]]
    x = np.arange(len(generations))
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(WIDTH_IN, 5.5), sharex=True)
    revocation = (g["phase"] == "revocation").to_numpy()
    colours = np.where(revocation, "#c5b0d5", "#9467bd")
    top.bar(x, g["imbalance"].fillna(0).astype(int), color=colours)
    top.set_ylabel(f"imbalance\n(max - min {units})")
    top.set_title(f"Imbalance and moved {units} per rebalance")
    bottom.bar(x, g["moved"].fillna(0).astype(int), color=np.where(revocation, "#ffbb78", "#ff7f0e"), label=f"moved {units}")
    if (g["unassigned"].fillna(0) > 0).any():
        bottom.step(x, g["unassigned"].fillna(0).astype(int), where="mid", color="#d62728", label="unassigned")
    bottom.set_ylabel(f"moved {units}")
    for ax in (top, bottom):
        ax.yaxis.get_major_locator().set_params(integer=True)
        ax.grid(axis="y", alpha=0.3)
    handles, _ = bottom.get_legend_handles_labels()
    if revocation.any():
        handles.append(Patch(color="#c5b0d5", label="cooperative revocation round (light)"))
    bottom.legend(handles=handles, loc="upper left", fontsize=8)
    _generation_axis(bottom, generations)
    return Chart("balance.png", f"Imbalance and moved {units} per rebalance",
                 f"Top: max minus min {units} per member after each generation. Bottom: {units} that "
                 f"changed owner in it (and any left unassigned). Light bars: cooperative revocation rounds.",
                 _png(fig))


_STARTS = ("joined", "rejoined", "static_rejoin")
_ENDS = ("left", "expired")


def membership_spans(history: GroupHistory, start_ms: int, end_ms: int) -> dict[str, list[tuple[int, int]]]:
    """When each member was in the group, from its events: join to leave or expiry (a static member
    replaced under a new member id ends there). A member already in the group when the window opens
    starts at ``start_ms``; one still in it at the end runs to ``end_ms``."""
    changes: dict[str, list[tuple[int, bool]]] = {m: [] for m in member_order(history)}
    for row in history.member_events.itertuples(index=False):
        if row.event in _STARTS:
            changes[row.member_id].append((int(row.event_time), True))
        elif row.event in _ENDS:
            changes[row.member_id].append((int(row.event_time), False))
        if row.event == "static_rejoin" and isinstance(row.previous_member_id, str):
            changes.setdefault(row.previous_member_id, []).append((int(row.event_time), False))
    spans: dict[str, list[tuple[int, int]]] = {}
    for member, moves in changes.items():
        moves.sort()
        opened: int | None = None if moves and moves[0][1] else start_ms
        for t, joins in moves:
            if joins and opened is None:
                opened = t
            elif not joins and opened is not None:
                spans.setdefault(member, []).append((opened, t))
                opened = None
        if opened is not None:
            spans.setdefault(member, []).append((opened, end_ms))
    return spans


def rebalance_timeline(history: GroupHistory) -> Chart:
    g = history.generations
    events = history.member_events
    members = member_order(history)
    by_member = len(members) <= TIMELINE_MAX_MEMBER_LANES
    lanes = [_short(m) for m in members] if by_member else [EVENT_STYLES.get(e, ("o", "k", e))[2]
                                                            for e in sorted(set(events["event"]))]
    lane_of = ({m: i for i, m in enumerate(members)} if by_member
               else {e: i for i, e in enumerate(sorted(set(events["event"])))})
    height = min(30.0, max(3.5, 0.3 * len(lanes) + 3.0))
    fig, ax = plt.subplots(figsize=(WIDTH_IN, height))
    label_y = len(lanes) - 0.3
    labelled = len(g) <= TIMELINE_MAX_LABELS
    for row in g.itertuples(index=False):
        t = _utc(row.event_time)
        ax.axvline(t, color="#9467bd" if row.trigger != "cooperative_followup" else "#c5b0d5",
                   linestyle="--", linewidth=1, zorder=1)
        if not labelled:
            continue
        who = f" ({_short(str(row.trigger_member), 16)})" if isinstance(row.trigger_member, str) else ""
        ax.text(t, label_y, f" g{int(row.generation)} {row.trigger}{who}", rotation=90, va="bottom",
                ha="center", fontsize=7, color="#4b2a7a", clip_on=False)
    times = [int(t) for t in g["event_time"]] + [int(t) for t in events["event_time"]]
    if by_member:  # a grey bar while the member is in the group
        for member, spans in membership_spans(history, min(times), max(times)).items():
            if member in lane_of:
                for start, end in spans:
                    ax.hlines(lane_of[member], _utc(start), _utc(end), color="#d9d9d9", linewidth=6, zorder=2)
    seen = set()
    for kind, (marker, colour, label) in EVENT_STYLES.items():
        rows = events[events["event"] == kind]
        if rows.empty:
            continue
        ys = [lane_of[m] for m in rows["member_id"]] if by_member else [lane_of[kind]] * len(rows)
        ax.scatter([_utc(t) for t in rows["event_time"]], ys, marker=marker, color=colour, s=60, zorder=3,
                   label=label)
        seen.add(kind)
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels(lanes, fontsize=8 if len(lanes) < 30 else 6)
    ax.set_ylim(-0.7, len(lanes) - 0.3)
    pad = max(1_000, (max(times) - min(times)) // 20)
    ax.set_xlim(_utc(min(times) - pad), _utc(max(times) + pad))
    locator = mdates.AutoDateLocator(tz=timezone.utc)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=timezone.utc))
    ax.set_xlabel("event time (UTC)")
    ax.grid(axis="y", alpha=0.2)
    if seen:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, title="member events")
    if labelled:
        ax.set_title("Rebalance timeline: generations (dashed, with trigger and trigger member) and member events",
                     pad=90)
    else:
        ax.set_title(f"Rebalance timeline: {len(g)} generations (dashed; triggers in the table below) "
                     "and member events")
    return Chart("timeline.png", "Rebalance timeline",
                 "Each dashed line is a generation, labelled with its number, its trigger and the member "
                 "whose change opened it. One lane per member: grey while it is in the group, markers where it "
                 "joins, leaves or expires.",
                 _png(fig))


def _natural(text: str) -> tuple:
    """Sort key that puts t0-2 before t0-10 and 0_2 before 0_10."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text))


def unit_placement(history: GroupHistory) -> Chart:
    units, unit = history.units, history.unit
    placements = history.placements if history.placements is not None else pd.DataFrame(
        columns=["generation", "member_id", "unit_id", "kind"])
    generations = [int(x) for x in history.generations["generation"]]
    members = member_order(history)
    colour_of = {m: i for i, m in enumerate(members)}
    kinds = list(dict.fromkeys(kind for _, kind in history.unit_columns.placed))
    labels = sorted({(kind, unit_id) for kind, unit_id in zip(placements["kind"], placements["unit_id"])},
                    key=lambda ku: (kinds.index(ku[0]) if ku[0] in kinds else len(kinds), _natural(ku[1])))
    cut = len(labels) > PLACEMENT_MAX_UNITS
    labels = labels[:PLACEMENT_MAX_UNITS]
    row_of = {u: i for i, u in enumerate(labels)}
    col_of = {gen: j for j, gen in enumerate(generations)}
    matrix = np.full((max(1, len(labels)), len(generations)), np.nan)
    for row in placements.itertuples(index=False):
        i, j = row_of.get((row.kind, row.unit_id)), col_of.get(int(row.generation))
        if i is not None and j is not None and row.member_id in colour_of:
            matrix[i, j] = colour_of[row.member_id]
    # tab10's ten clearly different colours first; tab20 (pairs of shades) only for more members.
    palette = plt.get_cmap("tab10" if len(members) <= 10 else "tab20").colors
    cmap = ListedColormap([palette[i % len(palette)] for i in range(max(1, len(members)))])
    height = min(30.0, max(2.5, 0.25 * len(labels) + 1.8))
    fig, ax = plt.subplots(figsize=(WIDTH_IN, height))
    ax.imshow(np.ma.masked_invalid(matrix), aspect="auto", cmap=cmap, interpolation="nearest",
              vmin=-0.5, vmax=max(1, len(members)) - 0.5)
    ax.set_facecolor("#f0f0f0")
    ax.set_yticks(range(len(labels)))
    several_kinds = len(kinds) > 1
    ax.set_yticklabels([f"{u} ({k})" if several_kinds else u for k, u in labels],
                       fontsize=8 if len(labels) < 40 else 5)
    _generation_axis(ax, generations)
    legend = [Patch(color=cmap(colour_of[m]), label=_short(m)) for m in members[:30]]
    ax.legend(handles=legend, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, title="member")
    more = f" (first {PLACEMENT_MAX_UNITS})" if cut else ""
    what = " and ".join(f"{k}s" for k in kinds)
    ax.set_title(f"{unit.capitalize()} placement per member across generations{more} (grey: not assigned)")
    return Chart("placement.png", f"{unit.capitalize()} placement per member",
                 f"Which member holds each of the group's {what} after each generation (one colour per "
                 f"member; grey: nobody).", _png(fig))
