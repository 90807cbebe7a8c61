"""Invariants of ``sticky`` and ``cooperative-sticky`` over random groups (hypothesis)."""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assignors.model import GroupAssignment, GroupSpec, MemberSpec, TopicPartition, TopicSpec
from assignors.sticky import assign_cooperative_sticky, assign_sticky

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def groups(draw, equal: bool | None = None, with_claims: bool = True) -> GroupSpec:
    topics = {f"t{i}": draw(st.integers(1, 8)) for i in range(draw(st.integers(1, 4)))}
    names = sorted(topics)
    n_members = draw(st.integers(1, 7))
    if equal is None:
        equal = draw(st.booleans())
    every = [TopicPartition(t, p) for t in names for p in range(topics[t])]
    members = []
    for i in range(n_members):
        if equal:
            subscription = tuple(names)
        else:
            subscription = tuple(draw(st.lists(st.sampled_from(names), max_size=len(names), unique=True)))
        owned: tuple[TopicPartition, ...] = ()
        generation = -1
        if with_claims:
            owned = tuple(draw(st.lists(st.sampled_from(every), max_size=6, unique=True)))
            generation = draw(st.integers(-1, 3))
        members.append(MemberSpec(f"m{i}", subscription, owned, generation))
    return GroupSpec(members=tuple(members), topics={t: TopicSpec(t, n) for t, n in topics.items()})


def expected_partitions(spec: GroupSpec) -> set[TopicPartition]:
    return {
        TopicPartition(t, p)
        for m in spec.members
        for t in m.topics
        if t in spec.topics
        for p in range(spec.topics[t].partitions)
    }


def check_valid(spec: GroupSpec, result: GroupAssignment) -> None:
    assert list(result.assignment) == [m.member_id for m in spec.members]
    counted = Counter(p for parts in result.assignment.values() for p in parts)
    assert all(c == 1 for c in counted.values())
    subs = {m.member_id: set(m.topics) for m in spec.members}
    for member_id, parts in result.assignment.items():
        assert all(p.topic in subs[member_id] for p in parts)
    assigned = set(counted)
    withheld = set(result.transferring)
    assert not assigned & withheld
    assert assigned | withheld == expected_partitions(spec)
    for p, to in result.transferring.items():
        assert p.topic in subs[to]


def check_balanced(spec: GroupSpec, result: GroupAssignment) -> None:
    sizes = {m: len(p) for m, p in result.assignment.items()}
    subs = {m.member_id: set(m.topics) for m in spec.members}
    if len({m.topics for m in spec.members if m.topics}) <= 1:
        nonempty = [sizes[m.member_id] for m in spec.members if m.topics]
        assert not nonempty or max(nonempty) - min(nonempty) <= 1
    for heavy, parts in result.assignment.items():
        for light in result.assignment:
            if sizes[heavy] - sizes[light] >= 2:
                assert not {p.topic for p in parts} & subs[light]


def rejoin(spec: GroupSpec, result: GroupAssignment, members=None, extra=()) -> GroupSpec:
    """Members rejoin owning what they were given, one generation later."""
    generation = max((m.generation for m in spec.members), default=-1) + 1
    keep = spec.members if members is None else members
    rejoined = tuple(
        MemberSpec(m.member_id, m.topics, tuple(result.assignment.get(m.member_id, ())), generation)
        for m in keep
    )
    return GroupSpec(members=rejoined + tuple(extra), topics=spec.topics)


def movements(before: dict, after: dict) -> set[tuple[str, str, str]]:
    owner = {p: m for m, parts in before.items() for p in parts}
    return {(owner[p], m, p.topic) for m, parts in after.items() for p in parts if p in owner and owner[p] != m}


@SETTINGS
@given(groups())
def test_every_answer_is_valid_and_complete(spec):
    eager = assign_sticky(spec)
    check_valid(spec, eager)
    assert eager.transferring == {}
    check_valid(spec, assign_cooperative_sticky(spec))


@SETTINGS
@given(groups())
def test_eager_answer_is_balanced(spec):
    check_balanced(spec, assign_sticky(spec))


@SETTINGS
@given(groups(with_claims=False), st.data())
def test_next_round_is_sticky_and_members_that_stay_keep_their_partitions(spec, data):
    first = assign_sticky(spec)
    leavers = data.draw(st.sets(st.sampled_from([m.member_id for m in spec.members])))
    stay = [m for m in spec.members if m.member_id not in leavers]
    joiners = [MemberSpec(f"new{i}", spec.members[0].topics) for i in range(data.draw(st.integers(0, 2)))]
    nxt = rejoin(spec, first, stay, joiners)
    second = assign_sticky(nxt)
    check_valid(nxt, second)
    check_balanced(nxt, second)
    moved = movements(first.assignment, second.assignment)
    assert not {(b, a, t) for a, b, t in moved} & moved  # Kafka's isSticky
    equal = len({m.topics for m in nxt.members}) == 1
    if equal and not joiners:
        for m in stay:
            assert set(first.assignment[m.member_id]) <= set(second.assignment[m.member_id])


@SETTINGS
@given(groups())
def test_cooperative_never_adds_a_partition_that_another_member_revokes(spec):
    # The coordinator's cooperative rule: what a member is given beyond what it reported owning
    # must not be owned by anybody else in the same round.
    result = assign_cooperative_sticky(spec)
    owned = {m.member_id: set(m.owned_partitions) for m in spec.members}
    for member_id, parts in result.assignment.items():
        added = set(parts) - owned[member_id]
        for p in added:
            assert not any(p in owned[o] for o in owned if o != member_id)


@SETTINGS
@given(groups())
def test_generation_contest_decides_who_keeps_a_contested_partition(spec):
    result = assign_cooperative_sticky(spec)
    claims: dict[TopicPartition, list[MemberSpec]] = {}
    for m in spec.members:
        if m.topics:
            for p in set(m.owned_partitions):
                claims.setdefault(p, []).append(m)
    equal = len({m.topics for m in spec.members if m.topics}) == 1
    owner = {p: m for m, parts in result.assignment.items() for p in parts}
    for p, claimants in claims.items():
        if len(claimants) < 2 or p not in expected_partitions(spec):
            continue
        top = max(c.generation for c in claimants)
        winners = [c.member_id for c in claimants if c.generation == top]
        if len(winners) >= 2 and equal:
            # same-generation double claim on the constrained path: voided for both, withheld
            assert p not in owner
        elif len(winners) == 1 and equal and p in owner:
            # a unique newest claimant either keeps it or the new owner waits for it
            assert owner[p] == winners[0] or p in result.transferring
        if p in owner:
            assert owner[p] in {c.member_id for c in claimants}, (p, owner[p], winners)


@SETTINGS
@given(groups())
def test_cooperative_rounds_converge_to_a_balanced_assignment(spec):
    result = assign_cooperative_sticky(spec)
    for _ in range(4):
        if not result.transferring:
            break
        spec = rejoin(spec, result)
        result = assign_cooperative_sticky(spec)
    else:
        spec = rejoin(spec, result)
        result = assign_cooperative_sticky(spec)
    assert result.transferring == {}
    check_valid(spec, result)
    check_balanced(spec, result)
    # a converged round is stable: nothing moves when nobody changes
    again = assign_cooperative_sticky(rejoin(spec, result))
    assert {m: set(p) for m, p in again.assignment.items()} == {
        m: set(p) for m, p in result.assignment.items()
    }


@SETTINGS
@given(groups(equal=True))
def test_equal_subscriptions_agree_between_eager_and_cooperative(spec):
    eager = assign_sticky(spec)
    cooperative = assign_cooperative_sticky(spec)
    for member_id, parts in eager.assignment.items():
        expected = [p for p in parts if cooperative.transferring.get(p) != member_id]
        assert cooperative.assignment[member_id] == expected
