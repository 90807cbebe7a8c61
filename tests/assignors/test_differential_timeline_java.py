"""assignors/timeline_order.py against Kafka's own ``TimelineHashMap`` (kafka-server-common 4.1.1):
the order of the coordinator's member map after random histories of joins and departures."""

from __future__ import annotations

import base64
import json
import random
import subprocess
import uuid

import pytest

from assignors.timeline_order import MemberTable, coordinator_member_order
from tests.java_reference import ensure_built

HISTORIES = 1500


def _kafka_member_id(rng: random.Random) -> str:
    """A member id as a KIP-848 client makes one (``Uuid.randomUuid().toString()``)."""
    raw = uuid.UUID(int=rng.getrandbits(128)).bytes
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _history(rng: random.Random, short_ids: bool) -> list[tuple[list[str], list[str]]]:
    """Steps of (removed, joined): mostly one change at a time, sometimes several at once, up to
    about 40 members (the table grows to 64 slots)."""
    present: list[str] = []
    steps = []
    for _ in range(rng.randint(1, 60)):
        if present and rng.random() < 0.35:
            removed = rng.sample(present, rng.randint(1, min(3, len(present))))
            present = [m for m in present if m not in removed]
        else:
            removed = []
        joined = []
        for _ in range(rng.choice((0, 1, 1, 1, 2, 3)) if removed else rng.choice((1, 1, 1, 2, 4))):
            mid = f"m{rng.randint(0, 200)}" if short_ids else _kafka_member_id(rng)
            if mid not in present and mid not in joined:
                joined.append(mid)
        present += joined
        steps.append((removed, joined))
    return steps


def _ops(steps) -> list[list[str]]:
    """The coordinator's own operations on its member map for those steps: a departure removes the
    member, a join puts it twice (its metadata record, then its current assignment record)."""
    ops = []
    for removed, joined in steps:
        ops += [["remove", m] for m in removed]
        for m in joined:
            ops += [["put", m], ["put", m]]
    return ops


def _java_orders(histories: list[list[list[str]]]) -> list[list[str]]:
    lines = "".join(json.dumps({"id": i, "ops": ops}) + "\n" for i, ops in enumerate(histories))
    done = subprocess.run(["java", "-XX:+UseSerialGC", "-cp", str(ensure_built() / "*"),
                           "rebalancemonitor.reference.MemberMapOrder"],
                          input=lines, capture_output=True, text=True, timeout=300, check=True)
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a["id"] for a in answers] == list(range(len(histories)))
    return [a["order"] for a in answers]


@pytest.mark.parametrize("short_ids", [False, True], ids=["kafka-member-ids", "colliding-short-ids"])
def test_the_member_tables_order_is_kafkas_after_every_history(short_ids):
    rng = random.Random(20261126 + short_ids)
    histories = [_history(rng, short_ids) for _ in range(HISTORIES)]
    # Every prefix of some histories too: the order must hold at every epoch, not only the last.
    cases = [steps for steps in histories] + [steps[:k] for steps in histories[:100] for k in range(1, len(steps))]
    expected = _java_orders([_ops(steps) for steps in cases])
    mismatches = []
    for steps, java in zip(cases, expected):
        table = MemberTable()
        for removed, joined in steps:
            table = table.changed(removed, joined)
        if table.iteration_order() != java:
            mismatches.append((steps, java, table.iteration_order()))
    assert not mismatches, f"{len(mismatches)} of {len(cases)} differ; first: {mismatches[0]}"
    # The histories must reach the cases that matter: shared slots and every growth up to 64 slots.
    sizes = {len(java) for java in expected}
    assert max(sizes) >= 25


def test_the_coordinator_inserts_known_members_in_table_order_then_the_ones_that_joined():
    table = MemberTable().changed(joined=["a", "b", "c"])
    assert table.iteration_order() == ["c", "b", "a"]
    assert coordinator_member_order(table, ["a", "b", "c", "d"]) == ["c", "b", "a", "d"]
    assert coordinator_member_order(table, ["a", "c", "e", "d"]) == ["c", "a", "e", "d"]
