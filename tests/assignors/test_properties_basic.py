"""Property tests for range, roundrobin, uniform and server-side range (spec section 7.1), and for
the metrics computed over their answers."""

from __future__ import annotations

from itertools import combinations

from hypothesis import given, settings
from hypothesis import strategies as st

from assignors import GroupSpec, MemberSpec, TopicPartition
from assignors.metrics import balance_metrics, balance_score, validate
from assignors.range import assign_range
from assignors.roundrobin import assign_roundrobin
from assignors.server_range import assign_server_range
from assignors.uniform import assign_uniform, assign_uniform_heterogeneous

from .conftest import group, member

CLIENT = {"range": assign_range, "roundrobin": assign_roundrobin}
SERVER = {"uniform": assign_uniform, "server-range": assign_server_range}
ALL = {**CLIENT, **SERVER}
PROPERTY_SETTINGS = settings(max_examples=120, deadline=None)


@st.composite
def groups(draw, *, equal_subscriptions: bool = False, unknown_topics: bool = False, owned: bool = False) -> GroupSpec:
    topic_names = [f"t{i}" for i in range(draw(st.integers(1, 5)))]
    counts = {t: draw(st.integers(0, 12)) for t in topic_names}
    choices = topic_names + (["ghost"] if unknown_topics else [])
    shared = draw(st.lists(st.sampled_from(choices), min_size=1, unique=True))
    n_members = draw(st.integers(0, 8))
    ids = draw(st.lists(st.text("abcxyz", min_size=1, max_size=4), min_size=n_members, max_size=n_members, unique=True))
    all_partitions = [TopicPartition(t, p) for t in topic_names for p in range(counts[t] + 1)]  # one beyond
    members = []
    for i, member_id in enumerate(ids):
        topics = shared if equal_subscriptions else draw(st.lists(st.sampled_from(choices), unique=True))
        instance = draw(st.one_of(st.none(), st.sampled_from(["s1", "s2", "s3", "s4"])))
        if instance in {m.group_instance_id for m in members}:
            instance = None
        claims = draw(st.lists(st.sampled_from(all_partitions), unique=True, max_size=8)) if owned else []
        members.append(member(member_id, topics, claims, instance=instance))
    return group(*members, topics=counts)


def subscribed_partitions(spec: GroupSpec) -> set[TopicPartition]:
    return {
        TopicPartition(t, p) for m in spec.members for t in m.topics if t in spec.topics for p in range(spec.topics[t].partitions)
    }


@PROPERTY_SETTINGS
@given(groups(unknown_topics=True, owned=True))
def test_client_assignors_assign_every_subscribed_partition_once_to_a_subscriber(spec):
    for name, assign in CLIENT.items():
        answer = assign(spec)
        assert validate(spec, answer) == [], name
        assert list(answer.assignment) == [m.member_id for m in spec.members], name


@PROPERTY_SETTINGS
@given(groups(owned=True))
def test_server_assignors_assign_every_subscribed_partition_once_to_a_subscriber(spec):
    for name, assign in SERVER.items():
        answer = assign(spec)
        assert validate(spec, answer) == [], name
        assert list(answer.assignment) == [m.member_id for m in spec.members], name
    assert validate(spec, assign_uniform_heterogeneous(spec)) == []


@PROPERTY_SETTINGS
@given(groups(equal_subscriptions=True, owned=True))
def test_equal_subscriptions_are_balanced_within_one(spec):
    for name in ("roundrobin", "uniform"):
        sizes = [len(parts) for parts in ALL[name](spec).assignment.values()]
        assert not sizes or max(sizes) - min(sizes) <= 1, name
    for name in ("range", "server-range"):
        answer = ALL[name](spec).assignment
        for topic in spec.members[0].topics if spec.members else ():
            per_topic = [sum(1 for t, _ in parts if t == topic) for parts in answer.values()]
            assert max(per_topic) - min(per_topic) <= 1, (name, topic)


@PROPERTY_SETTINGS
@given(groups(unknown_topics=True), st.data())
def test_static_members_keep_their_partitions_when_their_member_ids_change(spec, data):
    renamed = {
        m.member_id: f"new-{m.member_id}" if m.group_instance_id is not None and data.draw(st.booleans()) else m.member_id
        for m in spec.members
    }
    respec = GroupSpec(
        tuple(MemberSpec(renamed[m.member_id], m.topics, group_instance_id=m.group_instance_id) for m in spec.members),
        spec.topics,
        spec.group_id,
    )
    for name in ("range", "roundrobin", "server-range"):
        if name == "server-range" and any(t not in spec.topics for m in spec.members for t in m.topics):
            continue
        before, after = ALL[name](spec).assignment, ALL[name](respec).assignment
        for old_id, new_id in renamed.items():
            assert sorted(before[old_id]) == sorted(after[new_id]), name


@PROPERTY_SETTINGS
@given(groups(equal_subscriptions=True), st.data())
def test_uniform_members_keep_what_they_owned_within_quota_across_rounds(spec, data):
    first = assign_uniform(spec).assignment
    stayers = [m for m in spec.members if data.draw(st.booleans())]
    joiners = [member(f"joiner-{i}", spec.members[0].topics) for i in range(data.draw(st.integers(0, 3)))] if spec.members else []
    members = [MemberSpec(m.member_id, m.topics, tuple(first[m.member_id])) for m in stayers] + joiners
    second_spec = GroupSpec(tuple(members), spec.topics, spec.group_id)
    second = assign_uniform(second_spec).assignment
    assert validate(second_spec, second) == []
    if members:
        floor_quota = len(subscribed_partitions(second_spec)) // len(members)
        for m in stayers:
            kept = set(second[m.member_id]) & set(first[m.member_id])
            assert len(kept) >= min(len(first[m.member_id]), floor_quota), m.member_id


@PROPERTY_SETTINGS
@given(groups(owned=True))
def test_uniform_answer_is_a_fixed_point_of_the_next_round(spec):
    # Feeding the answer back as everyone's current assignment changes nothing, for identical
    # and for differing subscriptions alike.
    first = assign_uniform(spec).assignment
    again = GroupSpec(tuple(MemberSpec(m.member_id, m.topics, tuple(first[m.member_id])) for m in spec.members), spec.topics)
    assert assign_uniform(again).assignment == first


@PROPERTY_SETTINGS
@given(groups(owned=True), st.sampled_from(sorted(ALL)))
def test_metrics_invariants_hold_for_every_assignor(spec, name):
    answer = ALL[name](spec)
    m = balance_metrics(spec, answer)
    sizes = list(m.per_member.values())
    assert m.members == len(spec.members) and m.partitions == sum(sizes)
    assert m.partitions == len(subscribed_partitions(spec)) and m.unassigned == 0
    assert m.balance_score == sum(abs(a - b) for a, b in combinations(sizes, 2)) == balance_score(sizes)
    assert m.imbalance == (max(sizes) - min(sizes) if sizes else 0)
    assert 0 <= m.retained <= m.retainable and 0.0 <= m.stickiness <= 1.0
    owned_somewhere = {tp for mem in spec.members for tp in mem.owned_partitions if tp in subscribed_partitions(spec)}
    assert m.moved + m.retained <= len(owned_somewhere)
    if m.retainable == 0:
        assert m.stickiness == 1.0
