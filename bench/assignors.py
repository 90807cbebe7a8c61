"""Our Python assignors against Kafka's Java ones on Kafka's ClientSideAssignorBenchmark grid (spec 9.1),
and Kafka 4.1's server-side (KIP-848) ``uniform`` and ``range`` (ours: ``server-range``) on the same grid.

Not a test: it measures. Usage::

    .venv/bin/python bench/assignors.py --quick                      # a small subset, a few minutes
    .venv/bin/python bench/assignors.py --kip848 --merge             # the KIP-848 cells (below)
    .venv/bin/python bench/assignors.py                              # the whole grid (hours)
    .venv/bin/python bench/assignors.py --members 100,500 --assignors range,cooperative-sticky \\
        --budget 60 --repeat 5

Grid: members {100, 500, 1000, 5000, 10000} x partitions-per-member {5, 10, 50} x topics
{10, 100, 1000} x subscription {homogeneous, heterogeneous} x assignment {full, incremental} x
assignor {range, roundrobin, sticky, cooperative-sticky, uniform, server-range}. As in Kafka's benchmark, each topic has
``members * ratio // topics`` partitions (0 when that rounds down to 0) and heterogeneous groups are
up to 5 buckets of members, each subscribed to its own slice of the topics. Racks are left out: the
JMH grid puts every partition on every rack, where rack awareness switches itself off.

KIP-848 cells (``--kip848``): ``uniform`` and ``server-range`` with 500 members and 5,000 partitions
(ratio 10) over 10, 100 and 1,000 topics, both subscriptions, both assignments. Kafka's side is
kafka-group-coordinator 4.1.1's own assignor fed as the coordinator feeds it (jvm/reference). Their
topics carry topic ids (derived from the names), so both sides walk topics in the same order and
every answer must be Kafka's exactly. Python's time, like Java's, is the assign call on inputs built
beforehand: the reference builds the coordinator's ``GroupSpecImpl`` outside its clock, and our
port keeps its equivalent with the spec (``assignors/server_group.py``), built by the first
(untimed) call.

INCREMENTAL is what the JMH benchmark meant to measure but does not (it builds the subscription
object before replacing the subscriptions, spec 9.1): ``members - 1`` members get a first
assignment (computed by Kafka's own assignor), then they rejoin owning it at generation 1 and one
new member joins last (subscribed like the last bucket when heterogeneous).

Each side runs each cell in its own process, like JMH's fork per parameter set: our CLI
(``rebalance-monitor assign --repeat R --warmup W``) and the Java reference (the same flags).
Both report the median in-process time of the assign call alone. A cell whose process exceeds the
per-cell ``--budget`` is killed and recorded as skipped; a cell at least as large (members and
partitions) as one that already exceeded the budget on that side is skipped without running, with
that reason. Results: ``bench/results/assignors.json`` and ``docs/benchmarks/assignors.md``.

``--merge`` re-measures only the cells the filters select (``--members``, ``--ratios``,
``--topics``, ``--assignors``, ``--subscriptions``, ``--assignments``) and puts them into the
existing ``--json`` result in place of the same cells, keeping every other cell as it was; then
the summary and ``--markdown`` are recomputed from the merged set. Each cell records the run that
measured it (``run``: an index into the result's ``runs``, each with its commit, start time,
command line, settings and load), and the Markdown lists the runs and each cell's run::

    .venv/bin/python bench/assignors.py --merge --members 100,500 --ratios 5,10 --topics 10 \
        --assignors sticky,cooperative-sticky --subscriptions homogeneous --assignments incremental
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from assignors.model import topic_id_string  # noqa: E402
from tests.java_reference import JavaReferenceError, ensure_built, run_reference  # noqa: E402

MEMBERS = (100, 500, 1000, 5000, 10000)
RATIOS = (5, 10, 50)
TOPICS = (10, 100, 1000)
SUBSCRIPTIONS = ("homogeneous", "heterogeneous")
ASSIGNMENTS = ("full", "incremental")
ASSIGNORS = ("range", "roundrobin", "sticky", "cooperative-sticky", "uniform", "server-range")
#: KIP-848's server-side assignors: their specs carry topic ids, and Kafka's answers are sets.
SERVER_SIDE = ("uniform", "server-range")
MAX_BUCKETS = 5
QUICK = {"members": (100, 500), "ratios": (5, 10), "topics": (10, 100)}
KIP848 = {"members": (500,), "ratios": (10,), "topics": (10, 100, 1000), "assignors": SERVER_SIDE}
DEADLINE_REASON = "not run: the run's --deadline-minutes"
#: The code a cell's times depend on (for the commit recorded with each run).
MEASURED_PATHS = ("assignors", "streaming/cli/assign.py", "jvm", "bench/assignors.py")


@dataclass
class Side:
    status: str = "pending"  # ok | skipped | error
    ms: float | None = None
    reason: str | None = None
    wall_s: float | None = None


@dataclass
class Cell:
    assignor: str
    subscription: str
    assignment: str
    members: int
    ratio: int
    topics: int
    partitions_per_topic: int
    total_partitions: int
    python: Side = field(default_factory=Side)
    java: Side = field(default_factory=Side)
    #: Did both answers agree (exactly where Kafka's answer is deterministic for our port)? None if not compared.
    agree: bool | None = None
    #: 1-minute load average when the cell started (the machine is shared; see the Markdown).
    load1: float | None = None
    #: Index into the result's ``runs``: the run (commit, settings, time) that measured this cell.
    #: ``--merge`` keeps cells from several runs in one result; None in results older than that.
    run: int | None = None
    #: KIP-848 cells: Python's median with the coordinator's view of the group built inside each
    #: call (a fresh spec per call), where ``python.ms`` keeps it between calls as Java keeps its
    #: ``GroupSpecImpl`` (see the module doc).
    python_with_view_ms: float | None = None

    @property
    def key(self) -> str:
        return f"{self.assignor}/{self.subscription}/{self.assignment}/m{self.members}/r{self.ratio}/t{self.topics}"

    @property
    def speed_ratio(self) -> float | None:
        if self.python.ms is None or self.java.ms is None or self.java.ms <= 0:
            return None
        return self.python.ms / self.java.ms


# --- the groups ------------------------------------------------------------------------------------

def bucket_subscriptions(member_count: int, topic_names: list[str]) -> list[list[str]]:
    """Kafka's benchmark buckets: up to 5 groups of members, each on a disjoint slice of the topics."""
    buckets = min(MAX_BUCKETS, member_count)
    if len(topic_names) < buckets:
        raise ValueError(f"{buckets} buckets need at least {buckets} topics")
    topics_per_bucket = math.ceil(len(topic_names) / buckets)
    members_per_bucket = math.ceil(member_count / buckets)
    subscriptions: list[list[str]] = []
    for bucket in range(buckets):
        topics = topic_names[bucket * topics_per_bucket:(bucket + 1) * topics_per_bucket]
        first, last = bucket * members_per_bucket, min((bucket + 1) * members_per_bucket, member_count)
        subscriptions += [topics] * max(0, last - first)
    return subscriptions


def group_spec(cell: Cell, member_count: int) -> dict[str, Any]:
    topic_names = [f"topic{i}" for i in range(cell.topics)]
    if cell.subscription == "homogeneous":
        subscriptions = [topic_names] * member_count
    else:
        subscriptions = bucket_subscriptions(member_count, topic_names)
    topics: dict[str, dict[str, Any]] = {t: {"partitions": cell.partitions_per_topic} for t in topic_names}
    if cell.assignor in SERVER_SIDE:
        for name, entry in topics.items():
            entry["topic_id"] = topic_id_string(uuid.UUID(bytes=hashlib.md5(name.encode()).digest()))
    return {
        "id": cell.key,
        "assignor": cell.assignor,
        "topics": topics,
        "members": [{"member_id": f"member{i}", "topics": subs} for i, subs in enumerate(subscriptions)],
    }


def incremental_spec(cell: Cell, previous: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    """``previous`` rejoining with what ``answer`` gave it (generation 1), plus one new member last."""
    spec = json.loads(json.dumps(previous))
    spec["id"] = cell.key
    for member in spec["members"]:
        owned = answer["assignment"][member["member_id"]]
        if owned:
            member["owned_partitions"] = owned
        member["generation"] = 1
    newcomer_topics = spec["members"][-1]["topics"] if cell.subscription == "heterogeneous" else list(spec["topics"])
    spec["members"].append({"member_id": "newMember", "topics": newcomer_topics})
    return spec


def subscription_entries(cell: Cell) -> int:
    if cell.subscription == "homogeneous":
        return cell.members * cell.topics
    return cell.members * math.ceil(cell.topics / min(MAX_BUCKETS, cell.members))


# --- running one side -------------------------------------------------------------------------------

def run_python(spec_path: Path, repeat: int, warmup: int, budget: float,
               warmup_seconds: float = 0.0) -> tuple[Side, dict | None]:
    cmd = [sys.executable, "-m", "streaming.cli.main", "assign", "--input", str(spec_path),
           "--repeat", str(repeat), "--warmup", str(warmup), "--warmup-seconds", str(warmup_seconds)]
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=budget)
    except subprocess.TimeoutExpired:
        return Side("skipped", reason=f"exceeded the budget of {budget:g} s"), None
    wall = time.monotonic() - start
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    if len(lines) != 1:
        return Side("error", reason=f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}", wall_s=wall), None
    if "error" in lines[0]:
        return Side("error", reason=lines[0]["error"][-300:], wall_s=wall), None
    return Side("ok", ms=lines[0]["elapsed_ms"], wall_s=wall), lines[0]


def time_with_view(spec: dict, repeat: int, warmup: int) -> float:
    """Median time of the assign call on a freshly parsed spec each time, so that the server-side
    assignors build their view of the group inside the timed call (in this process, between the
    cell's two measured sides)."""
    from assignors import registry
    from assignors.codec import parse_group_spec

    assign = registry.get_assignor(spec["assignor"])
    times = []
    for i in range(warmup + repeat):
        fresh = parse_group_spec(spec).spec
        start = time.perf_counter()
        assign(fresh)
        if i >= warmup:
            times.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(times), 4)


def run_java(spec: dict, repeat: int, warmup: int, budget: float, heap: str | None,
             warmup_seconds: int = 0) -> tuple[Side, dict | None]:
    start = time.monotonic()
    try:
        [answer] = run_reference([spec], repeat=repeat, warmup=warmup, timeout=budget, heap=heap,
                                 warmup_seconds=warmup_seconds)
    except subprocess.TimeoutExpired:
        return Side("skipped", reason=f"exceeded the budget of {budget:g} s"), None
    except JavaReferenceError as exc:
        return Side("error", reason=str(exc)[-300:]), None
    wall = time.monotonic() - start
    if "error" in answer:
        return Side("error", reason=answer["error"][-300:], wall_s=wall), None
    return Side("ok", ms=answer["elapsed_ms"], wall_s=wall), answer


def answers_agree(cell: Cell, ours: dict, java: dict) -> bool | None:
    """Exact where our port must be exact (spec section 7 and the differential tests); else None."""
    if cell.assignor in ("range",) + SERVER_SIDE:
        return {m: sorted(map(tuple, tps)) for m, tps in ours["assignment"].items()} == {
            m: sorted(map(tuple, tps)) for m, tps in java["assignment"].items()}
    if cell.assignor == "roundrobin" or cell.subscription == "homogeneous":
        same_withheld = {tuple(t[:2]) for t in ours["transferring"]} == {tuple(t[:2]) for t in java["transferring"]}
        return ours["assignment"] == java["assignment"] and same_withheld
    return None


# --- the grid ----------------------------------------------------------------------------------------

def build_cells(args: argparse.Namespace) -> list[Cell]:
    cells = []
    for assignor in args.assignors:
        for subscription in args.subscriptions:
            for assignment in args.assignments:
                for members in args.members:
                    for ratio in args.ratios:
                        for topics in args.topics:
                            per_topic = members * ratio // topics
                            cells.append(Cell(assignor, subscription, assignment, members, ratio, topics,
                                              per_topic, per_topic * topics))
    # Smallest first, so that a cell over budget predicts the larger ones on the same side.
    cells.sort(key=lambda c: (c.total_partitions * c.members, c.key))
    return cells


def dominated_by_failure(cell: Cell, failures: dict[tuple, list[Cell]], side: str) -> Cell | None:
    for other in failures.get((side, cell.assignor, cell.subscription, cell.assignment), []):
        if cell.members >= other.members and cell.total_partitions >= other.total_partitions and cell.topics >= other.topics:
            return other
    return None


def run_grid(args: argparse.Namespace) -> list[Cell]:
    cells = build_cells(args)
    over_budget: dict[tuple, list[Cell]] = {}
    deadline = None if args.deadline_minutes is None else time.monotonic() + 60 * args.deadline_minutes
    with tempfile.TemporaryDirectory(prefix="bench-assignors-") as tmp:
        for n, cell in enumerate(cells, 1):
            print(f"[{n}/{len(cells)}] {cell.key}", end=" ", flush=True)
            if deadline is not None and time.monotonic() > deadline:
                # Cells run smallest first, so what is left when time runs out is the largest.
                reason = f"{DEADLINE_REASON} {args.deadline_minutes:g} had passed"
                cell.python = Side("skipped", reason=reason)
                cell.java = Side("skipped", reason=reason)
                print("skipped (deadline)")
                continue
            cell.load1 = round(os.getloadavg()[0], 2)
            entries = subscription_entries(cell)
            if entries > args.max_entries:
                reason = f"spec too large: {entries:,} subscription entries > --max-entries {args.max_entries:,}"
                cell.python = Side("skipped", reason=reason)
                cell.java = Side("skipped", reason=reason)
                print("skipped (too large)")
                continue
            if cell.subscription == "heterogeneous" and cell.topics < min(MAX_BUCKETS, cell.members):
                cell.python = cell.java = Side("skipped", reason="fewer topics than buckets")
                print("skipped")
                continue

            spec = _spec_for(cell, args)
            if isinstance(spec, str):
                cell.python = Side("skipped", reason=spec)
                cell.java = Side("skipped", reason=spec)
                print("skipped (no previous round)")
                continue
            spec_path = Path(tmp) / "spec.jsonl"
            spec_path.write_text(json.dumps(spec, separators=(",", ":")) + "\n")

            ours = java = None
            blocker = dominated_by_failure(cell, over_budget, "python")
            if blocker is not None:
                cell.python = Side("skipped", reason=f"predicted over budget: {blocker.key} already exceeded it")
            else:
                cell.python, ours = run_python(spec_path, args.repeat, args.python_warmup, args.budget,
                                               args.python_warmup_seconds)
                if cell.python.status == "skipped":
                    over_budget.setdefault(("python", cell.assignor, cell.subscription, cell.assignment), []).append(cell)
            blocker = dominated_by_failure(cell, over_budget, "java")
            if blocker is not None:
                cell.java = Side("skipped", reason=f"predicted over budget: {blocker.key} already exceeded it")
            else:
                cell.java, java = run_java(spec, args.repeat, args.java_warmup, args.budget, args.heap,
                                          args.java_warmup_seconds)
                if cell.java.status == "skipped":
                    over_budget.setdefault(("java", cell.assignor, cell.subscription, cell.assignment), []).append(cell)
            if ours is not None and java is not None:
                cell.agree = answers_agree(cell, ours, java)
            if cell.assignor in SERVER_SIDE and cell.python.status == "ok":
                cell.python_with_view_ms = time_with_view(spec, args.repeat, args.python_warmup)
            ratio = cell.speed_ratio
            print(f"python {_fmt_side(cell.python)}  java {_fmt_side(cell.java)}"
                  + (f"  x{ratio:.2f}" if ratio is not None else "")
                  + ("  DISAGREE" if cell.agree is False else ""), flush=True)
    return cells


def _spec_for(cell: Cell, args: argparse.Namespace) -> dict | str:
    if cell.assignment == "full":
        return group_spec(cell, cell.members)
    previous = group_spec(cell, cell.members - 1)
    # The previous round comes from Kafka's own assignor, so both sides start from the same state.
    _, answer = run_java(previous, 1, 0, args.budget, args.heap)
    if answer is None:
        return "the previous round (members - 1) could not be computed within the budget"
    return incremental_spec(cell, previous, answer)


def _fmt_side(side: Side) -> str:
    return f"{side.ms:.3f} ms" if side.status == "ok" else side.status


# --- reporting ------------------------------------------------------------------------------------------

def machine() -> dict[str, Any]:
    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = None
    try:
        mem_gib = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError):
        pass
    return {"platform": platform.platform(), "cpu": cpu, "cores": os.cpu_count(), "memory_gib": mem_gib}


def versions() -> dict[str, Any]:
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    # Uncommitted changes to the measured code make the commit a lie: say so. (Other paths of the
    # shared working tree change all the time and do not touch the assignors.)
    # (status, not diff: a new, untracked module changes the measured code as much as an edit.)
    dirty = bool(subprocess.run(["git", "status", "--porcelain", "--", *MEASURED_PATHS], cwd=REPO,
                                capture_output=True, text=True).stdout.strip())
    if commit and dirty:
        commit += "+uncommitted"
    jars = sorted(p.name for p in ensure_built().glob("kafka-clients-*.jar"))
    return {"python": platform.python_version(), "java": java[0] if java else None,
            "kafka_clients": jars[0].removeprefix("kafka-clients-").removesuffix(".jar") if jars else None,
            "commit": commit or None}


def summary(cells: list[Cell]) -> dict[str, Any]:
    by_assignor: dict[str, Any] = {}
    for name in sorted({c.assignor for c in cells}, key=ASSIGNORS.index):
        ratios = [(c.speed_ratio, c.key) for c in cells if c.assignor == name and c.speed_ratio is not None]
        by_assignor[name] = _ratio_summary(ratios, [c for c in cells if c.assignor == name])
    all_ratios = [(c.speed_ratio, c.key) for c in cells if c.speed_ratio is not None]
    return {"by_assignor": by_assignor, "overall": _ratio_summary(all_ratios, cells)}


def _ratio_summary(ratios: list[tuple[float, str]], cells: list[Cell]) -> dict[str, Any]:
    positive = [(r, k) for r, k in ratios if r > 0]
    geo = math.exp(sum(math.log(r) for r, _ in positive) / len(positive)) if positive else None
    worst = max(positive) if positive else None
    homogeneous = [c.speed_ratio for c in cells if c.subscription == "homogeneous" and c.speed_ratio is not None]
    return {
        "measured_cells": len(positive),
        "cells": len(cells),
        "homogeneous_measured": len(homogeneous),
        "homogeneous_at_most_java": sum(r <= 1.0 for r in homogeneous),
        "cells_over_2x": sum(r > 2.0 for r, _ in positive),
        "skipped_or_failed": sum(c.speed_ratio is None for c in cells),
        "disagreements": sum(c.agree is False for c in cells),
        "geomean_python_over_java": geo,
        "worst_python_over_java": worst[0] if worst else None,
        "worst_cell": worst[1] if worst else None,
    }


def write_markdown(path: Path, result: dict[str, Any], cells: list[Cell]) -> None:
    s = result["summary"]
    runs = result.get("runs") or []
    merged = len(runs) > 1
    lines = ["# Assignor benchmark: our Python port vs Kafka's Java assignors", ""]
    if merged:
        lines += [
            f"Merged from {len(runs)} runs of `bench/assignors.py` (`--merge`): each cell comes from the run in its"
            " `run` column; the runs, with their commits, command lines and settings, are listed under"
            f" [Runs](#runs). The latest run started on {result['started']} (commit {result['versions']['commit']}).",
            "",
        ]
    else:
        lines += [
            f"Generated by `bench/assignors.py {' '.join(result['argv'])}` on {result['started']}"
            f" (commit {result['versions']['commit']}).",
            "",
        ]
    lines += [
        f"Machine: {result['machine']['cpu']}, {result['machine']['cores']} cores, {result['machine']['memory_gib']} GiB;"
        f" Python {result['versions']['python']}; {result['versions']['java']}; kafka-clients {result['versions']['kafka_clients']}.",
        "",
    ]
    if merged:
        lines.append("Each number is the median in-process time of one assign call (ms) over the run's timed calls, after its"
                     " untimed Python and Java warm-up calls (see [Runs](#runs)), each cell in a fresh process per side."
                     " Ratio = Python / Java (lower is better for us).")
    else:
        lines.append(
            f"Each number is the median in-process time of one assign call (ms) over {result['settings']['repeat']} runs,"
            f" after {result['settings']['python_warmup']} untimed Python run(s)"
            f" (continued until {result['settings'].get('python_warmup_seconds', 0):g} s had passed) and, in Java, at least"
            f" {result['settings']['java_warmup']} untimed runs continued until {result['settings']['java_warmup_seconds']} s had passed (JIT),"
            f" each cell in a fresh process per side; budget {result['settings']['budget_s']:g} s per cell and side."
            " Ratio = Python / Java (lower is better for us).")
    lines += [
        "",
        _load_line(result, cells),
        "",
        "## Summary",
        "",
        "Target: Python at most Java's time in every homogeneous cell and in the geometric mean; no cell over 2x.",
        "",
        "| assignor | measured cells | skipped or failed | geometric mean ratio | worst ratio | worst cell"
        " | homogeneous cells with Python <= Java | cells over 2x | answers differ |",
        "|---|---:|---:|---:|---:|---|---:|---:|---:|",
    ]
    for name, row in list(s["by_assignor"].items()) + [("**all**", s["overall"])]:
        lines.append(
            f"| {name} | {row['measured_cells']} / {row['cells']} | {row['skipped_or_failed']} | {_x(row['geomean_python_over_java'])}"
            f" | {_x(row['worst_python_over_java'])} | {row['worst_cell'] or '-'}"
            f" | {row['homogeneous_at_most_java']} / {row['homogeneous_measured']} | {row['cells_over_2x']} | {row['disagreements']} |"
        )
    if result.get("notes"):
        lines += ["", result["notes"].rstrip()]
    if merged:
        lines += _runs_table(runs, cells)
    run_head, run_rule = (" run |", "---:|") if merged else ("", "")
    lines += [
        "",
        "## Cells",
        "",
        "| assignor | subscription | assignment | members | partitions/member | topics | partitions | Python ms | Java ms | ratio | same answer | load |"
        + run_head,
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|" + run_rule,
    ]
    for c in sorted(cells, key=lambda c: (ASSIGNORS.index(c.assignor), c.subscription, c.assignment, c.members, c.ratio, c.topics)):
        lines.append(
            f"| {c.assignor} | {c.subscription} | {c.assignment} | {c.members} | {c.ratio} | {c.topics} | {c.total_partitions}"
            f" | {_side_md(c.python)} | {_side_md(c.java)} | {_x(c.speed_ratio)} | {_agree_md(c.agree)}"
            f" | {'-' if c.load1 is None else f'{c.load1:.1f}'} |" + (f" {c.run} |" if merged else "")
        )
    with_view = [c for c in cells if c.python_with_view_ms is not None]
    if with_view:
        lines += ["", "## KIP-848 cells: the coordinator's view inside the clock", "",
                  "Java builds the coordinator's `GroupSpecImpl` once, outside its clock, and our port keeps its"
                  " equivalent with the spec (`assignors/server_group.py`), so `Python ms` above times the assign"
                  " call alone on both sides. Here Python also builds that view inside every timed call (a fresh"
                  " spec each time), as a job assigning a new generation does.", "",
                  "| cell | Python ms, view kept | Python ms, view built in the call | Java ms |",
                  "|---|---:|---:|---:|"]
        lines += [f"| {c.key} | {_side_md(c.python)} | {c.python_with_view_ms:.3f} | {_side_md(c.java)} |"
                  for c in sorted(with_view, key=lambda c: c.key)]
    skipped = [(c, side, getattr(c, side)) for c in cells for side in ("python", "java") if getattr(c, side).status != "ok"]
    if skipped:
        lines += ["", "## Skipped and failed cells", "", "| cell | side | status | reason |", "|---|---|---|---|"]
        lines += [f"| {c.key} | {side} | {sd.status} | {(sd.reason or '').replace('|', '/')} |" for c, side, sd in skipped]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def _runs_table(runs: list[dict[str, Any]], cells: list[Cell]) -> list[str]:
    lines = ["", "## Runs", "",
             "| run | started | commit | cells kept from it | timed calls | Python warm-up (calls / s) | Java warm-up (calls / s) | budget s"
             " | 1-min load start / end | command line |",
             "|---:|---|---|---:|---:|---|---|---:|---|---|"]
    for i, run in enumerate(runs):
        st = run.get("settings") or {}
        load = run.get("load_average") or {}
        argv = " ".join(run.get("argv") or []).replace("|", "/")
        lines.append(
            f"| {i} | {run.get('started')} | {run.get('commit')} | {sum(c.run == i for c in cells)} | {st.get('repeat')}"
            f" | {st.get('python_warmup')} / {st.get('python_warmup_seconds', 0):g} | {st.get('java_warmup')} / {st.get('java_warmup_seconds')} | {st.get('budget_s')}"
            f" | {load.get('start')} / {load.get('end')} | `{argv}` |")
    return lines


def _load_line(result: dict[str, Any], cells: list[Cell]) -> str:
    loads = [c.load1 for c in cells if c.load1 is not None]
    if not loads:
        return "Load average: not recorded."
    loads.sort()
    if len(result.get("runs") or []) > 1:
        return (f"The machine (2 cores) is shared: 1-minute load average per cell median {loads[len(loads) // 2]:.2f},"
                f" range {loads[0]:.2f}-{loads[-1]:.2f} (column `load`; each run's start and end under [Runs](#runs))."
                " Both sides run one after the other in the same conditions, but a loaded machine adds noise to small cells.")
    return (f"The machine (2 cores) is shared: 1-minute load average {result['load_average']['start']:.2f} at the start,"
            f" {result['load_average']['end']:.2f} at the end; per cell median {loads[len(loads) // 2]:.2f},"
            f" range {loads[0]:.2f}-{loads[-1]:.2f} (column `load`)."
            " Both sides run one after the other in the same conditions, but a loaded machine adds noise to small cells.")


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _side_md(side: Side) -> str:
    return f"{side.ms:.3f}" if side.status == "ok" else side.status


def _agree_md(agree: bool | None) -> str:
    return {True: "yes", False: "**no**", None: "n/a"}[agree]


# --- command line -------------------------------------------------------------------------------------

def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(","))


def _names(allowed: tuple[str, ...]):
    def parse(text: str) -> tuple[str, ...]:
        names = tuple(text.split(","))
        unknown = [n for n in names if n not in allowed]
        if unknown:
            raise argparse.ArgumentTypeError(f"unknown {unknown}; choose from {','.join(allowed)}")
        return names
    return parse


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    merge_doc = next(part for part in __doc__.split("\n\n") if part.startswith("``--merge``"))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=merge_doc.replace("``", "") + "\n\n" + __doc__.split("\n\n")[-1].strip().rstrip('"'))
    p.add_argument("--quick", action="store_true",
                   help="members 100,500 x ratio 5,10 x topics 10,100, budget 30 s, 3 runs (unless given)")
    p.add_argument("--kip848", action="store_true",
                   help="the KIP-848 cells: uniform and server-range, 500 members x ratio 10 x topics 10,100,1000"
                        " (filters given as well win)")
    p.add_argument("--members", type=_ints, help=f"default {','.join(map(str, MEMBERS))}")
    p.add_argument("--ratios", type=_ints, help=f"partitions per member, default {','.join(map(str, RATIOS))}")
    p.add_argument("--topics", type=_ints, help=f"default {','.join(map(str, TOPICS))}")
    p.add_argument("--assignors", type=_names(ASSIGNORS))
    p.add_argument("--subscriptions", type=_names(SUBSCRIPTIONS), default=SUBSCRIPTIONS)
    p.add_argument("--assignments", type=_names(ASSIGNMENTS), default=ASSIGNMENTS)
    p.add_argument("--budget", type=float, help="seconds per cell and side, process included (default 120; quick 30)")
    p.add_argument("--repeat", type=int, help="timed runs per cell, median reported (default 5; quick 3)")
    p.add_argument("--python-warmup", type=int, default=1, help="untimed Python runs first (default 1)")
    p.add_argument("--python-warmup-seconds", type=float, default=0.0,
                   help="and more untimed Python runs until this many seconds have passed, like Java's (default 0)")
    p.add_argument("--java-warmup", type=int, default=2, help="untimed Java runs first, at least (default 2)")
    p.add_argument("--java-warmup-seconds", type=int, default=3,
                   help="and more untimed Java runs until this many seconds have passed, for the JIT (default 3)")
    p.add_argument("--deadline-minutes", type=float,
                   help="start no cell after this many minutes; the rest are recorded as skipped (default: none)")
    p.add_argument("--max-entries", type=int, default=2_000_000,
                   help="skip cells whose spec has more member-topic subscription entries (default 2,000,000)")
    p.add_argument("--heap", default="2g", help="Java -Xmx (default 2g)")
    p.add_argument("--json", type=Path, default=REPO / "bench" / "results" / "assignors.json")
    p.add_argument("--markdown", type=Path, default=REPO / "docs" / "benchmarks" / "assignors.md")
    p.add_argument("--notes", type=Path,
                   help="Markdown file whose text goes under the summary (e.g. why cells miss the target)")
    p.add_argument("--merge", action="store_true",
                   help="re-measure only the cells the filters select and put them into the existing --json in"
                        " place of the same cells (the others are kept, each with the run that measured it);"
                        " then rewrite --json and --markdown from the merged set")
    p.add_argument("--render-only", action="store_true",
                   help="run nothing: recompute the summary of --json and rewrite it and --markdown (with --notes)")
    args = p.parse_args(argv)
    if args.merge and args.render_only:
        p.error("--merge measures cells and --render-only measures none: give one of them")
    quick = args.quick
    preset = KIP848 if args.kip848 else QUICK if quick else {}
    args.members = args.members or preset.get("members", MEMBERS)
    args.ratios = args.ratios or preset.get("ratios", RATIOS)
    args.topics = args.topics or preset.get("topics", TOPICS)
    args.assignors = args.assignors or preset.get("assignors", ASSIGNORS)
    args.budget = args.budget or (30.0 if quick else 120.0)
    args.repeat = args.repeat or (3 if quick else 5)
    return args


def render_only(args: argparse.Namespace) -> int:
    result = json.loads(args.json.read_text())
    cells = cells_from_result(result)
    result["runs"] = runs_of(result)
    for cell in cells:
        if cell.run is None:
            cell.run = 0  # a result written before --merge existed: one run
    result["summary"] = summary(cells)
    result["cells"] = [dict(asdict(c), key=c.key, python_over_java=c.speed_ratio) for c in cells]
    if args.notes:
        result["notes"] = args.notes.read_text()
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    write_markdown(args.markdown, result, cells)
    print(f"rewrote {args.json} and {args.markdown}")
    return 0


def cells_from_result(result: dict[str, Any]) -> list[Cell]:
    cells = []
    for row in result["cells"]:
        row = {k: v for k, v in row.items() if k not in ("key", "python_over_java")}
        python, java = Side(**row.pop("python")), Side(**row.pop("java"))
        cells.append(Cell(**row, python=python, java=java))
    return cells


def run_record(result: dict[str, Any]) -> dict[str, Any]:
    """What one run of this script was: when, which commit, which command line and settings, load."""
    record = {k: result.get(k) for k in ("started", "duration_s", "argv", "settings", "load_average")}
    record["commit"] = (result.get("versions") or {}).get("commit")
    return record


def runs_of(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The runs that measured a result's cells; a result written before ``--merge`` existed is one
    run, described by its top-level fields."""
    return list(result["runs"]) if "runs" in result else [run_record(result)]


def merge_results(previous: dict[str, Any], current: dict[str, Any], measured: list[Cell]) -> tuple[dict[str, Any], list[Cell]]:
    """``previous`` with the cells of ``measured`` (this run, described by ``current``) in place of
    the cells with the same key; cells new to ``previous`` are added. A cell this run did not start
    because its ``--deadline-minutes`` had passed was not re-measured: the previous one stays."""
    cells = cells_from_result(previous)
    runs = runs_of(previous)
    for cell in cells:
        if cell.run is None:
            cell.run = 0
    this_run = len(runs)
    runs.append(run_record(current))
    position = {cell.key: i for i, cell in enumerate(cells)}
    for cell in measured:
        if cell.python.status == "skipped" and (cell.python.reason or "").startswith(DEADLINE_REASON) \
                and cell.key in position:
            continue
        cell.run = this_run
        if cell.key in position:
            cells[position[cell.key]] = cell
        else:
            position[cell.key] = len(cells)
            cells.append(cell)
    # Renumber the runs that still measure some cell, oldest first.
    used = sorted({cell.run for cell in cells})
    renumber = {old: new for new, old in enumerate(used)}
    for cell in cells:
        cell.run = renumber[cell.run]
    merged = dict(current)
    merged["runs"] = [runs[i] for i in used]
    merged["summary"] = summary(cells)
    merged["cells"] = [dict(asdict(c), key=c.key, python_over_java=c.speed_ratio) for c in cells]
    if "notes" not in current and previous.get("notes"):
        merged["notes"] = previous["notes"]
    return merged, cells


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.render_only:
        return render_only(args)
    previous = None
    if args.merge:
        # Read it first: a missing or broken file should stop the run before an hour of measuring.
        try:
            previous = json.loads(args.json.read_text())
            cells_from_result(previous)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"--merge: cannot read the results to merge into, {args.json}: {exc}", file=sys.stderr)
            return 2
    load_start = os.getloadavg()[0]
    started = dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()
    ensure_built()
    t0 = time.monotonic()
    cells = run_grid(args)
    result = {
        "started": started,
        "duration_s": round(time.monotonic() - t0, 1),
        "argv": sys.argv[1:] if argv is None else argv,
        "machine": machine(),
        "versions": versions(),
        "settings": {"deadline_minutes": args.deadline_minutes, "repeat": args.repeat, "python_warmup": args.python_warmup, "java_warmup": args.java_warmup,
                     "java_warmup_seconds": args.java_warmup_seconds,
                     "python_warmup_seconds": args.python_warmup_seconds,
                     "budget_s": args.budget, "max_entries": args.max_entries, "heap": args.heap},
        "load_average": {"start": round(load_start, 2), "end": round(os.getloadavg()[0], 2)},
    }
    if args.notes:
        result["notes"] = args.notes.read_text()
    if previous is not None:
        result, cells = merge_results(previous, result, cells)
    else:
        for cell in cells:
            cell.run = 0
        result["runs"] = [run_record(result)]
        result["summary"] = summary(cells)
        result["cells"] = [dict(asdict(c), key=c.key, python_over_java=c.speed_ratio) for c in cells]
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    write_markdown(args.markdown, result, cells)
    print(f"{'merged into' if previous is not None else 'wrote'} {args.json} and {args.markdown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
