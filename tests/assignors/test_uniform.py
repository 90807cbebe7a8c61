"""KIP-848 UniformAssignor scenarios (spec sections 6.1-6.2; catalogue items 45-50, 52).

Members are listed in the order of Kafka's tests (a TreeMap: A, B, C). Kafka orders topics by the
hash of their ids where this port uses topic names; scenario 46 shows the one place where that
changes the answer, and how to reproduce Kafka's answer by naming the topics accordingly.
"""

from __future__ import annotations

import time

import pytest

from assignors import AssignmentError, InvalidGroupSpecError
from assignors.metrics import balance_metrics, validate
from assignors.uniform import assign_uniform, assign_uniform_heterogeneous, assign_uniform_homogeneous

from .conftest import group, listed, member, tps


# --- homogeneous (6.1) ----------------------------------------------------------------------------


def test_uniform_homogeneous_trims_an_unbalanced_previous_assignment_to_the_quota():
    spec = group(
        member("A", ["t1", "t2"], tps("t1", 0, 1) + tps("t2", 0, 1)),
        member("B", ["t1", "t2"], tps("t1", 2) + tps("t2", 2)),
        topics={"t1": 3, "t2": 3},
    )
    assert listed(assign_uniform(spec)) == {"A": ["t1-0", "t1-1", "t2-0"], "B": ["t1-2", "t2-1", "t2-2"]}


def test_uniform_homogeneous_hands_out_added_partitions_in_topic_name_order():
    spec = group(
        member("A", ["t1", "t2"], tps("t1", 0, 2) + tps("t2", 0)),
        member("B", ["t1", "t2"], tps("t1", 1) + tps("t2", 1, 2)),
        topics={"t1": 6, "t2": 5},
    )
    # A (quota 6) has 3 and takes the first three unowned partitions, all of t1 since t1 < t2.
    assert listed(assign_uniform(spec)) == {
        "A": ["t1-0", "t1-2", "t1-3", "t1-4", "t1-5", "t2-0"],
        "B": ["t1-1", "t2-1", "t2-2", "t2-3", "t2-4"],
    }


def test_uniform_homogeneous_matches_kafkas_answer_when_topic_names_sort_like_its_topic_ids():
    # Kafka's test topic ids iterate topic2 before topic1; name them so that the names do too.
    topic1, topic2 = "b-topic1", "a-topic2"
    spec = group(
        member("A", [topic1, topic2], tps(topic1, 0, 2) + tps(topic2, 0)),
        member("B", [topic1, topic2], tps(topic1, 1) + tps(topic2, 1, 2)),
        topics={topic1: 6, topic2: 5},
    )
    answer = listed(assign_uniform(spec))
    assert sorted(answer["A"]) == sorted(["b-topic1-0", "b-topic1-2", "b-topic1-3", "a-topic2-0", "a-topic2-3", "a-topic2-4"])
    assert sorted(answer["B"]) == sorted(["b-topic1-1", "b-topic1-4", "b-topic1-5", "a-topic2-1", "a-topic2-2"])


def test_uniform_homogeneous_gives_the_extra_partitions_to_the_first_members_in_order():
    # 7 partitions over 3 members: quotas 3, 2, 2 by position, whatever they own.
    spec = group(
        member("A", ["t"], tps("t", 0, 1)),
        member("B", ["t"], tps("t", 2, 3, 4)),
        member("C", ["t"], tps("t", 5, 6)),
        topics={"t": 7},
    )
    assert listed(assign_uniform(spec)) == {"A": ["t-0", "t-1", "t-4"], "B": ["t-2", "t-3"], "C": ["t-5", "t-6"]}


def test_uniform_homogeneous_member_leaving_moves_only_its_partitions():
    first = assign_uniform(group(*(member(m, ["t"]) for m in "ABC"), topics={"t": 6})).assignment
    assert {m: [p for _, p in parts] for m, parts in first.items()} == {"A": [0, 1], "B": [2, 3], "C": [4, 5]}
    spec = group(*(member(m, ["t"], first[m]) for m in "AB"), topics={"t": 6})
    assert listed(assign_uniform(spec)) == {"A": ["t-0", "t-1", "t-4"], "B": ["t-2", "t-3", "t-5"]}


def test_uniform_homogeneous_fresh_group_fills_members_with_contiguous_slices():
    spec = group(member("A", ["t1", "t2"]), member("B", ["t1", "t2"]), topics={"t1": 3, "t2": 2})
    assert listed(assign_uniform(spec)) == {"A": ["t1-0", "t1-1", "t1-2"], "B": ["t2-0", "t2-1"]}


def test_uniform_homogeneous_builder_refuses_different_subscriptions():
    spec = group(member("A", ["t1"]), member("B", ["t2"]), topics={"t1": 1, "t2": 1})
    with pytest.raises(InvalidGroupSpecError, match="subscribe to different topics"):
        assign_uniform_homogeneous(spec)


def test_uniform_handles_ninety_nine_topics_over_forty_nine_members():
    topics = [f"t{i:02d}" for i in range(99)]
    spec = group(*(member(f"m{i:02d}", topics) for i in range(49)), topics={t: 3 for t in topics})
    answer = assign_uniform(spec)
    assert validate(spec, answer) == []
    # 297 partitions: the first 297 % 49 = 3 members get 7, the rest 6, in contiguous slices.
    sizes = [len(parts) for parts in answer.assignment.values()]
    assert sizes == [7, 7, 7] + [6] * 46
    assert listed(answer)["m00"] == ["t00-0", "t00-1", "t00-2", "t01-0", "t01-1", "t01-2", "t02-0"]
    assert listed(answer)["m48"] == ["t97-0", "t97-1", "t97-2", "t98-0", "t98-1", "t98-2"]


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


def test_uniform_rejects_a_subscription_to_an_unknown_topic_naming_it():
    spec = group(member("A", ["known", "ghost"]), topics={"known": 2}, group_id="payments")
    with pytest.raises(AssignmentError, match="group 'payments': member 'A' subscribes to topic 'ghost'"):
        assign_uniform(spec)
    heterogeneous = group(member("A", ["known"]), member("B", ["ghost"]), topics={"known": 2})
    with pytest.raises(AssignmentError, match="'ghost'"):
        assign_uniform(heterogeneous)


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
    started = time.perf_counter()
    answer = assign_uniform(spec).assignment
    elapsed = time.perf_counter() - started
    assert all(answer[m.member_id] == list(m.owned_partitions) for m in stayers)
    assert sorted(answer["newcomer"]) == sorted(first["c00000"])
    assert elapsed < 10.0, f"took {elapsed:.2f}s"
