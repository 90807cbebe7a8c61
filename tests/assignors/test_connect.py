"""Kafka Connect assignors: scenarios 38-44 of the spec (section 7.2) and validity properties."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assignors.connect import (
    ConnectAssignorState,
    ConnectGroupSpec,
    ConnectorTaskId,
    ConnectWorkerSpec,
    InvalidConnectSpecError,
    assign_connect_eager,
    assign_connect_incremental,
    revoking_backoff_ms,
)
from assignors.errors import RebalanceMonitorError

MAX_DELAY = 300_000


class ConnectCluster:
    """Drives the incremental assignor the way Kafka's IncrementalCooperativeAssignorTest does.

    Workers report what they run; after each round they stop what was revoked and start what was
    newly assigned (in that order), the generation advances, and the leader state is carried over.
    """

    def __init__(self, connectors: dict[str, int], workers=("worker1",), max_delay=MAX_DELAY, now=1_000_000):
        self.connectors = dict(connectors)
        self.running: dict[str, tuple[list[str], list[ConnectorTaskId]]] = {w: ([], []) for w in workers}
        self.max_delay = max_delay
        self.now = now
        self.generation = 0
        self.state: ConnectAssignorState | None = None
        self.leader = workers[0]
        self.last = None

    def join(self, *workers: str, connectors=(), tasks=()):
        for w in workers:
            self.running[w] = (list(connectors), list(tasks))

    def leave(self, *workers: str):
        for w in workers:
            del self.running[w]

    def new_leader(self, leader: str):
        self.leader = leader
        self.state = None

    def spec(self) -> ConnectGroupSpec:
        return ConnectGroupSpec(
            workers=tuple(ConnectWorkerSpec(w, tuple(cs), tuple(ts)) for w, (cs, ts) in self.running.items()),
            connectors=self.connectors,
            leader_id=self.leader,
            leader_config_offset=0,
            generation_id=self.generation + 1,
            last_completed_generation_id=self.generation,
            scheduled_rebalance_max_delay_ms=self.max_delay,
        )

    def rebalance(self):
        assignment, self.state = assign_connect_incremental(self.spec(), self.state, self.now)
        self.generation += 1
        for w, a in assignment.workers.items():
            cs, ts = self.running[w]
            cs = [c for c in cs if c not in a.revoked_connectors] + list(a.assigned_connectors)
            ts = [t for t in ts if t not in a.revoked_tasks] + list(a.assigned_tasks)
            self.running[w] = (cs, ts)
            assert list(a.connectors) == cs and list(a.tasks) == ts, "full assignment must equal old - revoked + new"
        self.last = assignment
        return assignment

    def sleep(self, ms: int):
        self.now += ms

    def connector_counts(self):
        return sorted(len(cs) for cs, _ in self.running.values())

    def task_counts(self):
        return sorted(len(ts) for _, ts in self.running.values())

    def revocations(self) -> int:
        return sum(len(a.revoked_connectors) + len(a.revoked_tasks) for a in self.last.workers.values())

    def assert_no_duplicates(self):
        cs = [c for cs, _ in self.running.values() for c in cs]
        ts = [t for _, ts in self.running.values() for t in ts]
        assert len(cs) == len(set(cs)) and len(ts) == len(set(ts))

    def assert_balanced_and_complete(self):
        self.assert_no_duplicates()
        cs = {c for cs, _ in self.running.values() for c in cs}
        ts = {t for _, ts in self.running.values() for t in ts}
        assert cs == set(self.connectors)
        assert ts == {ConnectorTaskId(c, i) for c, n in self.connectors.items() for i in range(n)}
        assert max(self.connector_counts()) - min(self.connector_counts()) <= 1
        assert max(self.task_counts()) - min(self.task_counts()) <= 1

    def assert_nothing_changes(self):
        a = self.rebalance()
        assert all(
            not (w.assigned_connectors or w.assigned_tasks or w.revoked_connectors or w.revoked_tasks)
            for w in a.workers.values()
        )


TWO_BY_FOUR = {"connector1": 4, "connector2": 4}


def started_cluster(connectors=TWO_BY_FOUR, **kw) -> ConnectCluster:
    cluster = ConnectCluster(connectors, **kw)
    cluster.rebalance()
    cluster.assert_balanced_and_complete()
    return cluster


# --- Eager ------------------------------------------------------------------------------------


def test_eager_round_robins_connectors_then_continues_the_same_iterator_for_tasks():
    spec = ConnectGroupSpec(
        workers=(ConnectWorkerSpec("w2"), ConnectWorkerSpec("w1")),
        connectors={"b": 1, "a": 2},
        leader_id="w1",
        leader_config_offset=5,
    )
    a = assign_connect_eager(spec)
    assert a.error == "NONE"
    assert list(a.workers) == ["w2", "w1"]  # spec order kept
    assert a.workers["w1"].connectors == ("a",)
    assert a.workers["w2"].connectors == ("b",)
    # Position 2 continues at w1: a-0 -> w1, a-1 -> w2, b-0 -> w1.
    assert a.workers["w1"].tasks == (ConnectorTaskId("a", 0), ConnectorTaskId("b", 0))
    assert a.workers["w2"].tasks == (ConnectorTaskId("a", 1),)
    assert a.config_offset == 5


def test_eager_reports_config_mismatch_when_a_member_read_further_than_the_leader():
    spec = ConnectGroupSpec(
        workers=(ConnectWorkerSpec("w1", config_offset=3), ConnectWorkerSpec("w2", config_offset=7)),
        connectors={"a": 2},
        leader_id="w1",
        leader_config_offset=3,
    )
    a = assign_connect_eager(spec)
    assert a.error == "CONFIG_MISMATCH"
    assert a.config_offset == 7
    assert all(not w.connectors and not w.tasks for w in a.workers.values())


def test_incremental_config_mismatch_leaves_the_leader_state_untouched():
    spec = ConnectGroupSpec(
        workers=(ConnectWorkerSpec("w1", config_offset=9),), connectors={"a": 1}, leader_id="w1", leader_config_offset=2
    )
    state = ConnectAssignorState(previous_generation_id=4)
    a, new_state = assign_connect_incremental(spec, state, 0)
    assert a.error == "CONFIG_MISMATCH" and new_state is state


def test_bad_specs_name_the_culprit():
    with pytest.raises(InvalidConnectSpecError, match="'w1'"):
        assign_connect_eager(
            ConnectGroupSpec(workers=(ConnectWorkerSpec("w1"), ConnectWorkerSpec("w1")), connectors={}, leader_id="w1", leader_config_offset=0)
        )
    with pytest.raises(RebalanceMonitorError, match="leader 'x'"):
        assign_connect_eager(
            ConnectGroupSpec(workers=(ConnectWorkerSpec("w1"),), connectors={}, leader_id="x", leader_config_offset=0)
        )


# --- Incremental: spec scenarios 38-44 ------------------------------------------------------------


def test_scenario_38_second_worker_joins_revoke_then_assign_then_stable():
    cluster = started_cluster()
    assert cluster.last.delay_ms == 0
    assert cluster.connector_counts() == [2] and cluster.task_counts() == [8]

    cluster.join("worker2")
    a = cluster.rebalance()
    assert a.delay_ms == 0
    assert cluster.connector_counts() == [0, 1] and cluster.task_counts() == [0, 4]
    # Revocations take the first excess items in the worker's reported order.
    assert a.workers["worker1"].revoked_connectors == ("connector1",)
    assert a.workers["worker1"].revoked_tasks == tuple(ConnectorTaskId("connector1", i) for i in range(4))

    a = cluster.rebalance()
    assert a.delay_ms == 0 and cluster.revocations() == 0
    assert cluster.connector_counts() == [1, 1] and cluster.task_counts() == [4, 4]
    cluster.assert_balanced_and_complete()
    cluster.assert_nothing_changes()


def test_scenario_39_joins_right_after_a_revoking_round_back_off_then_balance():
    cluster = started_cluster({"connector1": 4, "connector2": 4, "connector3": 4})
    cluster.join("worker2")
    cluster.rebalance()
    assert cluster.revocations() > 0

    cluster.join("worker3")
    a = cluster.rebalance()
    assert a.delay_ms == 40  # first successive revoking round: 1 * 40^1 ms
    assert cluster.revocations() == 0
    assert cluster.connector_counts() == [0, 1, 2] and cluster.task_counts() == [3, 3, 6]

    cluster.sleep(a.delay_ms)
    cluster.join("worker4")
    cluster.rebalance()
    assert cluster.revocations() > 0  # the back-off expired: revoking is allowed again

    cluster.join("worker5")
    a = cluster.rebalance()
    assert a.delay_ms > 40  # 1,600 ms for the second successive revoking round
    assert cluster.revocations() == 0

    for _ in range(20):
        if cluster.last.delay_ms:
            cluster.sleep(cluster.last.delay_ms)
        cluster.rebalance()
    cluster.assert_balanced_and_complete()


def test_scenario_40_worker_leaves_for_good_its_work_waits_for_the_delay():
    cluster = started_cluster(workers=("worker1", "worker2"))
    assert cluster.connector_counts() == [1, 1] and cluster.task_counts() == [4, 4]

    cluster.leave("worker2")
    a = cluster.rebalance()
    assert a.delay_ms == MAX_DELAY
    assert cluster.connector_counts() == [1] and cluster.task_counts() == [4]
    assert len(a.lost_pending_connectors) == 1 and len(a.lost_pending_tasks) == 4

    cluster.sleep(MAX_DELAY // 2)
    a = cluster.rebalance()
    assert a.delay_ms == MAX_DELAY // 2
    assert cluster.connector_counts() == [1] and cluster.task_counts() == [4]

    cluster.sleep(MAX_DELAY // 2 + 1)
    a = cluster.rebalance()
    assert a.delay_ms == 0 and not a.lost_pending_tasks
    assert cluster.connector_counts() == [2] and cluster.task_counts() == [8]
    cluster.assert_balanced_and_complete()


def test_scenario_41_bounced_worker_gets_its_own_work_back_after_the_delay():
    cluster = started_cluster(workers=("worker1", "worker2"))
    lost_tasks = set(cluster.running["worker2"][1])
    cluster.leave("worker2")
    assert cluster.rebalance().delay_ms == MAX_DELAY

    cluster.sleep(MAX_DELAY // 4)
    assert cluster.rebalance().delay_ms == MAX_DELAY * 3 // 4

    cluster.sleep(MAX_DELAY // 4)
    cluster.join("worker2")
    a = cluster.rebalance()
    assert a.delay_ms == MAX_DELAY // 2
    assert cluster.connector_counts() == [0, 1] and cluster.task_counts() == [0, 4]
    assert cluster.state.candidate_workers == ("worker2",)

    cluster.sleep(MAX_DELAY)
    a = cluster.rebalance()
    assert a.delay_ms == 0 and cluster.revocations() == 0
    assert cluster.connector_counts() == [1, 1] and cluster.task_counts() == [4, 4]
    assert set(cluster.running["worker2"][1]) == lost_tasks
    cluster.assert_balanced_and_complete()


def test_scenario_42_new_leader_starts_from_a_clean_slate_and_reassigns_at_once():
    cluster = started_cluster(workers=("worker1", "worker2", "worker3"))
    assert cluster.connector_counts() == [0, 1, 1] and cluster.task_counts() == [2, 3, 3]

    cluster.leave("worker1")
    cluster.new_leader("worker2")
    a = cluster.rebalance()
    assert a.delay_ms == 0
    assert cluster.connector_counts() == [1, 1] and cluster.task_counts() == [4, 4]
    cluster.assert_balanced_and_complete()
    cluster.assert_nothing_changes()


def test_scenario_43_duplicated_work_is_revoked_from_every_holder_then_rebalanced():
    cluster = started_cluster()
    dup_tasks = [ConnectorTaskId("connector1", i) for i in range(4)]
    cluster.join("worker2", connectors=["connector1"], tasks=dup_tasks)
    a = cluster.rebalance()
    for w in ("worker1", "worker2"):
        assert a.workers[w].revoked_connectors == ("connector1",)
        assert a.workers[w].revoked_tasks == tuple(dup_tasks)
    cluster.assert_no_duplicates()

    cluster.rebalance()
    assert cluster.connector_counts() == [1, 1] and cluster.task_counts() == [4, 4]
    cluster.assert_balanced_and_complete()


def test_scenario_44_zero_max_delay_revokes_successively_and_reassigns_lost_work_at_once():
    cluster = started_cluster(max_delay=0)
    cluster.join("worker2")
    cluster.rebalance()
    assert cluster.revocations() > 0
    cluster.join("worker3")
    a = cluster.rebalance()
    assert a.delay_ms == 0 and cluster.revocations() > 0  # no back-off with max delay 0

    cluster.leave("worker3")
    a = cluster.rebalance()
    assert a.delay_ms == 0 and not a.lost_pending_tasks and not a.lost_pending_connectors
    for _ in range(4):
        cluster.rebalance()
    cluster.assert_balanced_and_complete()


def test_generation_mismatch_forgets_the_previous_assignment():
    cluster = started_cluster(workers=("worker1", "worker2"))
    cluster.leave("worker2")
    spec = cluster.spec()
    spec = ConnectGroupSpec(**{**{f: getattr(spec, f) for f in spec.__slots__}, "last_completed_generation_id": -5})
    a, _ = assign_connect_incremental(spec, cluster.state, cluster.now)
    # Without the previous view nothing is "lost": worker2's work looks new and is assigned now.
    assert a.delay_ms == 0
    assert len(a.workers["worker1"].tasks) == 8


def test_backoff_sequence_matches_kafka():
    assert [revoking_backoff_ms(n, 300_000) for n in range(1, 6)] == [40, 1_600, 64_000, 300_000, 300_000]
    assert revoking_backoff_ms(3, 0) == 0


def test_deleted_connector_is_revoked_from_its_worker():
    cluster = started_cluster(workers=("worker1", "worker2"))
    holder = next(w for w, (cs, _) in cluster.running.items() if "connector2" in cs)
    del cluster.connectors["connector2"]
    a = cluster.rebalance()
    assert "connector2" in a.workers[holder].revoked_connectors
    assert not any(t.connector == "connector2" for _, ts in cluster.running.values() for t in ts)


# --- Properties -----------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    connectors=st.dictionaries(st.sampled_from("abcdefg"), st.integers(0, 6), min_size=0, max_size=5),
    workers=st.lists(st.sampled_from([f"w{i}" for i in range(12)]), min_size=1, max_size=8, unique=True),
)
def test_eager_is_complete_without_duplicates_and_balanced(connectors, workers):
    spec = ConnectGroupSpec(
        workers=tuple(ConnectWorkerSpec(w) for w in workers), connectors=connectors, leader_id=workers[0], leader_config_offset=0
    )
    a = assign_connect_eager(spec)
    cs = [c for w in a.workers.values() for c in w.connectors]
    ts = [t for w in a.workers.values() for t in w.tasks]
    assert sorted(cs) == sorted(connectors)
    assert len(ts) == len(set(ts)) == sum(connectors.values())
    counts = [len(w.connectors) + len(w.tasks) for w in a.workers.values()]
    assert max(counts) - min(counts) <= 1  # one shared circular iterator


@settings(max_examples=40, deadline=None)
@given(
    connectors=st.dictionaries(st.sampled_from("abcdef"), st.integers(1, 6), min_size=1, max_size=4),
    events=st.lists(
        st.tuples(st.sampled_from(["join", "leave", "bounce", "wait"]), st.integers(0, 9)), min_size=1, max_size=8
    ),
    max_delay=st.sampled_from([0, 10_000, 300_000]),
)
def test_incremental_rounds_stay_valid_and_end_balanced(connectors, events, max_delay):
    cluster = started_cluster(connectors, max_delay=max_delay)
    for kind, n in events:
        name = f"w{n}"
        if kind == "join" and name not in cluster.running:
            cluster.join(name)
        elif kind in ("leave", "bounce") and name in cluster.running and len(cluster.running) > 1:
            cluster.leave(name)
            if cluster.leader == name:
                cluster.new_leader(next(iter(cluster.running)))
            if kind == "bounce":
                cluster.rebalance()
                cluster.assert_no_duplicates()
                cluster.join(name)
        elif kind == "wait":
            cluster.sleep(max_delay // 3 + 1)
        cluster.rebalance()
        cluster.assert_no_duplicates()
    # Let every delay and back-off expire; the group must settle balanced and complete.
    for _ in range(12):
        cluster.sleep(max(cluster.last.delay_ms, 1))
        cluster.rebalance()
        cluster.assert_no_duplicates()
    cluster.assert_balanced_and_complete()
