"""Our ``uniform`` and ``server-range`` against Kafka 4.1's own server-side assignors, on seeded random
groups (the Java reference in jvm/reference runs ``UniformAssignor`` and ``RangeAssignor`` of
kafka-group-coordinator 4.1.1, fed the way the group coordinator feeds them).

The corpus: groups of 1-30 members over 1-8 topics, homogeneous and heterogeneous subscriptions,
static members, member and instance ids beyond the Basic Multilingual Plane, subscriptions to topics
missing from the metadata (deleted), and previous target assignments of two kinds: made up (random
or balanced-looking, with members that have left, partitions added since and deleted topics) and
chained (Kafka's own answer for the group a moment before, then members join, leave or restart
statically, partitions are added, topics are deleted or created, subscriptions change). Plus a few
500-member groups of 5,000 partitions, homogeneous and heterogeneous, fresh and chained.

Every answer must be exactly Kafka's, member by member (as sets: Kafka keeps unordered sets). The
inputs fix every order Kafka's answer depends on: the members' map order follows from the spec's
member order, and topics with ids are walked in Kafka's hash order of those ids. A spec without
topic ids makes our port walk topics in name order; Kafka then gets ids that it walks in that same
order (``Uuid(0, 2 + rank of the name)``: ascending both in ``compareTo`` and in hash buckets), so
those answers must be exact too. Validity, balance (Kafka's balance score) and the number of
previously owned partitions moved are also compared, so that a failure says how far apart the two
are. States a coordinator never produces (a partition in two target assignments, beyond the
partition count) are checked for validity on our side only.

Seed and size: ``SERVER_DIFFERENTIAL_SEED`` and ``SERVER_DIFFERENTIAL_GROUPS`` (defaults 20261125 and
1500 random groups, each also chained once: about 6,000 comparisons). Run with ``-s`` for the table.
"""

from __future__ import annotations

import json
import os
import random
import uuid
from collections import Counter
from dataclasses import dataclass, field

import pytest

from assignors import TopicPartition, registry
from assignors.codec import parse_answer, parse_group_spec
from assignors.metrics import balance_score
from assignors.model import GroupSpec, topic_id_string
from tests.java_reference import run_reference

pytestmark = pytest.mark.integration

SEED = int(os.environ.get("SERVER_DIFFERENTIAL_SEED", "20261125"))
GROUPS = int(os.environ.get("SERVER_DIFFERENTIAL_GROUPS", "1500"))
ASSIGNORS = ("uniform", "server-range")
LARGE_MEMBERS, LARGE_PARTITIONS = 500, 5000


# --- random groups ---------------------------------------------------------------------------------

def random_topic_id(rng: random.Random) -> str:
    while True:
        topic_id = uuid.UUID(int=rng.getrandbits(128))
        if topic_id.int > 1:
            return topic_id_string(topic_id)


def member_ids(rng: random.Random, count: int) -> list[str]:
    style = rng.choice(["kip848", "consumer", "short", "wide"])
    if style == "kip848":  # the Java consumer's member ids are random Uuids
        ids = [random_topic_id(rng) for _ in range(count)]
    elif style == "consumer":
        ids = [f"consumer-{rng.randint(1, 9)}-{rng.getrandbits(32):08x}" for _ in range(count)]
    elif style == "short":
        ids = [f"c{i}" for i in range(count)]
    else:  # Java and Python order these differently (UTF-16 code units vs code points)
        ids = [rng.choice(["\U0001f600", "\uff01", "z", "\U00010000"]) + f"-{rng.randint(0, 999)}" for _ in range(count)]
    ids = list(dict.fromkeys(ids))
    rng.shuffle(ids)
    return ids


def random_group(rng: random.Random, index: int) -> dict:
    names = list(dict.fromkeys(f"{rng.choice(['topic-', 't', 'orders.', 'x_'])}{rng.randint(0, 60)}"
                               for _ in range(rng.randint(1, 8))))
    counts = {t: rng.choice([0, rng.randint(1, 5)]) if rng.random() < 0.1 else rng.randint(1, 40) for t in names}
    with_ids = rng.random() < 0.7
    topics = {t: {"partitions": counts[t], **({"topic_id": random_topic_id(rng)} if with_ids else {})} for t in names}

    ids = member_ids(rng, rng.randint(1, 30))
    homogeneous = rng.random() < 0.5
    shared = rng.sample(names, rng.randint(1, len(names)))
    missing = [f"deleted-{k}" for k in range(rng.randint(1, 2))] if rng.random() < 0.15 else []
    members = []
    for member_id in ids:
        if homogeneous:
            subscription = shared + missing
        elif rng.random() < 0.06:
            subscription = []
        else:
            subscription = rng.sample(names, rng.randint(1, len(names))) + (missing if rng.random() < 0.5 else [])
        rng.shuffle(subscription)
        member: dict = {"member_id": member_id, "topics": subscription}
        if rng.random() < 0.25:
            member["group_instance_id"] = rng.choice(["instance-", "\U0001f600", "\uff01"]) + str(rng.randint(0, 99))
        members.append(member)
    _unique_instances(members)
    spec = {"id": f"g{index}", "topics": topics, "members": members}
    if rng.random() < 0.6:
        _made_up_previous_assignment(rng, spec, missing)
    return spec


def _unique_instances(members: list[dict]) -> None:
    seen: set[str] = set()
    for m in members:
        if m.get("group_instance_id") in seen:
            del m["group_instance_id"]
        elif "group_instance_id" in m:
            seen.add(m["group_instance_id"])


def _made_up_previous_assignment(rng: random.Random, spec: dict, deleted: list[str]) -> None:
    """A target assignment the group could have had: each partition with one member or none, from
    before partitions were added, with members that have left and topics deleted since."""
    members = spec["members"]
    ghosts = [f"departed-{k}" for k in range(rng.randint(0, 3))]
    previous_topics = {m["member_id"]: set(m["topics"]) if rng.random() < 0.85 else
                       set(rng.sample(list(spec["topics"]), rng.randint(1, len(spec["topics"]))))
                       for m in members}
    owned: dict[str, dict[str, list[int]]] = {m["member_id"]: {} for m in members}
    earlier_counts = {t: max(0, e["partitions"] - (rng.randint(1, 4) if rng.random() < 0.2 else 0))
                      for t, e in spec["topics"].items()}
    earlier_counts.update({t: rng.randint(1, 6) for t in deleted})
    balanced = rng.random() < 0.5
    for topic, count in earlier_counts.items():
        holders = [m for m, ts in previous_topics.items() if topic in ts or topic in deleted] + ghosts
        if not holders:
            continue
        rng.shuffle(holders)
        for p in range(count):
            if not balanced and rng.random() < 0.1:
                continue  # nobody has it
            holder = holders[p * len(holders) // count] if balanced else rng.choice(holders)
            if holder in owned:
                owned[holder].setdefault(topic, []).append(p)
    for m in members:
        record = list(owned[m["member_id"]].items())
        rng.shuffle(record)
        pairs = []
        for topic, parts in record:
            rng.shuffle(parts)
            pairs += [[topic, p] for p in parts]
        if pairs:
            m["owned_partitions"] = pairs


def chained_group(rng: random.Random, spec: dict, answer: dict, index: int) -> dict:
    """The group a moment after ``spec`` was assigned ``answer`` (Kafka's own): members keep their
    target assignment, in the order Kafka listed it, and then things happen."""
    nxt = json.loads(json.dumps(spec))
    nxt["id"] = f"{spec['id']}/next{index}"
    by_id = {m["member_id"]: m for m in nxt["members"]}
    for member_id, pairs in answer["assignment"].items():
        by_id[member_id].pop("owned_partitions", None)
        if pairs:
            by_id[member_id]["owned_partitions"] = pairs
    members = nxt["members"]
    names = list(nxt["topics"])
    for _ in range(rng.randint(1, 3)):
        event = rng.choice(["join", "leave", "static-restart", "add-partitions", "delete-topic", "create-topic",
                            "resubscribe"])
        if event == "join":
            template = rng.choice(members)["topics"] if members else names
            members.insert(rng.randint(0, len(members)),
                           {"member_id": f"joined-{index}-{rng.getrandbits(24):06x}", "topics": list(template)})
        elif event == "leave" and len(members) > 1:
            members.pop(rng.randrange(len(members)))
        elif event == "static-restart":
            static = [m for m in members if m.get("group_instance_id")]
            if static:
                # TargetAssignmentBuilder hands the new member id the departed one's target assignment.
                static[rng.randrange(len(static))]["member_id"] = f"restarted-{index}-{rng.getrandbits(24):06x}"
        elif event == "add-partitions":
            topic = rng.choice(names)
            nxt["topics"][topic]["partitions"] += rng.randint(1, 10)
        elif event == "delete-topic" and len(names) > 1:
            del nxt["topics"][names.pop(rng.randrange(len(names)))]
        elif event == "create-topic":
            topic = f"created-{index}-{rng.randint(0, 9)}"
            if topic not in nxt["topics"]:
                entry = {"partitions": rng.randint(1, 20)}
                if any("topic_id" in e for e in nxt["topics"].values()):
                    entry["topic_id"] = random_topic_id(rng)
                nxt["topics"][topic] = entry
                names.append(topic)
                for m in members:
                    if rng.random() < 0.7 and topic not in m["topics"]:  # it may have been deleted before
                        m["topics"].append(topic)
        elif event == "resubscribe" and members:
            m = rng.choice(members)
            m["topics"] = rng.sample(names, rng.randint(1, len(names)))
    return nxt


def large_group(rng: random.Random, homogeneous: bool, index: int) -> dict:
    topic_count = rng.choice([10, 100])
    names = [f"topic{i}" for i in range(topic_count)]
    topics = {t: {"partitions": LARGE_PARTITIONS // topic_count, "topic_id": random_topic_id(rng)} for t in names}
    ids = member_ids(rng, LARGE_MEMBERS)
    buckets = [names[b::5] for b in range(5)]
    members = [{"member_id": m, "topics": list(names) if homogeneous else list(buckets[i % 5])} for i, m in enumerate(ids)]
    return {"id": f"large{index}-{'homogeneous' if homogeneous else 'heterogeneous'}", "topics": topics,
            "members": members}


def impossible_state(rng: random.Random, spec: dict) -> dict:
    """``spec`` with claims no coordinator produces: a partition in two target assignments, claims
    beyond a topic's partition count."""
    bad = json.loads(json.dumps(spec))
    bad["id"] = f"{spec['id']}/impossible"
    members = bad["members"]
    for m in rng.sample(members, min(len(members), 3)):
        topic = rng.choice(list(bad["topics"]))
        count = bad["topics"][topic]["partitions"]
        claims = m.setdefault("owned_partitions", [])
        for p in {rng.randint(0, count + 2) for _ in range(3)}:
            if [topic, p] not in claims:
                claims.append([topic, p])
    return bad


def java_view(spec: dict) -> dict:
    """What the Java reference gets: ``spec`` itself, or, without topic ids, ids that Kafka walks in
    topic-name order (our port's order without ids)."""
    if any("topic_id" in e for e in spec["topics"].values()):
        return spec
    ranked = {t: topic_id_string(uuid.UUID(int=rank + 2)) for rank, t in enumerate(sorted(spec["topics"]))}
    return dict(spec, topics={t: dict(e, topic_id=ranked[t]) for t, e in spec["topics"].items()})


# --- properties -----------------------------------------------------------------------------------

def existing_partitions(spec: GroupSpec) -> set[TopicPartition]:
    subscribed = {t for m in spec.members for t in m.topics}
    return {TopicPartition(t, p) for t in subscribed if t in spec.topics for p in range(spec.topics[t].partitions)}


def validity_problems(spec: GroupSpec, assignment: dict[str, list[TopicPartition]]) -> list[str]:
    problems = []
    subscriptions = {m.member_id: set(m.topics) for m in spec.members}
    if set(assignment) != set(subscriptions):
        problems.append(f"members {sorted(assignment)} instead of {sorted(subscriptions)}")
    seen = Counter(tp for tps in assignment.values() for tp in tps)
    problems += [f"{m} got {tp} of a topic it does not subscribe to"
                 for m, tps in assignment.items() for tp in tps if tp.topic not in subscriptions.get(m, ())][:3]
    problems += [f"{tp} assigned {n} times" for tp, n in seen.items() if n > 1][:3]
    existing = existing_partitions(spec)
    problems += [f"{tp} does not exist" for tp in seen if tp not in existing][:3]
    unassigned = existing - set(seen)
    if unassigned:
        problems.append(f"{len(unassigned)} partitions unassigned, e.g. {sorted(unassigned)[:3]}")
    return problems


def assignment_balance_score(assignment: dict) -> int:
    """Kafka's ``getBalanceScore`` of a member -> partitions answer."""
    return balance_score([len(tps) for tps in assignment.values()])


def moves(spec: GroupSpec, assignment: dict) -> int:
    """Previously owned partitions (that still exist) that their member does not keep."""
    existing = existing_partitions(spec)
    return sum(1 for m in spec.members for tp in m.owned_partitions
               if tp in existing and tp not in set(assignment[m.member_id]))


# --- the comparison --------------------------------------------------------------------------------

@dataclass
class Tally:
    compared: Counter = field(default_factory=Counter)
    exact: Counter = field(default_factory=Counter)
    impossible_valid: int = 0
    impossible: int = 0
    failures: list = field(default_factory=list)  # (size, spec id, message, spec json)


def kind_of(spec: GroupSpec, with_ids: bool) -> tuple[str, str, str]:
    homogeneous = len({frozenset(m.topics) for m in spec.members}) <= 1
    previous = any(m.owned_partitions for m in spec.members)
    return ("homogeneous" if homogeneous else "heterogeneous", "previous" if previous else "fresh",
            "topic ids" if with_ids else "names only")


@pytest.fixture(scope="module")
def corpus() -> tuple[list[dict], list[dict], dict[str, list[dict]]]:
    rng = random.Random(SEED)
    first = [random_group(rng, i) for i in range(GROUPS)]
    first += [large_group(rng, homogeneous, i) for i, homogeneous in enumerate([True, False, True, False])]
    # Kafka's uniform answers for the first round make the chained round's previous assignments.
    first_answers = run_reference([dict(java_view(s), assignor="uniform") for s in first], timeout=600)
    chained = [chained_group(rng, spec, answer, i) for i, (spec, answer) in enumerate(zip(first, first_answers))
               if "error" not in answer]
    specs = first + chained
    impossible = [impossible_state(rng, s) for s in rng.sample(first[:GROUPS], min(GROUPS, 200))]
    lines = [dict(java_view(s), id=f"{s['id']}@{name}", assignor=name) for name in ASSIGNORS for s in specs]
    answers = run_reference(lines, timeout=900)
    by_assignor = {name: answers[i * len(specs):(i + 1) * len(specs)] for i, name in enumerate(ASSIGNORS)}
    return specs, impossible, by_assignor


def _size(spec: GroupSpec) -> int:
    return len(spec.members) * 100 + sum(t.partitions for t in spec.topics.values())


@pytest.mark.parametrize("assignor", ASSIGNORS)
def test_our_server_side_assignor_is_exactly_kafkas(assignor, corpus):
    specs, impossible, java_answers = corpus
    assign = registry.get_assignor(assignor)
    tally = Tally()
    for raw, java_line in zip(specs, java_answers[assignor]):
        spec = parse_group_spec(raw, assignor).spec
        with_ids = any("topic_id" in e for e in raw["topics"].values())
        kind = kind_of(spec, with_ids)
        tally.compared[kind] += 1

        def fail(message: str) -> None:
            tally.failures.append((_size(spec), raw["id"], message, json.dumps(dict(raw, assignor=assignor))))

        try:
            ours = assign(spec).assignment
        except Exception as exc:  # noqa: BLE001 - every crash is a finding, reported with its spec
            fail(f"our assignor raised {type(exc).__name__}: {exc}")
            continue
        if "error" in java_line:
            fail(f"Kafka failed: {java_line['error']}")
            continue
        java = parse_answer(java_line).assignment
        problems = validity_problems(spec, ours)
        if problems:
            fail("ours is invalid: " + "; ".join(problems[:3]))
            continue
        if {m: set(tps) for m, tps in ours.items()} == {m: set(tps) for m, tps in java.items()}:
            tally.exact[kind] += 1
            continue
        fail(_difference(spec, ours, java))

    for raw in impossible:
        spec = parse_group_spec(raw, assignor).spec
        tally.impossible += 1
        problems = validity_problems(spec, assign(spec).assignment)
        if problems:
            tally.failures.append((_size(spec), raw["id"], "ours is invalid on a state no coordinator produces: "
                                   + "; ".join(problems[:3]), json.dumps(dict(raw, assignor=assignor))))
        else:
            tally.impossible_valid += 1

    _report(assignor, tally)
    if tally.failures:
        size, spec_id, message, spec_json = min(tally.failures)
        pytest.fail(f"{assignor}: {len(tally.failures)} specs differ from Kafka. Smallest ({spec_id}): {message}\n"
                    f"spec: {spec_json}", pytrace=False)


def _difference(spec: GroupSpec, ours: dict, java: dict) -> str:
    members = [m for m in java if set(ours.get(m, ())) != set(java[m])]
    diffs = [f"{m}: only ours {sorted(map(tuple, set(ours.get(m, ())) - set(java[m])))},"
             f" only Kafka's {sorted(map(tuple, set(java[m]) - set(ours.get(m, ()))))}" for m in members[:3]]
    return (f"{len(members)} members differ (balance score ours {assignment_balance_score(ours)}, Kafka {assignment_balance_score(java)};"
            f" moves ours {moves(spec, ours)}, Kafka {moves(spec, java)}): " + "; ".join(diffs))


def _report(assignor: str, t: Tally) -> None:
    print(f"\n[server differential] {assignor}: exact per member")
    for kind in sorted(t.compared):
        print(f"  {' / '.join(kind):45} {t.exact[kind]:5} / {t.compared[kind]}")
    print(f"  total {sum(t.exact.values())} / {sum(t.compared.values())}; states no coordinator produces: "
          f"{t.impossible_valid} / {t.impossible} valid; failures: {len(t.failures)}")


def test_the_corpus_covers_what_the_comparison_is_about(corpus):
    """Guards the generator: each kind of group shows up often enough to count."""
    specs, _, _ = corpus
    kinds = Counter(kind_of(parse_group_spec(s, "uniform").spec, any("topic_id" in e for e in s["topics"].values()))
                    for s in specs)
    for subscription in ("homogeneous", "heterogeneous"):
        for previous in ("fresh", "previous"):
            for ids in ("topic ids", "names only"):
                assert kinds[(subscription, previous, ids)] >= 50, (subscription, previous, ids, kinds)
    assert sum(len(s["members"]) >= LARGE_MEMBERS - 5 for s in specs) >= 6  # chained ones may lose a few
    assert sum("/next" in s["id"] and any(m["member_id"].startswith("restarted-") for m in s["members"])
               for s in specs) >= 30
    assert sum(any(t not in s["topics"] for m in s["members"] for t in m["topics"]) for s in specs) >= 150
