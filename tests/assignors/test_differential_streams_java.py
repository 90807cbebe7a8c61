"""Our Kafka Streams task assignor against Kafka's own (jvm/streams-reference), on seeded random groups.

Every spec goes through ``assign_streams_ha`` and through Kafka 4.1.1 (all specs in one JVM): its
``HighAvailabilityTaskAssignor.assign``, or ``FallbackPriorTaskAssignor.assign`` when the spec has no
end offsets, as ``StreamsPartitionAssignor`` decides. Nothing is excluded. What must agree, per
client, in three fields:

* actives: the active tasks;
* standbys+warm-ups: standbys and warm-ups together (Kafka ships both as standbys); the warm-ups
  Kafka itself records (those of active movements) are warm-ups on our side too, and the number of
  warm-ups we report is the number the ``max.warmup.replicas`` budget paid for in Kafka (Kafka does
  not record which standby-movement copies are warm-ups; see docs/streams-connect-reference.md);
* probing: the probing-rebalance flag and time, and whether the fallback ran.

An impossible movement must fail on both sides. The specs come in families (``FAMILIES``) that steer
at the paths where Kafka's answer hangs on Java details; the test counts the specs that took each
path and requires every path at a default-size run.

Seeds and size: ``STREAMS_DIFFERENTIAL_SEEDS`` (comma-separated, default 20241117) and
``STREAMS_DIFFERENTIAL_SPECS`` (per seed, default 600) in the environment. Run with ``-s`` to see
the agreement table.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import tempfile
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import pytest

from assignors.errors import AssignmentError
from assignors.java_order import uuid_compare_key
from assignors.streams import (
    LATEST_OFFSET,
    LONG_MAX,
    UNKNOWN_OFFSET_SUM,
    StreamsAssignment,
    StreamsAssignmentConfig,
    StreamsClient,
    StreamsGroupSpec,
    assign_streams_ha,
    high_availability,
    java_hash,
    task_sort_key,
)
from assignors.streams.java_queue import ConstrainedPrioritySet

from .test_streams_ha import assert_valid

pytestmark = pytest.mark.integration  # needs a JVM

REPO = Path(__file__).resolve().parents[2]
REFERENCE_DIR = REPO / ".cache" / "jars" / "streams-reference"
MAIN_CLASS = "rebalancemonitor.streamsreference.StreamsReference"
SEEDS = [int(s) for s in os.environ.get("STREAMS_DIFFERENTIAL_SEEDS", "20241117").split(",")]
SPEC_COUNT = int(os.environ.get("STREAMS_DIFFERENTIAL_SPECS", "600"))


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
#
# Each spec belongs to a family. "general" is a group after a previous round; the others steer at
# the paths where Kafka's answer depends on details that are easy to get wrong: lags Kafka cannot
# know, end offsets it could not fetch, standbys that cannot be spread over tag values, warm-up
# budgets that run out (where Kafka's client queue goes out of heap order), and task ids whose Java
# hashes collide (tree buckets in Kafka's hash maps).

FAMILIES = (
    ("general", 0.40),
    ("unknown_offset_sums", 0.13),
    ("missing_end_offsets", 0.15),
    ("tags_too_few_values", 0.13),
    ("warmup_budget_runs_out", 0.16),
    ("colliding_task_ids", 0.03),
)


def _pids(rng: random.Random, n: int) -> list[str]:
    return [str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(n)]


def _tasks(rng: random.Random, n: int, subtopologies: int) -> list[str]:
    return [f"{i % subtopologies}_{i // subtopologies}" for i in range(n)]


def _previous_round(rng: random.Random, pids: list[str], stateful: list[str], bound: int, *,
                    owned: float = 0.85, holders: int = 3, far: float = 0.2) -> tuple[dict, dict]:
    """Lags after a previous round: maybe an active owner per task (-2), standby holders near the
    bound, a few far-behind stores; the rest have no state (the task's end offset)."""
    lag: dict[str, dict[str, int]] = {p: {} for p in pids}
    no_state = {t: rng.randint(bound + 1, bound * 5 + 1000) for t in stateful}
    for t in stateful:
        owners = rng.sample(pids, min(len(pids), rng.randint(0, holders)))
        if owners and rng.random() < owned:
            lag[owners[0]][t] = LATEST_OFFSET
            owners = owners[1:]
        for p in owners:
            lag[p][t] = max(0, bound + rng.randint(-bound // 2 - 5, bound // 2 + 5))
        for p in pids:
            if t not in lag[p] and rng.random() < far:
                lag[p][t] = rng.randint(bound + 1, no_state[t])
    return lag, no_state


def _clients(rng: random.Random, pids: list[str], stateful: list[str], lag: dict, no_state: dict, *,
             offset_mode: bool, ends: dict | None, tags=None, capacities=(1, 1, 1, 2, 3, 4)) -> list[StreamsClient]:
    clients = []
    for p in pids:
        capacity = rng.choice(capacities)
        client_tags = tags(p) if tags else {}
        if offset_mode:
            sums = {}
            for t, value in lag[p].items():
                if value in (LATEST_OFFSET, UNKNOWN_OFFSET_SUM):
                    sums[t] = value
                elif ends is not None and rng.random() < 0.03:
                    sums[t] = ends[t] + rng.randint(1, 50)  # a store ahead of the changelog end
                else:
                    sums[t] = max(0, (ends or no_state)[t] - value)
            clients.append(StreamsClient(p, capacity, task_offset_sums=sums, tags=client_tags))
        else:
            lags = {t: lag[p].get(t, no_state[t]) for t in stateful}
            clients.append(StreamsClient(p, capacity, task_lags=lags, tags=client_tags))
    return clients


def _config(rng: random.Random, acceptable: int, **overrides) -> StreamsAssignmentConfig:
    values = dict(
        acceptable_recovery_lag=acceptable,
        num_standby_replicas=rng.choice([0, 0, 1, 1, 2]),
        max_warmup_replicas=rng.randint(1, 3),
        probing_rebalance_interval_ms=rng.choice([60_000, 600_000]),
    )
    values.update(overrides)
    return StreamsAssignmentConfig(**values)


def _acceptable(rng: random.Random) -> tuple[int, int]:
    acceptable = rng.choice([0, 10, 100, 10_000, 10_000, LONG_MAX])
    return acceptable, 10_000 if acceptable == LONG_MAX else acceptable


def _split_stateless(rng: random.Random, tasks: list[str]) -> tuple[list[str], list[str]]:
    share = rng.choice([0.0, 0.0, 0.2, 0.5, 1.0])
    stateless = [t for t in tasks if rng.random() < share]
    return [t for t in tasks if t not in stateless], stateless


def general_spec(rng: random.Random) -> StreamsGroupSpec:
    """1-20 clients of 1-4 threads, 1-60 tasks (some stateless), lags around acceptable.recovery.lag
    from a previous round, 0-2 standbys, 1-3 warm-ups, zone tags in about 15%; lags given directly
    or as offset sums against end offsets; now and then a client that cannot tell an offset (-3)."""
    acceptable, bound = _acceptable(rng)
    pids = _pids(rng, rng.randint(1, 20))
    stateful, stateless = _split_stateless(rng, _tasks(rng, rng.randint(1, 60), rng.randint(1, 5)))
    lag, no_state = _previous_round(rng, pids, stateful, bound, owned=0.0 if rng.random() < 0.15 else 0.85)
    if rng.random() < 0.1 and stateful:
        lag[rng.choice(pids)][rng.choice(stateful)] = UNKNOWN_OFFSET_SUM
    tag_aware = rng.random() < 0.15
    zones = rng.sample(["a", "b", "c", "d"], rng.randint(1, 4))
    offset_mode = rng.random() < 0.5
    ends = dict(no_state) if offset_mode else None
    clients = _clients(rng, pids, stateful, lag, no_state, offset_mode=offset_mode, ends=ends,
                       tags=(lambda p: {"zone": rng.choice(zones)}) if tag_aware else None)
    config = _config(rng, acceptable, rack_aware_assignment_tags=("zone",) if tag_aware else ())
    return StreamsGroupSpec(tuple(clients), tuple(stateful), tuple(stateless), ends, config, now_ms=rng.randint(0, 10**12))


def unknown_offset_sums_spec(rng: random.Random) -> StreamsGroupSpec:
    """End offsets known, but several clients report -3 (UNKNOWN_OFFSET_SUM) for several tasks,
    next to previous actives (-2) and real lags on the same tasks: Kafka runs the HA assignor and
    takes -3 as a lag (never caught up, yet first in its ranking by lag)."""
    acceptable, bound = _acceptable(rng)
    pids = _pids(rng, rng.randint(1, 12))
    stateful, stateless = _split_stateless(rng, _tasks(rng, rng.randint(1, 40), rng.randint(1, 4)))
    lag, no_state = _previous_round(rng, pids, stateful, bound, owned=rng.choice([0.5, 0.85, 1.0]))
    share = rng.choice([0.05, 0.2, 0.5])
    for p in pids:
        for t in stateful:
            if rng.random() < share and (lag[p].get(t) != LATEST_OFFSET or rng.random() < 0.3):
                lag[p][t] = UNKNOWN_OFFSET_SUM
    offset_mode = rng.random() < 0.6
    ends = dict(no_state)
    clients = _clients(rng, pids, stateful, lag, no_state, offset_mode=offset_mode, ends=ends if offset_mode else None)
    config = _config(rng, acceptable)
    return StreamsGroupSpec(tuple(clients), tuple(stateful), tuple(stateless), ends if offset_mode else None,
                            config, now_ms=rng.randint(0, 10**12))


def missing_end_offsets_spec(rng: random.Random) -> StreamsGroupSpec:
    """Clients report offset sums but the leader could not fetch the end offsets: Kafka runs its
    fallback. Previous actives (sometimes claimed twice), standby stores (some -3), stateless tasks
    run before (-2 from owned partitions), stores of tasks gone from the topology, 0-3 standbys."""
    pids = _pids(rng, rng.randint(1, 16))
    subtopologies = rng.randint(1, 6)
    stateful, stateless = _split_stateless(rng, _tasks(rng, rng.randint(1, 70), subtopologies))
    lag, _ = _previous_round(rng, pids, stateful, 100, owned=rng.choice([0.0, 0.5, 0.9, 1.0]),
                             holders=rng.randint(1, 4), far=rng.choice([0.0, 0.1, 0.3]))
    clients = []
    for p in pids:
        sums = {t: (v if v == LATEST_OFFSET else (UNKNOWN_OFFSET_SUM if rng.random() < 0.2 else rng.randint(0, 5000)))
                for t, v in lag[p].items()}
        if rng.random() < 0.15 and stateful:
            sums[rng.choice(stateful)] = LATEST_OFFSET  # a second client claims an active
        for t in stateless:
            if rng.random() < 0.5 / len(pids):
                sums[t] = LATEST_OFFSET
        if rng.random() < 0.1:
            sums[f"{subtopologies + 3}_{rng.randint(0, 9)}"] = rng.randint(0, 100)  # a task no longer there
        clients.append(StreamsClient(p, rng.choice([1, 1, 2, 3, 4]), task_offset_sums=sums))
    config = _config(rng, rng.choice([0, 100, 10_000]), num_standby_replicas=rng.choice([0, 1, 1, 2, 3]))
    return StreamsGroupSpec(tuple(clients), tuple(stateful), tuple(stateless), None, config, now_ms=rng.randint(0, 10**12))


def tags_too_few_values_spec(rng: random.Random) -> StreamsGroupSpec:
    """Tag-aware standbys with fewer tag values than copies per task (1-3 standbys over 1-3 zones,
    sometimes a second key, sometimes a tag that is not a rack-aware key): some standbys cannot land
    on distinct values and Kafka hands them out in the walk of a HashMap of task ids."""
    acceptable, bound = _acceptable(rng)
    pids = _pids(rng, rng.randint(2, 14))
    stateful, stateless = _split_stateless(rng, _tasks(rng, rng.randint(1, 60), rng.randint(1, 6)))
    lag, no_state = _previous_round(rng, pids, stateful, bound)
    standbys = rng.randint(1, 3)
    zones = ["a", "b", "c"][: rng.randint(1, min(3, standbys + 1))]
    clusters = ["k1", "k2"][: rng.randint(1, 2)]
    keys = ("zone", "cluster") if rng.random() < 0.4 else ("zone",)

    def tags(_p):
        out = {"zone": rng.choice(zones)}
        if "cluster" in keys:
            out["cluster"] = rng.choice(clusters)
        if rng.random() < 0.2:
            out["host"] = f"h{rng.randint(0, 3)}"  # not a rack-aware key: ignored by Kafka
        return out

    offset_mode = rng.random() < 0.4
    ends = dict(no_state) if offset_mode else None
    clients = _clients(rng, pids, stateful, lag, no_state, offset_mode=offset_mode, ends=ends, tags=tags)
    config = _config(rng, acceptable, num_standby_replicas=standbys, rack_aware_assignment_tags=keys)
    return StreamsGroupSpec(tuple(clients), tuple(stateful), tuple(stateless), ends, config, now_ms=rng.randint(0, 10**12))


def warmup_budget_runs_out_spec(rng: random.Random) -> StreamsGroupSpec:
    """A big restart: 16-48 single-thread clients, nearly all caught up on some tasks, 80-120 tasks
    whose actives mostly sit on clients without state, two standbys, a budget of one warm-up. Nearly
    every movement finds the budget spent, so destination clients lose tasks while they sit in
    Kafka's client queue, and its heap goes out of order now and then: in about one spec in ten at
    these group sizes (a heap of 2**k - 1 clients puts a re-offered client on the path that meets
    the destination's stale slot most often)."""
    acceptable = rng.choice([100, 100, 1000])
    pids = _pids(rng, rng.choice([16, 24, 32, 32, 48, rng.randint(16, 48)]))
    stateful = _tasks(rng, rng.randint(80, 120), rng.randint(1, 4))
    caught_up = rng.sample(pids, max(1, round(len(pids) * 0.95)))
    holders = 0.4
    lag: dict[str, dict[str, int]] = {p: {} for p in pids}
    no_state = {t: rng.randint(acceptable + 1000, acceptable + 20_000) for t in stateful}
    for t in stateful:
        owner = rng.choice(caught_up if rng.random() < 0.2 else pids)
        lag[owner][t] = LATEST_OFFSET
        for p in caught_up:
            if p != owner and rng.random() < holders:
                lag[p][t] = rng.randint(0, acceptable)
    offset_mode = rng.random() < 0.5
    ends = dict(no_state) if offset_mode else None
    clients = _clients(rng, pids, stateful, lag, no_state, offset_mode=offset_mode, ends=ends,
                       capacities=(1,))
    config = _config(rng, acceptable, num_standby_replicas=2, max_warmup_replicas=1)
    return StreamsGroupSpec(tuple(clients), tuple(stateful), (), ends, config, now_ms=rng.randint(0, 10**12))


def colliding_task_ids_spec(rng: random.Random) -> StreamsGroupSpec:
    """Task ids whose Java hashes collide: ``TaskId.hashCode`` is ``29791 + 31 * (31 * s + p)``, so
    ``0_k``, ``1_(k-31)``, ... share one. With nine or more of them Kafka's hash maps of task ids grow
    a tree bucket, whose walk is not insertion order. Tag-aware standbys over too few zones (the
    pending map is walked), or end offsets missing (the fallback walks a copy of the task set and
    removes from it)."""
    tasks = set()
    for k in rng.sample([250, 300, 341, 400], rng.randint(1, 2)):
        tasks.update(f"{s}_{k - 31 * s}" for s in range(k // 31 + 1) if rng.random() < 0.9)
    while len(tasks) < rng.randint(len(tasks), 90):
        tasks.add(f"{rng.randint(0, 12)}_{rng.randint(0, 60)}")
    tasks = sorted(tasks, key=task_sort_key)
    rng.shuffle(tasks)
    pids = _pids(rng, rng.randint(2, 6))
    if rng.random() < 0.5:
        no_state = {t: 1000 for t in tasks}
        lag = {p: {} for p in pids}
        for t in tasks:
            lag[rng.choice(pids)][t] = LATEST_OFFSET
        clients = _clients(rng, pids, tasks, lag, no_state, offset_mode=False, ends=None,
                           tags=lambda p: {"zone": rng.choice(["a", "b"])})
        config = _config(rng, 100, num_standby_replicas=rng.choice([2, 3]), rack_aware_assignment_tags=("zone",))
        return StreamsGroupSpec(tuple(clients), tuple(tasks), (), None, config, now_ms=rng.randint(0, 10**12))
    stateful = [t for t in tasks if rng.random() < 0.8]
    stateless = [t for t in tasks if t not in set(stateful)]
    clients = []
    for p in pids:
        sums = {t: (LATEST_OFFSET if rng.random() < 0.5 else rng.randint(0, 100)) for t in stateful if rng.random() < 0.3}
        clients.append(StreamsClient(p, rng.randint(1, 3), task_offset_sums=sums))
    config = _config(rng, 100, num_standby_replicas=rng.choice([0, 1, 2]))
    return StreamsGroupSpec(tuple(clients), tuple(stateful), tuple(stateless), None, config, now_ms=rng.randint(0, 10**12))


GENERATORS: dict[str, Callable[[random.Random], StreamsGroupSpec]] = {
    "general": general_spec,
    "unknown_offset_sums": unknown_offset_sums_spec,
    "missing_end_offsets": missing_end_offsets_spec,
    "tags_too_few_values": tags_too_few_values_spec,
    "warmup_budget_runs_out": warmup_budget_runs_out_spec,
    "colliding_task_ids": colliding_task_ids_spec,
}


def random_case(rng: random.Random) -> tuple[str, StreamsGroupSpec]:
    """A family drawn with the weights of :data:`FAMILIES`, and a spec of it."""
    names, weights = zip(*FAMILIES)
    family = rng.choices(names, weights)[0]
    return family, GENERATORS[family](rng)


def random_spec(rng: random.Random) -> StreamsGroupSpec:
    return random_case(rng)[1]


# --- comparison, field by field -----------------------------------------------------------------------

FIELDS = ("actives", "standbys+warm-ups", "probing")


def field_agreement(ours: StreamsAssignment | AssignmentError, java: dict[str, Any]) -> dict[str, str | None]:
    """Per field, None when both sides agree, else what differs. An error answer (Kafka's
    IllegalStateException for an impossible movement, ours an AssignmentError) agrees only with an
    error on the other side, on every field."""
    if isinstance(ours, AssignmentError) or "error" in java:
        same = isinstance(ours, AssignmentError) and "IllegalStateException" in java.get("error", "")
        problem = None if same else f"error: ours={ours if isinstance(ours, AssignmentError) else 'none'} java={java.get('error')}"
        return {f: problem for f in FIELDS}
    actives, copies, probing = [], [], []
    for pid, mine in ours.clients.items():
        theirs = java["clients"][pid]
        if list(mine.active_tasks) != theirs["active_tasks"]:
            actives.append(f"{pid} actives {mine.active_tasks} != {theirs['active_tasks']}")
        mine_copies = sorted(set(mine.standby_tasks) | set(mine.warmup_tasks))
        if mine_copies != sorted(set(theirs["standby_tasks"]) | set(theirs["warmup_tasks"])):
            copies.append(f"{pid} standbys+warm-ups {mine.standby_tasks}+{mine.warmup_tasks} != "
                          f"{theirs['standby_tasks']}+{theirs['warmup_tasks']}")
        if not set(theirs["warmup_tasks"]) <= set(mine.warmup_tasks):
            copies.append(f"{pid} Kafka's recorded warm-ups {theirs['warmup_tasks']} not among ours {mine.warmup_tasks}")
    granted = sum(len(c.warmup_tasks) for c in ours.clients.values())
    if granted != java["warmups_granted"]:
        copies.append(f"warm-ups granted {granted} != {java['warmups_granted']}")
    if ours.probing_rebalance_needed != java["probing_rebalance_needed"]:
        probing.append(f"probing {ours.probing_rebalance_needed} != {java['probing_rebalance_needed']}")
    elif ours.probing_rebalance_at_ms != java["probing_rebalance_at_ms"]:
        probing.append(f"probing at {ours.probing_rebalance_at_ms} != {java['probing_rebalance_at_ms']}")
    if ours.fallback_used != java["fallback_used"]:
        probing.append(f"fallback {ours.fallback_used} != {java['fallback_used']}")
    return {"actives": "; ".join(actives) or None, "standbys+warm-ups": "; ".join(copies) or None,
            "probing": "; ".join(probing) or None}


def disagreement(ours: StreamsAssignment | AssignmentError, java: dict[str, Any]) -> str | None:
    """None when the two answers agree on everything Kafka lets us see, else what differs."""
    problems = [p for p in dict.fromkeys(field_agreement(ours, java).values()) if p]
    return "; ".join(problems) or None


@dataclass
class Case:
    seed: int
    index: int
    family: str
    spec: StreamsGroupSpec
    java: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"seed {self.seed} #{self.index} ({self.family})"


@pytest.fixture(scope="module")
def corpus() -> list[Case]:
    cases = []
    for seed in SEEDS:
        rng = random.Random(seed)
        cases += [Case(seed, i, *random_case(rng)) for i in range(SPEC_COUNT)]
    try:
        answers = run_streams_reference(spec_to_json(c.spec, f"{c.seed}/{c.index}") for c in cases)
    except (StreamsReferenceError, FileNotFoundError) as e:
        pytest.skip(f"Java reference unavailable: {e}")
    for case, answer in zip(cases, answers):
        assert answer["id"] == f"{case.seed}/{case.index}"
        case.java = answer
    return cases


class _PathCounter:
    """Counts the specs in which our assignor took each of the paths the corpus steers at."""

    def __init__(self, monkeypatch):
        self.counts: Counter[str] = Counter()
        self._this_spec: set[str] = set()
        taken = self._this_spec

        class CountingSet(ConstrainedPrioritySet):
            def poll(self, constraint, candidates=None):
                # The least loaded client the constraint admits, by the loads of this moment: what an
                # idealised queue would return. Kafka's heap, and ours, may return another one.
                load = self._load
                admitted = [c for c in self._members if constraint(c)]
                ideal = min(admitted, key=lambda c: (load[c], c)) if admitted else None
                got = super().poll(constraint, candidates)
                if got != ideal:
                    taken.add("queue yielded a client that is not the least loaded")
                return got

        monkeypatch.setattr(high_availability, "ConstrainedPrioritySet", CountingSet)
        take_budget = high_availability._HighAvailabilityRound._take_warmup_budget
        pending_walk = high_availability._HighAvailabilityRound._pending_standbys_walk

        def counting_take(round_):
            had = take_budget(round_)
            if not had:
                taken.add("movement after the warm-up budget was spent")
            return had

        def counting_walk(round_, pending):
            walk = pending_walk(round_, pending)
            if walk != sorted(pending):
                taken.add("pending tag-aware standbys walked out of TaskId order")
            return walk

        monkeypatch.setattr(high_availability._HighAvailabilityRound, "_take_warmup_budget", counting_take)
        monkeypatch.setattr(high_availability._HighAvailabilityRound, "_pending_standbys_walk", counting_walk)

    def take(self, path: str) -> None:
        self._this_spec.add(path)

    def end_spec(self) -> None:
        self.counts.update(self._this_spec)
        self._this_spec.clear()


def _reports_unknown_offset_sum(spec: StreamsGroupSpec) -> bool:
    return any(UNKNOWN_OFFSET_SUM in (c.task_lags.values() if c.task_lags is not None else c.task_offset_sums.values())
               for c in spec.clients)


def test_agrees_with_kafka_streams_task_assignors_field_by_field(corpus, monkeypatch):
    """Every spec compared, none excluded: actives, standbys with warm-ups, and the probing decision
    (with the fallback flag) agree with Kafka 4.1.1's own assignors."""
    paths = _PathCounter(monkeypatch)
    agreed: Counter[tuple[int, str]] = Counter()
    per_family: Counter[tuple[str, str]] = Counter()
    failures = []
    for case in corpus:
        try:
            ours: StreamsAssignment | AssignmentError = assign_streams_ha(case.spec)
            assert_valid(case.spec, ours)
        except AssignmentError as e:
            ours = e
        fields = field_agreement(ours, case.java)
        per_family[(case.family, "specs")] += 1
        for name, problem in fields.items():
            if problem is None:
                agreed[(case.seed, name)] += 1
                per_family[(case.family, name)] += 1
        if any(fields.values()):
            failures.append(f"{case.name}: {disagreement(ours, case.java)}")
        if case.java.get("fallback_used"):
            paths.take("end offsets missing: Kafka's fallback ran")
        elif _reports_unknown_offset_sum(case.spec) and "error" not in case.java:
            paths.take("-3 reported, Kafka's HA assignor ran")
        paths.end_spec()

    print(f"\nStreams differential against Kafka 4.1.1, {SPEC_COUNT} specs per seed, nothing excluded:")
    print(f"  {'seed':>10s}  " + "  ".join(f"{f:>18s}" for f in FIELDS))
    for seed in SEEDS:
        total = sum(c.seed == seed for c in corpus)
        print(f"  {seed:>10d}  " + "  ".join(f"{agreed[(seed, f)]:>8d} = {100 * agreed[(seed, f)] / total:6.2f}%"
                                             for f in FIELDS))
    print("  by family (specs, then agreeing per field):")
    for family, _ in FAMILIES:
        n = per_family[(family, "specs")]
        print(f"    {family:26s} {n:6d}  " + "  ".join(f"{per_family[(family, f)]:6d}" for f in FIELDS))
    print("  specs that took each path:")
    for key in sorted(paths.counts):
        print(f"    {key:60s} {paths.counts[key]}")

    assert not failures, f"{len(failures)} of {len(corpus)} specs disagree:\n" + "\n".join(failures[:15])
    if SPEC_COUNT >= 300:
        # The corpus is only worth its figures if it reaches the paths it steers at.
        for path in ("end offsets missing: Kafka's fallback ran", "-3 reported, Kafka's HA assignor ran",
                     "movement after the warm-up budget was spent",
                     "queue yielded a client that is not the least loaded",
                     "pending tag-aware standbys walked out of TaskId order"):
            assert paths.counts[path] > 0, f"no spec of the corpus took the path: {path}"


# --- Java's hash containers -----------------------------------------------------------------------------

def _task_keys(rng: random.Random, n: int) -> list[str]:
    """Task ids with colliding hashes: equal ones (31 * subtopology + partition fixed), ones sharing
    a bucket of a small table, and spread ones."""
    mode, keys = rng.random(), set()
    for _ in range(20 * n):
        if len(keys) >= n:
            break
        if mode < 0.4:
            k = rng.choice([217, 250, 300, 400])
            s = rng.randint(0, k // 31)
            keys.add(f"{s}_{k - 31 * s}")
        elif mode < 0.7:
            keys.add(f"{rng.randint(0, 20)}_{rng.randint(0, 40) * 16 + rng.randint(0, 1)}")
        else:
            keys.add(f"{rng.randint(0, 8)}_{rng.randint(0, 3000)}")
    out = sorted(keys)
    rng.shuffle(out)
    return out


def _process_keys(rng: random.Random, n: int) -> list[str]:
    """UUIDs most of which share one ``hashCode`` (``(int)(x >>> 32) ^ (int) x``, ``x = msb ^ lsb``)."""
    shared, keys = rng.getrandbits(32), set()
    while len(keys) < n:
        msb = rng.getrandbits(64)
        if rng.random() < 0.7:
            hi = rng.getrandbits(32)
            x = (hi << 32) | (hi ^ (shared if rng.random() < 0.8 else rng.getrandbits(32)))
        else:
            x = rng.getrandbits(64)
        keys.add(str(uuid.UUID(int=(msb << 64) | (msb ^ x))))
    out = sorted(keys)
    rng.shuffle(out)
    return out


def test_java_hash_walks_match_the_jdk():
    """assignors/streams/java_hash.py against java.util.HashSet/HashMap (the reference's JVM) on
    crowded task-id and process-id keys: puts, HashSet.remove (which reorders tree buckets),
    iterator removal, presized tables, copies and putAll."""
    rng = random.Random(SEEDS[0])
    specs, ours, crowded = [], [], 0
    for i in range(300):
        key_type = rng.choice(["task", "process"])
        keys = (_task_keys if key_type == "task" else _process_keys)(rng, rng.randint(1, 120))
        hash_of, rank_of = ((lambda t: java_hash.task_id_hash(*task_sort_key(t))), task_sort_key) if key_type == "task" \
            else (java_hash.process_id_hash, lambda p: uuid_compare_key(uuid.UUID(p)))
        how = rng.choice(["default", "presized", "copy", "put_all"])
        construct: dict[str, Any] = {"kind": how}
        base: list[str] = []
        table = 0
        if how == "presized":
            construct["capacity"] = rng.randint(0, 200)
            table = java_hash.presized(construct["capacity"])
        elif how in ("copy", "put_all"):
            base = keys[: rng.randint(0, len(keys))]
            construct["of"] = base
            table = java_hash.copy_sized(len(base)) if how == "copy" else java_hash.put_all_sized(len(base))
        walk = java_hash.JavaHashMap(hash_of, rank_of, table)
        for k in base:
            walk.put(k)
        ops, present = [], list(base)
        for k in (keys[len(base):] if how != "put_all" else []):
            ops.append(["put", k])
            walk.put(k)
            present.append(k)
        buckets = Counter(java_hash.spread_hash(hash_of(k)) & 63 for k in present)
        crowded += bool(present) and max(buckets.values()) > 8 and len(present) > 48
        for _ in range(rng.randint(0, len(present))):
            k = rng.choice(present)
            verb = rng.choice(["remove", "iterator_remove"])
            ops.append([verb, k])
            walk.remove(k, movable=verb == "remove")
            present.remove(k)
        specs.append({"kind": "java_hash", "id": i, "key_type": key_type, "construct": construct, "ops": ops})
        ours.append(list(walk))
    try:
        answers = run_streams_reference(specs)
    except (StreamsReferenceError, FileNotFoundError) as e:
        pytest.skip(f"Java reference unavailable: {e}")
    mismatches = [f"#{s['id']} {s['key_type']} {s['construct']['kind']}: ours {o[:6]}... java {a.get('walk', a)[:6]}..."
                  for s, a, o in zip(specs, answers, ours) if a.get("walk") != o]
    assert not mismatches, "\n".join(mismatches[:10])
    assert crowded >= 10, f"only {crowded} sequences crowded a bucket enough for a tree"
