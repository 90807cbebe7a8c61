"""Streams and Connect assignors: our Python ports against Kafka 4.1.1's Java ones, side by side.

Not a test: it measures. Usage::

    .venv/bin/python bench/streams_connect.py [--repeat 5] [--warmup 2]

Streams (HighAvailabilityTaskAssignor), the shapes of Kafka's ``StreamsAssignmentScaleTest``
(spec 4.4): 1,000 partitions x 1,000 clients; 1,000 partitions x 100 clients with 50 standbys;
6,000 partitions x 2 clients; one stream thread per client, one stateful task per partition. Like
Kafka's test each shape is assigned twice: ``fresh`` (no client has state: every lag is the changelog
end offset) and ``second`` (every client reports the first round's answer: ``-2`` for its actives,
caught up for its standbys). Lags are given as offset sums against end offsets, so the Java side also
computes them with Kafka's ``ClientState.computeTaskLags`` (outside the clock).

Connect (IncrementalCooperativeAssignor): 100 workers, 1,000 connectors x 10 tasks. ``fresh``: every
worker empty, everything is new; ``scale-out``: the first round's owners plus one new worker, so the
assignor computes load-balancing revocations. The leader's state carries from the first round.

Timing: the assign call alone, median of ``--repeat`` runs after ``--warmup`` untimed ones; Python in
this process, Java in one JVM for all cells (docs/streams-connect-reference.md). Both sides' answers
are compared, so the table also says whether they agree. Results: ``bench/results/streams_connect.json``
and ``docs/benchmarks/streams_connect.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from assignors.connect import (  # noqa: E402
    ConnectGroupSpec,
    ConnectWorkerSpec,
    assign_connect_incremental,
)
from assignors.streams import (  # noqa: E402
    LATEST_OFFSET,
    StreamsAssignmentConfig,
    StreamsClient,
    StreamsGroupSpec,
    assign_streams_ha,
)
from tests.assignors.test_differential_streams_java import (  # noqa: E402
    disagreement,
    run_streams_reference,
    spec_to_json,
)

RESULTS = REPO / "bench" / "results" / "streams_connect.json"
TABLE = REPO / "docs" / "benchmarks" / "streams_connect.md"
END_OFFSET = 1_000

STREAMS_SHAPES = [
    # (name, partitions, clients, standbys)
    ("1,000 partitions x 1,000 clients", 1_000, 1_000, 0),
    ("1,000 partitions x 100 clients x 50 standbys", 1_000, 100, 50),
    ("6,000 partitions x 2 clients", 6_000, 2, 0),
]
CONNECT_WORKERS, CONNECT_CONNECTORS, CONNECT_TASKS = 100, 1_000, 10


def timed(fn: Callable[[], Any], repeat: int, warmup: int) -> tuple[float, Any]:
    """Median wall time (ms) of ``fn`` over ``repeat`` runs after ``warmup`` untimed ones, and its last answer."""
    for _ in range(warmup):
        fn()
    times, answer = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        answer = fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times), answer


# --- Streams ----------------------------------------------------------------------------------------

def streams_round(partitions: int, clients: int, standbys: int, previous=None) -> StreamsGroupSpec:
    tasks = tuple(f"0_{p}" for p in range(partitions))
    # Deterministic UUIDs: the same process ids on both sides and in every run.
    pids = [str(uuid.UUID(int=(i + 1) * 0x9E3779B97F4A7C15 % (1 << 128))) for i in range(clients)]
    members = []
    for pid in pids:
        sums: dict[str, int] = {}
        if previous is not None:
            mine = previous.clients[pid]
            sums.update({t: LATEST_OFFSET for t in mine.active_tasks})
            sums.update({t: END_OFFSET for t in (*mine.standby_tasks, *mine.warmup_tasks)})
        members.append(StreamsClient(pid, 1, task_offset_sums=sums))
    config = StreamsAssignmentConfig(acceptable_recovery_lag=100, num_standby_replicas=standbys)
    return StreamsGroupSpec(tuple(members), tasks, (), {t: END_OFFSET for t in tasks}, config)


def bench_streams(repeat: int, warmup: int) -> list[dict]:
    cells, java_specs = [], []
    for name, partitions, clients, standbys in STREAMS_SHAPES:
        fresh = streams_round(partitions, clients, standbys)
        fresh_ms, first = timed(lambda: assign_streams_ha(fresh), repeat, warmup)
        second = streams_round(partitions, clients, standbys, previous=first)
        second_ms, answer = timed(lambda: assign_streams_ha(second), repeat, warmup)
        for round_name, spec, ms, ours in (("fresh", fresh, fresh_ms, first), ("second", second, second_ms, answer)):
            cells.append({"kind": "streams", "shape": name, "round": round_name, "python_ms": ms, "_ours": ours})
            java_specs.append(spec_to_json(spec, f"{name} / {round_name}"))
        print(f"streams {name}: python fresh {fresh_ms:.1f} ms, second {second_ms:.1f} ms", flush=True)
    answers = run_streams_reference(java_specs, repeat=repeat, warmup=warmup, heap="4g")
    for cell, java in zip(cells, answers):
        ours = cell.pop("_ours")
        cell["java_ms"] = java.get("elapsed_ms")
        cell["same_answer"] = "error" not in java and disagreement(ours, java) is None
        print(f"streams {cell['shape']} / {cell['round']}: java {cell['java_ms']} ms, same answer {cell['same_answer']}")
    return cells


# --- Connect ----------------------------------------------------------------------------------------

def connect_rounds() -> tuple[dict[str, int], list[str]]:
    connectors = {f"connector-{c:04d}": CONNECT_TASKS for c in range(CONNECT_CONNECTORS)}
    workers = [f"worker-{w:03d}" for w in range(CONNECT_WORKERS)]
    return connectors, workers


def connect_spec(connectors, workers, owned, generation) -> ConnectGroupSpec:
    return ConnectGroupSpec(
        workers=tuple(ConnectWorkerSpec(w, tuple(owned.get(w, ((), ()))[0]), tuple(owned.get(w, ((), ()))[1]))
                      for w in workers),
        connectors=connectors, leader_id=workers[0], leader_config_offset=1,
        generation_id=generation, last_completed_generation_id=generation - 1,
    )


def connect_json_round(spec: ConnectGroupSpec, now_ms: int) -> dict:
    return {
        "now_ms": now_ms, "generation_id": spec.generation_id,
        "last_completed_generation_id": spec.last_completed_generation_id,
        "leader_config_offset": spec.leader_config_offset, "connectors": dict(spec.connectors),
        "workers": [{"worker_id": w.worker_id, "connectors": list(w.connectors),
                     "tasks": [[t.connector, t.task] for t in w.tasks]} for w in spec.workers],
    }


def same_connect_answer(ours, java_round: dict) -> bool:
    for wid, mine in ours.workers.items():
        theirs = java_round["workers"][wid]
        if sorted(mine.connectors) != theirs["connectors"]:
            return False
        if sorted((t.connector, t.task) for t in mine.tasks) != [tuple(t) for t in theirs["tasks"]]:
            return False
        if sorted(mine.revoked_connectors) != theirs["revoked_connectors"]:
            return False
        if sorted((t.connector, t.task) for t in mine.revoked_tasks) != [tuple(t) for t in theirs["revoked_tasks"]]:
            return False
    return ours.delay_ms == java_round["delay_ms"]


def bench_connect(repeat: int, warmup: int) -> list[dict]:
    connectors, workers = connect_rounds()
    fresh = connect_spec(connectors, workers, {}, generation=1)
    fresh_ms, (first, state) = timed(lambda: assign_connect_incremental(fresh, None, 0), repeat, warmup)
    owned = {w: (a.connectors, a.tasks) for w, a in first.workers.items()}
    scaled = connect_spec(connectors, workers + ["worker-new"], owned, generation=2)
    scale_ms, (second, _) = timed(lambda: assign_connect_incremental(scaled, state, 1_000), repeat, warmup)
    name = f"{CONNECT_WORKERS} workers x {CONNECT_CONNECTORS:,} connectors x {CONNECT_TASKS} tasks"
    rounds = [connect_json_round(fresh, 0), connect_json_round(scaled, 1_000)]
    java_specs = [
        {"kind": "connect", "id": f"{name} / fresh", "rounds": rounds[:1], "timed_round": 0},
        {"kind": "connect", "id": f"{name} / scale-out", "rounds": rounds, "timed_round": 1},
    ]
    answers = run_streams_reference(java_specs, repeat=repeat, warmup=warmup, heap="2g")
    cells = []
    for round_name, ms, ours, java, index in (("fresh", fresh_ms, first, answers[0], 0),
                                               ("scale-out (+1 worker)", scale_ms, second, answers[1], 1)):
        same = "error" not in java and same_connect_answer(ours, java["rounds"][index])
        cells.append({"kind": "connect", "shape": name, "round": round_name, "python_ms": ms,
                      "java_ms": java.get("elapsed_ms"), "same_answer": same})
        print(f"connect {name} / {round_name}: python {ms:.1f} ms, java {java.get('elapsed_ms')} ms, same answer {same}")
    return cells


# --- output -----------------------------------------------------------------------------------------

def java_version() -> str:
    proc = subprocess.run(["java", "-version"], capture_output=True, text=True)
    return (proc.stderr.splitlines() or ["?"])[0]


#: The code the Python times depend on (for the commit recorded with the result).
MEASURED_PATHS = ("assignors/streams", "assignors/connect", "assignors/java_order.py")


def measured_commit() -> str | None:
    """HEAD, marked ``+uncommitted`` when the measured code differs from it."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", *MEASURED_PATHS], cwd=REPO,
                           capture_output=True, text=True).stdout.strip()
    return (commit + ("+uncommitted" if dirty else "")) if commit else None


def write(cells: list[dict], args, load: tuple[float, float]) -> None:
    meta = {
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d"),
        "commit": measured_commit(),
        "python": platform.python_version(), "java": java_version(), "kafka": "4.1.1",
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        # The machine is shared: the 1-minute load average when the run started and when it ended.
        "load_average": {"start": load[0], "end": load[1]},
        "repeat": args.repeat, "warmup": args.warmup,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"meta": meta, "cells": cells}, indent=2) + "\n")
    lines = [
        "# Streams and Connect assignors: Python vs Kafka (Java)",
        "",
        f"Generated by `bench/streams_connect.py` on {meta['date']} (commit {meta['commit']}; {meta['machine']},"
        f" load average {meta['load_average']['start']} at the start, {meta['load_average']['end']} at the end;"
        f" Python {meta['python']}; {meta['java']}; Kafka {meta['kafka']}). Median of {args.repeat} timed assign calls after"
        f" {args.warmup} untimed ones, the call alone (inputs built outside the clock). Streams shapes are"
        " those of Kafka's `StreamsAssignmentScaleTest` (one thread per client, one stateful task per"
        " partition, `acceptable.recovery.lag` 100, changelog end offset 1,000): `fresh` = no client has"
        " state, `second` = every client reports the first round's answer. Connect: 100 workers, 1,000"
        " connectors x 10 tasks, `fresh` then one more worker joining with the first round's owners."
        " \"Same answer\" compares both sides' assignments (Streams: actives, standbys with warm-ups, probing;"
        " Connect: connectors, tasks and revocations per worker, and the delay).",
        "",
        "| assignor | shape | round | Python (ms) | Java (ms) | Python / Java | same answer |",
        "| --- | --- | --- | ---: | ---: | ---: | --- |",
    ]
    for c in cells:
        ratio = f"{c['python_ms'] / c['java_ms']:.2f}x" if c.get("java_ms") else "-"
        java = f"{c['java_ms']:.1f}" if c.get("java_ms") is not None else "error"
        assignor = "Streams HA" if c["kind"] == "streams" else "Connect incremental"
        lines.append(f"| {assignor} | {c['shape']} | {c['round']} | {c['python_ms']:.1f} | {java} | {ratio} |"
                     f" {'yes' if c['same_answer'] else 'no'} |")
    lines += ["", "Kafka's own bound for these shapes is 120 s per assignment (`MAX_ASSIGNMENT_DURATION`).", ""]
    TABLE.parent.mkdir(parents=True, exist_ok=True)
    TABLE.write_text("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args()
    start_load = os.getloadavg()[0]
    cells = bench_streams(args.repeat, args.warmup) + bench_connect(args.repeat, args.warmup)
    write(cells, args, (round(start_load, 2), round(os.getloadavg()[0], 2)))
    print(f"wrote {RESULTS.relative_to(REPO)} and {TABLE.relative_to(REPO)}")


if __name__ == "__main__":
    main()
