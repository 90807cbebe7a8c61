"""Sticky assignors on the general path (members subscribe to different topics, spec 3.4)."""

from __future__ import annotations

import json
import random
from collections import Counter
from itertools import combinations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assignors.codec import parse_group_spec
from assignors.model import GroupAssignment, GroupSpec, MemberSpec, TopicPartition, TopicSpec
from assignors.sticky import assign_cooperative_sticky, assign_sticky
from assignors.sticky._kafka_general import kafka_general
from assignors.sticky._layout import build_layout, collect_claims, hashmap_visit_order, partition_objects
from assignors.sticky._ownership import resolve_ownership
from assignors.sticky._racks import rack_info


def tp(name: str) -> TopicPartition:
    topic, _, p = name.rpartition("-")
    return TopicPartition(topic, int(p))


def tps(*names: str) -> list[TopicPartition]:
    return [tp(n) for n in names]


def group(members, topics: dict[str, int], racks=None) -> GroupSpec:
    specs = {}
    for name, n in topics.items():
        replica = tuple(frozenset([r]) for r in racks[name]) if racks and name in racks else None
        specs[name] = TopicSpec(name, n, replica)
    return GroupSpec(members=tuple(members), topics=specs)


def member(mid, topics, owned=(), generation=-1, rack=None) -> MemberSpec:
    return MemberSpec(mid, tuple(topics), tuple(tp(o) if isinstance(o, str) else o for o in owned), generation, rack=rack)


def check_valid_and_complete(spec: GroupSpec, result: GroupAssignment) -> None:
    assert list(result.assignment) == [m.member_id for m in spec.members]
    seen = Counter(p for parts in result.assignment.values() for p in parts)
    assert all(c == 1 for c in seen.values())
    for m in spec.members:
        assert all(p.topic in m.topics for p in result.assignment[m.member_id])
    expected = {
        TopicPartition(t, p)
        for m in spec.members
        for t in m.topics
        if t in spec.topics
        for p in range(spec.topics[t].partitions)
    }
    assert set(seen) == expected


def check_balanced(spec: GroupSpec, result: GroupAssignment) -> None:
    """No member holds a partition of a topic that a member two or more partitions lighter subscribes to."""
    sizes = {m: len(p) for m, p in result.assignment.items()}
    subs = {m.member_id: set(m.topics) for m in spec.members}
    for heavy, parts in result.assignment.items():
        for light in result.assignment:
            if sizes[heavy] - sizes[light] >= 2:
                assert not {p.topic for p in parts} & subs[light], (heavy, light, sizes)


def moves(before: dict, after: dict) -> list[tuple[str, str, TopicPartition]]:
    owner = {p: m for m, parts in before.items() for p in parts}
    return [(owner[p], m, p) for m, parts in after.items() for p in parts if p in owner and owner[p] != m]


def check_sticky(before: dict, after: dict) -> None:
    """Kafka's isSticky: no topic has partitions moving both ways between two members."""
    directions = {(src, dst, p.topic) for src, dst, p in moves(before, after)}
    for src, dst, topic in directions:
        assert (dst, src, topic) not in directions


def rejoin(spec: GroupSpec, result: GroupAssignment, generation: int, members=None) -> GroupSpec:
    keep = members if members is not None else spec.members
    return GroupSpec(
        members=tuple(
            MemberSpec(m.member_id, m.topics, tuple(result.assignment.get(m.member_id, ())), generation)
            for m in keep
        ),
        topics=spec.topics,
    )


def test_fresh_mixed_subscriptions_place_single_subscriber_topic_first():
    spec = group(
        [
            member("consumer1", ["topic1"]),
            member("consumer2", ["topic1", "topic2"]),
            member("consumer3", ["topic1"]),
        ],
        {"topic1": 3, "topic2": 2},
    )
    result = assign_cooperative_sticky(spec)
    assert result.assignment == {
        "consumer1": tps("topic1-0", "topic1-2"),
        "consumer2": tps("topic2-0", "topic2-1"),
        "consumer3": tps("topic1-1"),
    }
    assert result.transferring == {}


def test_staircase_subscriptions_stay_balanced_and_sticky_when_a_member_leaves():
    topics = {f"t{i}": i for i in range(1, 20)}
    members = [member(f"consumer{i}", [f"t{j}" for j in range(1, i + 1)]) for i in range(1, 20)]
    spec = group(members, topics)
    first = assign_sticky(spec)
    check_valid_and_complete(spec, first)
    check_balanced(spec, first)
    survivors = [m for m in spec.members if m.member_id != "consumer10"]
    second_spec = rejoin(spec, first, 1, survivors)
    second = assign_sticky(second_spec)
    check_valid_and_complete(second_spec, second)
    check_balanced(second_spec, second)
    check_sticky(first.assignment, second.assignment)


def test_chain_imbalance_is_left_when_fixing_it_would_revoke_more_than_kafka():
    # A -t1-> B -t2-> C: loads 5/4/3 and every partition owned. No direct move helps, so Kafka stops
    # here with nothing revoked; 4/4/4 would need two revocations. The contract (no more moves than
    # Kafka) wins over the better balance score.
    spec = group(
        [
            member("A", ["t1"], [f"t1-{p}" for p in range(5)], 1),
            member("B", ["t1", "t2"], [f"t2-{p}" for p in range(4)], 1),
            member("C", ["t2"], [f"t2-{p}" for p in range(4, 7)], 1),
        ],
        {"t1": 5, "t2": 7},
    )
    result = assign_sticky(spec)
    check_valid_and_complete(spec, result)
    before = {m.member_id: list(m.owned_partitions) for m in spec.members}
    assert moves(before, result.assignment) == []
    assert sorted(len(p) for p in result.assignment.values()) == [3, 4, 5]


def test_chain_imbalance_that_no_single_move_fixes_is_balanced_when_it_costs_no_revocation():
    # Same shape, but t1-4 and t2-3..6 are new: Kafka places them 5/4/3 (nobody two above a
    # co-subscriber), while shifting one new unit along the chain revokes nothing, so our chain
    # balancing (4/4/4) beats Kafka's answer on both counts.
    spec = group(
        [
            member("A", ["t1"], [f"t1-{p}" for p in range(4)], 1),
            member("B", ["t1", "t2"], [f"t2-{p}" for p in range(3)], 1),
            member("C", ["t2"], [], 1),
        ],
        {"t1": 5, "t2": 7},
    )
    result = assign_sticky(spec)
    check_valid_and_complete(spec, result)
    assert sorted(len(p) for p in result.assignment.values()) == [4, 4, 4]
    before = {m.member_id: list(m.owned_partitions) for m in spec.members}
    assert moves(before, result.assignment) == []


def test_stale_claim_of_an_unsubscribed_topic_is_never_handed_back():
    spec = group(
        [
            member("X", ["tB", "tC"], ["tA-0", "tB-0"], 1),
            member("Y", ["tA"], ["tA-0", "tA-1", "tA-2", "tA-3"], 2),
            member("Z", ["tA"], [], 2),
        ],
        {"tA": 4, "tB": 2, "tC": 2},
    )
    for assign in (assign_sticky, assign_cooperative_sticky):
        result = assign(spec)
        assert all(p.topic in ("tB", "tC") for p in result.assignment["X"])
        assert tp("tA-0") not in result.assignment["X"]
    eager = assign_sticky(spec)
    check_valid_and_complete(spec, eager)
    assert sorted(eager.assignment["X"]) == tps("tB-0", "tB-1", "tC-0", "tC-1")


def test_member_with_empty_subscription_gets_nothing_on_the_general_path():
    spec = group(
        [member("a", ["t1"]), member("b", []), member("c", ["t1", "t2"])], {"t1": 2, "t2": 2}
    )
    result = assign_sticky(spec)
    check_valid_and_complete(spec, result)
    assert result.assignment["b"] == []


def test_new_subscriber_of_a_shared_topic_takes_it_after_revocation():
    spec = group(
        [
            member("a", ["t1", "t2"], ["t1-0", "t1-1", "t2-0", "t2-1"], 3),
            member("b", ["t2"]),
        ],
        {"t1": 2, "t2": 2},
    )
    coop = assign_cooperative_sticky(spec)
    # balance (2/2) needs b to take both t2 partitions, which a must revoke first
    assert coop.assignment == {"a": tps("t1-0", "t1-1"), "b": []}
    assert coop.transferring == {tp("t2-0"): "b", tp("t2-1"): "b"}
    eager = assign_sticky(spec)
    assert eager.assignment == {"a": tps("t1-0", "t1-1"), "b": tps("t2-0", "t2-1")}


def test_rack_aware_general_path_prefers_partitions_on_the_members_rack():
    racks = {"t1": ["b", "a", "b", "a"], "t2": ["b", "b"]}
    spec = group(
        [member("ma", ["t1"], rack="a"), member("mb", ["t1"], rack="b"), member("mc", ["t2"], rack="b")],
        {"t1": 4, "t2": 2},
        racks,
    )
    result = assign_sticky(spec)
    check_valid_and_complete(spec, result)
    assert result.assignment["ma"] == tps("t1-1", "t1-3")
    rack_of = {tp(f"{t}-{p}"): r for t, rs in racks.items() for p, r in enumerate(rs)}
    member_rack = {"ma": "a", "mb": "b", "mc": "b"}
    mismatches = sum(rack_of[p] != member_rack[m] for m, parts in result.assignment.items() for p in parts)
    assert mismatches == 0


def test_random_rounds_stay_valid_balanced_and_sticky():
    rng = random.Random(20240611)
    for _ in range(12):
        topics = {f"t{i}": rng.randint(1, 10) for i in range(rng.randint(3, 10))}
        names = list(topics)
        members = [
            member(f"m{i:02d}", rng.sample(names, rng.randint(1, len(names)))) for i in range(rng.randint(5, 25))
        ]
        spec = group(members, topics)
        first = assign_sticky(spec)
        check_valid_and_complete(spec, first)
        check_balanced(spec, first)
        survivors = [m for m in spec.members if rng.random() > 0.2] or list(spec.members[:1])
        nxt = rejoin(spec, first, 1, survivors)
        second = assign_sticky(nxt)
        check_valid_and_complete(nxt, second)
        check_balanced(nxt, second)
        check_sticky(first.assignment, second.assignment)


# --- the contract against Kafka's own answer (balance score and moves, spec 3.4) ----------------------
#
# Differential specs (seed 20241025) where our builder alone was better balanced but revoked more
# than Kafka, shrunk while that stayed true. Each carries Kafka's balance score and move count
# (from the Java reference on the shrunk spec); the chosen answer must match or beat both.

KAFKA_REGRESSIONS = {
    "d166": (68, 0, "{\"topics\":{\"topic-f0\":{\"partitions\":3},\"topic-b1\":{\"partitions\":35}},\"members\":[{\"member_id\":\"member-2-1f8bce2a\",\"topics\":[\"topic-b1\",\"topic-f0\"],\"owned_partitions\":[],\"generation\":3},{\"member_id\":\"member-21-5e90ee1b\",\"topics\":[\"topic-b1\"],\"owned_partitions\":[],\"generation\":3},{\"member_id\":\"member-22-38051c27\",\"topics\":[\"topic-f0\",\"topic-b1\"],\"owned_partitions\":[],\"generation\":3},{\"member_id\":\"member-17-6790918c\",\"topics\":[\"topic-f0\",\"topic-b1\"],\"owned_partitions\":[],\"generation\":3},{\"member_id\":\"member-8-33e006e5\",\"topics\":[\"topic-b1\",\"topic-f0\"],\"owned_partitions\":[[\"topic-b1\",3],[\"topic-b1\",18],[\"topic-b1\",33]],\"generation\":3},{\"member_id\":\"member-24-ca000997\",\"topics\":[\"topic-b1\",\"topic-f0\"],\"owned_partitions\":[[\"topic-b1\",34],[\"topic-b1\",19],[\"topic-b1\",4]],\"generation\":3},{\"member_id\":\"member-5-ec680509\",\"topics\":[\"topic-f0\",\"topic-b1\"],\"owned_partitions\":[],\"generation\":3},{\"member_id\":\"member-19-5c94f1c4\",\"topics\":[\"topic-b1\"],\"owned_partitions\":[],\"generation\":3},{\"member_id\":\"member-15-f62a0434\",\"topics\":[\"topic-b1\"],\"owned_partitions\":[],\"generation\":3},{\"member_id\":\"member-10-03bd662f\",\"topics\":[\"topic-f0\",\"topic-b1\"],\"owned_partitions\":[],\"generation\":1},{\"member_id\":\"member-20-268d0b75\",\"topics\":[\"topic-f0\"],\"owned_partitions\":[],\"generation\":3},{\"member_id\":\"member-16-50d568ae\",\"topics\":[\"topic-f0\",\"topic-b1\"],\"owned_partitions\":[],\"generation\":1},{\"member_id\":\"member-18-8ad2bb60\",\"topics\":[\"topic-b1\"],\"owned_partitions\":[],\"generation\":3},{\"member_id\":\"member-6-16e0e3df\",\"topics\":[\"topic-b1\"],\"owned_partitions\":[],\"generation\":3},{\"member_id\":\"member-13-e43c167f\",\"topics\":[\"topic-b1\"],\"owned_partitions\":[],\"generation\":3},{\"member_id\":\"member-25-07f99d92\",\"topics\":[\"topic-b1\"],\"owned_partitions\":[],\"generation\":3},{\"member_id\":\"member-12-55ebce04\",\"topics\":[\"topic-f0\"],\"owned_partitions\":[],\"generation\":1},{\"member_id\":\"member-23-6cb519bd\",\"topics\":[\"topic-f0\",\"topic-b1\"],\"owned_partitions\":[],\"generation\":3},{\"member_id\":\"member-0-6cf4543c\",\"topics\":[\"topic-b1\"],\"owned_partitions\":[],\"generation\":3}]}"),
    "d302": (43, 2, "{\"topics\":{\"topic-h0\":{\"partitions\":15},\"topic-b1\":{\"partitions\":3},\"topic-d2\":{\"partitions\":13}},\"members\":[{\"member_id\":\"member-5-98a81481\",\"topics\":[\"topic-b1\"]},{\"member_id\":\"member-4-73152991\",\"topics\":[\"topic-d2\",\"topic-h0\"],\"owned_partitions\":[],\"generation\":14},{\"member_id\":\"member-8-29c40afe\",\"topics\":[\"topic-b1\",\"topic-d2\",\"topic-h0\"],\"owned_partitions\":[],\"generation\":14},{\"member_id\":\"member-11-7044aaa7\",\"topics\":[\"topic-b1\",\"topic-d2\"],\"owned_partitions\":[],\"generation\":14},{\"member_id\":\"member-10-2ccfabb0\",\"topics\":[\"topic-d2\",\"topic-h0\",\"topic-b1\"]},{\"member_id\":\"member-9-f54ea903\",\"topics\":[\"topic-h0\",\"topic-d2\"],\"owned_partitions\":[[\"topic-h0\",0],[\"topic-h0\",5],[\"topic-h0\",10],[\"topic-d2\",3]],\"generation\":14},{\"member_id\":\"member-14-3b9c0e07\",\"topics\":[\"topic-b1\"]},{\"member_id\":\"member-0-eddbd9f4\",\"topics\":[\"topic-b1\",\"topic-d2\"],\"owned_partitions\":[],\"generation\":14},{\"member_id\":\"member-13-26c4d117\",\"topics\":[\"topic-h0\",\"topic-d2\",\"topic-b1\"]},{\"member_id\":\"member-6-4f1274ad\",\"topics\":[\"topic-h0\",\"topic-b1\",\"topic-d2\"],\"owned_partitions\":[[\"topic-h0\",7],[\"topic-h0\",12],[\"topic-b1\",2],[\"topic-d2\",6]],\"generation\":14},{\"member_id\":\"member-12-864d6b6e\",\"topics\":[\"topic-d2\",\"topic-b1\",\"topic-h0\"],\"owned_partitions\":[],\"generation\":14},{\"member_id\":\"member-3-2803ccee\",\"topics\":[\"topic-d2\"],\"owned_partitions\":[],\"generation\":14}]}"),
    "d559": (40, 0, "{\"topics\":{\"topic-h0\":{\"partitions\":1},\"topic-h1\":{\"partitions\":4},\"topic-a2\":{\"partitions\":39}},\"members\":[{\"member_id\":\"1147\",\"topics\":[\"topic-h0\",\"topic-h1\",\"topic-a2\"],\"owned_partitions\":[],\"generation\":16},{\"member_id\":\"3184\",\"topics\":[\"topic-a2\",\"topic-h1\"]},{\"member_id\":\"ee4f\",\"topics\":[\"topic-a2\",\"topic-h0\",\"topic-h1\"]},{\"member_id\":\"d466\",\"topics\":[\"topic-h0\",\"topic-a2\"],\"owned_partitions\":[],\"generation\":14},{\"member_id\":\"3763\",\"topics\":[\"topic-a2\",\"topic-h1\"],\"owned_partitions\":[],\"generation\":16},{\"member_id\":\"dba6\",\"topics\":[\"topic-a2\",\"topic-h1\",\"topic-h0\"],\"owned_partitions\":[],\"generation\":16},{\"member_id\":\"abf2\",\"topics\":[\"topic-h0\",\"topic-h1\",\"topic-a2\"]},{\"member_id\":\"c61a\",\"topics\":[\"topic-h1\",\"topic-a2\"]},{\"member_id\":\"3843\",\"topics\":[\"topic-h0\",\"topic-a2\"]},{\"member_id\":\"2b87\",\"topics\":[\"topic-a2\"],\"owned_partitions\":[],\"generation\":16},{\"member_id\":\"69ad\",\"topics\":[\"topic-a2\"],\"owned_partitions\":[],\"generation\":16},{\"member_id\":\"f27d\",\"topics\":[\"topic-a2\"],\"owned_partitions\":[],\"generation\":16},{\"member_id\":\"0643\",\"topics\":[\"topic-h1\"],\"owned_partitions\":[],\"generation\":-1},{\"member_id\":\"1712\",\"topics\":[\"topic-h1\",\"topic-h0\"]},{\"member_id\":\"ed78\",\"topics\":[\"topic-a2\",\"topic-h1\",\"topic-h0\"],\"owned_partitions\":[[\"topic-a2\",9],[\"topic-a2\",18],[\"topic-a2\",27],[\"topic-a2\",36]],\"generation\":16}]}"),
    "d801": (4, 0, "{\"topics\":{\"topic-g0\":{\"partitions\":33},\"topic-c1\":{\"partitions\":27,\"racks\":[[\"r0\"],[\"r2\",\"r1\"],[\"r0\",\"r2\"],[\"r1\",\"r2\"],[\"r1\"],[\"r2\",\"r1\"],[\"r2\",\"r0\"],[\"r0\",\"r2\"],[\"r1\",\"r0\"],[\"r0\"],[\"r1\"],[\"r1\",\"r2\"],[\"r2\",\"r1\"],[\"r2\"],[\"r0\",\"r1\"],[\"r1\",\"r0\"],[\"r0\",\"r2\"],[\"r0\",\"r2\"],[\"r0\",\"r1\"],[\"r2\"],[\"r1\"],[\"r0\"],[\"r1\",\"r2\"],[\"r2\"],[\"r2\"],[\"r2\"],[\"r1\",\"r0\"]]}},\"members\":[{\"member_id\":\"consumer-5\",\"topics\":[\"topic-c1\",\"topic-g0\"],\"owned_partitions\":[[\"topic-g0\",17],[\"topic-g0\",20],[\"topic-g0\",22],[\"topic-g0\",24],[\"topic-g0\",25],[\"topic-g0\",26],[\"topic-g0\",27],[\"topic-g0\",28],[\"topic-g0\",29],[\"topic-g0\",30],[\"topic-g0\",31],[\"topic-g0\",32],[\"topic-c1\",26]],\"generation\":11},{\"member_id\":\"consumer-2\",\"topics\":[\"topic-g0\"]},{\"member_id\":\"consumer-4\",\"topics\":[\"topic-c1\"],\"rack\":\"r0\",\"owned_partitions\":[[\"topic-c1\",12]],\"generation\":10}]}"),
    "d971": (0, 0, "{\"topics\":{\"topic-g0\":{\"partitions\":5},\"topic-h1\":{\"partitions\":7,\"racks\":[[\"r0\",\"r1\"],[\"r1\",\"r2\"],[\"r1\"],[\"r2\"],[\"r0\"],[\"r0\",\"r1\"],[\"r1\",\"r0\"]]}},\"members\":[{\"member_id\":\"fcad\",\"topics\":[\"topic-h1\"],\"rack\":\"r1\",\"owned_partitions\":[[\"topic-h1\",3]]},{\"member_id\":\"b59f\",\"topics\":[\"topic-h1\",\"topic-g0\"]}]}"),
}


def balance_score(assignment: dict) -> int:
    """Kafka's ``getBalanceScore``: sum over member pairs of |size_i - size_j|."""
    sizes = sorted(len(p) for p in assignment.values())
    return sum(b - a for a, b in combinations(sizes, 2))


def claim_moves(spec: GroupSpec, assignment: dict) -> int:
    """Claims on existing partitions that the claimant does not keep (as the differential test counts)."""
    existing = {
        TopicPartition(t, p) for m in spec.members for t in m.topics if t in spec.topics
        for p in range(spec.topics[t].partitions)
    }
    return sum(
        1 for m in spec.members for p in m.owned_partitions
        if p in existing and p not in set(assignment[m.member_id])
    )


def final_placement(result: GroupAssignment) -> dict:
    """Where partitions end up once the withheld ones reach their intended owner."""
    placed = {m: list(p) for m, p in result.assignment.items()}
    for p, owner in result.transferring.items():
        placed[owner].append(p)
    return placed


@pytest.mark.parametrize("name", sorted(KAFKA_REGRESSIONS))
@pytest.mark.parametrize("assign", [assign_sticky, assign_cooperative_sticky], ids=["sticky", "cooperative"])
def test_kafka_regression_no_worse_balance_and_no_more_moves_than_kafka(name, assign):
    kafka_score, kafka_moves, raw = KAFKA_REGRESSIONS[name]
    spec = parse_group_spec(json.loads(raw), "sticky").spec
    result = assign(spec)
    placed = final_placement(result)
    check_valid_and_complete(spec, GroupAssignment(assignment=placed))
    assert balance_score(placed) <= kafka_score
    assert claim_moves(spec, result.assignment) <= kafka_moves


def _port_candidate(spec: GroupSpec) -> dict:
    """The Kafka-port answer on its own, as member -> partitions."""
    members = spec.members
    layout = build_layout(spec)
    visit = hashmap_visit_order([m.member_id for m in members])
    claims = collect_claims(members, layout)
    resolve_ownership(members, visit, claims)
    owner = kafka_general(members, layout, claims, rack_info(spec, members, layout), visit)
    objs = partition_objects(layout, claims)
    out = {m.member_id: [] for m in members}
    for g, o in enumerate(owner.tolist()):
        out[members[o].member_id].append(objs[g])
    return out


@st.composite
def heterogeneous_groups(draw):
    """Groups with differing subscriptions and a previous round (owned partitions, generations)."""
    n_topics = draw(st.integers(2, 5))
    counts = {f"t{i}": draw(st.integers(1, 12)) for i in range(n_topics)}
    names = list(counts)
    n_members = draw(st.integers(2, 9))
    subs = [draw(st.lists(st.sampled_from(names), min_size=1, max_size=n_topics, unique=True)) for _ in range(n_members)]
    if len({frozenset(s) for s in subs}) == 1:
        subs[0] = [t for t in names if t not in subs[0]] or names[:1]
        if len({frozenset(s) for s in subs}) == 1:
            subs[-1] = names
    # previous owners: each partition claimed by at most one subscriber-or-not, sometimes none
    owned: list[list[TopicPartition]] = [[] for _ in range(n_members)]
    for t, n in counts.items():
        for p in range(n):
            who = draw(st.integers(-1, n_members - 1))
            if who >= 0:
                owned[who].append(TopicPartition(t, p))
    gens = [draw(st.sampled_from([-1, 3, 4, 4, 4])) for _ in range(n_members)]
    members = [
        MemberSpec(f"m{i}", tuple(subs[i]), tuple(owned[i]), gens[i]) for i in range(n_members)
    ]
    return group(members, counts)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(heterogeneous_groups())
def test_chosen_answer_is_never_worse_than_the_kafka_port_on_balance_or_moves(spec):
    kafka = _port_candidate(spec)
    for assign in (assign_sticky, assign_cooperative_sticky):
        result = assign(spec)
        placed = final_placement(result)
        check_valid_and_complete(spec, GroupAssignment(assignment=placed))
        assert balance_score(placed) <= balance_score(kafka)
        assert claim_moves(spec, result.assignment) <= claim_moves(spec, kafka)


@pytest.mark.parametrize("seed", range(20))
def test_plain_python_level_fill_and_deal_order_equal_the_numpy_ones(seed, monkeypatch):
    # The general builder's per-topic routines run in plain Python for topics with few
    # subscribers; the NumPy versions handle the rest. Both must agree exactly.
    import random

    import numpy as np

    import assignors.sticky._dealing as dealing

    rng = random.Random(seed)
    for _ in range(100):
        n = rng.randint(1, 30)
        loads = np.array([rng.randint(0, 10) for _ in range(n)], dtype=np.int64)
        ranks = np.array(rng.sample(range(100), n), dtype=np.int64)
        members = np.array(rng.sample(range(200), n), dtype=np.int64)
        deficit = np.array([rng.randint(0, 4) for _ in range(n)], dtype=np.int64)
        units = rng.randint(1, 60)
        monkeypatch.setattr(dealing, "SMALL", 48)
        small = (dealing.level_fill(loads, ranks, units), dealing.deal_order(loads, ranks, members, deficit))
        monkeypatch.setattr(dealing, "SMALL", -1)
        large = (dealing.level_fill(loads, ranks, units), dealing.deal_order(loads, ranks, members, deficit))
        assert small[0].tolist() == large[0].tolist()
        assert int(small[0].sum()) == units
        assert small[1].tolist() == large[1].tolist()


@pytest.mark.parametrize("seed", range(20))
def test_level_sweep_deal_equals_the_numpy_deal_order(seed, monkeypatch):
    # deal_levels (the plain-Python deal of topics with few subscribers) sweeps levels when the
    # receivers' ranges overlap densely and sorts units otherwise; both must give deal_order's
    # NumPy answer. Wide starting spreads force the sorting branch.
    import random

    import numpy as np

    import assignors.sticky._dealing as dealing

    monkeypatch.setattr(dealing, "SMALL", -1)
    rng = random.Random(seed)
    branches = set()
    for _ in range(200):
        n = rng.randint(1, 30)
        spread = rng.choice((2, 10, 1000))
        running = [rng.randint(0, spread) for _ in range(n)]
        ranks = sorted(rng.sample(range(100), n))  # a topic's edges come in rank order
        members = rng.sample(range(200), n)
        deficit = [rng.randint(1, 4) for _ in range(n)]
        receivers = [(s, s + d, m) for s, d, m in zip(running, deficit, members)]
        expected = dealing.deal_order(
            np.array(running, dtype=np.int64), np.array(ranks, dtype=np.int64),
            np.array(members, dtype=np.int64), np.array(deficit, dtype=np.int64),
        )
        assert dealing.deal_levels(receivers) == expected.tolist()
        high, low = max(s + d for s, d in zip(running, deficit)), min(running)
        branches.add((high - low) * n <= 4 * sum(deficit) + 64)
    assert branches == {True, False}


@pytest.mark.parametrize("seed", range(40))
def test_general_path_answer_does_not_depend_on_the_plain_python_threshold(seed, monkeypatch):
    # Same groups (owned partitions included) through the plain-Python per-topic routines and
    # through the NumPy ones: identical answers, list order and transfers included. (The general
    # builder picks its own per-topic path with the same threshold.)
    import assignors.sticky._dealing as dealing
    import assignors.sticky._general as general

    rng = random.Random(seed)
    topics = {f"t{i}": rng.randint(0, 12) for i in range(rng.randint(2, 7))}
    names = list(topics)
    owners = {}
    members = []
    for i in range(rng.randint(2, 14)):
        subscribed = rng.sample(names, rng.randint(1, len(names)))
        owned = [TopicPartition(t, p) for t in subscribed for p in range(topics[t])
                 if rng.random() < 0.3 and (t, p) not in owners]
        owners.update({tp: i for tp in owned})
        members.append(MemberSpec(f"c{rng.randint(0, 99)}-{i}", tuple(subscribed), tuple(owned), 1))
    spec = GroupSpec(tuple(members), {t: TopicSpec(t, c) for t, c in topics.items()})
    for module in (dealing, general):
        monkeypatch.setattr(module, "SMALL", 48)
    small = (assign_sticky(spec), assign_cooperative_sticky(spec))
    for module in (dealing, general):
        monkeypatch.setattr(module, "SMALL", -1)
    large = (assign_sticky(spec), assign_cooperative_sticky(spec))
    assert small == large
    assert sum(map(len, small[0].assignment.values())) == sum(
        c for t, c in topics.items() if any(t in m.topics for m in members))
