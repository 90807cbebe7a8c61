"""AssignmentColumns: a member -> partitions map as integer columns, and back to lists."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assignors.columns import AssignmentColumns
from assignors.model import TopicPartition, TopicSpec

from .conftest import tps

TP = st.builds(TopicPartition, st.sampled_from(["a", "b", "c", "gone"]), st.integers(-1, 9))
MAPS = st.dictionaries(st.sampled_from([f"m{i}" for i in range(6)]), st.lists(TP, max_size=6), max_size=6)


@given(MAPS)
@settings(max_examples=200, deadline=None)
def test_lists_to_columns_and_back_keep_members_partitions_and_order(assignment):
    columns = AssignmentColumns.from_lists(assignment)
    assert columns.to_lists() == assignment
    assert list(columns.to_lists()) == list(assignment)
    assert len(columns) == sum(map(len, assignment.values()))
    assert columns.same_as(AssignmentColumns.from_lists(dict(assignment)))


def test_known_partitions_are_the_topic_specs_own_objects_and_others_are_built():
    topics = {"a": TopicSpec("a", 3)}
    lists = AssignmentColumns.from_lists({"m1": tps("a", 2, 0) + tps("a", 7), "m2": tps("gone", 1)}).to_lists(topics)
    assert lists == {"m1": tps("a", 2, 0, 7), "m2": tps("gone", 1)}
    assert lists["m1"][0] is topics["a"].partition_objects[2] and lists["m1"][1] is topics["a"].partition_objects[0]
    assert lists["m1"][2] == ("a", 7) and lists["m2"][0] == ("gone", 1)


def test_from_runs_lists_each_members_partitions_in_array_order():
    columns = AssignmentColumns.from_runs(["x", "y", "z"], np.array([1, 0, 1, 1]), ["t", "u"],
                                          np.array([0, 1, 1, 0]), np.array([5, 0, 3, 1]))
    assert columns.to_lists() == {"x": tps("u", 0), "y": tps("t", 5) + tps("u", 3) + tps("t", 1), "z": []}


def test_select_reorders_drops_and_adds_empty_members():
    columns = AssignmentColumns.from_lists({"a": tps("t", 0, 1), "b": tps("u", 4), "c": tps("t", 2)})
    picked = columns.select(["c", "new", "a"])
    assert picked.to_lists() == {"c": tps("t", 2), "new": [], "a": tps("t", 0, 1)}
    assert columns.select(["a", "b", "c"]) is columns


def test_plus_appends_runs_and_numbers_the_other_maps_topics_into_its_own():
    left = AssignmentColumns.from_lists({"a": tps("t", 0) + tps("u", 1)})
    right = AssignmentColumns.from_lists({"b": tps("v", 2) + tps("t", 3)})
    both = left.plus(right)
    assert both.to_lists() == {"a": tps("t", 0) + tps("u", 1), "b": tps("v", 2) + tps("t", 3)}
    assert both.topics == ["t", "u", "v"]
    assert left.plus(AssignmentColumns.empty()) is left and AssignmentColumns.empty().plus(right) is right


def test_keys_name_a_partition_alike_in_every_map_and_holds_finds_listed_ones():
    one = AssignmentColumns.from_lists({"a": tps("t", 0) + tps("u", 7)})
    other = AssignmentColumns.from_lists({"b": tps("u", 7) + tps("t", 0) + tps("w", 1)})
    numbering = {"t": 0, "u": 1}
    assert one.keys(numbering).tolist() == [0, (1 << 32) | 7]
    assert other.keys(numbering).tolist() == [(1 << 32) | 7, 0, -1]
    assert one.holds(tps("u", 7) + tps("u", 0) + tps("x", 7)).tolist() == [True, False, False]


def test_same_as_compares_content_not_topic_numbering():
    one = AssignmentColumns.from_lists({"a": tps("t", 0) + tps("u", 1)})
    renumbered = AssignmentColumns(["a"], np.array([2]), ["u", "t"], np.array([1, 0]), np.array([0, 1]))
    assert one.same_as(renumbered)
    assert not one.same_as(AssignmentColumns.from_lists({"a": tps("u", 1) + tps("t", 0)}))
    assert not one.same_as(AssignmentColumns.from_lists({"a": tps("t", 0) + tps("x", 1)}))
    assert not one.same_as(AssignmentColumns.from_lists({"b": tps("t", 0) + tps("u", 1)}))


def test_from_pairs_keeps_a_member_listed_twice():
    columns = AssignmentColumns.from_pairs(["a", "a"], [tps("t", 0), tps("t", 1)])
    assert columns.members == ["a", "a"] and columns.counts.tolist() == [1, 1]


PAIRS = st.lists(st.tuples(st.sampled_from([f"m{i}" for i in range(5)]), st.lists(TP, max_size=5)), max_size=6)


@given(PAIRS, PAIRS)
@settings(max_examples=300, deadline=None)
def test_changed_runs_are_the_members_whose_list_is_not_the_same_in_the_other_map(before, after):
    held = AssignmentColumns.from_pairs([m for m, _ in before], [tps_ for _, tps_ in before])
    assigned = AssignmentColumns.from_pairs([m for m, _ in after], [tps_ for _, tps_ in after])
    numbering = {name: i for i, name in enumerate(dict.fromkeys(held.topics + assigned.topics))}
    # A member listed twice in the other map reads as its last run (as a dict of its runs does).
    now = dict(after)
    last_place = {member_id: j for j, (member_id, _) in enumerate(after)}
    expected = [(i, last_place.get(member_id, -1)) for i, (member_id, tps_) in enumerate(before)
                if tps_ and now.get(member_id, []) != tps_]
    assert held.changed_runs(assigned, held.keys(numbering), assigned.keys(numbering)) == expected


def test_changed_runs_finds_a_reordered_list_a_grown_one_and_a_member_that_left():
    held = AssignmentColumns.from_lists({"same": tps("t", 0, 1), "reordered": tps("t", 2, 3), "grown": tps("t", 4),
                                         "left": tps("t", 5), "empty": []})
    assigned = AssignmentColumns.from_lists({"grown": tps("t", 4, 5), "same": tps("t", 0, 1),
                                             "reordered": tps("t", 3, 2), "empty": tps("t", 6)})
    numbering = {"t": 0}
    assert held.changed_runs(assigned, held.keys(numbering), assigned.keys(numbering)) == [(1, 2), (2, 0), (3, -1)]
