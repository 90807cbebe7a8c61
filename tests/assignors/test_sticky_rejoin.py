"""The constrained sticky builder's list-based way for the usual rejoin (``_rejoin``) gives the
array builder's answer, list order and ``transferring`` included."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import assignors.sticky as sticky
from assignors.errors import InvalidGroupSpecError
from assignors.model import TopicPartition
from assignors.sticky import assign_cooperative_sticky, assign_sticky
from assignors.sticky._constrained import visit_partition_topic_order
from assignors.sticky._layout import Claims, Layout, build_layout, collect_claims
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


# --- reading the claims ----------------------------------------------------------------------------


def _claims_by_definition(members, layout):
    """(member, global index, partition) of every claim naming an assignable partition, in order."""
    kept = []
    for m, spec_member in enumerate(members):
        for topic, partition in spec_member.owned_partitions:
            t = layout.topic_index.get(topic)
            if t is not None and 0 <= partition < int(layout.counts[t]):
                kept.append((m, int(layout.offsets[t]) + partition, partition))
    return kept


_claim_topics = st.sampled_from(["a", "b", "c", "gone"])
# Partition numbers below and above 256 (small and wide columns), negative ones, Python ints of any
# size that NumPy's int64 still holds.
_claim_numbers = st.one_of(st.integers(0, 300), st.integers(-3, -1), st.integers(2**31, 2**40))


@settings(max_examples=300, deadline=None)
@given(
    counts=st.fixed_dictionaries({"a": st.integers(1, 400), "b": st.integers(0, 5), "c": st.integers(1, 3)}),
    owned=st.lists(st.lists(st.tuples(_claim_topics, _claim_numbers), max_size=6), min_size=1, max_size=8),
)
def test_claims_are_read_as_defined(counts, owned):
    members = [
        member(f"m{i}", ["a", "b", "c"], [TopicPartition(t, p) for t, p in claims]) for i, claims in enumerate(owned)
    ]
    spec = group(*members, topics=counts)
    layout = build_layout(spec)
    claims = collect_claims(spec.members, layout)
    got = list(zip(claims.member.tolist(), claims.g.tolist(), claims.partition.tolist()))
    assert got == _claims_by_definition(spec.members, layout)
    assert len(claims.held) == len(claims.g) and len(claims.doubly) == layout.total


def test_claims_with_many_topics_take_the_wide_topic_column():
    names = [f"t{i:03d}" for i in range(300)]
    owner = member("m0", names, [TopicPartition(name, 0) for name in reversed(names)])
    spec = group(owner, member("m1", names), topics={name: 1 for name in names})
    layout = build_layout(spec)
    claims = collect_claims(spec.members, layout)
    assert claims.g.tolist() == list(range(299, -1, -1))


# --- the closed-form quota walk against the array builder, on generated groups -----------------------


@st.composite
def _rejoins(draw):
    """Same topics for all; members own disjoint partitions, spread so that often several members own
    more than maxQuota, fewer than `expected` of them can keep it (the exactly-min queue is used), or
    some own nothing; now and then a claim the layout drops."""
    counts = draw(st.lists(st.integers(1, 9), min_size=1, max_size=4))
    names = [f"t{i}" for i in range(len(counts))]
    pool = [TopicPartition(t, p) for t, c in zip(names, counts) for p in range(c)]
    pool = draw(st.permutations(pool))
    n = draw(st.integers(1, 12))
    owner_of = draw(st.lists(st.integers(-1, n - 1), min_size=len(pool), max_size=len(pool)))
    owned: list[list[TopicPartition]] = [[] for _ in range(n)]
    for tp, owner in zip(pool, owner_of):
        if owner >= 0:
            owned[owner].append(tp)
    if draw(st.booleans()):
        owned[0].append(TopicPartition("deleted", 0))
    ids = draw(st.lists(st.text("abcxyz", min_size=1, max_size=3), min_size=n, max_size=n, unique=True))
    return group(*(member(i, names, o) for i, o in zip(ids, owned)), topics=dict(zip(names, counts)))


@settings(max_examples=400, deadline=None)
@given(spec=_rejoins())
def test_rejoin_way_equals_the_array_builder_on_generated_groups(spec):
    for assign in (assign_sticky, assign_cooperative_sticky):
        with pytest.MonkeyPatch.context() as patch:
            fast = assign(spec)
            patch.setattr(sticky, "is_plain_rejoin", lambda claims: False)
            array = assign(spec)
        assert fast.assignment == array.assignment
        assert list(fast.assignment) == list(array.assignment)
        assert fast.transferring == array.transferring


# --- a member id listed twice ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "members, topics",
    [
        ([member("c1", ["t"]), member("c1", ["t"])], {"t": 0}),  # nothing to assign
        ([member("c1", ["t"]), member("c1", ["t"])], {"t": 4}),  # first assignment
        ([member("c1", ["t"], [TopicPartition("t", 0)]), member("c1", ["t"], [TopicPartition("t", 1)])],
         {"t": 4}),  # the usual rejoin
        ([member("c1", ["t"], [TopicPartition("t", 0)]), member("c1", ["t"], [TopicPartition("t", 0)])],
         {"t": 4}),  # the constrained builder (a doubly claimed partition)
        ([member("c1", ["t"], [TopicPartition("t", 0)]), member("c1", ["t", "u"])],
         {"t": 4, "u": 2}),  # the general builder
    ],
    ids=["nothing-to-assign", "first-assignment", "rejoin", "constrained", "general"],
)
@pytest.mark.parametrize("assign", [assign_sticky, assign_cooperative_sticky], ids=["sticky", "cooperative"])
def test_a_member_id_listed_twice_is_refused_on_every_path(assign, members, topics):
    with pytest.raises(InvalidGroupSpecError, match="member id 'c1' appears more than once"):
        assign(group(*members, topics=topics))
