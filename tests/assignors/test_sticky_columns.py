"""The sticky assignors over columns (``assign_sticky_columns``) give the list answer, list order
and ``transferring`` included, whichever of their ways a group takes."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given

import assignors.sticky as sticky
from assignors.columns import AssignmentColumns
from assignors.errors import InvalidGroupSpecError
from assignors.model import GroupSpec, MemberSpec, TopicPartition, TopicSpec
from assignors.sticky import assign_cooperative_sticky, assign_sticky, assign_sticky_columns

from .conftest import group, member, tps
from .test_sticky_properties import SETTINGS, groups
from .test_sticky_rejoin import _random_rejoin

WAYS = [(assign_sticky, False), (assign_cooperative_sticky, True)]


def _by_columns(spec: GroupSpec, cooperative: bool, rng: random.Random | None = None):
    """The columns answer for ``spec``, its owned partitions handed over as columns (in a shuffled
    member order, with a departed member's run, when ``rng`` is given) and not as the members'."""
    pairs = [(m.member_id, m.owned_partitions) for m in spec.members]
    if rng is not None:
        rng.shuffle(pairs)
        pairs.insert(rng.randint(0, len(pairs)), ("departed", (TopicPartition("t0", 0), TopicPartition("t9", 3))))
    owned = AssignmentColumns.from_pairs([p[0] for p in pairs], [p[1] for p in pairs])
    bare = replace(spec, members=tuple(replace(m, owned_partitions=()) for m in spec.members))
    return assign_sticky_columns(bare, owned, cooperative)


def _check_equal(spec: GroupSpec, assign, cooperative: bool, rng: random.Random | None = None) -> None:
    expected = assign(spec)
    got = _by_columns(spec, cooperative, rng)
    lists = got.assignment.to_lists(spec.topics)
    assert list(lists) == list(expected.assignment)
    assert lists == expected.assignment
    assert got.transferring == expected.transferring


@pytest.mark.parametrize("assign,cooperative", WAYS, ids=["sticky", "cooperative"])
@given(spec=groups())
@SETTINGS
def test_columns_answer_equals_the_list_answer_on_random_groups(assign, cooperative, spec):
    _check_equal(spec, assign, cooperative)


@pytest.mark.parametrize("assign,cooperative", WAYS, ids=["sticky", "cooperative"])
def test_columns_answer_equals_the_list_answer_on_rejoins_and_first_rounds(assign, cooperative, monkeypatch):
    rejoins = 0
    real = sticky.rejoin_draft

    def spy(*args, **kwargs):
        nonlocal rejoins
        rejoins += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(sticky, "rejoin_draft", spy)
    for seed in range(200):
        rng = random.Random(seed)
        spec = _random_rejoin(rng)
        _check_equal(spec, assign, cooperative, rng)
        # The same group's first round: nobody owns anything.
        _check_equal(replace(spec, members=tuple(replace(m, owned_partitions=()) for m in spec.members)),
                     assign, cooperative)
    assert rejoins > 100  # most random rejoins take the rejoin way


def test_a_member_leaving_a_large_group_moves_only_its_partitions_with_the_list_answer():
    names = [f"t{i}" for i in range(4)]
    first = assign_cooperative_sticky(group(*[member(f"c{i:03d}", names) for i in range(200)],
                                            topics={t: 500 for t in names}))
    stay = [member(f"c{i:03d}", names, first.assignment[f"c{i:03d}"]) for i in range(1, 200)]
    spec = group(*stay, topics={t: 500 for t in names})
    _check_equal(spec, assign_cooperative_sticky, True)
    got = _by_columns(spec, True)
    assert len(got.assignment) == 2_000 and got.transferring == {}
    sizes = dict(zip(got.assignment.members, got.assignment.counts.tolist()))
    assert set(sizes.values()) == {10, 11}


def test_racks_and_general_subscriptions_take_the_list_answer_too():
    racks = (frozenset({"a"}), frozenset({"b"}), frozenset({"a", "b"}), frozenset({"b"}))
    spec = group(member("m1", ["x", "y"], tps("x", 0, 1, 2), rack="a"),
                 member("m2", ["x"], tps("x", 2, 3), rack="b"),
                 member("m3", ["y"], rack="b"),
                 topics={"x": TopicSpec("x", 4, racks), "y": 3})
    for assign, cooperative in WAYS:
        _check_equal(spec, assign, cooperative, random.Random(1))


def test_a_repeated_member_id_is_refused_as_the_list_answer_refuses_it():
    spec = group(member("m1", ["t"]), member("m1", ["t"]), topics={"t": 2})
    with pytest.raises(InvalidGroupSpecError, match="appears more than once"):
        assign_sticky_columns(spec, AssignmentColumns.empty(), True)


def test_no_partitions_and_no_members_answer_empty_columns():
    nothing = assign_sticky_columns(group(member("m1", ["t"]), topics={"t": 0}), AssignmentColumns.empty(), True)
    assert nothing.assignment.members == ["m1"] and nothing.assignment.counts.tolist() == [0]
    nobody = assign_sticky_columns(GroupSpec((), {"t": TopicSpec("t", 3)}), AssignmentColumns.empty(), False)
    assert nobody.assignment.members == [] and len(nobody.assignment) == 0
