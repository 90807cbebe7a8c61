"""The report's charts as PNG bytes, drawn with matplotlib's Agg backend from a GroupHistory.

Pure rendering: no SQL, no files. Members are always listed in the same order (the generation,
or time, in which each first appears, then member id), so the same history always gives the same
picture and a member keeps its row from chart to chart. A member is drawn under a short key
(``m1``, ``m2``, ...) and the distinguishing part of its id; the page's member table gives each
key's full member id (Kafka's member ids run to 60 characters and more). Times are UTC.
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
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from streaming.reporting.report.history import GroupHistory  # noqa: E402

DPI = 100
WIDTH_IN = 11.0
#: Above this many cells a heatmap drops its numbers: they would be unreadable.
ANNOTATE_MAX_CELLS = 600
#: Above this many members the timeline has one lane per kind of event instead of one per member.
TIMELINE_MAX_MEMBER_LANES = 40
#: Rows of generation numbers above the timeline: close generations' numbers are staggered over
#: them, and a number that still finds no room is left out (the page's table has every generation).
TIMELINE_LABEL_ROWS = 4
#: Characters of a member id's distinguishing part shown beside its key.
MEMBER_HINT_WIDTH = 14
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
TRIGGER_COLOURS = {  # balance_metrics.trigger -> the colour of its generation's line
    "join": "#2ca02c",
    "leave": "#ff7f0e",
    "expiry": "#d62728",
    "update": "#1f77b4",
    "workload": "#7f7f7f",
    "cooperative_followup": "#c5b0d5",
    "probing_rebalance": "#17becf",
    "scheduled_rebalance": "#8c564b",
}
OTHER_TRIGGER_COLOUR = "#9467bd"


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
    """Members in the order they first show up (the earlier of their first event and the first
    generation that gives them something), then by member id."""
    generation_time = dict(zip(history.generations["generation"], history.generations["event_time"]))
    first: dict[str, int] = {}

    def seen(member: str, t) -> None:
        if t is not None and not pd.isna(t):
            first[member] = min(first.get(member, int(t)), int(t))

    for row in history.holdings.itertuples(index=False):
        seen(row.member_id, generation_time.get(row.generation))
        first.setdefault(row.member_id, 0)  # a generation outside the frame: as early as can be
    for row in history.member_events.itertuples(index=False):
        seen(row.member_id, row.event_time)
    return sorted(first, key=lambda member: (first[member], member))


def member_keys(history: GroupHistory) -> dict[str, str]:
    """Member id -> its short key (``m1``, ``m2``, ... in :func:`member_order`): what the charts
    draw, and what the page's member table resolves to the full id."""
    return {member: f"m{i}" for i, member in enumerate(member_order(history), start=1)}


def member_labels(history: GroupHistory) -> dict[str, str]:
    """Member id -> ``m3  1-9b10827a-c0…``: the key, then the part of the id that tells the
    group's members apart (what follows the prefix they all share, like the client id and the
    group id in ``consumer-orders-1-9b10827a-...``), cut to MEMBER_HINT_WIDTH characters."""
    keys = member_keys(history)
    members = list(keys)
    shared = _shared_prefix(members) if len(members) > 1 else ""
    labels = {}
    for member in members:
        hint = member[len(shared):] or member
        if len(hint) > MEMBER_HINT_WIDTH:
            hint = hint[:MEMBER_HINT_WIDTH - 1] + "…"
        labels[member] = f"{keys[member]}  {hint}"
    return labels


def _shared_prefix(ids: list[str]) -> str:
    """The prefix every id shares, ending where a part of the id ends (at ``-``, ``_``, ``.``, ``:``)."""
    prefix = ids[0]
    for member in ids[1:]:
        while not member.startswith(prefix):
            prefix = prefix[:-1]
    cut = max(prefix.rfind(sep) for sep in "-_.:")
    return prefix[:cut + 1] if cut >= 0 else ""


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def _utc(epoch_ms) -> datetime:
    return datetime.fromtimestamp(int(epoch_ms) / 1000, tz=timezone.utc)


def _generation_axis(ax, generations: list[int]) -> None:
    step = max(1, len(generations) // 30)
    ax.set_xticks(range(0, len(generations), step))
    ax.set_xticklabels([str(g) for g in generations[::step]])
    ax.set_xlim(-0.5, len(generations) - 0.5)  # a cell (or bar) per generation, edge to edge
    ax.set_xlabel("generation")


def _count_axis(ax, *series) -> None:
    """A y axis of whole counts from 0: all-zero data gets 0..1, not matplotlib's -0.04..0.04."""
    top = max([0.0] + [float(np.nanmax(values, initial=0)) for values in series])
    ax.set_ylim(0, max(1.0, top) * 1.1)
    ax.yaxis.get_major_locator().set_params(integer=True)


def units_per_member(history: GroupHistory) -> Chart:
    units = history.units
    generations = [int(g) for g in history.generations["generation"]]
    members = member_order(history)
    labels = member_labels(history)
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
    ax.set_yticklabels([labels[m] for m in rows], fontsize=8 if len(rows) < 40 else 6, family="monospace")
    _generation_axis(ax, generations)
    if values.size <= ANNOTATE_MAX_CELLS:
        for (i, j), v in np.ndenumerate(matrix.to_numpy(dtype=float)):
            if not np.isnan(v):
                ax.text(j, i, str(int(v)), ha="center", va="center", fontsize=8,
                        color="white" if v < 0.6 * image.norm.vmax else "black")
    bar = fig.colorbar(image, ax=ax, label=units, pad=0.01)
    bar.locator = MaxNLocator(integer=True)  # counts: no 0.5 partitions on the scale
    bar.update_ticks()
    ax.set_title(f"{units.capitalize()} per member across generations (grey: not a member)")
    return Chart("units-per-member.png", f"{units.capitalize()} per member across generations",
                 f"How many {units} each member holds after each generation; members in the order they "
                 f"first appear, under their keys (full ids in the member table below). Grey: the member "
                 f"is not in that generation.", _png(fig))


def balance_per_rebalance(history: GroupHistory) -> Chart:
    units = history.units
    g = history.generations
    generations = [int(x) for x in g["generation"]]
    x = np.arange(len(generations))
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(WIDTH_IN, 5.5), sharex=True)
    revocation = (g["phase"] == "revocation").to_numpy()
    imbalance = g["imbalance"].fillna(0).astype(int).to_numpy()
    moved = g["moved"].fillna(0).astype(int).to_numpy()
    unassigned = g["unassigned"].fillna(0).astype(int).to_numpy()
    top.bar(x, imbalance, color=np.where(revocation, "#c5b0d5", "#9467bd"), label=f"imbalance (max - min {units})")
    top.set_ylabel(f"imbalance\n(max - min {units})")
    top.set_title(f"Imbalance and moved {units} per rebalance")
    if (unassigned > 0).any():  # side by side: moved on the left, unassigned on the right of each generation
        bottom.bar(x - 0.2, moved, width=0.4, color=np.where(revocation, "#ffbb78", "#ff7f0e"), label=f"moved {units}")
        bottom.bar(x + 0.2, unassigned, width=0.4, color="#d62728", label=f"unassigned {units}")
    else:
        bottom.bar(x, moved, color=np.where(revocation, "#ffbb78", "#ff7f0e"), label=f"moved {units}")
    bottom.set_ylabel(f"{units}")
    _count_axis(top, imbalance)
    _count_axis(bottom, moved, unassigned)
    for ax, light in ((top, "#c5b0d5"), (bottom, "#ffbb78")):
        ax.grid(axis="y", alpha=0.3)
        handles = ax.get_legend_handles_labels()[0]
        if revocation.any():
            handles.append(Patch(color=light, label="cooperative revocation round (light)"))
        # Beside the plot, never on it: a legend inside the axes covers the bars of some generation.
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    _generation_axis(bottom, generations)
    return Chart("balance.png", f"Imbalance and moved {units} per rebalance",
                 f"Top: max minus min {units} per member after each generation. Bottom: {units} that "
                 f"changed owner in it (and, in red beside them, any left unassigned). Light bars: cooperative "
                 f"revocation rounds.",
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


def stagger(extents: list[tuple[float, float]], rows: int, gap: float = 4.0) -> list[int | None]:
    """Rows for labels that must not overlap: each (left, right) extent, in order from left to
    right, goes to the first row whose last label ends ``gap`` before it starts; None where no row
    has room (the label is left out)."""
    ends: list[float] = [float("-inf")] * rows
    placed: list[int | None] = []
    for left, right in extents:
        row = next((r for r in range(rows) if ends[r] + gap <= left), None)
        if row is not None:
            ends[row] = right
        placed.append(row)
    return placed


def _trigger_colour(trigger) -> str:
    return TRIGGER_COLOURS.get(trigger, OTHER_TRIGGER_COLOUR)


def draw_timeline(history: GroupHistory):
    """The timeline as a matplotlib Figure (what :func:`rebalance_timeline` renders).

    Two panels sharing the time axis. Above, the generations band: a line per generation in the
    colour of its trigger, and the generation numbers staggered over TIMELINE_LABEL_ROWS rows so
    that no two overlap (measured in the rendered figure, not guessed). Below, one lane per
    member: grey while it is in the group, its events as markers, and a ring where its change
    opened a generation (the trigger member).
    """
    g = history.generations
    events = history.member_events
    members = member_order(history)
    by_member = len(members) <= TIMELINE_MAX_MEMBER_LANES
    kinds = sorted(set(events["event"]))
    labels = member_labels(history)
    lanes = [labels[m] for m in members] if by_member else [EVENT_STYLES.get(e, ("o", "k", e))[2] for e in kinds]
    lane_of = {m: i for i, m in enumerate(members)} if by_member else {e: i for i, e in enumerate(kinds)}
    checked = _checks_by_generation(history)
    lanes_in = min(28.0, max(2.0, 0.3 * len(lanes) + 0.8))

    def band_height(rows: int) -> float:
        return 0.28 * rows + 0.2

    fig, (band, ax) = plt.subplots(2, 1, figsize=(WIDTH_IN, band_height(TIMELINE_LABEL_ROWS) + lanes_in + 1.2),
                                   sharex=True, gridspec_kw={"height_ratios": [band_height(TIMELINE_LABEL_ROWS),
                                                                               lanes_in], "hspace": 0.04})
    times = [int(t) for t in g["event_time"]] + [int(t) for t in events["event_time"]]
    pad = max(1_000, (max(times) - min(times)) // 40)
    ax.set_xlim(_utc(min(times) - pad), _utc(max(times) + pad))

    # The generations band: lines, then numbers placed where they fit.
    band.set_yticks([])
    band.set_ylabel("generation", rotation=0, ha="right", va="center", fontsize=8)
    texts = []
    for row in g.itertuples(index=False):
        t, colour = _utc(row.event_time), _trigger_colour(row.trigger)
        band.axvline(t, color=colour, linewidth=1.5)
        ax.axvline(t, color=colour, linestyle="--", linewidth=0.9, alpha=0.6, zorder=1)
        texts.append(band.text(t, 0, str(int(row.generation)), ha="center", va="bottom", fontsize=7,
                               color="#222222", gid="generation-label",
                               bbox={"boxstyle": "square,pad=0.1", "facecolor": "white", "edgecolor": "none"}))
    renderer = fig.canvas.get_renderer()
    extents = [(box.x0, box.x1) for box in (text.get_window_extent(renderer) for text in texts)]
    order = sorted(range(len(texts)), key=lambda i: extents[i][0])
    used = 1
    for i, row in zip(order, stagger([extents[i] for i in order], TIMELINE_LABEL_ROWS)):
        if row is None:
            texts[i].set_visible(False)
        else:
            texts[i].set_y(row + 0.15)
            used = max(used, row + 1)
    # The band as high as the rows of numbers it needs (the width, hence the numbers' places, stays).
    band_rows = used + (1 if checked else 0)
    band.set_ylim(0, band_rows)
    fig.set_size_inches(WIDTH_IN, band_height(band_rows) + lanes_in + 1.2)
    band.get_gridspec().set_height_ratios([band_height(band_rows), lanes_in])
    for panel in (band, ax):
        panel.set_position(panel.get_subplotspec().get_position(fig))
    for row in g.itertuples(index=False):
        if int(row.generation) in checked:
            agrees = checked[int(row.generation)]
            band.plot([_utc(row.event_time)], [band_rows - 0.5], marker="o" if agrees else "X", markersize=6,
                      linestyle="none", color="#2ca02c" if agrees else "#d62728", zorder=3)

    # The member lanes.
    if by_member:  # a grey bar while the member is in the group
        for member, spans in membership_spans(history, min(times), max(times)).items():
            if member in lane_of:
                for start, end in spans:
                    ax.hlines(lane_of[member], _utc(start), _utc(end), color="#d9d9d9", linewidth=6, zorder=2)
        opened = [(row.event_time, lane_of[row.trigger_member], _trigger_colour(row.trigger))
                  for row in g.itertuples(index=False) if row.trigger_member in lane_of]
        if opened:
            ax.scatter([_utc(t) for t, _, _ in opened], [y for _, y, _ in opened], s=160, facecolors="none",
                       edgecolors=[c for _, _, c in opened], linewidths=1.6, zorder=4,
                       label="opened a generation (ring in its trigger's colour)")
    for kind, (marker, colour, label) in EVENT_STYLES.items():
        rows = events[events["event"] == kind]
        if rows.empty:
            continue
        ys = [lane_of[m] for m in rows["member_id"]] if by_member else [lane_of[kind]] * len(rows)
        ax.scatter([_utc(t) for t in rows["event_time"]], ys, marker=marker, color=colour, s=50, zorder=3, label=label)
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels(lanes, fontsize=8 if len(lanes) < 30 else 7, family="monospace" if by_member else None)
    ax.set_ylim(len(lanes) - 0.4, -0.6)  # the first member on top
    _time_axis(ax, min(times), max(times))
    band.tick_params(axis="x", length=0)
    ax.grid(axis="y", alpha=0.2)

    # One legend beside the panels, never on them: the band's line colours, then the lanes' markers.
    def heading(text: str) -> Line2D:
        return Line2D([], [], linestyle="none", label=text)

    handles = [heading("generation line: trigger")]
    handles += [Line2D([], [], color=_trigger_colour(t), linewidth=2, label=f"  {t}") for t in dict.fromkeys(g["trigger"])]
    if checked:
        handles += [heading("live group"),
                    Line2D([], [], marker="o", color="#2ca02c", linestyle="none", label="  agreed"),
                    Line2D([], [], marker="X", color="#d62728", linestyle="none", label="  differed")]
    labels = [h.get_label() for h in handles]
    markers, names = ax.get_legend_handles_labels()
    if markers:
        handles += [heading("member events")] + markers
        labels += ["member events"] + [f"  {name}" for name in names]
    legend = band.legend(handles=handles, labels=labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8,
                         handlelength=1.6, borderaxespad=0)
    for text in legend.get_texts():
        if not text.get_text().startswith("  "):
            text.set_fontweight("bold")
    missing = [text.get_text() for text in texts if not text.get_visible()]
    skipped = ""
    if missing:
        shown = ", ".join(missing[:6]) + (", ..." if len(missing) > 6 else "")
        skipped = f"; no room to number generation{'s' if len(missing) > 1 else ''} {shown}"
    band.set_title(f"Rebalance timeline: {len(g)} generations (line colour: trigger{skipped}) and member events",
                   fontsize=11)
    return fig


def _time_axis(ax, first_ms: int, last_ms: int) -> None:
    """Clock times on the axis and the date in its label when the history fits in a day (a bare
    "30" for 30 seconds past the minute reads as nothing); dates and times otherwise."""
    locator = mdates.AutoDateLocator(tz=timezone.utc)
    ax.xaxis.set_major_locator(locator)
    first, last = _utc(first_ms), _utc(last_ms)
    if first.date() == last.date():
        ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S", tz=timezone.utc))
        ax.set_xlabel(f"event time (UTC) on {first:%Y-%m-%d}")
    else:
        ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=timezone.utc))
        ax.set_xlabel("event time (UTC)")


def _checks_by_generation(history: GroupHistory) -> dict[int, bool]:
    """Generation -> whether the live group agreed with it (the last comparison of it), when observed."""
    if history.checks is None or history.checks.empty:
        return {}
    return {int(row.generation): bool(row.agrees) for row in history.checks.itertuples(index=False)}


def rebalance_timeline(history: GroupHistory) -> Chart:
    return Chart("timeline.png", "Rebalance timeline",
                 "Above: one line per generation in the colour of its trigger, with its number (close "
                 "generations' numbers are staggered; the generations table below has every one), and, when "
                 "the collector observed the group live, whether the live group agreed. Below: one lane per "
                 "member (keys as in the member table): grey while it is in the group, markers where it "
                 "joins, leaves or expires, and a ring on its lane at each generation its change opened.",
                 _png(draw_timeline(history)))


def _natural(text: str) -> tuple:
    """Sort key that puts t0-2 before t0-10 and 0_2 before 0_10."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text))


def unit_placement(history: GroupHistory) -> Chart:
    unit = history.unit
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
    names = member_labels(history)
    legend = [Patch(color=cmap(colour_of[m]), label=names[m]) for m in members[:30]]
    ax.legend(handles=legend, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="member",
              prop={"family": "monospace", "size": 8})
    more = f" (first {PLACEMENT_MAX_UNITS})" if cut else ""
    what = " and ".join(f"{k}s" for k in kinds)
    ax.set_title(f"{unit.capitalize()} placement per member across generations{more} (grey: not assigned)")
    return Chart("placement.png", f"{unit.capitalize()} placement per member",
                 f"Which member holds each of the group's {what} after each generation (one colour per "
                 f"member; grey: nobody).", _png(fig))
