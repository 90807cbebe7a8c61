#!/usr/bin/env python3
"""Paired latency A/B: the working tree against an earlier revision, runs alternating.

The machine's speed drifts between runs (the latency floor's batch took 0.73 s one evening and
1.32 s the next afternoon), so a change is judged against the code before it *in the same run*:
``--runs`` rounds of (base revision, working tree), each a fresh process with its own broker, Spark
JVM and job, each one warm run of the latency scenario at 10,000 events/s (bench/job.py's
``latency_run``: 1,000 groups, the low-latency settings, probes after a 90 s JIT warm-up).

    .venv/bin/python bench/ab_latency.py --base a56e008 --runs 2

Writes ``bench/results/ab_latency.json``: each run's produce-to-Delta latency, batch durations and
the batches' median planning, compute, state update and sink times.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results" / "ab_latency.json"
PROBES = 30


def one_run() -> dict:
    """One warm run of the code in the current directory (a child process of :func:`main`)."""
    sys.path.insert(0, str(Path.cwd()))
    from bench import job
    from streaming import broker
    from streaming.job.spark_session import build_spark_session

    work = Path(tempfile.mkdtemp(prefix="ab-latency-"))
    port = broker._free_port()
    status = broker.start(port, work / "kafka", tied_to_caller=True)
    try:
        spark = build_spark_session(extra={"spark.sql.streaming.numRecentProgressUpdates": "100000"})
        started = time.monotonic()
        run = job.latency_run(spark, status.bootstrap_servers, work, "ab", 1_000, PROBES, 150,
                              probe_not_before=started + 90, start=job._start_job, **job.LOW_LATENCY)
        batches = run["batches"]

        def median(field: str) -> float:
            return statistics.median(b.get(field, 0) for b in batches)

        return {"latency_s": run["latency_s"], "missing": run["missing"], "batch_duration_s": run["batch_duration_s"],
                "median_ms": {f: median(f) for f in ("queryPlanning", "compute_ms", "state_update_ms", "sink_ms")},
                "median_rows_per_batch": median("rows")}
    finally:
        broker.stop(port, work / "kafka")
        shutil.rmtree(work, ignore_errors=True)


def _tree_of(revision: str, under: Path) -> Path:
    """A worktree of ``revision`` that shares this checkout's jars (.cache/jars)."""
    tree = under / revision
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(tree), revision], check=True)
    (tree / ".cache").mkdir(exist_ok=True)
    (tree / ".cache" / "jars").symlink_to(REPO / ".cache" / "jars")
    return tree


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", help="the git revision to compare the working tree with (required)")
    parser.add_argument("--runs", type=int, default=2, help="rounds of (base, working tree)")
    parser.add_argument("--one-run", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one_run:
        print("RESULT " + json.dumps(one_run()), flush=True)
        return 0
    if not args.base:
        parser.error("--base is required: the git revision to compare the working tree with")
    under = Path(tempfile.mkdtemp(prefix="ab-trees-"))
    base = _tree_of(args.base, under)
    results = {"command": "bench/ab_latency.py " + " ".join(argv if argv is not None else sys.argv[1:]),
               "generated_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
               "base": args.base, "probes": PROBES, "runs": []}
    try:
        for round_no in range(args.runs):
            for name, tree in (("base", base), ("working tree", REPO)):
                print(f"[ab] round {round_no + 1}: {name} ...", flush=True)
                done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--one-run"], cwd=tree,
                                      env={**os.environ, "PYTHONPATH": str(tree)}, capture_output=True, text=True,
                                      timeout=1_200)
                lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
                if done.returncode != 0 or not lines:
                    raise SystemExit(f"[ab] the {name} run failed:\n{done.stderr[-3000:]}")
                run = {"code": name, "round": round_no + 1, **json.loads(lines[-1][len("RESULT "):])}
                results["runs"].append(run)
                print(f"[ab] {name}: latency {run['latency_s']}, batch {run['batch_duration_s']}", flush=True)
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(base)], check=False)
        shutil.rmtree(under, ignore_errors=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(REPO)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
