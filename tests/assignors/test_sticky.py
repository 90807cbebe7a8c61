"""Eager ``sticky`` assignor, constrained path (identical subscriptions): Kafka-exact scenarios.

Expected lists are ordered where Kafka's tests assert order (spec 7.2): kept partitions in
(partition, topic) order, then new ones in the order they were dealt.
"""

from __future__ import annotations

import numpy as np
import pytest

from assignors.errors import InvalidGroupSpecError
from assignors.java_order import hashmap_order
from assignors.model import GroupSpec, MemberSpec, TopicPartition, TopicSpec
from assignors.sticky import assign_cooperative_sticky, assign_sticky
from assignors.sticky._layout import hashmap_visit_order


def tp(name: str) -> TopicPartition:
    topic, _, p = name.rpartition("-")
    return TopicPartition(topic, int(p))


def tps(*names: str) -> list[TopicPartition]:
    return [tp(n) for n in names]


def group(members, topics: dict[str, int], racks: dict[str, list[str]] | None = None) -> GroupSpec:
    specs = {}
    for name, n in topics.items():
        replica = None
        if racks and name in racks:
            replica = tuple(frozenset([r]) for r in racks[name])
        specs[name] = TopicSpec(name, n, replica)
    return GroupSpec(members=tuple(members), topics=specs)


def member(mid, topics, owned=(), generation=-1, rack=None) -> MemberSpec:
    return MemberSpec(mid, tuple(topics), tuple(tp(o) for o in owned), generation, rack=rack)


T12 = ("topic1", "topic2")


def test_fresh_two_members_two_topics_interleave_partitions():
    spec = group([member("consumer1", T12), member("consumer2", T12)], {"topic1": 3, "topic2": 3})
    result = assign_sticky(spec)
    assert result.assignment == {
        "consumer1": tps("topic1-0", "topic1-2", "topic2-1"),
        "consumer2": tps("topic1-1", "topic2-0", "topic2-2"),
    }
    assert result.transferring == {}


def test_fresh_four_members_deal_round_robin_in_member_id_order():
    spec = group([member(m, ["t"]) for m in ("a", "aa", "b", "c")], {"t": 10})
    assert assign_sticky(spec).assignment == {
        "a": tps("t-0", "t-4", "t-8"),
        "aa": tps("t-1", "t-5", "t-9"),
        "b": tps("t-2", "t-6"),
        "c": tps("t-3", "t-7"),
    }


def test_second_member_joins_and_takes_the_highest_partition_then_first_leaves():
    spec = group(
        [member("consumer1", ["t"], ["t-0", "t-1", "t-2"], 1), member("consumer2", ["t"])], {"t": 3}
    )
    result = assign_sticky(spec).assignment
    assert result == {"consumer1": tps("t-0", "t-1"), "consumer2": tps("t-2")}

    after_leave = group([member("consumer2", ["t"], ["t-2"], 2)], {"t": 3})
    assert assign_sticky(after_leave).assignment == {"consumer2": tps("t-2", "t-0", "t-1")}


def test_two_members_join_two_owners_of_seven_partitions():
    spec = group(
        [
            member("consumer1", T12, ["topic1-0", "topic1-2", "topic2-1", "topic2-3"], 1),
            member("consumer2", T12, ["topic1-1", "topic2-0", "topic2-2"], 1),
            member("consumer3", T12),
            member("consumer4", T12),
        ],
        {"topic1": 3, "topic2": 4},
    )
    assert assign_sticky(spec).assignment == {
        "consumer1": tps("topic1-0", "topic2-1"),
        "consumer2": tps("topic2-0", "topic1-1"),
        "consumer3": tps("topic1-2", "topic2-3"),
        "consumer4": tps("topic2-2"),
    }


def test_the_two_owners_leave_and_the_newcomers_split_everything():
    spec = group(
        [
            member("consumer3", T12, ["topic1-2", "topic2-3"], 2),
            member("consumer4", T12, ["topic2-2"], 2),
        ],
        {"topic1": 3, "topic2": 4},
    )
    assert assign_sticky(spec).assignment == {
        "consumer3": tps("topic1-2", "topic2-3", "topic1-0", "topic2-1"),
        "consumer4": tps("topic2-2", "topic1-1", "topic2-0"),
    }


def test_new_partition_goes_to_the_first_member_at_min_quota():
    spec = group(
        [
            member("consumer1", T12, ["topic1-0", "topic2-1"], 1),
            member("consumer2", T12, ["topic1-1", "topic2-2"], 1),
        ],
        {"topic1": 2, "topic2": 3},
    )
    assert assign_sticky(spec).assignment == {
        "consumer1": tps("topic1-0", "topic2-1", "topic2-0"),
        "consumer2": tps("topic1-1", "topic2-2"),
    }


def test_who_keeps_max_quota_follows_java_hashmap_order():
    # consumer2 is visited before consumer1, so it keeps both of its partitions.
    spec = group(
        [
            member("consumer1", T12, ["topic1-0", "topic2-0"], 1),
            member("consumer2", T12, ["topic1-1", "topic2-1"], 1),
            member("consumer3", T12),
        ],
        {"topic1": 2, "topic2": 2},
    )
    assert assign_sticky(spec).assignment == {
        "consumer1": tps("topic1-0"),
        "consumer2": tps("topic1-1", "topic2-1"),
        "consumer3": tps("topic2-0"),
    }


def test_new_topic_partitions_fill_the_member_with_nothing_first():
    spec = group(
        [
            member("consumer1", T12, ["topic1-0"], 1),
            member("consumer2", T12, ["topic1-1"], 1),
            member("consumer3", T12, [], 1),
        ],
        {"topic1": 2, "topic2": 3},
    )
    assert assign_sticky(spec).assignment == {
        "consumer1": tps("topic1-0", "topic2-1"),
        "consumer2": tps("topic1-1", "topic2-2"),
        "consumer3": tps("topic2-0"),
    }


def test_unbalanced_owners_keep_what_fits_and_newcomer_gets_the_rest():
    spec = group(
        [
            member("consumer1", ["t"], ["t-0", "t-1"], 1),
            member("consumer2", ["t"], ["t-2"], 1),
            member("consumer3", ["t"]),
        ],
        {"t": 4},
    )
    assert assign_sticky(spec).assignment == {
        "consumer1": tps("t-0", "t-1"),
        "consumer2": tps("t-2"),
        "consumer3": tps("t-3"),
    }


@pytest.mark.parametrize(
    "partitions, expected_c1",
    [(3, tps("t-1")), (4, tps("t-1", "t-3"))],
)
def test_same_generation_double_claim_is_voided_for_both_claimants(partitions, expected_c1):
    spec = group(
        [
            member("consumer1", ["t"], ["t-0", "t-1"], 1),
            member("consumer2", ["t"], ["t-0", "t-2"], 1),
            member("consumer3", ["t"]),
        ],
        {"t": partitions},
    )
    assert assign_sticky(spec).assignment == {
        "consumer1": expected_c1,
        "consumer2": tps("t-2"),
        "consumer3": tps("t-0"),
    }


@pytest.mark.parametrize("stale_generation", [9, -1])
def test_older_or_absent_generation_loses_the_claim(stale_generation):
    topics = ("topic", "topic2")
    claimed = ["topic-0", "topic-2", "topic2-1"]
    spec = group(
        [
            member("consumer1", topics, claimed, 10),
            member("consumer2", topics, claimed, stale_generation),
        ],
        {"topic": 3, "topic2": 3},
    )
    result = assign_sticky(spec).assignment
    assert sorted(result["consumer1"]) == sorted(tps(*claimed))
    assert sorted(result["consumer2"]) == tps("topic-1", "topic2-0", "topic2-2")


def test_highest_generation_wins_each_partition_separately():
    topics = ("topic", "topic2", "topic3")
    spec = group(
        [
            member("consumer1", topics, ["topic-0", "topic2-0", "topic3-0"], 10),
            member("consumer2", topics, ["topic-1", "topic2-1", "topic3-1"], 9),
            member("consumer3", topics, ["topic2-1", "topic3-0", "topic3-2"], 8),
        ],
        {"topic": 3, "topic2": 3, "topic3": 3},
    )
    result = {m: sorted(p) for m, p in assign_sticky(spec).assignment.items()}
    assert result == {
        "consumer1": tps("topic-0", "topic2-0", "topic3-0"),
        "consumer2": tps("topic-1", "topic2-1", "topic3-1"),
        "consumer3": tps("topic-2", "topic2-2", "topic3-2"),
    }


def test_member_without_generation_gets_exactly_the_unowned_partitions():
    topics = ("t1", "t2", "t3")
    spec = group(
        [
            member("consumer1", topics, ["t1-0", "t1-1", "t2-0"], 9),
            member("consumer2", topics, ["t1-3", "t2-2", "t2-3"], 8),
            member("consumer3", topics, ["t3-1", "t3-2", "t3-3"], 7),
            member("consumer4", topics),
        ],
        {"t1": 4, "t2": 4, "t3": 4},
    )
    for assign in (assign_sticky, assign_cooperative_sticky):
        result = assign(spec)
        assert sorted(result.assignment["consumer4"]) == tps("t1-2", "t2-1", "t3-0")
        assert result.transferring == {}


def test_deleted_topic_is_skipped_and_the_rest_goes_to_the_only_member():
    topics = ("topic1", "topic2", "topic3")
    spec = group([member("consumer", topics)], {"topic1": 1, "topic3": 100})
    result = assign_sticky(spec).assignment["consumer"]
    assert len(result) == 101
    assert set(result) == {TopicPartition("topic1", 0)} | {TopicPartition("topic3", p) for p in range(100)}

    only_deleted = group([member("consumer", ["topic2"], ["topic2-0"], 3)], {})
    assert assign_sticky(only_deleted).assignment == {"consumer": []}


def test_owned_partitions_of_an_unsubscribed_topic_are_dropped():
    spec = group([member("consumer", ["topic"], ["topic-0", "other-0"], 1)], {"topic": 2, "other": 1})
    assert assign_sticky(spec).assignment == {"consumer": tps("topic-0", "topic-1")}


def test_member_leaves_and_the_others_keep_their_single_partitions():
    ids = ["consumer1", "consumer2", "consumer3", "consumer4"]
    first = assign_sticky(group([member(m, ["t"]) for m in ids], {"t": 3})).assignment
    leaver = next(m for m in ids if first[m])
    rest = [member(m, ["t"], [f"{p.topic}-{p.partition}" for p in first[m]], 1) for m in ids if m != leaver]
    second = assign_sticky(group(rest, {"t": 3})).assignment
    assert all(len(p) == 1 for p in second.values())
    assert all(set(first[m]) <= set(second[m]) for m in second)


def test_rack_aware_uniform_subscription_aligns_every_partition():
    # RF 1 over racks a, b, c; the rack index keeps counting across topics as in Kafka's tests.
    rack_cycle = "abc"
    counts = {"t1": 6, "t2": 7, "t3": 2}
    racks, start = {}, 0
    for name, n in counts.items():
        racks[name] = [rack_cycle[(start + p) % 3] for p in range(n)]
        start += n
    topics = tuple(counts)
    spec = group(
        [member(f"consumer{i}", topics, rack=rack_cycle[i]) for i in range(3)], counts, racks
    )
    result = assign_sticky(spec).assignment
    assert result == {
        "consumer0": tps("t1-0", "t1-3", "t2-0", "t2-3", "t2-6"),
        "consumer1": tps("t1-1", "t1-4", "t2-1", "t2-4", "t3-0"),
        "consumer2": tps("t1-2", "t1-5", "t2-2", "t2-5", "t3-1"),
    }


def test_rack_aware_owned_partition_on_another_rack_is_not_kept():
    racks = {"t": ["a", "b", "a", "b"]}
    spec = group(
        [
            member("consumer1", ["t"], ["t-0", "t-1"], 1, rack="a"),
            member("consumer2", ["t"], ["t-2", "t-3"], 1, rack="b"),
        ],
        {"t": 4},
        racks,
    )
    eager = assign_sticky(spec).assignment
    assert eager == {"consumer1": tps("t-0", "t-2"), "consumer2": tps("t-3", "t-1")}
    cooperative = assign_cooperative_sticky(spec)
    assert cooperative.assignment == {"consumer1": tps("t-0"), "consumer2": tps("t-3")}
    assert cooperative.transferring == {tp("t-2"): "consumer1", tp("t-1"): "consumer2"}


def test_rack_round_robin_stops_offering_extra_slots_once_they_are_used():
    # KAFKA-15170: after the last "over" slot is taken in the rack pass, nobody at minQuota may
    # take another partition; 5 partitions over 2 members means exactly one member gets 3.
    racks = {"t": ["a", "a", "a", "a", "b"]}
    spec = group(
        [member("consumer1", ["t"], rack="a"), member("consumer2", ["t"], rack="b")], {"t": 5}, racks
    )
    result = assign_sticky(spec).assignment
    assert sorted(len(p) for p in result.values()) == [2, 3]
    assert set(result["consumer1"]) | set(result["consumer2"]) == set(tps(*(f"t-{p}" for p in range(5))))


def test_empty_subscription_member_visited_first_gets_nothing():
    # consumer3 is visited first (Java HashMap order consumer3, consumer2, consumer1); Kafka
    # would hand it partitions of a topic it does not subscribe to.
    assert hashmap_order(["consumer1", "consumer2", "consumer3"])[0] == "consumer3"
    spec = group(
        [member("consumer1", ["t"]), member("consumer2", ["t"]), member("consumer3", [], ["t-1"], 1)],
        {"t": 4},
    )
    eager = assign_sticky(spec)
    assert eager.assignment["consumer3"] == []
    assert sorted(eager.assignment["consumer1"] + eager.assignment["consumer2"]) == tps(
        "t-0", "t-1", "t-2", "t-3"
    )
    cooperative = assign_cooperative_sticky(spec)
    assert cooperative.assignment["consumer3"] == []
    # it still owned t-1, so whoever gets t-1 waits for the revocation
    assert tp("t-1") in cooperative.transferring


def test_duplicate_member_id_is_rejected_with_its_name():
    spec = group([member("dup", ["t"]), member("dup", ["t"])], {"t": 1})
    with pytest.raises(InvalidGroupSpecError, match="dup"):
        assign_sticky(spec)


def test_no_state_survives_between_calls():
    # Kafka keeps maxGeneration in the assignor instance; a high generation seen once must not
    # make later, lower generations look stale.
    later = group(
        [member("consumer1", ["t"], ["t-0"], 1), member("consumer2", ["t"], ["t-1"], 1)], {"t": 2}
    )
    before = assign_sticky(later).assignment
    assign_sticky(group([member("x", ["t"], ["t-0"], 100)], {"t": 2}))
    assert assign_sticky(later).assignment == before == {
        "consumer1": tps("t-0"),
        "consumer2": tps("t-1"),
    }


def test_fast_hashmap_order_matches_the_reference_emulation():
    rng = np.random.default_rng(7)
    for n in (1, 3, 12, 13, 100, 1000):
        ids = [f"member-{int(x)}-{'y' * int(rng.integers(0, 5))}" for x in rng.integers(0, 10**9, n)]
        ids = list(dict.fromkeys(ids))
        fast = [ids[i] for i in hashmap_visit_order(ids)]
        assert fast == hashmap_order(ids)
        # Non-ASCII ids take the per-string hash, below and above the vectorised size.
        accented = [f"{member_id}-é" for member_id in ids]
        assert [accented[i] for i in hashmap_visit_order(accented)] == hashmap_order(accented)


def test_claim_of_a_partition_number_the_topic_lacks_is_ignored():
    spec = group([member("c1", ["t"], ["t-7", "t-1"], 1), member("c2", ["t"])], {"t": 2})
    result = assign_sticky(spec).assignment
    assert result == {"c1": tps("t-1"), "c2": tps("t-0")}


def _through_the_constrained_builder(spec: GroupSpec):
    """The constrained builder's answer, bypassing the first-assignment shortcut."""
    from assignors.sticky import _answer
    from assignors.sticky._constrained import build_constrained
    from assignors.sticky._layout import build_layout, collect_claims
    from assignors.sticky._ownership import resolve_ownership
    from assignors.sticky._racks import rack_info

    members = spec.members
    layout = build_layout(spec)
    claims = collect_claims(members, layout)
    visit = hashmap_visit_order([m.member_id for m in members])
    resolve_ownership(members, visit, claims)
    subscribed = np.array([bool(m.topics) for m in members], dtype=bool)
    draft = build_constrained(
        members, np.flatnonzero(subscribed), visit[subscribed[visit]], layout, claims,
        rack_info(spec, members, layout), spec.group_id,
    )
    return _answer(spec, layout, claims, draft, cooperative=True)


@pytest.mark.parametrize("seed", range(60))
def test_first_assignment_shortcut_equals_the_constrained_builder(seed):
    # With nothing owned and no racks the facade deals strided slices instead of running the
    # builder; lists and their order must be the builder's, for more or fewer partitions than members.
    rng = np.random.default_rng(seed)
    n_members = int(rng.integers(1, 40))
    topics = {f"t{i}": int(rng.integers(0, 12)) for i in range(int(rng.integers(1, 6)))}
    if not any(topics.values()):
        topics["t0"] = 1
    names = list(topics)
    ids = [f"c{int(x)}" for x in rng.choice(1000, size=n_members, replace=False)]
    members = [member(mid, [] if rng.random() < 0.1 else rng.permutation(names).tolist()) for mid in ids]
    if not any(m.topics for m in members):
        members[0] = member(ids[0], names)
    spec = group(members, topics)
    expected = _through_the_constrained_builder(spec).assignment
    assert assign_sticky(spec).assignment == expected
    shortcut = assign_cooperative_sticky(spec)
    assert shortcut.assignment == expected
    assert shortcut.transferring == {}
    assert sum(len(v) for v in expected.values()) == sum(topics.values())
