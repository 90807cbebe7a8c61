"""The constrained sticky builder's list-based way for the usual rejoin (``_rejoin``) gives the
array builder's answer, list order and ``transferring`` included."""

from __future__ import annotations

import random

import numpy as np
import pytest

import assignors.sticky as sticky
from assignors.model import TopicPartition
from assignors.sticky import assign_cooperative_sticky, assign_sticky
from assignors.sticky._constrained import visit_partition_topic_order
from assignors.sticky._layout import Claims, Layout
from assignors.sticky._rejoin import _owned_in_kafka_order

from .conftest import group, member


def _random_rejoin(rng: random.Random):
    """Everyone on the same topics; members own disjoint random sets (some far over their quota,
    some nothing); now and then a claim of a deleted topic or of a partition number past the end."""
    names = [f"t{i}" for i in range(rng.randint(1, 5))]
    counts = {name: rng.randint(0, 12) for name in names}
    pool = [TopicPartition(t, p) for t in names for p in range(counts[t])]
    rng.shuffle(pool)
    n = rng.randint(1, 25)
    owned: list[list[TopicPartition]] = [[] for _ in range(n)]
    for tp in pool:
        if rng.random() < 0.85:  # the rest are nobody's: a member left
            owned[min(int(rng.expovariate(0.3)), n - 1) if rng.random() < 0.3 else rng.randrange(n)].append(tp)
    for claims in owned:
        if rng.random() < 0.05:
            claims.append(TopicPartition("deleted", 0))
        if rng.random() < 0.05 and names:
            claims.append(TopicPartition(names[0], counts[names[0]] + 1))
    subscription = tuple(rng.sample(names, len(names)))  # any order: the same set
    members = [
        member(f"c{rng.randint(0, 99):02d}-{i}", subscription, owned[i]) for i in range(n)
    ]
    return group(*members, topics=counts)


def _both_ways(spec, assign, monkeypatch):
    taken = []
    real = sticky.assign_rejoin

    def spy(*args, **kwargs):
        taken.append(True)
        return real(*args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(sticky, "assign_rejoin", spy)
        fast = assign(spec)
    with monkeypatch.context() as patch:
        patch.setattr(sticky, "is_plain_rejoin", lambda claims: False)
        array = assign(spec)
    return fast, array, bool(taken)


@pytest.mark.parametrize("assign", [assign_sticky, assign_cooperative_sticky], ids=["sticky", "cooperative"])
def test_rejoin_way_equals_the_array_builder(assign, monkeypatch):
    taken = 0
    for seed in range(300):
        spec = _random_rejoin(random.Random(seed))
        fast, array, used = _both_ways(spec, assign, monkeypatch)
        assert fast.assignment == array.assignment, seed
        assert list(fast.assignment) == list(array.assignment), seed
        assert fast.transferring == array.transferring, seed
        taken += used
    # Most random groups are plain rejoins; the comparison above must have exercised that way.
    assert taken > 200


def test_trimmed_partitions_wait_for_their_owner_in_the_cooperative_variant(monkeypatch):
    # c1 owns all four, c2 joins: c1 keeps t-0 and t-1 (lowest partition numbers), t-2 and t-3 go
    # to c2, withheld this round while c1 still owns them.
    spec = group(member("c1", ["t"], [TopicPartition("t", p) for p in (3, 1, 2, 0)]), member("c2", ["t"]),
                 topics={"t": 4})
    fast, array, used = _both_ways(spec, assign_cooperative_sticky, monkeypatch)
    assert used
    assert fast.assignment == array.assignment == {"c1": [("t", 0), ("t", 1)], "c2": []}
    assert fast.transferring == array.transferring == {("t", 2): "c2", ("t", 3): "c2"}
    eager, _, _ = _both_ways(spec, assign_sticky, monkeypatch)
    assert eager.assignment == {"c1": [("t", 0), ("t", 1)], "c2": [("t", 2), ("t", 3)]}


def test_doubly_claimed_partitions_go_to_the_array_builder(monkeypatch):
    spec = group(member("c1", ["t"], [TopicPartition("t", 0)]), member("c2", ["t"], [TopicPartition("t", 0)]),
                 topics={"t": 2})
    _, _, used = _both_ways(spec, assign_sticky, monkeypatch)
    assert not used


def test_packed_sort_key_orders_like_three_keys():
    rng = np.random.default_rng(7)
    counts = np.array([3, 1, 4, 1, 5], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    layout = Layout(topics=[f"t{i}" for i in range(5)], topic_index={}, counts=counts, offsets=offsets,
                    total=int(offsets[-1]))
    g = rng.permutation(layout.total)
    topic = np.searchsorted(offsets, g, side="right") - 1
    expected_key = lambda rank: np.lexsort((topic, g - offsets[topic], rank))  # noqa: E731
    for rank in (rng.integers(0, 4, layout.total), rng.integers(0, 2**60, layout.total)):  # packed; too wide
        assert visit_partition_topic_order(rank, g, layout).tolist() == expected_key(rank).tolist()


@pytest.mark.parametrize("last_topic_partitions", [6, 2**40], ids=["packed", "too-wide-for-int64"])
def test_owned_partitions_come_sorted_by_partition_then_topic_per_member(last_topic_partitions):
    counts = np.array([3, 5, last_topic_partitions], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    layout = Layout(topics=["a", "b", "c"], topic_index={}, counts=counts, offsets=offsets, total=int(offsets[-1]))
    rng = random.Random(3)
    member = np.repeat(np.arange(6, dtype=np.int64), [4, 0, 3, 3, 1, 2])
    g = np.array(rng.sample(range(14), len(member)), dtype=np.int64)
    claims = Claims(member=member, g=g, held=np.ones(len(g), dtype=bool), doubly=np.zeros(0, dtype=bool))
    topic = np.searchsorted(offsets, g, side="right") - 1
    expected = sorted(zip(member.tolist(), (g - offsets[topic]).tolist(), topic.tolist(), g.tolist()))
    assert _owned_in_kafka_order(claims, layout).tolist() == [x[3] for x in expected]
