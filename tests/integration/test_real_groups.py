"""Issue 7 acceptance: real consumer groups observed by the collector and checked by the job.

Real confluent-kafka consumers join and leave a group on the test broker while the collector
polls it into the job's topics; then the real job runs available-now over those topics and its
Delta tables are read back. The job's ``assignment_checks`` compares each generation it computed
with the assignment the coordinator actually reported.
"""

from __future__ import annotations

import json

import pytest

from schemas import tables
from streaming import broker
from streaming.collector import LEAVE_REASON, MEMBERSHIP
from tests.conftest import free_port
from tests.integration.jobs import make_config, read, run_available_now
from tests.integration.real_groups import (
    CollectorThread, RealGroup, collect_options, differing, moved, predicted,
)
from streaming.kafka_io import ensure_topics

pytestmark = pytest.mark.integration

#: Three topics with different partition counts, every member subscribed to all of them.
PARTITIONS = (3, 5, 7)
#: Polls after a settled cue, so the job's clock (newest heartbeat - allowed lateness) passes the
#: generation and its comparison: 2 s lateness + 1 s coalescing + cooperative follow-up, with margin.
POLLS_PAST = 12


def _topics(bootstrap: str, name: str) -> dict[str, int]:
    topics = {f"rg-{letter}-{name}": n for letter, n in zip("abc", PARTITIONS)}
    for topic, n in topics.items():
        ensure_topics(bootstrap, [topic], partitions=n)
    return topics


def _job_generations(spark, config, group_id: str) -> dict[int, dict[str, frozenset]]:
    out: dict[int, dict[str, frozenset]] = {}
    for r in read(spark, config, tables.ASSIGNMENTS):
        if r["group_id"] == group_id:
            out.setdefault(r["generation"], {})[r["member_id"]] = frozenset(
                (p["topic"], p["partition"]) for p in r["partitions"])
    return out


def _stable_observations(collector: CollectorThread, group_id: str) -> list[dict[str, frozenset]]:
    """Each distinct actual assignment the collector saw while the coordinator said STABLE."""
    seen: list[dict[str, frozenset]] = []
    for view in collector.views:
        g = view.get(group_id)
        if g is None or g.state.upper() != "STABLE" or not g.members:
            continue
        actual = {m.member_id: frozenset(m.owned or ()) for m in g.members.values()}
        if not seen or seen[-1] != actual:
            seen.append(actual)
    return seen


def _checks(spark, config, group_id: str) -> list[dict]:
    return sorted((r for r in read(spark, config, tables.ASSIGNMENT_CHECKS) if r["group_id"] == group_id),
                  key=lambda r: (r["event_time"], r["generation"]))


@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
def test_eager_groups_every_generation_computed_equals_the_actual_one(
        kafka_broker, spark, tmp_path, unique_name, strategy):
    bootstrap = kafka_broker.bootstrap_servers
    config = make_config(kafka_broker, tmp_path, unique_name)
    topics = _topics(bootstrap, unique_name)
    group_id = f"rg-{strategy}-{unique_name}"
    group = RealGroup(bootstrap, group_id, topics, strategy=strategy)
    collector = CollectorThread(collect_options(config, bootstrap, group_id))
    collector.start()
    try:
        group.join(1)
        group.settle()
        collector.polls_after(3)
        group.join(3)  # 1 -> 4
        group.settle()
        collector.polls_after(3)
        group.leave(group.consumers[1:3])  # 4 -> 2, the first member stays
        group.settle()
        collector.polls_after(POLLS_PAST)
    finally:
        collector.stop()
        group.close()
    run_available_now(spark, config)

    assert [len(g.members) for g in group.generations] == [1, 4, 2]
    (tmp_path / "collector-events.json").write_text(json.dumps(collector.events()))
    checks = _checks(spark, config, group_id)
    assert checks, "the job wrote no assignment_checks for the live group"
    computed = _job_generations(spark, config, group_id)
    assert [c for c in checks if not c["agrees"]] == [], \
        f"disagreements; the job's generations: {computed}; events in {tmp_path / 'collector-events.json'}"
    assert all(c["computed_assignor"] == c["reported_assignor"] == strategy for c in checks)
    assert all(c["group_state"] == "STABLE" for c in checks)

    # At least one comparison per real generation the collector saw settled, and each of those
    # actual assignments is exactly one of the job's computed generations.
    observed = _stable_observations(collector, group_id)
    assert len(checks) >= len(observed) >= len(group.generations)
    for actual in observed:
        assert actual in computed.values(), f"no computed generation equals the actual {actual}"
    for settled in group.generations:
        assert settled.assignment in computed.values()

    # Departures were reported by the collector, nothing expired.
    events = [e for e in read(spark, config, tables.MEMBER_EVENTS) if e["group_id"] == group_id]
    assert sorted(e["event"] for e in events if e["event"] in ("left", "expired")) == ["left", "left"]
    assert {e["reason"] for e in events if e["event"] == "left"} == {LEAVE_REASON}


def test_a_kip848_group_is_observed_and_recorded_with_the_server_side_assignor(
        kafka_broker, spark, tmp_path, unique_name):
    bootstrap = kafka_broker.bootstrap_servers
    config = make_config(kafka_broker, tmp_path, unique_name)
    topics = _topics(bootstrap, unique_name)
    group_id = f"rg-kip848-{unique_name}"
    group = RealGroup(bootstrap, group_id, topics, group_protocol="consumer")
    collector = CollectorThread(collect_options(config, bootstrap, group_id))
    collector.start()
    try:
        group.join(2)
        group.settle()
        collector.polls_after(3)
        group.join(1)  # 2 -> 3
        group.settle()
        collector.polls_after(3)
        group.leave(group.consumers[:2])  # 3 -> 1
        group.settle()
        collector.polls_after(POLLS_PAST)
    finally:
        results = collector.stop()
        group.close()
    run_available_now(spark, config)

    membership = [e.value for r in results for e in r.events if e.kind == MEMBERSHIP and e.value["type"] != "workload"]
    assert membership and {v["group_protocol"] for v in membership} == {"consumer"}
    assert {v["partition_assignor"] for v in membership} == {"uniform"}  # the broker's default
    assert {v["assignor"] for v in membership if v["type"] != "leave"} == {"uniform"}

    metrics = [r for r in read(spark, config, tables.BALANCE_METRICS) if r["group_id"] == group_id]
    assert metrics and {(r["assignor"], r["protocol"]) for r in metrics} == {("uniform", "cooperative")}
    assert max(r["generation"] for r in metrics) >= len(group.generations)
    members = [e for e in read(spark, config, tables.MEMBER_EVENTS) if e["group_id"] == group_id]
    joined = {e["member_id"] for e in members if e["event"] == "joined"}
    assert joined == {mid for g in group.generations for mid in g.members}
    assert [e for e in members if e["event"] == "expired"] == []
    checks = _checks(spark, config, group_id)
    assert checks and all(c["reported_assignor"] == "uniform" for c in checks)
