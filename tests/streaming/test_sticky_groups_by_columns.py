"""A sticky group's generations are the same whether its assignor answers as columns (what the
engine asks for, :func:`assignors.sticky.assign_sticky_columns`) or as lists of partitions."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

import streaming.engine.consumer as consumer
from assignors.columns import AssignmentColumns, ColumnsAnswer
from assignors.sticky import assign_cooperative_sticky, assign_sticky
from streaming.testing import engine_settings, run_story


def _by_lists(spec, owned, cooperative):
    """The list assignor on the same group: each member's owned partitions put in its spec."""
    lists = owned.to_lists(spec.topics)
    members = tuple(replace(m, owned_partitions=tuple(lists.get(m.member_id, ()))) for m in spec.members)
    answer = (assign_cooperative_sticky if cooperative else assign_sticky)(replace(spec, members=members))
    return ColumnsAnswer(AssignmentColumns.from_lists(answer.assignment), answer.transferring)


def _story(rng: random.Random, assignor: str, protocol: str) -> list[list]:
    """Members join (some reporting owned partitions, some on other topics or racks), leave and
    change subscriptions while topics grow, shrink and appear; cut into random batches."""
    names = [f"t{i}" for i in range(rng.randint(1, 3))]
    counts = {n: rng.randint(1, 8) for n in names}
    serial = iter(range(10**6))

    def workload(t):
        return {"event_id": f"w{next(serial)}", "event_time": t, "type": "workload",
                "workload": {"topics": [{"name": n, "partitions": c, "racks": None} for n, c in counts.items()]}}

    events, live, t = [workload(0)], set(), 0
    for _ in range(rng.randint(4, 12)):
        t += rng.randint(300, 4_000)
        roll = rng.random()
        if roll < 0.5 or not live:
            m = f"m{rng.randint(0, 7)}"
            owned = [{"topic": rng.choice(names + ["gone"]), "partition": rng.randint(0, 9)}
                     for _ in range(rng.randint(0, 4))] if rng.random() < 0.4 else []
            events.append({"event_id": f"j{next(serial)}", "event_time": t, "type": "join", "member_id": m,
                           "topics": rng.sample(names, rng.randint(1, len(names))) if rng.random() < 0.3 else names,
                           "assignor": assignor, "protocol": protocol, "owned_partitions": owned,
                           "generation": rng.randint(-1, 3), "rack": rng.choice([None, "a", "b"]),
                           "session_timeout_ms": 10_000})
            live.add(m)
        elif roll < 0.7:
            m = rng.choice(sorted(live))
            live.discard(m)
            events.append({"event_id": f"l{next(serial)}", "event_time": t, "type": "leave", "member_id": m})
        elif roll < 0.85:
            events.append({"event_id": f"u{next(serial)}", "event_time": t, "type": "update",
                           "member_id": rng.choice(sorted(live)), "topics": rng.sample(names, rng.randint(0, len(names)))})
        else:
            topic = rng.choice(names)
            counts[topic] = max(0, counts[topic] + rng.randint(-3, 4))
            if rng.random() < 0.3:
                names.append(f"t{len(names)}")
                counts[names[-1]] = rng.randint(1, 5)
            events.append(workload(t))
        events += [("hb", m, t + 100 + k * 900) for m in sorted(live) for k in range(3)]
    events.sort(key=lambda e: e["event_time"] if isinstance(e, dict) else e[2])
    batches, current = [], []
    for event in events:
        current.append(event)
        if rng.random() < 0.2:
            batches.append(current)
            current = []
    return batches + [current, [("hb", "late", t + 100_000)]]


@pytest.mark.parametrize("assignor,protocol", [("cooperative-sticky", "cooperative"), ("sticky", "eager")])
def test_rows_are_the_same_when_the_assignor_answers_as_lists(assignor, protocol, monkeypatch):
    settings = engine_settings()
    generations = 0
    for seed in range(120):
        story = _story(random.Random(seed), assignor, protocol)
        by_columns, _ = run_story(story, settings)
        with monkeypatch.context() as patch:
            patch.setattr(consumer, "assign_sticky_columns", _by_lists)
            by_lists, _ = run_story(story, settings)
        assert [(r.table, r.as_dict()) for r in by_columns] == [(r.table, r.as_dict()) for r in by_lists], seed
        generations += sum(r.table == "balance_metrics" for r in by_columns)
    assert generations > 500  # the stories rebalance often: the comparison covers many generations
