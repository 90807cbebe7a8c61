"""Kafka 4.1's server-side range assignor scenarios (spec section 6.3; catalogue items 50-51).

Expected answers were checked against Kafka 4.1.1's own ``RangeAssignor`` (jvm/reference).
"""

from __future__ import annotations

from assignors.server_range import assign_server_range

from .conftest import group, listed, member, tps


def test_server_range_splits_each_topic_over_its_subscribers_in_member_order():
    spec = group(
        member("A", ["t1", "t2"]),
        member("B", ["t3"]),
        member("C", ["t2", "t3"]),
        topics={"t1": 3, "t2": 3, "t3": 2},
    )
    assert listed(assign_server_range(spec)) == {
        "A": ["t1-0", "t1-1", "t1-2", "t2-0", "t2-1"],
        "B": ["t3-0"],
        "C": ["t2-2", "t3-1"],
    }


def test_server_range_static_member_rejoining_with_a_new_member_id_keeps_its_ranges():
    def spec(rejoined_id: str):
        return group(
            member("A", ["t1", "t2"], instance="instance-a"),
            member(rejoined_id, ["t1", "t2"], instance="instance-b"),
            member("C", ["t1", "t2"]),
            topics={"t1": 5, "t2": 4},
        )

    before, after = listed(assign_server_range(spec("B-1"))), listed(assign_server_range(spec("0-new")))
    assert before["B-1"] == after["0-new"] == ["t1-2", "t1-3", "t2-2"]
    assert before["A"] == after["A"] == ["t1-0", "t1-1", "t2-0", "t2-1"]
    assert before["C"] == after["C"] == ["t1-4", "t2-3"]


def test_server_range_is_not_sticky_and_ignores_owned_partitions():
    spec = group(member("A", ["t"], tps("t", 2, 3)), member("B", ["t"], tps("t", 0, 1)), topics={"t": 4})
    assert listed(assign_server_range(spec)) == {"A": ["t-0", "t-1"], "B": ["t-2", "t-3"]}


def test_server_range_gives_extra_partitions_to_the_first_members_and_nothing_beyond_the_count():
    spec = group(*(member(f"m{i}", ["t"]) for i in range(4)), topics={"t": 2})
    assert listed(assign_server_range(spec)) == {"m0": ["t-0"], "m1": ["t-1"], "m2": [], "m3": []}


def test_server_range_gives_a_member_without_subscriptions_an_empty_list():
    spec = group(member("A", []), member("B", ["t"]), topics={"t": 2})
    assert listed(assign_server_range(spec)) == {"A": [], "B": ["t-0", "t-1"]}


def test_server_range_skips_a_subscription_to_a_topic_missing_from_the_metadata():
    spec = group(member("A", ["t"]), member("B", ["t", "gone"]), topics={"t": 2}, group_id="billing")
    assert listed(assign_server_range(spec)) == {"A": ["t-0"], "B": ["t-1"]}


def test_server_range_orders_ids_as_java_strings():
    # Java compares UTF-16 code units: U+1F600 (surrogates D83D DE00) sorts before U+FF01, where
    # Python's code-point order puts it after. Static members first, by instance id.
    spec = group(
        member("\uff01", ["t"]), member("\U0001f600", ["t"]),
        member("z", ["t"], instance="\uff01x"), member("y", ["t"], instance="\U0001f600x"),
        topics={"t": 3},
    )
    assert listed(assign_server_range(spec)) == {"\uff01": [], "\U0001f600": ["t-2"], "z": ["t-1"], "y": ["t-0"]}


def test_server_range_assigns_ten_thousand_members_and_half_a_million_partitions():
    topics = tuple(f"topic-{i}" for i in range(10))
    spec = group(*(member(f"consumer-{i:05d}", topics) for i in range(10_000)), topics={t: 50_000 for t in topics})
    answer = assign_server_range(spec).assignment
    assert answer["consumer-09999"] == [(t, p) for t in sorted(topics) for p in range(49_995, 50_000)]
    assert sum(len(parts) for parts in answer.values()) == 500_000
