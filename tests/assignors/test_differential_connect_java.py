"""Our Connect incremental cooperative assignor against Kafka's own (jvm/streams-reference), on seeded
random sessions of rebalances led by one leader.

A session is 2-8 rounds: workers join, leave for good, bounce (leave and come back within the
scheduled-rebalance delay), connectors are added, removed or change their task count, and the clock
moves on. Each round's input is what the workers run after our previous answer (revoked work
stopped); Kafka's ``IncrementalCooperativeAssignor`` goes through the same inputs on one instance, so
its leader state (previous assignment, delay, candidate workers, revocation back-off) evolves as
ours should. Per round and worker what must agree: the connectors and tasks it runs, what is revoked
from it, and the round's delay. Nothing is excluded.

Seeds and size: ``CONNECT_DIFFERENTIAL_SEEDS`` (comma-separated, default 20241117) and
``CONNECT_DIFFERENTIAL_SESSIONS`` (default 300) in the environment. Run with ``-s`` for the table.
"""

from __future__ import annotations

import os
import random
import uuid
from collections import Counter
from typing import Any

import pytest

from assignors.connect import (
    ConnectGroupSpec,
    ConnectorTaskId,
    ConnectWorkerSpec,
    assign_connect_incremental,
)

from .test_differential_streams_java import StreamsReferenceError, run_streams_reference

pytestmark = pytest.mark.integration  # needs a JVM

SEEDS = [int(s) for s in os.environ.get("CONNECT_DIFFERENTIAL_SEEDS", "20241117").split(",")]
SESSION_COUNT = int(os.environ.get("CONNECT_DIFFERENTIAL_SESSIONS", "300"))
FIELDS = ("assignment", "revocations", "delay")


def _worker_id(rng: random.Random, style: str, i: int) -> str:
    if style == "uuid":  # what a Connect worker's member id looks like: connect-<n>-<uuid>
        return f"connect-{rng.randint(1, 3)}-{uuid.UUID(int=rng.getrandbits(128))}"
    if style == "host":
        return f"worker-{i}.connect.svc:8083"
    return f"w{i}"


def random_session(rng: random.Random) -> tuple[int, list[dict[str, Any]]]:
    """A leader's sequence of rebalances, and the Java spec's rounds for it; ours are run alongside
    (each round's reports follow from our previous answer)."""
    max_delay = rng.choice([0, 1_000, 60_000, 300_000])
    style = rng.choice(["uuid", "host", "short"])
    next_worker = 0

    def new_worker() -> str:
        nonlocal next_worker
        next_worker += 1
        return _worker_id(rng, style, next_worker)

    workers = [new_worker() for _ in range(rng.randint(1, 25))]
    connectors = {f"connector-{c}": rng.randint(0, 10) for c in range(rng.randint(1, 30))}
    running: dict[str, tuple[list[str], list[ConnectorTaskId]]] = {}
    away: list[str] = []
    state = None
    now = 0
    generation = 1
    rounds = []
    for r in range(rng.randint(2, 8)):
        if r:
            now += rng.choice([0, rng.randint(1, max(1, max_delay)), max_delay + rng.randint(1, 1000)])
            generation += 1
            event = rng.random()
            if event < 0.2:
                workers.append(new_worker())
            elif event < 0.35 and len(workers) > 1:
                workers.remove(rng.choice(workers[1:]))  # leaves for good (the leader stays)
            elif event < 0.5 and len(workers) > 1:
                gone = rng.choice(workers[1:])
                workers.remove(gone)
                away.append(gone)
            elif event < 0.6 and away:
                workers.append(away.pop(0))  # a bounced worker comes back with its id
                running.pop(workers[-1], None)  # ...and an empty hand
            elif event < 0.75:
                connectors[f"connector-{len(connectors) + rng.randint(0, 99)}"] = rng.randint(0, 10)
            elif event < 0.85 and connectors:
                connectors.pop(rng.choice(sorted(connectors)))
            elif connectors:
                connectors[rng.choice(sorted(connectors))] = rng.randint(0, 10)
        last_completed = generation - 1 if rng.random() < 0.9 else generation - 2
        members = tuple(ConnectWorkerSpec(w, tuple(running.get(w, ([], []))[0]), tuple(running.get(w, ([], []))[1]),
                                          config_offset=generation) for w in workers)
        spec = ConnectGroupSpec(workers=members, connectors=dict(connectors), leader_id=workers[0],
                                leader_config_offset=generation, generation_id=generation,
                                last_completed_generation_id=last_completed,
                                scheduled_rebalance_max_delay_ms=max_delay)
        answer, state = assign_connect_incremental(spec, state, now)
        rounds.append({"spec": spec, "ours": answer, "now_ms": now})
        for w, a in answer.workers.items():
            revoked_c, revoked_t = set(a.revoked_connectors), set(a.revoked_tasks)
            running[w] = ([c for c in a.connectors if c not in revoked_c], [t for t in a.tasks if t not in revoked_t])
    return max_delay, rounds


def to_json(session_id: str, max_delay: int, rounds: list[dict]) -> dict[str, Any]:
    return {"kind": "connect", "id": session_id, "scheduled_rebalance_max_delay_ms": max_delay, "rounds": [
        {"now_ms": r["now_ms"], "generation_id": r["spec"].generation_id,
         "last_completed_generation_id": r["spec"].last_completed_generation_id,
         "leader_config_offset": r["spec"].leader_config_offset, "connectors": dict(r["spec"].connectors),
         "workers": [{"worker_id": w.worker_id, "connectors": list(w.connectors),
                      "tasks": [[t.connector, t.task] for t in w.tasks]} for w in r["spec"].workers]}
        for r in rounds]}


def round_agreement(ours, theirs: dict[str, Any]) -> dict[str, str | None]:
    """Per field, None when both sides agree on the round, else what differs."""
    assignment, revocations = [], []
    for wid, mine in ours.workers.items():
        java = theirs["workers"][wid]
        if sorted(mine.connectors) != java["connectors"] or \
                sorted((t.connector, t.task) for t in mine.tasks) != [tuple(t) for t in java["tasks"]]:
            assignment.append(f"{wid}: {sorted(mine.connectors)} {sorted(mine.tasks)} != {java['connectors']} {java['tasks']}")
        if sorted(mine.revoked_connectors) != java["revoked_connectors"] or \
                sorted((t.connector, t.task) for t in mine.revoked_tasks) != [tuple(t) for t in java["revoked_tasks"]]:
            revocations.append(f"{wid}: revoked {mine.revoked_connectors} {mine.revoked_tasks} != "
                               f"{java['revoked_connectors']} {java['revoked_tasks']}")
    delay = None if ours.delay_ms == theirs["delay_ms"] else f"delay {ours.delay_ms} != {theirs['delay_ms']}"
    return {"assignment": "; ".join(assignment) or None, "revocations": "; ".join(revocations) or None, "delay": delay}


def test_agrees_with_kafka_connect_incremental_cooperative_assignor():
    sessions = []
    for seed in SEEDS:
        rng = random.Random(seed)
        sessions += [(seed, i, *random_session(rng)) for i in range(SESSION_COUNT)]
    try:
        answers = run_streams_reference(to_json(f"{seed}/{i}", delay, rounds) for seed, i, delay, rounds in sessions)
    except (StreamsReferenceError, FileNotFoundError) as e:
        pytest.skip(f"Java reference unavailable: {e}")
    agreed: Counter[tuple[int, str]] = Counter()
    rounds_per_seed: Counter[int] = Counter()
    failures = []
    for (seed, i, _, rounds), java in zip(sessions, answers):
        assert "error" not in java, java
        for r, (mine, theirs) in enumerate(zip(rounds, java["rounds"])):
            rounds_per_seed[seed] += 1
            fields = round_agreement(mine["ours"], theirs)
            for name, problem in fields.items():
                agreed[(seed, name)] += problem is None
            if any(fields.values()):
                failures.append(f"seed {seed} session {i} round {r}: " + "; ".join(p for p in fields.values() if p))
    print(f"\nConnect differential against Kafka 4.1.1, {SESSION_COUNT} sessions per seed, nothing excluded:")
    for seed in SEEDS:
        n = rounds_per_seed[seed]
        print(f"  seed {seed}: {n} rounds; " + ", ".join(
            f"{f} {agreed[(seed, f)]} = {100 * agreed[(seed, f)] / n:.2f}%" for f in FIELDS))
    assert not failures, f"{len(failures)} rounds disagree:\n" + "\n".join(failures[:10])
