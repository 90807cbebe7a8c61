"""Kafka 4.1's server-side UniformAssignor scenarios (spec sections 6.1-6.2; catalogue items 45-50, 52).

Every expected answer here was checked against Kafka 4.1.1's own ``UniformAssignor`` (the Java
reference in jvm/reference; ``test_differential_server_java.py`` compares thousands of groups).
Members are single letters, so Kafka's member map (a ``HashMap``) walks them in alphabetical
order, as a ``TreeMap`` in Kafka's own tests would. Without topic ids the port walks topics in name
order; the tests with ids give ids whose hash order differs from the name order.
"""

from __future__ import annotations

import uuid

import pytest

from assignors import InvalidGroupSpecError
from assignors.java_order import hashmap_order
from assignors.metrics import balance_metrics, validate
from assignors.model import GroupSpec, TopicSpec
from assignors.uniform import assign_uniform, assign_uniform_heterogeneous, assign_uniform_homogeneous

from .conftest import group, listed, member, tps

#: Topic ids Kafka's hash sets walk "b" first: Uuid(0, 3) falls in bucket 3, Uuid(0, 5) in bucket 5.
ID_OF_A, ID_OF_B = uuid.UUID(int=5), uuid.UUID(int=3)


def with_ids(spec: GroupSpec, ids: dict[str, uuid.UUID]) -> GroupSpec:
    topics = {name: TopicSpec(name, t.partitions, topic_id=ids[name]) for name, t in spec.topics.items()}
    return GroupSpec(spec.members, topics, spec.group_id)


# --- homogeneous (6.1) ----------------------------------------------------------------------------


def test_uniform_homogeneous_trims_an_unbalanced_previous_assignment_to_the_quota():
    spec = group(
        member("A", ["t1", "t2"], tps("t1", 0, 1) + tps("t2", 0, 1)),
        member("B", ["t1", "t2"], tps("t1", 2) + tps("t2", 2)),
        topics={"t1": 3, "t2": 3},
    )
    assert listed(assign_uniform(spec)) == {"A": ["t1-0", "t1-1", "t2-0"], "B": ["t1-2", "t2-1", "t2-2"]}


def test_uniform_homogeneous_fresh_group_of_two_over_three_partitions_gives_the_extra_one_to_the_last():
    # Kafka 4.1 (KAFKA-18688): A cannot fill an extra slot from what it owned, so it gives the slot
    # up; B, the last member, must take it. (Before 4.1 the first member took it.)
    spec = group(member("A", ["t"]), member("B", ["t"]), topics={"t": 3})
    assert listed(assign_uniform(spec)) == {"A": ["t-0"], "B": ["t-1", "t-2"]}


def test_uniform_homogeneous_keeps_an_already_balanced_assignment_whole():
    # 7 partitions over 3 members: B, which owns 3, keeps the one extra slot; nothing moves.
    spec = group(
        member("A", ["t"], tps("t", 0, 1)),
        member("B", ["t"], tps("t", 2, 3, 4)),
        member("C", ["t"], tps("t", 5, 6)),
        topics={"t": 7},
    )
    assert listed(assign_uniform(spec)) == {"A": ["t-0", "t-1"], "B": ["t-2", "t-3", "t-4"], "C": ["t-5", "t-6"]}


def test_uniform_homogeneous_hands_out_added_partitions_in_topic_name_order():
    spec = group(
        member("A", ["t1", "t2"], tps("t1", 0, 2) + tps("t2", 0)),
        member("B", ["t1", "t2"], tps("t1", 1) + tps("t2", 1, 2)),
        topics={"t1": 6, "t2": 5},
    )
    # 11 partitions: A gives up the extra slot (it owns 3), B keeps it; the unowned partitions go out
    # t1 first, then t2.
    assert listed(assign_uniform(spec)) == {
        "A": ["t1-0", "t1-2", "t1-3", "t1-4", "t2-0"],
        "B": ["t1-1", "t1-5", "t2-1", "t2-2", "t2-3", "t2-4"],
    }


def test_uniform_homogeneous_hands_out_partitions_in_the_hash_order_of_the_topic_ids():
    spec = group(member("A", ["a", "b"]), member("B", ["a", "b"]), topics={"a": 2, "b": 2})
    assert listed(assign_uniform(spec)) == {"A": ["a-0", "a-1"], "B": ["b-0", "b-1"]}
    assert listed(assign_uniform(with_ids(spec, {"a": ID_OF_A, "b": ID_OF_B}))) == {"A": ["b-0", "b-1"], "B": ["a-0", "a-1"]}


def test_uniform_homogeneous_trims_a_member_in_the_hash_order_of_its_topic_ids():
    spec = group(member("A", ["a", "b"], tps("a", 0) + tps("b", 0)), member("B", ["a", "b"]), topics={"a": 1, "b": 1})
    assert listed(assign_uniform(spec)) == {"A": ["a-0"], "B": ["b-0"]}
    assert listed(assign_uniform(with_ids(spec, {"a": ID_OF_A, "b": ID_OF_B}))) == {"A": ["b-0"], "B": ["a-0"]}


def test_uniform_homogeneous_trims_a_member_in_the_hash_order_of_its_partitions():
    # new HashSet<>([16, 0, 17, 1]) has 16 buckets: 16 and 0 share bucket 0, 17 and 1 bucket 1, so
    # Kafka walks 16, 0, 17, 1 and A (quota 3) gives up partition 1.
    spec = group(member("A", ["t"], tps("t", 16, 0, 17, 1)), *(member(m, ["t"]) for m in "BCDEF"), topics={"t": 18})
    answer = listed(assign_uniform(spec))
    assert answer["A"] == ["t-0", "t-16", "t-17"]
    assert answer["F"] == ["t-1", "t-14", "t-15"]


def test_uniform_homogeneous_member_leaving_moves_only_its_partitions():
    first = assign_uniform(group(*(member(m, ["t"]) for m in "ABC"), topics={"t": 6})).assignment
    assert {m: [p for _, p in parts] for m, parts in first.items()} == {"A": [0, 1], "B": [2, 3], "C": [4, 5]}
    spec = group(*(member(m, ["t"], first[m]) for m in "AB"), topics={"t": 6})
    assert listed(assign_uniform(spec)) == {"A": ["t-0", "t-1", "t-4"], "B": ["t-2", "t-3", "t-5"]}


def test_uniform_homogeneous_fresh_group_fills_members_with_contiguous_slices():
    spec = group(member("A", ["t1", "t2"]), member("B", ["t1", "t2"]), topics={"t1": 3, "t2": 2})
    assert listed(assign_uniform(spec)) == {"A": ["t1-0", "t1-1"], "B": ["t1-2", "t2-0", "t2-1"]}


def test_uniform_homogeneous_builder_refuses_different_subscriptions():
    spec = group(member("A", ["t1"]), member("B", ["t2"]), topics={"t1": 1, "t2": 1})
    with pytest.raises(InvalidGroupSpecError, match="subscribe to different topics"):
        assign_uniform_homogeneous(spec)


def test_uniform_handles_ninety_nine_topics_over_forty_nine_members():
    topics = [f"t{i:02d}" for i in range(99)]
    spec = group(*(member(f"m{i:02d}", topics) for i in range(49)), topics={t: 3 for t in topics})
    answer = listed(assign_uniform(spec))
    assert validate(spec, assign_uniform(spec)) == []
    # 297 partitions: 6 each and one more for the last 297 % 49 = 3 members in Kafka's member order
    # (the HashMap order of the ids), each a contiguous slice of the topics in name order.
    in_kafka_order = hashmap_order([m.member_id for m in spec.members])
    assert [len(answer[m]) for m in in_kafka_order] == [6] * 46 + [7] * 3
    dealt = [tp for m in in_kafka_order for tp in answer[m]]
    assert dealt == [f"{t}-{p}" for t in topics for p in range(3)]


# --- heterogeneous (6.2) --------------------------------------------------------------------------


def test_uniform_heterogeneous_rebalances_overlapping_subscriptions():
    spec = group(
        member("A", ["t1"], tps("t1", 0, 1, 2)),
        member("B", ["t1", "t2"], tps("t1", 3) + tps("t2", 0)),
        member("C", ["t1", "t2", "t3"], tps("t1", 4, 5) + tps("t2", 1, 2, 3) + tps("t3", 0, 1, 2, 3)),
        topics={"t1": 6, "t2": 4, "t3": 4},
    )
    assert listed(assign_uniform(spec)) == {
        "A": ["t1-0", "t1-1", "t1-2", "t1-5"],
        "B": ["t1-3", "t2-0", "t2-1", "t2-2", "t2-3"],
        "C": ["t1-4", "t3-0", "t3-1", "t3-2", "t3-3"],
    }


def test_uniform_heterogeneous_builder_moves_highest_partitions_from_the_most_loaded_member():
    owned = [tp for t in ("t1", "t2", "t3") for tp in tps(t, 0, 1)]
    spec = group(member("A", ["t1", "t2", "t3"], owned), member("B", ["t1", "t2", "t3"]), topics={"t1": 2, "t2": 2, "t3": 2})
    assert listed(assign_uniform_heterogeneous(spec)) == {"A": ["t2-0", "t3-0", "t3-1"], "B": ["t1-0", "t1-1", "t2-1"]}


def test_uniform_heterogeneous_gives_a_member_with_no_subscription_nothing():
    spec = group(member("A", []), member("B", ["t1", "t2"]), topics={"t1": 3, "t2": 2})
    assert listed(assign_uniform(spec)) == {"A": [], "B": ["t1-0", "t1-1", "t1-2", "t2-0", "t2-1"]}


def test_uniform_heterogeneous_assigns_topics_with_most_partitions_per_subscriber_first():
    # t2 (3 partitions, 1 subscriber) goes first, so B is loaded before t1 is split: A takes all of t1.
    spec = group(member("A", ["t1"]), member("B", ["t1", "t2"]), topics={"t1": 3, "t2": 3})
    assert listed(assign_uniform(spec)) == {"A": ["t1-0", "t1-1", "t1-2"], "B": ["t2-0", "t2-1", "t2-2"]}


def test_uniform_heterogeneous_keeps_everything_owned_when_already_balanced():
    spec = group(
        member("A", ["t1"], tps("t1", 1, 2)),
        member("B", ["t1", "t2"], tps("t1", 0) + tps("t2", 1)),
        member("C", ["t2"], tps("t2", 0, 2)),
        topics={"t1": 3, "t2": 3},
    )
    answer = assign_uniform(spec).assignment
    assert {m.member_id: sorted(m.owned_partitions) for m in spec.members} == {k: sorted(v) for k, v in answer.items()}


def test_uniform_heterogeneous_ends_within_one_for_members_sharing_all_topics():
    spec = group(
        member("A", ["t1", "t2"]), member("B", ["t1", "t2"]), member("C", ["t1", "t2", "t3"]),
        topics={"t1": 10, "t2": 7, "t3": 2},
    )
    sizes = balance_metrics(spec, assign_uniform(spec)).per_member
    assert max(sizes.values()) - min(sizes.values()) <= 1


# --- normalisation and errors (50) ----------------------------------------------------------------


def test_uniform_skips_a_subscription_to_a_topic_missing_from_the_metadata():
    # The coordinator resolves names to topic ids and skips what it cannot resolve; the group is
    # still heterogeneous by name, so the heterogeneous builder runs (A 2, B 1, where the
    # homogeneous one would give A 1, B 2).
    spec = group(member("A", ["t", "ghost"]), member("B", ["t"]), topics={"t": 3}, group_id="payments")
    assert listed(assign_uniform(spec)) == {"A": ["t-0", "t-2"], "B": ["t-1"]}
    everyone = group(member("A", ["t", "ghost"]), member("B", ["ghost", "t"]), topics={"t": 3})
    assert listed(assign_uniform(everyone)) == {"A": ["t-0"], "B": ["t-1", "t-2"]}


def test_uniform_drops_owned_partitions_of_unsubscribed_or_vanished_topics():
    spec = group(
        member("A", ["t"], tps("t", 0) + tps("old", 0) + tps("t", 9)),
        member("B", ["t"], tps("t", 1)),
        topics={"t": 2, "old": 1},
    )
    assert listed(assign_uniform(spec)) == {"A": ["t-0"], "B": ["t-1"]}


def test_uniform_leaves_a_partition_claimed_twice_with_its_first_claimant():
    spec = group(member("A", ["t"], tps("t", 0)), member("B", ["t"], tps("t", 0)), topics={"t": 2})
    assert listed(assign_uniform(spec)) == {"A": ["t-0"], "B": ["t-1"]}


def test_uniform_gives_an_empty_answer_for_no_members_and_empty_lists_for_no_topics():
    assert assign_uniform(group(topics={"t": 1})).assignment == {}
    assert listed(assign_uniform(group(member("A", []), member("B", []), topics={"t": 1}))) == {"A": [], "B": []}


# --- scale ----------------------------------------------------------------------------------------


def test_uniform_second_round_for_ten_thousand_members_keeps_every_stayer_whole():
    topics = tuple(f"topic-{i}" for i in range(50))
    counts = {t: 10_000 for t in topics}
    first = assign_uniform(group(*(member(f"c{i:05d}", topics) for i in range(10_000)), topics=counts)).assignment
    stayers = [member(f"c{i:05d}", topics, first[f"c{i:05d}"]) for i in range(1, 10_000)]
    spec = group(*stayers, member("newcomer", topics), topics=counts)
    answer = assign_uniform(spec).assignment
    assert all(answer[m.member_id] == list(m.owned_partitions) for m in stayers)
    assert sorted(answer["newcomer"]) == sorted(first["c00000"])


@pytest.mark.parametrize("seed", range(10))
def test_uniform_homogeneous_bulk_and_per_member_answers_are_the_same(seed, monkeypatch):
    # Groups whose topic-id order is not the name order leave many shares to sort; those are then
    # built in one split by owner instead. Both ways must give the same answer.
    import random

    import assignors.uniform as uniform

    rng = random.Random(seed)
    for _ in range(20):
        topics = [f"t{i}" for i in range(rng.randint(1, 12))]
        counts = {t: rng.randint(0, 30) for t in topics}
        ids = {t: uuid.UUID(int=rng.getrandbits(128) | 2) for t in topics}
        members = []
        for i in range(rng.randint(1, 40)):
            owned = [tp for t in topics for tp in tps(t, *[p for p in range(counts[t]) if rng.random() < 0.05])]
            members.append(member(f"m{i}", topics, owned))
        spec = with_ids(group(*members, topics=counts), ids) if rng.random() < 0.7 else group(*members, topics=counts)
        monkeypatch.setattr(uniform, "_MANY_SORTS", 10**9)
        per_member = assign_uniform(spec).assignment
        monkeypatch.setattr(uniform, "_MANY_SORTS", -1)
        spec = GroupSpec(spec.members, spec.topics, spec.group_id)  # a fresh view
        assert assign_uniform(spec).assignment == per_member


def _quotas_member_by_member(owned: list[int], min_quota: int, extra: int) -> list[int]:
    """UniformHomogeneousAssignmentBuilder.maybeRevokePartitions' quota rule, walked as Kafka does."""
    quotas = []
    for index, has in enumerate(owned):
        quota, takes_extra = min_quota, extra > 0
        if takes_extra:
            quota += 1
        left = max(quota - has, 0)
        if left > 0 and takes_extra and len(owned) - index > extra:
            quota, takes_extra = quota - 1, False
        if takes_extra:
            extra -= 1
        quotas.append(quota)
    return quotas


@pytest.mark.parametrize("seed", range(20))
def test_homogeneous_quotas_for_all_members_at_once_equal_kafkas_walk(seed):
    import random

    import numpy as np

    from assignors.uniform import homogeneous_quotas

    rng = random.Random(seed)
    for _ in range(200):
        n = rng.randint(1, 30)
        min_quota, extra = rng.randint(0, 5), rng.randint(0, n - 1)
        owned = [rng.randint(0, min_quota + 3) for _ in range(n)]
        expected = _quotas_member_by_member(owned, min_quota, extra)
        assert homogeneous_quotas(np.array(owned), min_quota, extra).tolist() == expected
        assert sum(expected) == n * min_quota + extra
