"""Kafka Streams HighAvailabilityTaskAssignor: spec scenarios 32-36 and validity properties."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assignors.errors import AssignmentError, RebalanceMonitorError
from assignors.streams import (
    LATEST_OFFSET,
    LONG_MAX,
    UNKNOWN_OFFSET_SUM,
    InvalidStreamsSpecError,
    StreamsAssignment,
    StreamsAssignmentConfig,
    StreamsClient,
    StreamsGroupSpec,
    assign_streams_ha,
)

PID = [f"00000000-0000-0000-0000-{i:012d}" for i in range(1, 20)]
NINE_TASKS = tuple(f"{s}_{p}" for s in range(3) for p in range(3))
FOUR_TASKS = ("0_0", "0_1", "0_2", "0_3")


def config(acceptable=10_000, warmups=2, standbys=0, tags=()):
    return StreamsAssignmentConfig(
        acceptable_recovery_lag=acceptable,
        max_warmup_replicas=warmups,
        num_standby_replicas=standbys,
        probing_rebalance_interval_ms=60_000,
        rack_aware_assignment_tags=tags,
    )


def client_with_lags(pid, tasks, lag_of, capacity=1, tags=None):
    return StreamsClient(pid, capacity, task_lags={t: lag_of(t) for t in tasks}, tags=tags or {})


def caught_up_on(pid, caught_up, tasks, capacity=1):
    """Kafka's ``getMockClientWithPreviousCaughtUpTasks``: lag 0 on some tasks, Long.MAX elsewhere."""
    return client_with_lags(pid, tasks, lambda t: 0 if t in caught_up else LONG_MAX, capacity)


def total(assignment: StreamsAssignment, pid: str) -> int:
    c = assignment.clients[pid]
    return len(c.active_tasks) + len(c.standby_tasks) + len(c.warmup_tasks)


def assert_valid(spec: StreamsGroupSpec, a: StreamsAssignment) -> None:
    cfg = spec.config
    assert list(a.clients) == [c.process_id for c in spec.clients]
    actives = [t for c in a.clients.values() for t in c.active_tasks]
    assert sorted(actives) == sorted(spec.stateful_tasks + spec.stateless_tasks)
    for c in a.clients.values():
        copies = list(c.active_tasks) + list(c.standby_tasks) + list(c.warmup_tasks)
        assert len(copies) == len(set(copies)), f"{c.process_id} holds two copies of a task"
    stateless = set(spec.stateless_tasks)
    for t in spec.stateful_tasks:
        standbys = sum(t in c.standby_tasks for c in a.clients.values())
        assert standbys <= cfg.num_standby_replicas
    assert not any(set(c.standby_tasks + c.warmup_tasks) & stateless for c in a.clients.values())
    warmups = sum(len(c.warmup_tasks) for c in a.clients.values())
    assert warmups <= cfg.max_warmup_replicas
    if warmups:
        assert a.probing_rebalance_needed
    assert (a.probing_rebalance_at_ms is not None) == a.probing_rebalance_needed
    if a.probing_rebalance_needed:
        assert a.probing_rebalance_at_ms == spec.now_ms + cfg.probing_rebalance_interval_ms


# --- spec scenarios 32-36 -------------------------------------------------------------------------


def scenario_32_clients():
    return (
        client_with_lags(PID[0], NINE_TASKS, lambda t: 0),
        client_with_lags(PID[1], NINE_TASKS, lambda t: 10),
        client_with_lags(PID[2], NINE_TASKS, lambda t: LONG_MAX),
    )


def test_scenario_32_sticky_for_active_and_standby_while_a_new_client_warms_up():
    spec = StreamsGroupSpec(scenario_32_clients(), NINE_TASKS, config=config(acceptable=11, warmups=2, standbys=1), now_ms=7)
    a = assign_streams_ha(spec)
    assert_valid(spec, a)
    assert [total(a, p) for p in PID[:3]] == [9, 9, 2]
    assert a.clients[PID[2]].warmup_tasks == ("0_1", "0_2")
    assert a.clients[PID[2]].active_tasks == () and a.clients[PID[2]].standby_tasks == ()
    assert a.clients[PID[0]].active_tasks == ("0_0", "0_2", "1_0", "2_0", "2_2")
    assert a.probing_rebalance_needed and a.probing_rebalance_at_ms == 60_007


def test_scenario_33_unbounded_acceptable_lag_balances_at_once_without_probing():
    spec = StreamsGroupSpec(scenario_32_clients(), NINE_TASKS, config=config(acceptable=LONG_MAX, warmups=1, standbys=1))
    a = assign_streams_ha(spec)
    assert_valid(spec, a)
    assert [total(a, p) for p in PID[:3]] == [6, 6, 6]
    assert [len(a.clients[p].active_tasks) for p in PID[:3]] == [3, 3, 3]
    assert not a.probing_rebalance_needed and a.probing_rebalance_at_ms is None


def test_scenario_34_no_more_warmups_than_allowed():
    clients = (caught_up_on(PID[0], FOUR_TASKS, FOUR_TASKS), caught_up_on(PID[1], (), FOUR_TASKS))
    spec = StreamsGroupSpec(clients, FOUR_TASKS, config=config(acceptable=0, warmups=1, standbys=0))
    a = assign_streams_ha(spec)
    assert_valid(spec, a)
    assert a.clients[PID[0]].active_tasks == FOUR_TASKS
    assert a.clients[PID[0]].standby_tasks == () and a.clients[PID[0]].warmup_tasks == ()
    assert a.clients[PID[1]].active_tasks == () and a.clients[PID[1]].warmup_tasks == ("0_1",)
    assert a.probing_rebalance_needed


def test_scenario_34_no_warmup_on_a_client_that_already_has_the_standby():
    clients = (caught_up_on(PID[0], FOUR_TASKS, FOUR_TASKS), caught_up_on(PID[1], (), FOUR_TASKS))
    spec = StreamsGroupSpec(clients, FOUR_TASKS, config=config(acceptable=0, warmups=1, standbys=1))
    a = assign_streams_ha(spec)
    assert_valid(spec, a)
    assert a.clients[PID[0]].active_tasks == FOUR_TASKS and a.clients[PID[0]].standby_tasks == ()
    assert a.clients[PID[1]].standby_tasks == FOUR_TASKS and a.clients[PID[1]].warmup_tasks == ()
    assert a.probing_rebalance_needed


def test_scenario_35_a_lone_client_without_state_still_gets_every_active():
    spec = StreamsGroupSpec((caught_up_on(PID[0], (), FOUR_TASKS),), FOUR_TASKS, config=config(acceptable=0))
    a = assign_streams_ha(spec)
    assert_valid(spec, a)
    assert a.clients[PID[0]].active_tasks == FOUR_TASKS and a.clients[PID[0]].standby_tasks == ()
    assert not a.probing_rebalance_needed


def test_scenario_36_warmups_stay_within_the_limit_with_standbys():
    clients = (
        caught_up_on(PID[0], FOUR_TASKS, FOUR_TASKS),
        caught_up_on(PID[1], (), FOUR_TASKS),
        caught_up_on(PID[2], (), FOUR_TASKS),
    )
    spec = StreamsGroupSpec(clients, FOUR_TASKS, config=config(acceptable=0, warmups=2, standbys=1))
    a = assign_streams_ha(spec)
    assert_valid(spec, a)
    assert sum(len(c.warmup_tasks) for c in a.clients.values()) <= 2
    assert a.clients[PID[0]].active_tasks == FOUR_TASKS
    assert a.probing_rebalance_needed


# --- lag rules, ordering, tags, fallback, errors ------------------------------------------------


def test_offset_sums_follow_kafkas_lag_rules():
    # c1 runs 0_0 (-2); c2 is 50 behind; c3's store is ahead of the changelog (lag = end offset).
    clients = (
        StreamsClient(PID[0], task_offset_sums={"0_0": LATEST_OFFSET}),
        StreamsClient(PID[1], task_offset_sums={"0_0": 950}),
        StreamsClient(PID[2], task_offset_sums={"0_0": 5_000}),
    )
    spec = StreamsGroupSpec(clients, ("0_0",), task_end_offset_sums={"0_0": 1_000}, config=config(acceptable=10))
    a = assign_streams_ha(spec)
    assert a.clients[PID[0]].active_tasks == ("0_0",)
    assert not a.probing_rebalance_needed


def test_clients_are_visited_in_signed_uuid_order():
    # 0x8... is negative as a signed long, so it sorts before 0x0... in Java.
    neg, pos = "80000000-0000-0000-0000-000000000000", "00000000-0000-0000-0000-000000000001"
    clients = (StreamsClient(pos, task_lags={"0_0": LONG_MAX}), StreamsClient(neg, task_lags={"0_0": LONG_MAX}))
    a = assign_streams_ha(StreamsGroupSpec(clients, ("0_0",)))
    assert a.clients[neg].active_tasks == ("0_0",)
    assert list(a.clients) == [pos, neg]  # output keeps spec order


def test_non_uuid_process_ids_use_java_string_order():
    clients = tuple(StreamsClient(p, task_lags={"0_0": 0, "0_1": 0}) for p in ("b", "a"))
    a = assign_streams_ha(StreamsGroupSpec(clients, ("0_0", "0_1")))
    assert a.clients["a"].active_tasks == ("0_0",) and a.clients["b"].active_tasks == ("0_1",)


def test_tag_aware_standbys_land_in_another_zone():
    zones = ["a", "a", "b", "b"]
    tasks = ("0_0", "0_1", "0_2", "0_3")
    clients = tuple(
        client_with_lags(PID[i], tasks, lambda t: 0, tags={"zone": z}) for i, z in enumerate(zones)
    )
    spec = StreamsGroupSpec(clients, tasks, config=config(standbys=1, tags=("zone",)))
    a = assign_streams_ha(spec)
    assert_valid(spec, a)
    zone_of = {PID[i]: z for i, z in enumerate(zones)}
    for t in tasks:
        active = next(p for p, c in a.clients.items() if t in c.active_tasks)
        standby = next(p for p, c in a.clients.items() if t in c.standby_tasks)
        assert zone_of[active] != zone_of[standby]


def test_stateless_tasks_go_to_the_least_active_load():
    clients = (StreamsClient(PID[0], 2, task_lags={"0_0": 0}), StreamsClient(PID[1], 1, task_lags={"0_0": LONG_MAX}))
    spec = StreamsGroupSpec(clients, ("0_0",), stateless_tasks=("1_0", "1_1", "1_2"), config=config(acceptable=0))
    a = assign_streams_ha(spec)
    assert_valid(spec, a)
    assert a.clients[PID[0]].active_tasks == ("0_0", "1_1", "1_2")
    assert a.clients[PID[1]].active_tasks == ("1_0",)


def test_unknown_end_offsets_fall_back_to_the_prior_assignment():
    clients = (
        StreamsClient(PID[0], task_offset_sums={"0_0": LATEST_OFFSET, "0_1": LATEST_OFFSET}),
        StreamsClient(PID[1], task_offset_sums={"0_0": 10}),
    )
    spec = StreamsGroupSpec(clients, ("0_0", "0_1"), task_end_offset_sums=None, config=config(standbys=1), now_ms=100)
    a = assign_streams_ha(spec)
    assert a.fallback_used and a.probing_rebalance_needed and a.probing_rebalance_at_ms == 60_100
    assert a.clients[PID[0]].active_tasks == ("0_0", "0_1")
    assert a.clients[PID[1]].standby_tasks == ("0_0", "0_1")


def test_fallback_gives_an_unowned_stateful_active_to_the_client_with_state_for_it():
    # Kafka's FallbackPriorTaskAssignor (a sticky assignor): 0_0 goes to the client that holds a store
    # for it, the stateless task to the other one (checked against Kafka 4.1.1's jar).
    clients = (StreamsClient(PID[0], task_offset_sums={}), StreamsClient(PID[1], task_offset_sums={"0_0": 50}))
    spec = StreamsGroupSpec(clients, ("0_0",), ("1_0",), task_end_offset_sums=None, config=config())
    a = assign_streams_ha(spec)
    assert a.fallback_used and a.probing_rebalance_needed
    assert a.clients[PID[0]].active_tasks == ("1_0",)
    assert a.clients[PID[1]].active_tasks == ("0_0",)


def test_no_stateful_tasks_means_no_end_offsets_to_fetch_and_no_fallback():
    clients = (StreamsClient(PID[0], task_offset_sums={}), StreamsClient(PID[1], task_offset_sums={}))
    a = assign_streams_ha(StreamsGroupSpec(clients, (), ("1_0", "1_1"), task_end_offset_sums=None))
    assert not a.fallback_used and not a.probing_rebalance_needed


def test_a_lone_client_reporting_an_unknown_offset_sum_gets_the_task_without_probing():
    spec = StreamsGroupSpec((StreamsClient(PID[0], task_offset_sums={"0_0": UNKNOWN_OFFSET_SUM}),), ("0_0",),
                            task_end_offset_sums={"0_0": 1000})
    a = assign_streams_ha(spec)
    assert a.clients[PID[0]].active_tasks == ("0_0",)
    assert not a.fallback_used and not a.probing_rebalance_needed


def test_an_unknown_offset_sum_is_never_caught_up_yet_ranks_first_by_lag():
    # Kafka sorts clients by lag, and -3 sorts before every real lag (and before -2). A task on the
    # -3 client therefore never moves, even to a caught-up client...
    stays = (StreamsClient(PID[0], task_lags={"0_0": UNKNOWN_OFFSET_SUM}), StreamsClient(PID[1], task_lags={"0_0": 0}))
    a = assign_streams_ha(StreamsGroupSpec(stays, ("0_0",), config=config(acceptable=100)))
    assert a.clients[PID[0]].active_tasks == ("0_0",) and not a.probing_rebalance_needed
    # ...and a task on a lagging client moves to the -3 client, which counts as the most caught up.
    pulls = (StreamsClient(PID[0], task_lags={"0_0": 500}), StreamsClient(PID[1], task_lags={"0_0": UNKNOWN_OFFSET_SUM}))
    a = assign_streams_ha(StreamsGroupSpec(pulls, ("0_0",), config=config(acceptable=100)))
    assert a.clients[PID[1]].active_tasks == ("0_0",)
    assert a.clients[PID[0]].warmup_tasks == ("0_0",) and a.probing_rebalance_needed and not a.fallback_used


@pytest.mark.parametrize(
    "spec, message",
    [
        (StreamsGroupSpec((StreamsClient(PID[0], 0, task_lags={}),), ()), PID[0]),
        (StreamsGroupSpec((StreamsClient(PID[0], task_lags={}),), ("x",)), "'x'"),
        (StreamsGroupSpec((StreamsClient(PID[0], task_lags={}),), ("0_0",)), "'0_0'"),
        (StreamsGroupSpec((StreamsClient(PID[0]),), (), config=StreamsAssignmentConfig(max_warmup_replicas=0)), "max_warmup"),
        (StreamsGroupSpec((StreamsClient(PID[0]),), (), config=StreamsAssignmentConfig(probing_rebalance_interval_ms=5)), "probing"),
        (StreamsGroupSpec((StreamsClient(PID[0]), StreamsClient(PID[0])), ()), PID[0]),
    ],
)
def test_bad_specs_are_rejected_naming_the_culprit(spec, message):
    with pytest.raises(InvalidStreamsSpecError, match=message):
        assign_streams_ha(spec)
    assert issubclass(InvalidStreamsSpecError, RebalanceMonitorError)
    assert issubclass(AssignmentError, RebalanceMonitorError)


# --- properties -----------------------------------------------------------------------------------


@st.composite
def streams_specs(draw):
    n_clients = draw(st.integers(1, 6))
    pids = [str(uuid.UUID(int=draw(st.integers(0, 2**128 - 1)))) for _ in range(n_clients)]
    pids = list(dict.fromkeys(pids))
    n_stateful = draw(st.integers(0, 12))
    stateful = tuple(f"{i % 3}_{i // 3}" for i in range(n_stateful))
    stateless = tuple(f"9_{i}" for i in range(draw(st.integers(0, 5))))
    lag = st.one_of(st.just(LATEST_OFFSET), st.integers(0, 200), st.just(LONG_MAX))
    zones = ["a", "b", "c"]
    clients = tuple(
        StreamsClient(
            p,
            draw(st.integers(1, 3)),
            task_lags={t: draw(lag) for t in stateful},
            tags={"zone": draw(st.sampled_from(zones))},
        )
        for p in pids
    )
    cfg = StreamsAssignmentConfig(
        acceptable_recovery_lag=draw(st.sampled_from([0, 50, 10_000, LONG_MAX])),
        num_standby_replicas=draw(st.integers(0, 3)),
        max_warmup_replicas=draw(st.integers(1, 3)),
        rack_aware_assignment_tags=draw(st.sampled_from([(), ("zone",)])),
    )
    return StreamsGroupSpec(clients, stateful, stateless, config=cfg, now_ms=draw(st.integers(0, 10**12)))


@settings(max_examples=60, deadline=None)
@given(streams_specs())
def test_every_assignment_is_valid(spec):
    a = assign_streams_ha(spec)
    assert_valid(spec, a)
    # Probing flag: no probing means every stateful active sits on a client as caught up as any.
    if not a.probing_rebalance_needed:
        for t in spec.stateful_tasks:
            owner = next(c for c in spec.clients if t in a.clients[c.process_id].active_tasks)
            acc = spec.config.acceptable_recovery_lag
            lag = owner.task_lags[t]
            caught_up = lag == LATEST_OFFSET or acc == LONG_MAX or 0 <= lag <= acc
            best = min(c.task_lags[t] for c in spec.clients)
            assert caught_up or lag <= best


@settings(max_examples=30, deadline=None)
@given(streams_specs())
def test_assignment_is_deterministic_and_independent_of_client_order(spec):
    reversed_spec = StreamsGroupSpec(
        tuple(reversed(spec.clients)), spec.stateful_tasks, spec.stateless_tasks, config=spec.config, now_ms=spec.now_ms
    )
    a, b = assign_streams_ha(spec), assign_streams_ha(reversed_spec)
    assert a.clients == b.clients and a.probing_rebalance_needed == b.probing_rebalance_needed
