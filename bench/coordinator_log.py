"""Decoding ``__consumer_offsets``: the Python decoder against Kafka's own Java classes, same records, same run.

Not a test: it measures. Usage::

    .venv/bin/python bench/coordinator_log.py [--seconds 5] [--commits-per-generation 2000] [--repeat 3]

The mix is what a production offsets topic holds: offset commits dominate, so each classic
generation record (type 2, a real one from the fixture, with its members' consumer-protocol bytes)
comes with ``--commits-per-generation`` offset commits (real v4 commits from the fixture, their
partition varied) and a KIP-848 epoch's records (types 3, 5-8, real ones). Measured, in records per
second over the whole mix:

- ``python full``: :func:`streaming.coordinator_log.decode` on every record;
- ``python skip commits``: :func:`is_offset_commit` on every key, :func:`decode` on the rest (what the
  job does when it does not use commits);
- ``java full``: Kafka 4.1.1's ``GroupCoordinatorRecordSerde`` plus ``ConsumerProtocol`` for the
  type-2 members' bytes (what the Python decoder does), in one JVM after a warm-up of the same length
  (jvm/coordinator-reference ``--bench``).

It also probes the classpath clash that reusing Kafka's classes inside the Spark job would meet: the
reference run with Spark's kafka-clients 3.9.2 in place of 4.1.1, and the error it gives.
Rates are given per second of CPU time of the decoding thread (the headline: on a machine shared
with other work the wall clock also counts time the core spent elsewhere) and per second of wall
time; medians of ``--repeat`` runs, each side's cells interleaved. Results:
``bench/results/coordinator_log.json`` (the latest run only).
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from streaming.coordinator_log import decode, is_offset_commit  # noqa: E402
from tests.coordinator_log.capture import MAIN_CLASS, REFERENCE_DIR  # noqa: E402
from tests.coordinator_log.fixture import ensure_built, load  # noqa: E402

RESULTS = REPO / "bench" / "results" / "coordinator_log.json"
SPARK_KAFKA_CLIENTS = REPO / ".cache" / "jars" / "spark" / "kafka-clients-3.9.2.jar"


def realistic_mix(commits_per_generation: int, generations: int) -> list[tuple[bytes, bytes | None]]:
    rows = [r for r in load() if r["source"].startswith("captured")]
    commits = [r for r in rows if r["kafka"]["type"] == 1 and r["value"] is not None]
    classic = [r for r in rows if r["kafka"]["type"] == 2 and r["value"] is not None
               and r["kafka"]["value"]["protocolType"] == "consumer" and r["kafka"]["value"]["members"]]
    kip848 = [r for r in rows if r["kafka"]["type"] in (3, 5, 6, 7, 8)]
    mix: list[tuple[bytes, bytes | None]] = []
    for g in range(generations):
        generation = classic[g % len(classic)]
        mix.append((generation["key"], generation["value"]))
        for r in kip848[(g * 5) % len(kip848):(g * 5) % len(kip848) + 5]:
            mix.append((r["key"], r["value"]))
        for i in range(commits_per_generation):
            commit = commits[i % len(commits)]
            key = bytearray(commit["key"])
            key[-4:] = (i % 64).to_bytes(4, "big")  # another partition of the same topic
            mix.append((bytes(key), commit["value"]))
    return mix


def python_rate(mix, seconds: float, skip_commits: bool) -> tuple[float, float]:
    """Records per second of wall time and per second of this thread's CPU time."""
    def one_pass() -> int:
        skipped = 0
        for key, value in mix:
            if skip_commits and is_offset_commit(key):
                skipped += 1
                continue
            decode(key, value)
        return skipped

    one_pass()  # warm caches
    done, start, cpu_start = 0, time.perf_counter(), time.thread_time()
    while time.perf_counter() - start < seconds:
        one_pass()
        done += len(mix)
    return done / (time.perf_counter() - start), done / (time.thread_time() - cpu_start)


def java_rate(mix, seconds: float, classpath: str) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for key, value in mix:
            f.write(json.dumps({"key": base64.b64encode(key).decode(),
                                "value": None if value is None else base64.b64encode(value).decode()}) + "\n")
    try:
        proc = subprocess.run(["java", "-cp", classpath, MAIN_CLASS, "--bench", f.name, str(seconds)],
                              capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    if proc.returncode != 0:
        return {"error": next((line for line in proc.stderr.splitlines() if "Exception" in line or "Error" in line),
                              proc.stderr[-500:])}
    return json.loads(proc.stdout)


def clash_probe() -> dict:
    """Kafka's classes with Spark's kafka-clients 3.9.2 instead of 4.1.1: what breaks, concretely.

    Two checks: every fixture record decoded by the reference on that classpath (same JSON as with
    4.1.1, or the error), and the classes kafka-group-coordinator 4.1.1 refers to that 3.9.2 lacks
    (``jdeps --missing-deps``; a missing method would only show when called).
    """
    if not SPARK_KAFKA_CLIENTS.exists():
        return {"error": f"{SPARK_KAFKA_CLIENTS} is missing (scripts/bootstrap resolves it)"}
    jars = [str(p) for p in sorted(REFERENCE_DIR.glob("*.jar")) if not p.name.startswith("kafka-clients-")]
    mixed = ":".join(jars + [str(SPARK_KAFKA_CLIENTS)])
    records = "".join(json.dumps({"key": base64.b64encode(r["key"]).decode(),
                                  "value": None if r["value"] is None else base64.b64encode(r["value"]).decode()}) + "\n"
                      for r in load())
    answers = {}
    for name, classpath in (("4.1.1", str(REFERENCE_DIR / "*")), ("3.9.2", mixed)):
        proc = subprocess.run(["java", "-cp", classpath, MAIN_CLASS], input=records, capture_output=True, text=True)
        answers[name] = proc.stdout.splitlines() if proc.returncode == 0 else proc.stderr[-300:]
    same = sum(1 for a, b in zip(answers["4.1.1"], answers["3.9.2"]) if a == b)
    coordinator = next(REFERENCE_DIR.glob("kafka-group-coordinator-4*.jar"))
    others = [j for j in jars if Path(j) != coordinator] + [str(SPARK_KAFKA_CLIENTS)]
    jdeps = subprocess.run(["jdeps", "--multi-release", "17", "--missing-deps", "-cp", ":".join(others), str(coordinator)],
                           capture_output=True, text=True)
    # Lines read "<class> -> <missing class>   not found" (and one "<jar> -> not found" summary).
    missing = sorted({line.split()[-3] for line in jdeps.stdout.splitlines()
                      if line.rstrip().endswith("not found") and line.split()[-3].startswith("org.")})
    missing.sort(key=lambda name: ".message." in name)  # the non-protocol classes first: more telling
    return {"fixture_records": len(answers["4.1.1"]), "same_decoding_with_3_9_2": same,
            "classes_missing_from_3_9_2": len(missing), "missing_examples": missing[:8]}


def load_average() -> float:
    return os.getloadavg()[0]


def git_commit() -> str:
    proc = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    return proc.stdout.strip() or "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="measuring time per cell and repeat")
    parser.add_argument("--commits-per-generation", type=int, default=2000)
    parser.add_argument("--generations", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3, help="repeats per cell; the median is kept")
    args = parser.parse_args()
    ensure_built()
    mix = realistic_mix(args.commits_per_generation, args.generations)
    commits = sum(1 for key, _ in mix if is_offset_commit(key))
    load_before = load_average()
    group_records = [(key, value) for key, value in mix if not is_offset_commit(key)]
    everything = str(REFERENCE_DIR / "*")
    names = ("python_full", "python_skip_commits", "java_full", "python_group_records", "java_group_records")
    wall: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}

    def keep(name: str, rates: tuple[float, float]) -> None:
        wall[name].append(rates[0])
        cpu[name].append(rates[1])

    def java(records) -> tuple[float, float]:
        answer = java_rate(records, args.seconds, everything)
        return answer["records_per_s"], answer["records_per_cpu_s"]

    for _ in range(args.repeat):
        keep("python_full", python_rate(mix, args.seconds, skip_commits=False))
        keep("python_skip_commits", python_rate(mix, args.seconds, skip_commits=True))
        keep("java_full", java(mix))
        keep("python_group_records", python_rate(group_records, args.seconds, skip_commits=False))
        keep("java_group_records", java(group_records))
    median = {name: statistics.median(rates) for name, rates in cpu.items()}
    result = {
        "meta": {
            "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "commit": git_commit(),
            "python": platform.python_version(), "kafka": "4.1.1",
            "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "load_average_before": round(load_before, 2), "load_average_after": round(load_average(), 2),
            "seconds_per_cell": args.seconds, "repeat": args.repeat,
        },
        "mix": {"records": len(mix), "offset_commits": commits, "generations": args.generations,
                "commits_per_generation": args.commits_per_generation},
        "records_per_cpu_s": {name: round(rate) for name, rate in median.items()},
        "records_per_wall_s": {name: round(statistics.median(rates)) for name, rates in wall.items()},
        "runs_per_cpu_s": {name: [round(r) for r in rates] for name, rates in cpu.items()},
        "runs_per_wall_s": {name: [round(r) for r in rates] for name, rates in wall.items()},
        "python_full_over_java": round(median["python_full"] / median["java_full"], 3),
        "python_skip_commits_over_java": round(median["python_skip_commits"] / median["java_full"], 3),
        "python_group_records_over_java": round(median["python_group_records"] / median["java_group_records"], 3),
        "kafka_clients_3_9_2_probe": clash_probe(),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
