"""Kafka Connect clusters recorded from the coordinator's log, without Spark: the real records of
two Kafka Connect 4.1.1 clusters (the decoder's fixture, captured on a real broker: two workers, a
connector of 3 tasks and one of 2, the second worker joining then leaving; one cluster on the eager
protocol, one on ``sessioned``) through the job's decoding step, the engine and the processor.

What each worker runs after each generation is taken from Kafka's own decoding of the same bytes
(the fixture's ``kafka`` field), not from this project's decoder."""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict

import pytest

from schemas import tables
from streaming.coordinator_log import decode
from streaming.engine import GroupState, advance
from streaming.engine.coordinator_events import ConnectWork, CoordinatorGeneration
from streaming.engine.topic_catalog import TopicCatalog
from streaming.job.offsets_source import COORDINATOR, input_row
from streaming.testing import ProcessorHarness, engine_settings, output_rows, roundtrip
from tests.coordinator_log.fixture import load

TOPIC = "__consumer_offsets"
EAGER, SESSIONED = "cap-connect-eager", "cap-connect-sessioned"
#: The capture's workers set scheduled.rebalance.max.delay.ms=8000 (tests/coordinator_log/capture.py).
MAX_DELAY_MS = 8_000


def _records(group_id: str) -> list[dict]:
    """The group's captured GroupMetadata records, as the fixture holds them, in log order. The
    fixture keeps no record timestamps: each record's event time is its value's
    currentStateTimestamp, the coordinator's clock when the generation completed."""
    out = []
    for i, r in enumerate(load()):
        if r["source"] == f"captured: {group_id}":
            at = decode(r["key"], r["value"]).value.current_state_timestamp
            out.append({**r, "row": input_row(r["key"], r["value"], TOPIC, 7, i, at)})
    return out


def _generations(group_id: str) -> list[CoordinatorGeneration]:
    return [CoordinatorGeneration.from_json(json.loads(r["row"]["payload"])) for r in _records(group_id)]


#: A Connect group subscribes to no topic; the catalog only has to cover the records' time.
CATALOG = TopicCatalog()
CATALOG.apply({"event_time": 0, "topics": []})
CATALOG.apply({"event_time": 2**62, "unchanged": True})


def _run(group_id: str, batches: list[list[CoordinatorGeneration]]):
    state = GroupState(group_id=group_id)
    rows = []
    for batch in batches:
        out, _ = advance(state, [], [], [], engine_settings(), coordinator_generations=batch, topic_catalog=CATALOG)
        rows.extend(out)
        state = roundtrip(state)
    return rows, state


def _table(rows, table: str) -> list[dict]:
    return [r.to_json() for r in rows if r.table == table]


def _by_generation(rows, table: str) -> dict[int, list[dict]]:
    out = defaultdict(list)
    for r in _table(rows, table):
        out[r["generation"]].append(r)
    return out


def _kafkas_holdings(group_id: str) -> dict[int, dict[str, tuple[set, set]]]:
    """Generation -> worker -> (connectors, tasks) it runs after the generation, from Kafka's own
    decoding: the eager assignment lists everything; an incremental worker keeps its previous
    allocation less what is revoked, plus what is assigned (WorkerCoordinator.onJoinComplete)."""
    out = {}
    for r in _records(group_id):
        value = r["kafka"]["value"]
        if not value["members"]:
            continue
        workers = {}
        for m in r["kafka"]["members"]:
            a, held = m["assignment"], (m["subscription"].get("allocation") or {})
            connectors = set(held.get("connectors", ())) - set(a.get("revokedConnectors", ())) | set(a["connectors"])
            tasks = set(held.get("tasks", ())) - set(a.get("revokedTasks", ())) | set(a["tasks"])
            workers[m["memberId"]] = (connectors, tasks)
        out[value["generation"]] = workers
    return out


@pytest.mark.parametrize("group_id, assignor, protocol", [(EAGER, "connect-eager", "eager"),
                                                          (SESSIONED, "connect-incremental", "cooperative")])
def test_every_connect_generation_is_recorded_with_what_each_worker_runs_after_it(group_id, assignor, protocol):
    rows, state = _run(group_id, [_generations(group_id)])
    expected = _kafkas_holdings(group_id)
    metrics = _by_generation(rows, tables.BALANCE_METRICS)
    last = max(r["kafka"]["value"]["generation"] for r in _records(group_id))
    # Every generation the coordinator wrote, the last one Empty (both workers gone); 0 is the
    # group's creation, nothing to record.
    assert sorted(metrics) == list(range(1, last + 1)) and sorted(expected) == list(range(1, last))
    got = {gen: {a["member_id"]: (set(a["connectors"]), set(a["tasks"])) for a in assignments}
           for gen, assignments in _by_generation(rows, tables.ASSIGNMENTS).items()}
    assert got == expected
    assert all(a["partitions"] == [] and a["group_type"] == "connect" and (a["assignor"], a["protocol"])
               == (assignor, protocol) for a in _table(rows, tables.ASSIGNMENTS))
    for gen, workers in expected.items():
        (m,) = metrics[gen]
        tasks = [len(t) for _, t in workers.values()]
        assert (m["unit"], m["members"], m["tasks"], m["min_tasks_per_worker"], m["max_tasks_per_worker"],
                m["connectors"]) == ("task", len(workers), sum(tasks), min(tasks), max(tasks),
                                     sum(len(c) for c, _ in workers.values()))
    assert metrics[last][0]["members"] == 0 and state.generation == last and state.coordinator_backlog == []
    # The engine computes nothing of its own for a recorded group: no follow-up, no scheduled round.
    assert state.pending is None and state.scheduled is None


def test_the_eager_cluster_moves_work_to_the_joining_worker_and_back_when_it_leaves():
    rows, _ = _run(EAGER, [_generations(EAGER)])
    metrics = {m["generation"]: m for m in _table(rows, tables.BALANCE_METRICS)}
    holdings = _kafkas_holdings(EAGER)
    (original,) = holdings[1]
    (joiner,) = set(holdings[6]) - {original}
    assert [(g, metrics[g]["trigger"], metrics[g].get("trigger_member")) for g in sorted(metrics)] == [
        (1, "join", original), (2, "workload", None), (3, "workload", None), (4, "workload", None),
        (5, "workload", None), (6, "join", joiner), (7, "leave", joiner), (8, "leave", original)]
    assert {metrics[g]["phase"] for g in metrics} == {"complete"}
    revocations = _by_generation(rows, tables.REVOCATIONS)
    # Eager: what changes worker is revoked from its holder and goes to its new one in the same round.
    connectors, tasks = holdings[6][joiner]
    assert {(r["member_id"], r["to_member"], r["reason"], r["unit_id"]) for r in revocations[6]} == {
        (original, joiner, "moved", unit) for unit in connectors | tasks}
    assert {(r["member_id"], r["to_member"], r["reason"], r["unit_id"]) for r in revocations[7]} == {
        (joiner, original, "member_left", unit) for unit in connectors | tasks}
    assert (metrics[6]["moved"], metrics[6]["revoked"], metrics[7]["moved"]) == (len(tasks), 0, len(tasks))


def test_the_incremental_cluster_records_its_revocation_round_and_the_delay_for_lost_work():
    gens = _generations(SESSIONED)
    rows, state = _run(SESSIONED, [gens])
    metrics = {m["generation"]: m for m in _table(rows, tables.BALANCE_METRICS)}
    at = {g.generation: g.event_time for g in gens}
    (first,) = _kafkas_holdings(SESSIONED)[1]
    (joiner,) = set(_kafkas_holdings(SESSIONED)[6]) - {first}  # generation 6: the second worker joins
    sixth = next(r for r in _records(SESSIONED) if r["kafka"]["value"]["generation"] == 6)
    revoked = next(m for m in sixth["kafka"]["members"] if m["memberId"] == first)["assignment"]
    revoked_units = ({("connector", c) for c in revoked["revokedConnectors"]}
                     | {("task", t) for t in revoked["revokedTasks"]})
    assert len(revoked_units) == 3  # one connector and two tasks, to even out the load

    # 6: the leader revokes from the first worker; 7: the follow-up hands the revoked work out.
    assert (metrics[6]["trigger"], metrics[6]["trigger_member"], metrics[6]["phase"]) == ("join", joiner, "revocation")
    assert (metrics[6]["revoked"], metrics[6]["unassigned"]) == (3, 2)
    assert {(r["member_id"], r.get("to_member"), r["reason"], r["unit"], r["unit_id"])
            for r in _by_generation(rows, tables.REVOCATIONS)[6]} == {
        (first, None, "balance", unit, unit_id) for unit, unit_id in revoked_units}
    assert (metrics[7]["trigger"], metrics[7]["phase"], metrics[7]["unassigned"]) == (
        "cooperative_followup", "followup", 0)
    assert 7 not in _by_generation(rows, tables.REVOCATIONS)
    # 8: the joiner leaves; its work is lost and held back for the 8 s delay, nobody runs it.
    assert (metrics[8]["trigger"], metrics[8]["trigger_member"], metrics[8]["phase"]) == ("leave", joiner, "complete")
    assert (metrics[8]["lost_pending"], metrics[8]["delay_ms"], metrics[8]["scheduled_rebalance_at"]) == (
        3, MAX_DELAY_MS, at[8] + MAX_DELAY_MS)
    assert {(r["member_id"], r.get("to_member"), r["reason"], r["unit_id"])
            for r in _by_generation(rows, tables.REVOCATIONS)[8]} == {
        (joiner, None, "member_left", unit_id) for _, unit_id in revoked_units}
    # 9: the delay expired (the scheduled rebalance) and the lost work goes to the remaining worker.
    assert at[9] >= at[8] + MAX_DELAY_MS
    assert (metrics[9]["trigger"], metrics[9]["lost_pending"], metrics[9]["delay_ms"]) == ("scheduled_rebalance", 0, 0)
    assert metrics[9].get("scheduled_rebalance_at") is None
    assert {a["member_id"]: len(a["tasks"]) for a in _by_generation(rows, tables.ASSIGNMENTS)[9]} == {first: 5}
    # scheduled.rebalance.max.delay.ms is a worker setting the log does not carry: the round that
    # starts holding lost work back gives out all of it, and the engine keeps it for later checks.
    assert state.task_workload.scheduled_rebalance_max_delay_ms == MAX_DELAY_MS


@pytest.mark.parametrize("group_id, assignor, protocol", [(EAGER, "connect-eager", "default"),
                                                          (SESSIONED, "connect-incremental", "sessioned")])
def test_the_projects_connect_assignor_agrees_with_the_real_cluster_on_every_generation(group_id, assignor, protocol):
    rows, _ = _run(group_id, [_generations(group_id)])
    checks = _table(rows, tables.ASSIGNMENT_CHECKS)
    expected = _kafkas_holdings(group_id)
    assert [c["generation"] for c in checks] == sorted(expected)
    for c in checks:
        workers = expected[c["generation"]]
        assert c["agrees"], c
        assert (c["computed_assignor"], c["reported_assignor"], c["differing_units"], c["partitions_compared"]) == (
            assignor, protocol, [], 0)
        assert (c["members_compared"], c["units_compared"]) == (
            len(workers), sum(len(cs) + len(ts) for cs, ts in workers.values()))
    assert _table(rows, tables.ALERTS) == []


def test_a_check_names_each_unit_whose_worker_differs():
    """The recorded assignment of generation 6 altered: the joiner is given a task the leader left
    with the first worker. The check names that task, with the worker each side gives it."""
    gens = _generations(EAGER)
    sixth = next(i for i, g in enumerate(gens) if g.generation == 6)
    joiner, first = gens[sixth].members  # the record lists the joining worker first
    moved = next(t for t in first.connect.assigned.tasks)
    take = dataclasses.replace(first.connect, assigned=dataclasses.replace(
        first.connect.assigned, tasks=tuple(t for t in first.connect.assigned.tasks if t != moved)))
    give = dataclasses.replace(joiner.connect, assigned=dataclasses.replace(
        joiner.connect.assigned, tasks=joiner.connect.assigned.tasks + (moved,)))
    gens[sixth] = dataclasses.replace(gens[sixth], members=(dataclasses.replace(joiner, connect=give),
                                                            dataclasses.replace(first, connect=take)))
    rows, _ = _run(EAGER, [gens])
    check = next(c for c in _table(rows, tables.ASSIGNMENT_CHECKS) if c["generation"] == 6)
    assert not check["agrees"] and check["differing_units"] == [
        {"unit": "task", "unit_id": f"{moved[0]}-{moved[1]}", "computed_member": first.member_id,
         "actual_member": joiner.member_id}]
    assert all(c["agrees"] for c in _table(rows, tables.ASSIGNMENT_CHECKS) if c["generation"] != 6)


@pytest.mark.parametrize("group_id", [EAGER, SESSIONED])
def test_batch_boundaries_and_redelivered_records_change_nothing(group_id):
    gens = _generations(group_id)
    whole, _ = _run(group_id, [gens])
    split, _ = _run(group_id, [gens[:3], gens[2:7], list(reversed(gens[6:])), gens])
    assert [r.to_json() for r in split] == [r.to_json() for r in whole]


def test_the_processor_records_a_connect_cluster_from_its_rows():
    rows = [r["row"] for r in _records(SESSIONED)]
    assert {r["kind"] for r in rows} == {COORDINATOR}
    harness = ProcessorHarness()
    frame = _frame(rows + [{"group_key": "", "kind": "topic_metadata", "member_id": None, "event_time": 2**62,
                            "reject_reason": None, "payload": json.dumps({"event_time": 2**62, "topics": []})}])
    out = output_rows(harness.send(frame))
    assert [r["generation"] for t, r in out if t == tables.BALANCE_METRICS] == list(range(1, 11))
    assert [r["agrees"] for t, r in out if t == tables.ASSIGNMENT_CHECKS] == [True] * 9


def test_a_classic_group_of_another_protocol_type_is_set_aside():
    (custom,) = [r for r in load() if r["kafka"].get("type") == 2 and r["kafka"].get("value")
                 and r["kafka"]["value"]["protocolType"] not in ("consumer", "connect", "")]
    assert input_row(custom["key"], custom["value"], TOPIC, 0, 0, 0) is None


def _frame(rows: list[dict]):
    import pandas as pd

    return pd.DataFrame([{**r, "beat_times": None} for r in rows],
                        columns=["group_key", "kind", "member_id", "event_time", "reject_reason", "payload",
                                 "beat_times"])


def test_a_connector_deleted_in_a_revoking_round_is_the_one_difference_and_not_carried_on():
    """What the check cannot see: the log has no connector configuration, so a connector the leader
    revokes because it was deleted looks like running work in that round. After generation 7 of the
    incremental cluster, its connector ``idle-b`` is deleted: generation 8 (made from 7's real
    records) revokes it and its two tasks from the worker that ran them, generation 9 hands out
    nothing. The check of 8 names exactly those three units; 9 agrees again."""
    gens = [g for g in _generations(SESSIONED) if g.generation <= 7]
    seventh = gens[-1]
    rows, _ = _run(SESSIONED, [gens])
    after = {a["member_id"]: a for a in _by_generation(rows, tables.ASSIGNMENTS)[7]}
    (holder,) = [w for w, a in after.items() if any(c.endswith("idle-b") for c in a["connectors"])]
    deleted = next(c for c in after[holder]["connectors"] if c.endswith("idle-b"))

    def worker(m, revoked: bool):
        held = ConnectWork(tuple(after[m.member_id]["connectors"]),
                           tuple(_task(t) for t in after[m.member_id]["tasks"]))
        gone = ConnectWork((deleted,), tuple(t for t in held.tasks if t[0] == deleted)) if revoked else ConnectWork()
        if not revoked:  # the round after: the worker no longer runs what was revoked
            held = ConnectWork(tuple(c for c in held.connectors if c != deleted),
                               tuple(t for t in held.tasks if t[0] != deleted))
        return dataclasses.replace(m, connect=dataclasses.replace(
            m.connect, config_offset=11, leader_config_offset=11, held=held, assigned=ConnectWork(),
            revoked=gone if m.member_id == holder else ConnectWork()))

    eighth = dataclasses.replace(seventh, generation=8, offset=seventh.offset + 1,
                                 event_time=seventh.event_time + 1_000,
                                 members=tuple(worker(m, True) for m in seventh.members))
    ninth = dataclasses.replace(seventh, generation=9, offset=seventh.offset + 2,
                                event_time=seventh.event_time + 1_100,
                                members=tuple(worker(m, False) for m in seventh.members))
    rows, _ = _run(SESSIONED, [gens + [eighth, ninth]])
    checks = {c["generation"]: c for c in _table(rows, tables.ASSIGNMENT_CHECKS)}
    assert all(checks[g]["agrees"] for g in range(1, 8))
    assert {(d["unit"], d["unit_id"], d["computed_member"], d["actual_member"])
            for d in checks[8]["differing_units"]} == {
        ("connector", deleted, holder, None), ("task", f"{deleted}-0", holder, None),
        ("task", f"{deleted}-1", holder, None)}
    assert checks[9]["agrees"], checks[9]
    metrics = {m["generation"]: m for m in _table(rows, tables.BALANCE_METRICS)}
    assert (metrics[8]["trigger"], metrics[8]["phase"], metrics[8]["revoked"]) == ("workload", "revocation", 3)
    # Its revocations read as the load-balancing kind: the log cannot tell them from a deletion.
    assert {r["reason"] for r in _by_generation(rows, tables.REVOCATIONS)[8]} == {"balance"}
    assert (metrics[9]["connectors"], metrics[9]["tasks"], metrics[9]["lost_pending"]) == (1, 3, 0)


def _task(name: str) -> tuple[str, int]:
    connector, _, number = name.rpartition("-")
    return connector, int(number)
