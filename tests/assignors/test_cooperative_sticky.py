"""``cooperative-sticky``: partitions changing owner are withheld for one round (spec 3.5)."""

from __future__ import annotations

from assignors.model import GroupAssignment, GroupSpec, MemberSpec, TopicPartition, TopicSpec
from assignors.sticky import assign_cooperative_sticky


def tp(name: str) -> TopicPartition:
    topic, _, p = name.rpartition("-")
    return TopicPartition(topic, int(p))


def tps(*names: str) -> list[TopicPartition]:
    return [tp(n) for n in names]


def group(members, topics: dict[str, int]) -> GroupSpec:
    return GroupSpec(members=tuple(members), topics={n: TopicSpec(n, c) for n, c in topics.items()})


def member(mid, topics, owned=(), generation=-1) -> MemberSpec:
    return MemberSpec(mid, tuple(topics), tuple(tp(o) for o in owned), generation)


def next_round(spec: GroupSpec, result: GroupAssignment, generation: int) -> GroupSpec:
    """Every member rejoins owning what it was given, one generation later."""
    members = tuple(
        MemberSpec(m.member_id, m.topics, tuple(result.assignment[m.member_id]), generation)
        for m in spec.members
    )
    return GroupSpec(members=members, topics=spec.topics)


T12 = ("topic1", "topic2")


def test_joining_member_waits_one_round_for_the_partition_it_takes():
    spec = group([member("consumer1", ["t"], ["t-0", "t-1", "t-2"], 1), member("consumer2", ["t"])], {"t": 3})
    first = assign_cooperative_sticky(spec)
    assert first.assignment == {"consumer1": tps("t-0", "t-1"), "consumer2": []}
    assert first.transferring == {tp("t-2"): "consumer2"}

    second = assign_cooperative_sticky(next_round(spec, first, 2))
    assert second.assignment == {"consumer1": tps("t-0", "t-1"), "consumer2": tps("t-2")}
    assert second.transferring == {}


def test_two_joiners_wait_for_three_revoked_partitions():
    spec = group(
        [
            member("consumer1", T12, ["topic1-0", "topic1-2", "topic2-1", "topic2-3"], 1),
            member("consumer2", T12, ["topic1-1", "topic2-0", "topic2-2"], 1),
            member("consumer3", T12),
            member("consumer4", T12),
        ],
        {"topic1": 3, "topic2": 4},
    )
    first = assign_cooperative_sticky(spec)
    assert first.assignment == {
        "consumer1": tps("topic1-0", "topic2-1"),
        "consumer2": tps("topic2-0", "topic1-1"),
        "consumer3": [],
        "consumer4": [],
    }
    assert first.transferring == {
        tp("topic1-2"): "consumer3",
        tp("topic2-3"): "consumer3",
        tp("topic2-2"): "consumer4",
    }
    second = assign_cooperative_sticky(next_round(spec, first, 2))
    assert second.assignment == {
        "consumer1": tps("topic1-0", "topic2-1"),
        "consumer2": tps("topic2-0", "topic1-1"),
        "consumer3": tps("topic1-2", "topic2-3"),
        "consumer4": tps("topic2-2"),
    }
    assert second.transferring == {}


def test_hashmap_order_decides_who_gives_up_a_partition_to_the_newcomer():
    spec = group(
        [
            member("consumer1", T12, ["topic1-0", "topic2-0"], 1),
            member("consumer2", T12, ["topic1-1", "topic2-1"], 1),
            member("consumer3", T12),
        ],
        {"topic1": 2, "topic2": 2},
    )
    result = assign_cooperative_sticky(spec)
    assert result.assignment == {
        "consumer1": tps("topic1-0"),
        "consumer2": tps("topic1-1", "topic2-1"),
        "consumer3": [],
    }
    assert result.transferring == {tp("topic2-0"): "consumer3"}


def test_partitions_nobody_owned_are_given_at_once():
    spec = group(
        [
            member("consumer1", T12, ["topic1-0"], 1),
            member("consumer2", T12, ["topic1-1"], 1),
            member("consumer3", T12, [], 1),
        ],
        {"topic1": 2, "topic2": 3},
    )
    result = assign_cooperative_sticky(spec)
    assert result.assignment == {
        "consumer1": tps("topic1-0", "topic2-1"),
        "consumer2": tps("topic1-1", "topic2-2"),
        "consumer3": tps("topic2-0"),
    }
    assert result.transferring == {}


def test_doubly_claimed_partition_is_withheld_from_everybody_for_a_round():
    for partitions, c1 in ((3, tps("t-1")), (4, tps("t-1", "t-3"))):
        spec = group(
            [
                member("consumer1", ["t"], ["t-0", "t-1"], 1),
                member("consumer2", ["t"], ["t-0", "t-2"], 1),
                member("consumer3", ["t"]),
            ],
            {"t": partitions},
        )
        result = assign_cooperative_sticky(spec)
        assert result.assignment == {"consumer1": c1, "consumer2": tps("t-2"), "consumer3": []}
        assert result.transferring == {tp("t-0"): "consumer3"}


def test_partitions_of_a_member_that_left_are_reassigned_immediately():
    spec = group(
        [member("consumer2", ["t"], ["t-2"], 2)],  # consumer1 (owner of t-0, t-1) left
        {"t": 3},
    )
    result = assign_cooperative_sticky(spec)
    assert result.assignment == {"consumer2": tps("t-2", "t-0", "t-1")}
    assert result.transferring == {}


def test_stale_claim_loses_without_withholding_the_winner():
    topics = ("topic", "topic2")
    claimed = ["topic-0", "topic-2", "topic2-1"]
    spec = group(
        [member("consumer1", topics, claimed, 10), member("consumer2", topics, claimed, 9)],
        {"topic": 3, "topic2": 3},
    )
    result = assign_cooperative_sticky(spec)
    assert sorted(result.assignment["consumer1"]) == sorted(tps(*claimed))
    assert sorted(result.assignment["consumer2"]) == tps("topic-1", "topic2-0", "topic2-2")
    assert result.transferring == {}


def test_eager_variant_never_withholds():
    from assignors.sticky import assign_sticky

    spec = group([member("consumer1", ["t"], ["t-0", "t-1", "t-2"], 1), member("consumer2", ["t"])], {"t": 3})
    result = assign_sticky(spec)
    assert result.assignment == {"consumer1": tps("t-0", "t-1"), "consumer2": tps("t-2")}
    assert result.transferring == {}
