"""Convergence harness in the spirit of Kafka's ``TaskAssignorConvergenceTest``.

Streams: a simulated cluster runs the HA assignor round after round. Between rounds every copy a
client was given catches up (actives run, standbys and warm-ups restore), clients without a copy
have no state; joins, leaves and lost state perturb it. Every round must be valid, and once the
perturbations stop the probing rebalances must end within Kafka's iteration bound.

Connect: seeded random joins, leaves and bounces of workers, with time passing so that lost-work
delays and revocation back-offs expire; every round stays duplicate-free and the group ends
balanced and complete.
"""

from __future__ import annotations

import random
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assignors.streams import (
    LATEST_OFFSET,
    StreamsAssignment,
    StreamsAssignmentConfig,
    StreamsClient,
    StreamsGroupSpec,
    assign_streams_ha,
)

from .test_connect import ConnectCluster
from .test_streams_ha import assert_valid

ACCEPTABLE_LAG = 100
NO_STATE_LAG = 1_000


class StreamsCluster:
    def __init__(self, stateful: int, stateless: int, *, standbys=0, warmups=2, seed=0):
        self.stateful = tuple(f"{i % 3}_{i // 3}" for i in range(stateful))
        self.stateless = tuple(f"7_{i}" for i in range(stateless))
        self.config = StreamsAssignmentConfig(
            acceptable_recovery_lag=ACCEPTABLE_LAG, num_standby_replicas=standbys, max_warmup_replicas=warmups
        )
        self.rng = random.Random(seed)
        self.capacity: dict[str, int] = {}
        self.lags: dict[str, dict[str, int]] = {}
        self.now = 0
        self.last: StreamsAssignment | None = None

    def add_client(self, capacity=1) -> str:
        pid = str(uuid.UUID(int=self.rng.getrandbits(128)))
        self.capacity[pid] = capacity
        self.lags[pid] = {t: NO_STATE_LAG for t in self.stateful}
        return pid

    def drop_client(self, pid: str) -> None:
        del self.capacity[pid], self.lags[pid]

    def lose_state(self, pid: str) -> None:
        self.lags[pid] = {t: NO_STATE_LAG for t in self.stateful}

    def rebalance(self) -> StreamsAssignment:
        spec = StreamsGroupSpec(
            tuple(StreamsClient(p, c, task_lags=dict(self.lags[p])) for p, c in self.capacity.items()),
            self.stateful,
            self.stateless,
            config=self.config,
            now_ms=self.now,
        )
        a = assign_streams_ha(spec)
        assert_valid(spec, a)
        # Until the next rebalance: actives run, every standby and warm-up copy catches up.
        for pid, c in a.clients.items():
            for t in self.stateful:
                if t in c.active_tasks:
                    self.lags[pid][t] = LATEST_OFFSET
                elif t in c.standby_tasks or t in c.warmup_tasks:
                    self.lags[pid][t] = 0
                else:
                    self.lags[pid][t] = NO_STATE_LAG
        self.now = a.probing_rebalance_at_ms or self.now + 1
        self.last = a
        return a

    def rebalances_until_stable(self, limit: int) -> int:
        for n in range(1, limit + 1):
            if not self.rebalance().probing_rebalance_needed:
                return n
        raise AssertionError(f"no stable assignment after {limit} rebalances")

    def assert_balanced(self) -> None:
        # Equal capacities: active counts within one, stateful actives within one.
        actives = [len(c.active_tasks) for c in self.last.clients.values()]
        stateful = [sum(t in self.stateful for t in c.active_tasks) for c in self.last.clients.values()]
        assert max(actives) - min(actives) <= 1
        assert max(stateful) - min(stateful) <= 1


def settled_cluster(nodes: int, *, stateful=11, stateless=7, standbys=0, seed=0) -> StreamsCluster:
    cluster = StreamsCluster(stateful, stateless, standbys=standbys, seed=seed)
    for _ in range(nodes):
        cluster.add_client()
    cluster.rebalances_until_stable(limit=50)
    cluster.assert_balanced()
    return cluster


@pytest.mark.parametrize("standbys", [0, 1])
def test_scenario_37_scale_out_by_one_node_converges_within_the_warmup_bound(standbys):
    cluster = settled_cluster(10, standbys=standbys)
    cluster.add_client()
    rounds = cluster.rebalances_until_stable(limit=11 // 2 + 1 + 1)
    # The first rebalance plus at most stateful / max.warmup.replicas probing rebalances.
    assert rounds - 1 <= 11 // 2 + 1
    cluster.assert_balanced()


@pytest.mark.parametrize("standbys", [0, 1])
def test_scenario_37_dropping_a_node_converges(standbys):
    cluster = settled_cluster(10, standbys=standbys)
    cluster.drop_client(next(iter(cluster.capacity)))
    rounds = cluster.rebalances_until_stable(limit=13 // 2 + 2 + 1)
    assert rounds - 1 <= 13 // 2 + 2
    cluster.assert_balanced()


def test_scale_out_from_one_to_four_nodes_moves_at_most_max_warmups_per_round():
    cluster = settled_cluster(1, stateful=12, stateless=0)
    for _ in range(3):
        cluster.add_client()
    rounds = 0
    while True:
        a = cluster.rebalance()
        rounds += 1
        assert sum(len(c.warmup_tasks) for c in a.clients.values()) <= 2
        if not a.probing_rebalance_needed:
            break
        assert rounds <= 12 // 2 + 1
    cluster.assert_balanced()


@settings(max_examples=15, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    standbys=st.integers(0, 2),
    events=st.lists(st.sampled_from(["join", "leave", "lose_state", "rebalance"]), min_size=1, max_size=6),
)
def test_random_cluster_perturbations_stay_valid_and_converge(seed, standbys, events):
    cluster = settled_cluster(4, stateful=9, stateless=4, standbys=standbys, seed=seed)
    rng = random.Random(seed)
    for event in events:
        pids = list(cluster.capacity)
        if event == "join":
            cluster.add_client(capacity=rng.randint(1, 2))
        elif event == "leave" and len(pids) > 1:
            cluster.drop_client(rng.choice(pids))
        elif event == "lose_state":
            cluster.lose_state(rng.choice(pids))
        cluster.rebalance()  # every intermediate round is validated inside
    # Each probing round promotes up to max.warmup.replicas copies (actives and standbys alike).
    limit = len(cluster.stateful) * (standbys + 1) // 2 + 2
    cluster.rebalances_until_stable(limit)


@pytest.mark.parametrize("seed", range(8))
def test_connect_random_joins_leaves_and_delay_expiries_end_balanced(seed):
    rng = random.Random(seed)
    connectors = {f"conn{i}": rng.randint(1, 8) for i in range(rng.randint(1, 5))}
    max_delay = rng.choice([0, 5_000, 300_000])
    cluster = ConnectCluster(connectors, max_delay=max_delay)
    cluster.rebalance()
    next_worker = 2
    for _ in range(25):
        roll = rng.random()
        if roll < 0.35:
            cluster.join(f"worker{next_worker}")
            next_worker += 1
        elif roll < 0.6 and len(cluster.running) > 1:
            gone = rng.choice(sorted(cluster.running))
            cluster.leave(gone)
            if gone == cluster.leader:
                cluster.new_leader(sorted(cluster.running)[0])
        elif roll < 0.8:
            cluster.sleep(rng.randint(0, max_delay + 1))
        cluster.rebalance()
        cluster.assert_no_duplicates()
    for _ in range(15):
        cluster.sleep(max(cluster.last.delay_ms, 1))
        cluster.rebalance()
        cluster.assert_no_duplicates()
    cluster.assert_balanced_and_complete()
