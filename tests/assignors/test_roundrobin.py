"""Client RoundRobinAssignor scenarios (spec section 2; catalogue items 8-10). Kafka's tests assert
list order here, so these compare lists."""

from __future__ import annotations


from assignors.roundrobin import assign_roundrobin

from .conftest import group, listed, member


def test_roundrobin_deals_partitions_alternately_across_topics():
    spec = group(member("C0", ["t0", "t1"]), member("C1", ["t0", "t1"]), topics={"t0": 3, "t1": 3})
    assert listed(assign_roundrobin(spec)) == {
        "C0": ["t0-0", "t0-2", "t1-1"],
        "C1": ["t0-1", "t1-0", "t1-2"],
    }


def test_roundrobin_skips_members_not_subscribed_and_can_be_unbalanced():
    spec = group(
        member("C0", ["t0"]),
        member("C1", ["t0", "t1"]),
        member("C2", ["t0", "t1", "t2"]),
        topics={"t0": 1, "t1": 2, "t2": 3},
    )
    assert listed(assign_roundrobin(spec)) == {
        "C0": ["t0-0"],
        "C1": ["t1-0"],
        "C2": ["t1-1", "t2-0", "t2-1", "t2-2"],
    }


def test_roundrobin_deals_to_static_members_first_and_a_replaced_dynamic_member_gets_the_same_partitions():
    def spec(dynamic_id: str):
        return group(
            member("c3", ["t1", "t2"], instance="i3"),
            member("c1", ["t1", "t2"], instance="i1"),
            member(dynamic_id, ["t1", "t2"]),
            member("c2", ["t1", "t2"], instance="i2"),
            topics={"t1": 3, "t2": 3},
        )

    first = listed(assign_roundrobin(spec("consumer-4")))
    assert first == {
        "c3": ["t1-2"],
        "c1": ["t1-0", "t2-1"],
        "consumer-4": ["t2-0"],
        "c2": ["t1-1", "t2-2"],
    }
    second = listed(assign_roundrobin(spec("consumer-5")))
    assert second["consumer-5"] == first["consumer-4"]
    assert {k: v for k, v in second.items() if k != "consumer-5"} == {
        k: v for k, v in first.items() if k != "consumer-4"
    }


def test_roundrobin_lays_out_topics_by_name_not_by_subscription_order():
    spec = group(member("a", ["zeta", "alpha"]), member("b", ["zeta", "alpha"]), topics={"zeta": 2, "alpha": 1})
    assert listed(assign_roundrobin(spec)) == {"a": ["alpha-0", "zeta-1"], "b": ["zeta-0"]}


def test_roundrobin_cursor_wraps_to_the_first_subscriber():
    # After t0 the cursor sits past the last member; t1's only subscriber is the first member.
    spec = group(member("m1", ["t0", "t1"]), member("m2", ["t0"]), topics={"t0": 2, "t1": 2})
    assert listed(assign_roundrobin(spec)) == {"m1": ["t0-0", "t1-0", "t1-1"], "m2": ["t0-1"]}


def test_roundrobin_keeps_members_without_partitions_and_skips_unknown_topics():
    spec = group(member("x", ["t", "missing"]), member("y", ["t"]), member("z", []), topics={"t": 1})
    assert listed(assign_roundrobin(spec)) == {"x": ["t-0"], "y": [], "z": []}


def test_roundrobin_assigns_ten_thousand_members_and_half_a_million_partitions():
    topics = tuple(f"topic-{i}" for i in range(500))
    spec = group(*(member(f"consumer-{i:05d}", topics) for i in range(10_000)), topics={t: 1_000 for t in topics})
    answer = assign_roundrobin(spec).assignment
    sizes = [len(parts) for parts in answer.values()]
    assert sum(sizes) == 500_000 and min(sizes) == max(sizes) == 50
    # Dealing 10,000 at a time over topics in name order: the second member's second partition is
    # global position 10,001, i.e. partition 1 of the 11th topic by name.
    assert answer["consumer-00001"][:2] == [("topic-0", 1), (sorted(topics)[10], 1)]


def _random_group(seed: int):
    import random

    rng = random.Random(seed)
    topics = {f"t{i}": rng.randint(0, 9) for i in range(rng.randint(1, 6))}
    names = list(topics)
    everyone = rng.random() < 0.3
    members = [
        member(f"m{rng.randint(0, 999):03d}-{i}", names if everyone else rng.sample(names, rng.randint(1, len(names))))
        for i in range(rng.randint(1, 12))
    ]
    return group(*members, topics=topics)


def test_roundrobin_array_path_equals_the_sliced_paths(monkeypatch):
    # Small groups take the per-topic slices (or one strided slice when everyone subscribes to
    # everything); large ones with tiny blocks take the array path. Same lists, same order.
    import assignors.roundrobin as roundrobin

    specs = [_random_group(seed) for seed in range(200)]
    sliced = [listed(assign_roundrobin(spec)) for spec in specs]
    monkeypatch.setattr(roundrobin, "FORCE_SPLIT", True)
    assert [listed(assign_roundrobin(spec)) for spec in specs] == sliced
