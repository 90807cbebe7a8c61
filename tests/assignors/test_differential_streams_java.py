"""Our Kafka Streams HA task assignor against Kafka's own (jvm/streams-reference), on seeded random groups.

Every spec goes through ``assign_streams_ha`` and through Kafka 4.1.1's
``HighAvailabilityTaskAssignor.assign`` (all specs in one JVM). What must agree, per client:

* the active tasks;
* standbys and warm-ups together (Kafka ships both as standbys);
* the warm-ups Kafka itself records (those of active movements) are warm-ups on our side too, and the
  number of warm-ups we report is the number the ``max.warmup.replicas`` budget paid for in Kafka
  (Kafka does not record which standby-movement copies are warm-ups; see
  docs/streams-connect-reference.md);
* the probing-rebalance flag and time, and an impossible movement failing on both sides.

Deviations our port documents (assignors/streams/high_availability.py) are excluded by the named
predicates below, counted, and still checked for validity on our side.

Seed and size: ``STREAMS_DIFFERENTIAL_SEED`` and ``STREAMS_DIFFERENTIAL_SPECS`` in the environment
(defaults 20241117 and 400). Run with ``-s`` to see the agreement table.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import tempfile
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import pytest

from assignors.errors import AssignmentError
from assignors.streams import (
    LATEST_OFFSET,
    LONG_MAX,
    UNKNOWN_OFFSET_SUM,
    StreamsAssignment,
    StreamsAssignmentConfig,
    StreamsClient,
    StreamsGroupSpec,
    assign_streams_ha,
)

from .test_streams_ha import assert_valid

REPO = Path(__file__).resolve().parents[2]
REFERENCE_DIR = REPO / ".cache" / "jars" / "streams-reference"
MAIN_CLASS = "rebalancemonitor.streamsreference.StreamsReference"
SEED = int(os.environ.get("STREAMS_DIFFERENTIAL_SEED", "20241117"))
SPEC_COUNT = int(os.environ.get("STREAMS_DIFFERENTIAL_SPECS", "400"))


# --- the Java reference ----------------------------------------------------------------------------

class StreamsReferenceError(RuntimeError):
    """The reference could not be built or did not answer every spec."""


def ensure_built() -> Path:
    """Build the reference if needed (a no-op once built) and return its jar directory."""
    proc = subprocess.run(["bash", str(REPO / "scripts" / "build-streams-reference")], cwd=REPO,
                          capture_output=True, text=True)
    if proc.returncode != 0 or not (REFERENCE_DIR / "streams-reference.jar").is_file():
        raise StreamsReferenceError(f"scripts/build-streams-reference failed:\n{proc.stderr[-4000:]}")
    return REFERENCE_DIR


def run_streams_reference(specs: Iterable[Mapping[str, Any]], *, repeat: int = 1, warmup: int | None = None,
                          heap: str | None = None, timeout: float | None = None) -> list[dict[str, Any]]:
    """Kafka's answers for ``specs`` (JSON objects, see docs/streams-connect-reference.md), in order, from one JVM."""
    cmd = ["java"] + ([f"-Xmx{heap}"] if heap else [])
    # Serial GC: one JVM on a shared 2-core machine should not take both cores for collection.
    cmd += ["-XX:+UseSerialGC", "-cp", str(ensure_built() / "*"), MAIN_CLASS, "--repeat", str(repeat)]
    if warmup is not None:
        cmd += ["--warmup", str(warmup)]
    env = dict(os.environ)
    env.pop("JAVA_TOOL_OPTIONS", None)  # agents or heap options from the user would skew timings
    with tempfile.TemporaryDirectory(prefix="streams-reference-") as tmp:
        spec_path, out_path = Path(tmp) / "specs.jsonl", Path(tmp) / "answers.jsonl"
        count = 0
        with open(spec_path, "w", encoding="utf-8") as f:
            for spec in specs:
                f.write(json.dumps(spec, separators=(",", ":")) + "\n")
                count += 1
        proc = subprocess.run(cmd + ["--input", str(spec_path), "--output", str(out_path)],
                              capture_output=True, text=True, env=env, timeout=timeout)
        # Exit code 1 only says that some line has an error answer; callers look at those.
        if proc.returncode not in (0, 1):
            raise StreamsReferenceError(f"the reference exited with {proc.returncode}:\n{proc.stderr[-4000:]}")
        with open(out_path, encoding="utf-8") as f:
            answers = [json.loads(line) for line in f if line.strip()]
    if len(answers) != count:
        raise StreamsReferenceError(f"the reference answered {len(answers)} of {count} specs:\n{proc.stderr[-4000:]}")
    return answers


def spec_to_json(spec: StreamsGroupSpec, spec_id: str) -> dict[str, Any]:
    """The reference's JSON shape for a :class:`StreamsGroupSpec` (field names are the same)."""
    clients = []
    for c in spec.clients:
        entry: dict[str, Any] = {"process_id": c.process_id, "capacity": c.capacity}
        if c.task_lags is not None:
            entry["task_lags"] = dict(c.task_lags)
        else:
            entry["task_offset_sums"] = dict(c.task_offset_sums)
        if c.tags:
            entry["tags"] = dict(c.tags)
        clients.append(entry)
    cfg = spec.config
    out: dict[str, Any] = {
        "id": spec_id,
        "clients": clients,
        "stateful_tasks": list(spec.stateful_tasks),
        "stateless_tasks": list(spec.stateless_tasks),
        "config": {
            "acceptable_recovery_lag": cfg.acceptable_recovery_lag,
            "num_standby_replicas": cfg.num_standby_replicas,
            "max_warmup_replicas": cfg.max_warmup_replicas,
            "probing_rebalance_interval_ms": cfg.probing_rebalance_interval_ms,
            "rack_aware_assignment_tags": list(cfg.rack_aware_assignment_tags),
        },
        "now_ms": spec.now_ms,
    }
    if spec.task_end_offset_sums is not None:
        out["task_end_offset_sums"] = dict(spec.task_end_offset_sums)
    return out


# --- random groups ---------------------------------------------------------------------------------

def random_spec(rng: random.Random) -> StreamsGroupSpec:
    """1-20 clients of 1-4 threads, 1-60 tasks (some stateless), lags around acceptable.recovery.lag
    from a previous round's owners (an active at -2, standbys near the bound, the rest without state),
    0-2 standbys, 1-3 warm-ups; lags given directly or as offset sums against end offsets."""
    acceptable = rng.choice([0, 10, 100, 10_000, 10_000, LONG_MAX])
    bound = 10_000 if acceptable == LONG_MAX else acceptable
    n_clients = rng.randint(1, 20)
    pids = [str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(n_clients)]
    n_tasks = rng.randint(1, 60)
    subtopologies = rng.randint(1, 5)
    tasks = [f"{i % subtopologies}_{i // subtopologies}" for i in range(n_tasks)]
    stateless_share = rng.choice([0.0, 0.0, 0.2, 0.5, 1.0])
    stateless = [t for t in tasks if rng.random() < stateless_share]
    stateful = [t for t in tasks if t not in stateless]

    # A previous round: maybe an active owner per task, some standby holders with state near the
    # bound, and everybody else either without state (full restore) or with a far-behind store.
    lag: dict[str, dict[str, int]] = {p: {} for p in pids}
    no_state = {t: rng.randint(bound + 1, bound * 5 + 1000) for t in stateful}
    fresh_group = rng.random() < 0.15
    for t in stateful:
        owners = rng.sample(pids, min(len(pids), rng.randint(0, 3)))
        if owners and not fresh_group and rng.random() < 0.85:
            lag[owners[0]][t] = LATEST_OFFSET
            owners = owners[1:]
        for p in owners:
            lag[p][t] = max(0, bound + rng.randint(-bound // 2 - 5, bound // 2 + 5))
        for p in pids:
            if t not in lag[p] and rng.random() < 0.2:
                lag[p][t] = rng.randint(bound + 1, no_state[t])
    if rng.random() < 0.04 and stateful:
        # A client that cannot tell its offsets (Kafka's UNKNOWN_OFFSET_SUM).
        lag[rng.choice(pids)][rng.choice(stateful)] = UNKNOWN_OFFSET_SUM

    tag_aware = rng.random() < 0.15
    zones = rng.sample(["a", "b", "c", "d"], rng.randint(1, 4))
    offset_mode = rng.random() < 0.5
    ends = {t: no_state[t] for t in stateful} if offset_mode else None
    clients = []
    for p in pids:
        tags = {"zone": rng.choice(zones)} if tag_aware else {}
        capacity = rng.choice([1, 1, 1, 2, 3, 4])
        if offset_mode:
            sums = {}
            for t, value in lag[p].items():
                if value in (LATEST_OFFSET, UNKNOWN_OFFSET_SUM):
                    sums[t] = value
                elif rng.random() < 0.03:
                    sums[t] = ends[t] + rng.randint(1, 50)  # a store ahead of the changelog end
                else:
                    sums[t] = max(0, ends[t] - value)
            clients.append(StreamsClient(p, capacity, task_offset_sums=sums, tags=tags))
        else:
            clients.append(StreamsClient(p, capacity, task_lags={t: lag[p].get(t, no_state[t]) for t in stateful}, tags=tags))
    config = StreamsAssignmentConfig(
        acceptable_recovery_lag=acceptable,
        num_standby_replicas=rng.choice([0, 0, 1, 1, 2]),
        max_warmup_replicas=rng.randint(1, 3),
        probing_rebalance_interval_ms=rng.choice([60_000, 600_000]),
        rack_aware_assignment_tags=("zone",) if tag_aware else (),
    )
    return StreamsGroupSpec(tuple(clients), tuple(stateful), tuple(stateless), ends, config, now_ms=rng.randint(0, 10**12))


# --- documented deviations -------------------------------------------------------------------------

def reports_unknown_offset_sum(spec: StreamsGroupSpec) -> bool:
    """A client reports UNKNOWN_OFFSET_SUM (-3): we fall back to the prior assignment, Kafka's HA
    assignor ranks the -3 as a lag (documented in high_availability.py)."""
    return any(
        UNKNOWN_OFFSET_SUM in (c.task_lags.values() if c.task_lags is not None else c.task_offset_sums.values())
        for c in spec.clients
    )


DEVIATIONS: dict[str, Callable[[StreamsGroupSpec], bool]] = {
    "reports_unknown_offset_sum": reports_unknown_offset_sum,
}


# --- comparison --------------------------------------------------------------------------------------

def disagreement(ours: StreamsAssignment | AssignmentError, java: dict[str, Any]) -> str | None:
    """None when the two answers agree on everything Kafka lets us see, else what differs."""
    if isinstance(ours, AssignmentError) or "error" in java:
        if isinstance(ours, AssignmentError) and "IllegalStateException" in java.get("error", ""):
            return None
        return f"error: ours={ours if isinstance(ours, AssignmentError) else 'none'} java={java.get('error')}"
    problems = []
    for pid, mine in ours.clients.items():
        theirs = java["clients"][pid]
        if list(mine.active_tasks) != theirs["active_tasks"]:
            problems.append(f"{pid} actives {mine.active_tasks} != {theirs['active_tasks']}")
        copies = sorted(set(mine.standby_tasks) | set(mine.warmup_tasks))
        if copies != sorted(set(theirs["standby_tasks"]) | set(theirs["warmup_tasks"])):
            problems.append(f"{pid} standbys+warm-ups {mine.standby_tasks}+{mine.warmup_tasks} != "
                            f"{theirs['standby_tasks']}+{theirs['warmup_tasks']}")
        if not set(theirs["warmup_tasks"]) <= set(mine.warmup_tasks):
            problems.append(f"{pid} Kafka's recorded warm-ups {theirs['warmup_tasks']} not among ours {mine.warmup_tasks}")
    granted = sum(len(c.warmup_tasks) for c in ours.clients.values())
    if granted != java["warmups_granted"]:
        problems.append(f"warm-ups granted {granted} != {java['warmups_granted']}")
    if ours.probing_rebalance_needed != java["probing_rebalance_needed"]:
        problems.append(f"probing {ours.probing_rebalance_needed} != {java['probing_rebalance_needed']}")
    elif ours.probing_rebalance_at_ms != java["probing_rebalance_at_ms"]:
        problems.append(f"probing at {ours.probing_rebalance_at_ms} != {java['probing_rebalance_at_ms']}")
    return "; ".join(problems) or None


@pytest.fixture(scope="module")
def corpus():
    rng = random.Random(SEED)
    specs = [random_spec(rng) for _ in range(SPEC_COUNT)]
    try:
        answers = run_streams_reference(spec_to_json(s, f"s{i}") for i, s in enumerate(specs))
    except (StreamsReferenceError, FileNotFoundError) as e:
        pytest.skip(f"Java reference unavailable: {e}")
    return specs, answers


def test_at_least_300_specs_cover_the_interesting_cases(corpus):
    specs, _ = corpus
    assert len(specs) >= 300 or SPEC_COUNT < 300
    assert any(s.config.num_standby_replicas == 2 for s in specs)
    assert any(s.stateless_tasks for s in specs)
    assert any(s.task_end_offset_sums is not None for s in specs)
    assert any(s.config.rack_aware_assignment_tags for s in specs)


def test_agrees_with_kafka_streams_high_availability_task_assignor(corpus):
    specs, answers = corpus
    counts: Counter[str] = Counter()
    failures = []
    for i, (spec, java) in enumerate(zip(specs, answers)):
        assert java["id"] == f"s{i}"
        try:
            ours: StreamsAssignment | AssignmentError = assign_streams_ha(spec)
            assert_valid(spec, ours)
        except AssignmentError as e:
            ours = e
        excluded = [name for name, applies in DEVIATIONS.items() if applies(spec)]
        if excluded:
            counts[f"excluded: {excluded[0]}"] += 1
            continue
        problem = disagreement(ours, java)
        counts["compared"] += 1
        if problem is None:
            counts["agreed"] += 1
            counts["agreed, with a movement (probing)" if java.get("probing_rebalance_needed") else "agreed, settled"] += 1
            if java.get("warmups_granted"):
                counts["agreed, with warm-ups"] += 1
            if spec.config.rack_aware_assignment_tags:
                counts["agreed, tag-aware standbys"] += 1
        else:
            failures.append(f"s{i}: {problem}")
    print(f"\nStreams HA differential (seed {SEED}, {len(specs)} specs):")
    for key in sorted(counts):
        print(f"  {key:40s} {counts[key]}")
    assert not failures, f"{len(failures)} of {counts['compared']} specs disagree:\n" + "\n".join(failures[:15])
