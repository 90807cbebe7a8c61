"""Balance metrics and the validity check (assignors/metrics.py)."""

from __future__ import annotations

from itertools import combinations

from hypothesis import given, settings
from hypothesis import strategies as st

import pytest

from assignors import GroupAssignment, TopicPartition
from assignors.metrics import balance_metrics, balance_score, validate
from assignors.uniform import assign_uniform

from .conftest import group, member, tps


def test_balance_score_is_the_sum_of_pairwise_differences():
    sizes = [4, 0, 7, 7, 2, 9]
    assert balance_score(sizes) == sum(abs(a - b) for a, b in combinations(sizes, 2)) == 63
    assert balance_score([]) == balance_score([5]) == balance_score([3, 3, 3]) == 0


def test_metrics_of_a_trimmed_assignment_count_one_moved_partition():
    spec = group(
        member("A", ["t1", "t2"], tps("t1", 0, 1) + tps("t2", 0, 1)),
        member("B", ["t1", "t2"], tps("t1", 2) + tps("t2", 2)),
        topics={"t1": 3, "t2": 3},
    )
    m = balance_metrics(spec, assign_uniform(spec))
    assert (m.members, m.partitions, dict(m.per_member)) == (2, 6, {"A": 3, "B": 3})
    assert (m.min, m.max, m.mean, m.stddev, m.imbalance, m.balance_score) == (3, 3, 3.0, 0.0, 0, 0)
    assert (m.moved, m.retainable, m.retained, m.unassigned) == (1, 6, 5, 0)
    assert m.stickiness == pytest.approx(5 / 6)


def test_metrics_report_spread_and_withheld_partitions():
    spec = group(member("A", ["t"]), member("B", ["t"]), member("C", ["t"]), topics={"t": 6})
    answer = {"A": tps("t", 0, 1, 2, 3), "B": tps("t", 4), "C": []}
    m = balance_metrics(spec, answer)
    assert (m.min, m.max, m.imbalance, m.balance_score, m.unassigned) == (0, 4, 4, 8, 1)
    assert m.mean == pytest.approx(5 / 3)
    assert m.stddev == pytest.approx(((4 - 5 / 3) ** 2 + (1 - 5 / 3) ** 2 + (5 / 3) ** 2) ** 0.5 / 3**0.5)


def test_stickiness_is_one_when_nothing_was_owned_before():
    spec = group(member("A", ["t"]), member("B", ["t"]), topics={"t": 4})
    m = balance_metrics(spec, {"A": tps("t", 0, 1), "B": tps("t", 2, 3)})
    assert (m.moved, m.retainable, m.retained, m.stickiness) == (0, 0, 0, 1.0)


def test_explicit_previous_holdings_count_moves_away_from_members_that_left():
    spec = group(member("A", ["t"]), member("B", ["t"]), topics={"t": 4})
    previous = {"A": tps("t", 0), "gone": tps("t", 1), "B": tps("t", 2)}
    m = balance_metrics(spec, {"A": tps("t", 0, 1), "B": tps("t", 3)}, previous=previous)
    # t-1 moved away from a departed member; t-2 was withheld from B; only A and B could retain.
    assert (m.moved, m.retainable, m.retained, m.unassigned) == (1, 2, 1, 1)
    assert m.stickiness == 0.5


def test_a_partition_two_members_held_counts_for_the_first_listed():
    spec = group(member("A", ["t"]), member("B", ["t"]), topics={"t": 2})
    answer = {"A": tps("t", 1), "B": tps("t", 0)}
    # B keeps t-0 in the answer, but A is listed first as its holder: t-0 moved from A to B.
    assert balance_metrics(spec, answer, previous={"A": tps("t", 0), "B": tps("t", 0, 1)}).moved == 2
    assert balance_metrics(spec, answer, previous={"B": tps("t", 0, 1), "A": tps("t", 0)}).moved == 1


def test_holdings_equal_to_the_answer_keep_their_place_in_the_first_holder_order():
    # Holdings equal to a member's answer reuse the answer's encoding: the order still decides.
    spec = group(member("A", ["t"]), member("B", ["t"]), topics={"t": 2})
    answer = {"A": tps("t", 0, 9), "B": tps("t", 1)}  # t-9 does not exist: counted nowhere
    kept_first = balance_metrics(spec, answer, previous={"B": tps("t", 1), "A": tps("t", 0, 1)})
    assert (kept_first.moved, kept_first.retainable, kept_first.retained) == (0, 2, 2)
    taken_first = balance_metrics(spec, answer, previous={"A": tps("t", 0, 1), "B": tps("t", 1)})
    assert (taken_first.moved, taken_first.retainable, taken_first.retained) == (1, 2, 1)
    held = {"A": list(answer["A"]), "B": list(answer["B"])}
    assert balance_metrics(spec, answer, previous=held) == balance_metrics(spec, answer, previous={
        member_id: tuple(partitions) for member_id, partitions in held.items()})


def test_stickiness_ignores_owned_partitions_of_topics_the_owner_dropped():
    spec = group(member("A", ["u"], tps("t", 0) + tps("u", 0)), member("B", ["t", "u"]), topics={"t": 1, "u": 1})
    m = balance_metrics(spec, {"A": tps("u", 0), "B": tps("t", 0)})
    assert (m.moved, m.retainable, m.retained, m.stickiness) == (1, 1, 1, 1.0)


def test_validate_accepts_a_valid_complete_assignment():
    spec = group(member("A", ["t"]), member("B", ["t", "u"]), topics={"t": 2, "u": 1})
    assert validate(spec, {"A": tps("t", 0), "B": tps("t", 1) + tps("u", 0)}) == []


def test_validate_names_every_kind_of_violation():
    spec = group(member("A", ["t"]), member("B", ["t"]), member("C", ["t"]), topics={"t": 4, "u": 1}, group_id="g1")
    problems = validate(spec, {"A": tps("t", 0) + tps("u", 0) + tps("t", 7), "B": tps("t", 0), "X": []})
    assert problems == [
        "group 'g1': member 'C' is missing from the assignment",
        "group 'g1': the assignment names 'X', which is not a member",
        "group 'g1': member 'A' got partitions that do not exist: t-7",
        "group 'g1': member 'A' got partitions of topics it does not subscribe to: u-0",
        "group 'g1': t-0 is assigned more than once: to 'A', 'B'",
        "group 'g1': 3 subscribed partition(s) of topic 't' are not assigned: 1, 2, 3",
    ]


def test_validate_skips_completeness_on_request_and_accepts_withheld_partitions():
    spec = group(member("A", ["t"]), member("B", ["t"]), topics={"t": 2})
    partial = {"A": tps("t", 0), "B": []}
    assert validate(spec, partial) != []
    assert validate(spec, partial, complete=False) == []
    withheld = GroupAssignment(partial, transferring={TopicPartition("t", 1): "B"})
    assert validate(spec, withheld) == []


def test_validate_summarises_long_lists():
    spec = group(member("A", ["t"]), topics={"t": 100})
    (problem,) = validate(spec, {"A": []})
    assert problem.endswith("100 subscribed partition(s) of topic 't' are not assigned: 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, ...")


def test_metrics_and_validation_of_a_half_million_partition_group():
    topics = tuple(f"topic-{i}" for i in range(50))
    counts = {t: 10_000 for t in topics}
    first = assign_uniform(group(*(member(f"c{i:05d}", topics) for i in range(10_000)), topics=counts)).assignment
    spec = group(*(member(f"c{i:05d}", topics, first[f"c{i:05d}"]) for i in range(1, 10_000)), member("new", topics), topics=counts)
    answer = assign_uniform(spec)
    m = balance_metrics(spec, answer, previous=first)
    problems = validate(spec, answer)
    assert problems == []
    assert (m.members, m.partitions, m.imbalance, m.moved, m.stickiness) == (10_000, 500_000, 0, 50, 1.0)


@given(st.lists(st.tuples(st.sampled_from(["A", "B", "C", "gone"]),
                          st.lists(st.tuples(st.sampled_from(["t", "u", "deleted"]), st.integers(-1, 4)), max_size=5)),
                max_size=5),
       st.booleans())
@settings(max_examples=300, deadline=None)
def test_the_owner_of_each_partition_is_its_first_or_last_holder(holdings, first_wins):
    from assignors.columns import AssignmentColumns
    from assignors.metrics import _PartitionIndex

    spec = group(member("A", ("t", "u")), member("B", ("t",)), member("C", ("u",)), topics={"t": 3, "u": 2})
    index = _PartitionIndex(spec)
    columns = AssignmentColumns.from_pairs([m for m, _ in holdings], [[TopicPartition(*tp) for tp in tps_]
                                                                       for _, tps_ in holdings])
    number = {"A": 0, "B": 1, "C": 2}
    expected = [-1] * index.total
    for member_id, tps_ in holdings:
        for topic, partition in tps_:
            if topic in ("t", "u") and 0 <= partition < spec.topics[topic].partitions:
                at = int(index.offsets[index.topic_number[topic]]) + partition
                if not first_wins or expected[at] == -1:
                    expected[at] = number.get(member_id, -2)
    assert index.owners(columns, number, first_wins=first_wins).tolist() == expected
