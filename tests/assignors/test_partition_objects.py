"""The kept ``TopicPartition`` objects of a topic spec, and the assignors' answers built from them.

Assignors answer with slices of :attr:`TopicSpec.partition_objects` instead of creating new
objects; these tests check that this changes nothing a caller can see (values, equality, the JSON
contract) and that a spec keyed by another name than its topic spec's still answers with the key.
"""

from __future__ import annotations

import random

import pytest

from assignors import GroupSpec, MemberSpec, TopicPartition, TopicSpec, assign
from assignors.codec import format_group_spec, parse_group_spec

from .conftest import group, member

CLIENT_ASSIGNORS = ("range", "roundrobin", "sticky", "cooperative-sticky")


def test_partition_objects_are_the_topics_partitions_in_order():
    topic = TopicSpec("orders", 4)
    assert topic.partition_objects == tuple(TopicPartition("orders", p) for p in range(4))
    assert all(type(tp) is TopicPartition for tp in topic.partition_objects)
    assert topic.partition_objects[2].topic == "orders" and topic.partition_objects[2].partition == 2


def test_partition_objects_are_built_once_and_kept():
    topic = TopicSpec("orders", 3)
    assert topic.partition_objects is topic.partition_objects


def test_partition_objects_are_not_part_of_the_topic_specs_value():
    fresh, used = TopicSpec("t", 2), TopicSpec("t", 2)
    used.partition_objects
    assert fresh == used and hash(fresh) == hash(used)
    assert repr(used) == "TopicSpec(name='t', partitions=2, replica_racks=None, topic_id=None)"


def test_a_topic_without_partitions_has_no_partition_objects():
    assert TopicSpec("empty", 0).partition_objects == ()


def test_the_codec_builds_the_partition_objects_when_parsing():
    parsed = parse_group_spec(
        {"assignor": "range", "topics": {"t": {"partitions": 2}}, "members": [{"member_id": "a", "topics": ["t"]}]}
    )
    # Already there: read through the slot, without the property building them.
    assert parsed.spec.topics["t"]._partition_objects == (TopicPartition("t", 0), TopicPartition("t", 1))


@pytest.mark.parametrize("assignor", CLIENT_ASSIGNORS)
def test_answers_reuse_the_topic_specs_objects(assignor):
    spec = group(member("a", ["t"]), member("b", ["t"]), topics={"t": 5})
    answer = assign(spec, assignor)
    kept = {id(tp) for tp in spec.topics["t"].partition_objects}
    given = [tp for tps in answer.assignment.values() for tp in tps]
    assert sorted(given) == [TopicPartition("t", p) for p in range(5)]
    assert {id(tp) for tp in given} <= kept


@pytest.mark.parametrize("assignor", CLIENT_ASSIGNORS)
def test_a_topic_spec_named_differently_from_its_key_answers_with_the_key(assignor):
    spec = GroupSpec(
        (member("a", ["t"]), member("b", ["t"])), {"t": TopicSpec("other-name", 3)}, "g"
    )
    given = sorted(tp for tps in assign(spec, assignor).assignment.values() for tp in tps)
    assert given == [TopicPartition("t", p) for p in range(3)]
    assert {tp.topic for tp in given} == {"t"}


@pytest.mark.parametrize("assignor", CLIENT_ASSIGNORS)
@pytest.mark.parametrize("seed", range(40))
def test_answers_do_not_depend_on_whether_the_objects_were_built_before_the_call(assignor, seed):
    # The same random group twice: once with topic specs whose objects the codec built, once with
    # fresh topic specs (the assignor builds them); the answers must be equal.
    rng = random.Random(seed)
    topics = {f"t{i}": rng.randint(0, 8) for i in range(rng.randint(1, 5))}
    names = list(topics)
    members = []
    for i in range(rng.randint(1, 8)):
        subscription = rng.sample(names, rng.randint(1, len(names))) if seed % 2 else names
        owned = [TopicPartition(t, rng.randint(0, 9)) for t in subscription if rng.random() < 0.5]
        members.append(member(f"m{rng.randint(0, 99):02d}-{i}", subscription, dict.fromkeys(owned)))
    fresh = group(*members, topics=topics)
    parsed = parse_group_spec(format_group_spec(fresh, "s", assignor)).spec
    assert assign(parsed, assignor) == assign(fresh, assignor)


@pytest.mark.parametrize("assignor", ("range", "roundrobin"))
def test_nothing_to_assign_gives_every_member_an_empty_list(assignor):
    # The early return when no subscribed topic has partitions (and when the topics are unknown).
    spec = group(member("b", ["t0"]), member("a", ["t1", "missing"]), topics={"t0": 0, "t1": 0})
    assert assign(spec, assignor).assignment == {"b": [], "a": []}


def test_parsed_owned_partitions_carry_the_metadatas_topic_name_strings():
    parsed = parse_group_spec({
        "assignor": "sticky",
        "topics": {"t": {"partitions": 2}},
        "members": [{"member_id": "a", "topics": ["t"], "owned_partitions": [["t", 1], ["t", 5], ["gone", 0]]}],
    }).spec
    owned = parsed.members[0].owned_partitions
    assert owned == (TopicPartition("t", 1), TopicPartition("t", 5), TopicPartition("gone", 0))
    assert all(type(tp) is TopicPartition for tp in owned)
    name = next(iter(parsed.topics))
    assert owned[0].topic is name and owned[1].topic is name


@pytest.mark.parametrize("assignor", ("sticky", "cooperative-sticky"))
@pytest.mark.parametrize("seed", range(30))
def test_sticky_claims_of_missing_partitions_change_nothing(assignor, seed):
    # Claims are read with a fast path when all of them name existing partitions, and filtered
    # otherwise: adding claims of partitions that do not exist (beyond the count, unknown topic)
    # must give the same answer as leaving them out.
    rng = random.Random(seed)
    topics = {f"t{i}": rng.randint(1, 6) for i in range(rng.randint(1, 3))}
    names = list(topics)
    partitions = [TopicPartition(t, p) for t, count in topics.items() for p in range(count)]
    rng.shuffle(partitions)
    clean, noisy = [], []
    for i in range(rng.randint(1, 6)):
        owned = [partitions.pop() for _ in range(rng.randint(0, 2)) if partitions]
        stale = [TopicPartition(rng.choice(names), 50 + i), TopicPartition("gone", i)][: rng.randint(0, 2)]
        clean.append(MemberSpec(f"m{i}", tuple(names), tuple(owned), generation=1))
        noisy.append(MemberSpec(f"m{i}", tuple(names), tuple(owned + stale), generation=1))
    assert assign(group(*noisy, topics=topics), assignor) == assign(group(*clean, topics=topics), assignor)
