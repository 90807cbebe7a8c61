"""Client RangeAssignor scenarios (spec section 1; catalogue items 1-7)."""

from __future__ import annotations

import random

import pytest

from assignors import InvalidGroupSpecError, TopicSpec
from assignors.range import assign_range

from .conftest import as_sets, group, listed, member

AB = ("a", "b")


def alternating_racks(partitions: int, racks=AB, shift: int = 0) -> tuple[frozenset[str], ...]:
    """One replica per partition, partition p on racks[(p + shift) % len(racks)]."""
    return tuple(frozenset({racks[(p + shift) % len(racks)]}) for p in range(partitions))


def mismatches(spec, answer) -> int:
    racks = {m.member_id: m.rack for m in spec.members}
    return sum(
        1
        for member_id, parts in answer.assignment.items()
        for t, p in parts
        if racks[member_id] not in spec.topics[t].replica_racks[p]
    )


# --- catalogue 1-5 -------------------------------------------------------------------------------


def test_range_gives_extra_partition_to_first_members_of_each_topic():
    spec = group(member("C0", ["t0", "t1"]), member("C1", ["t0", "t1"]), topics={"t0": 3, "t1": 3})
    assert as_sets(assign_range(spec)) == {
        "C0": {"t0-0", "t0-1", "t1-0", "t1-1"},
        "C1": {"t0-2", "t1-2"},
    }


def test_range_splits_each_topic_over_its_own_subscribers_only():
    spec = group(
        member("c1", ["topic1"]),
        member("c2", ["topic1", "topic2"]),
        member("c3", ["topic1"]),
        topics={"topic1": 3, "topic2": 2},
    )
    assert as_sets(assign_range(spec)) == {
        "c1": {"topic1-0"},
        "c2": {"topic1-1", "topic2-0", "topic2-1"},
        "c3": {"topic1-2"},
    }


def test_range_orders_static_members_by_instance_id_not_member_id():
    spec = group(
        member("consumer-a", ["t"], instance="instance2"),
        member("consumer-b", ["t"], instance="instance1"),
        topics={"t": 3},
    )
    assert as_sets(assign_range(spec)) == {"consumer-b": {"t-0", "t-1"}, "consumer-a": {"t-2"}}


def test_range_puts_a_static_member_before_a_dynamic_one_with_a_smaller_member_id():
    spec = group(member("a-dynamic", ["t"]), member("z-static", ["t"], instance="i"), topics={"t": 3})
    assert as_sets(assign_range(spec)) == {"z-static": {"t-0", "t-1"}, "a-dynamic": {"t-2"}}


def test_range_static_member_keeps_its_range_when_its_member_id_changes():
    before = group(
        member("m-1", ["t"], instance="i2"), member("m-2", ["t"], instance="i1"), member("m-3", ["t"]),
        topics={"t": 7},
    )
    after = group(
        member("m-1", ["t"], instance="i2"), member("zz-new", ["t"], instance="i1"), member("m-3", ["t"]),
        topics={"t": 7},
    )
    old, new = as_sets(assign_range(before)), as_sets(assign_range(after))
    assert new["zz-new"] == old["m-2"] == {"t-0", "t-1", "t-2"}
    assert new["m-1"] == old["m-1"] and new["m-3"] == old["m-3"]


def test_range_leaves_members_beyond_the_partition_count_present_and_empty():
    spec = group(member("consumer1", ["t"]), member("consumer2", ["t"]), topics={"t": 1})
    assert listed(assign_range(spec)) == {"consumer1": ["t-0"], "consumer2": []}


@pytest.mark.parametrize("topics", [[], ["missing"]], ids=["no-topics", "non-existent-topic"])
def test_range_gives_an_empty_list_when_nothing_subscribed_exists(topics):
    spec = group(member("consumer", topics), topics={"other": 3})
    assert listed(assign_range(spec)) == {"consumer": []}


def test_range_gives_an_empty_answer_for_a_group_without_members():
    assert assign_range(group(topics={"t": 3})).assignment == {}


def test_range_lists_topics_in_kafkas_hashmap_order_when_no_rack_logic_runs():
    # "p" hashes into bucket 0 and "a" into bucket 1 of a 16-slot HashMap, so Kafka visits p first.
    spec = group(member("c", ["a", "p"]), topics={"a": 2, "p": 1})
    assert listed(assign_range(spec)) == {"c": ["p-0", "a-0", "a-1"]}


def test_range_co_partitioned_topics_get_the_same_partition_numbers():
    spec = group(*(member(f"c{i}", ["x", "y"]) for i in range(3)), topics={"x": 8, "y": 8})
    answer = assign_range(spec).assignment
    for parts in answer.values():
        assert sorted(p for t, p in parts if t == "x") == sorted(p for t, p in parts if t == "y")


# --- rack-aware (KIP-881), catalogue 6-7 ----------------------------------------------------------


def test_range_rack_aware_co_partitioned_topics_follow_replica_racks():
    spec = group(
        member("consumer0", ["t1", "t2"], rack="a"),
        member("consumer1", ["t1", "t2"], rack="b"),
        member("consumer2", ["t3", "t4"], rack="b"),
        member("consumer3", ["t3", "t4"], rack="a"),
        topics={
            t: TopicSpec(t, n, alternating_racks(n)) for t, n in [("t1", 6), ("t2", 6), ("t3", 2), ("t4", 2)]
        },
    )
    answer = assign_range(spec)
    assert listed(answer) == {
        "consumer0": ["t1-0", "t1-2", "t1-4", "t2-0", "t2-2", "t2-4"],
        "consumer1": ["t1-1", "t1-3", "t1-5", "t2-1", "t2-3", "t2-5"],
        "consumer2": ["t3-1", "t4-1"],
        "consumer3": ["t3-0", "t4-0"],
    }
    assert mismatches(spec, answer) == 0


def test_range_rack_aware_keeps_co_partitioning_when_topics_disagree_on_racks():
    racks = ("a", "b", "c")
    topics = {f"t{i}": TopicSpec(f"t{i}", 5, alternating_racks(5, racks, shift=i)) for i in (1, 2, 3)}
    with_racks = group(*(member(f"consumer{k}", topics, rack=racks[k]) for k in range(3)), topics=topics)
    without_racks = group(*(member(f"consumer{k}", topics) for k in range(3)), topics=topics)

    answer = assign_range(with_racks)
    assert as_sets(answer) == as_sets(assign_range(without_racks))
    assert as_sets(answer)["consumer0"] == {f"t{i}-{p}" for i in (1, 2, 3) for p in (0, 1)}
    assert mismatches(with_racks, answer) == 10


def test_range_rack_aware_single_topic_gives_each_member_its_local_partitions():
    spec = group(
        member("c0", ["t"], rack="b"),
        member("c1", ["t"], rack="a"),
        topics={"t": TopicSpec("t", 4, alternating_racks(4))},
    )
    assert listed(assign_range(spec)) == {"c0": ["t-1", "t-3"], "c1": ["t-0", "t-2"]}


def test_range_rack_aware_lets_a_later_member_take_the_extra_partition():
    # Racks b, b, a: c0 (rack a) can only use one local partition, so c1 ends up with two.
    racks = (frozenset("b"), frozenset("b"), frozenset("a"))
    spec = group(member("c0", ["t"], rack="a"), member("c1", ["t"], rack="b"), topics={"t": TopicSpec("t", 3, racks)})
    assert listed(assign_range(spec)) == {"c0": ["t-2"], "c1": ["t-0", "t-1"]}


def test_range_rack_aware_splits_topics_that_need_no_rack_logic_by_the_plain_walk():
    # Every partition of t is on rack a only, so t needs no rack logic and is split plainly;
    # u needs it, and c0 (rack a) takes both of its rack-a partitions including the extra one.
    racks = tuple(frozenset("a") for _ in range(4))
    spec = group(
        member("c0", ["t", "u"], rack="a"),
        member("c1", ["t", "u"], rack="b"),
        topics={"t": TopicSpec("t", 4, racks), "u": TopicSpec("u", 3, (frozenset("a"), frozenset("b"), frozenset("a")))},
    )
    assert listed(assign_range(spec)) == {"c0": ["t-0", "t-1", "u-0", "u-2"], "c1": ["t-2", "t-3", "u-1"]}


def test_range_ignores_racks_when_every_partition_is_on_every_rack():
    everywhere = tuple(frozenset(AB) for _ in range(3))
    spec = group(
        member("c0", ["t"], rack="b"), member("c1", ["t"], rack="a"), topics={"t": TopicSpec("t", 3, everywhere)}
    )
    assert listed(assign_range(spec)) == {"c0": ["t-0", "t-1"], "c1": ["t-2"]}


def test_range_treats_an_empty_rack_as_no_rack():
    spec = group(
        member("c0", ["t"], rack=""),
        member("c1", ["t"], rack="a"),
        topics={"t": TopicSpec("t", 4, alternating_racks(4))},
    )
    # c0 matches everything and comes first, so it takes the lowest two; c1 gets the rest.
    assert listed(assign_range(spec)) == {"c0": ["t-0", "t-1"], "c1": ["t-2", "t-3"]}


# --- errors and scale -----------------------------------------------------------------------------


def test_range_rejects_replica_racks_that_do_not_cover_every_partition():
    spec = group(member("c", ["t"], rack="a"), topics={"t": TopicSpec("t", 3, alternating_racks(2))})
    with pytest.raises(InvalidGroupSpecError, match="topic 't' has 3 partitions but replica racks for 2"):
        assign_range(spec)


def test_range_rejects_a_member_id_listed_twice():
    spec = group(member("same", ["t"]), member("same", ["t"]), topics={"t": 2}, group_id="orders")
    with pytest.raises(InvalidGroupSpecError, match="group 'orders': member id 'same'"):
        assign_range(spec)


def test_range_assigns_ten_thousand_members_and_half_a_million_partitions():
    topics = tuple(f"topic-{i}" for i in range(50))
    spec = group(*(member(f"consumer-{i:05d}", topics) for i in range(10_000)), topics={t: 10_000 for t in topics})
    answer = assign_range(spec).assignment
    sizes = [len(parts) for parts in answer.values()]
    assert sum(sizes) == 500_000 and min(sizes) == max(sizes) == 50


@pytest.mark.parametrize("seed", range(40))
def test_range_split_path_equals_the_block_path(seed):
    # Groups with many tiny blocks are split by owner in one array sort, the others built from
    # slices; both must give the same lists in the same (Kafka) order.
    import random

    from assignors.range import _block_ranges, _split_ranges, _topics_in_java_order

    rng = random.Random(seed)
    topics = {f"t{i}": rng.randint(0, 9) for i in range(rng.randint(1, 6))}
    names = list(topics)
    members = [member(f"m{rng.randint(0, 999):03d}-{i}", rng.sample(names, rng.randint(1, len(names))))
               for i in range(rng.randint(1, 12))]
    spec = group(*members, topics=topics)
    ordered = _topics_in_java_order(spec)
    blocks = _block_ranges(spec, ordered, len(members))
    assert blocks == _split_ranges(spec, ordered, len(members))
    subscribed = {t for m in members for t in m.topics}
    assert sum(map(len, blocks)) == sum(count for name, count in topics.items() if name in subscribed)


@pytest.mark.parametrize("missing", [0, 3], ids=["every-topic-exists", "some-topics-missing"])
def test_topic_order_with_colliding_buckets_is_the_hashmap_of_the_hashset(missing):
    # 60 topics in a 128-slot table collide, so the set's insertion order (members in map order)
    # decides ties; partitionsPerTopic is then a HashMap filled from that set's iteration.
    from assignors.java_order import hashmap_order
    from assignors.range import _java_topic_order

    names = [f"topic{i}" for i in range(60)]
    rng = random.Random(11)
    members = [member(f"m{i}", rng.sample(names, 25)) for i in range(8)]
    members.append(member("last", names))
    counts = {name: 2 for name in names[missing:]}
    spec = group(*members, topics={name: 2 for name in names})
    union = list(dict.fromkeys(t for m in members for t in m.topics))
    by_id = {m.member_id: m for m in members}
    insertion = list(dict.fromkeys(t for mid in hashmap_order(list(by_id)) for t in by_id[mid].topics))
    expected = hashmap_order([t for t in hashmap_order(insertion) if t in counts])
    assert _java_topic_order(spec, counts, union) == expected
