"""Our assignors against Kafka's own (the Java reference in jvm/reference), on seeded random groups.

The same 1,200 random specs go through every client assignor, on both sides; the Java side runs all
of them (4 x 1,200 lines) in one JVM. What must agree:

* ``range``: the same partitions per member (as sets: Kafka's tests compare them so);
* ``roundrobin``: the same lists, order included;
* ``sticky`` / ``cooperative-sticky`` when every member has the same non-empty subscription (the
  constrained path, whose list order Kafka's tests assert): the same lists, and for the cooperative
  assignor our ``transferring`` partitions are exactly the ones Kafka withheld;
* heterogeneous sticky specs: ours is valid and complete, its balance score is at most Kafka's and it
  moves no more previously owned partitions than Kafka does (for the cooperative assignor the balance
  is that of the final placement, after the withheld partitions reach their new owners).

Two documented Kafka bugs (spec section 8), and a third found by this test (a claim beyond a
topic's partition count is kept and that partition assigned), are not reproduced by our port on
purpose. Specs that can hit them are excluded from the comparison by the named predicates below,
counted, and still checked for validity and completeness on our side.

Seed and size: ``DIFFERENTIAL_SEED`` and ``DIFFERENTIAL_SPECS`` in the environment (defaults
20241025 and 1200). Run with ``-s`` to see the agreement table.
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

import pytest

from assignors import TopicPartition, registry
from assignors.codec import ParsedSpec, parse_answer, parse_group_spec
from assignors.java_order import hashmap_order
from assignors.metrics import balance_score
from assignors.model import GroupSpec
from tests.java_reference import run_reference

SEED = int(os.environ.get("DIFFERENTIAL_SEED", "20241025"))
SPEC_COUNT = int(os.environ.get("DIFFERENTIAL_SPECS", "1200"))
ASSIGNORS = ("range", "roundrobin", "sticky", "cooperative-sticky")
STICKY_FAMILY = ("sticky", "cooperative-sticky")
RACKS = ("r0", "r1", "r2")


# --- random groups ---------------------------------------------------------------------------------

def random_spec(rng: random.Random, index: int) -> dict:
    """A group as Kafka could see it: 1-30 members, 1-8 topics of 0-40 partitions, static members,
    racks sometimes, and often owned partitions from a previous round, with generations, stale
    members and occasional duplicate or out-of-date claims."""
    topic_count = rng.randint(1, 8)
    topics = [f"topic-{rng.choice('abcdefgh')}{i}" for i in range(topic_count)]
    counts = {t: rng.choice([0, rng.randint(1, 5), rng.randint(1, 40)]) if rng.random() < 0.1 else rng.randint(1, 40) for t in topics}
    with_racks = rng.random() < 0.25
    topic_json: dict = {}
    for t in topics:
        entry: dict = {"partitions": counts[t]}
        if with_racks:
            # Sometimes every partition on every rack: rack awareness must then switch itself off.
            everywhere = rng.random() < 0.3
            entry["racks"] = [list(RACKS) if everywhere else rng.sample(RACKS, rng.randint(1, 2)) for _ in range(counts[t])]
        topic_json[t] = entry

    member_count = rng.randint(1, 30)
    style = rng.choice(["consumer-{}", "c{}", "member-{}-{:08x}", "{:04x}"])
    ids = [style.format(i, rng.getrandbits(32)) if "{:08x}" in style else
           style.format(rng.getrandbits(16)) if style == "{:04x}" else style.format(i + 1)
           for i in range(member_count)]
    ids = list(dict.fromkeys(ids))  # random hex ids may collide
    rng.shuffle(ids)  # insertion order need not be id order

    homogeneous = rng.random() < 0.5
    shared = rng.sample(topics, rng.randint(1, topic_count))
    if rng.random() < 0.1:
        shared.append("not-in-metadata")  # subscribed but absent from metadata (spec 0.2)
    members = []
    for n, member_id in enumerate(ids):
        if homogeneous:
            subscription = rng.sample(shared, len(shared))  # same set, any order
        elif rng.random() < 0.06:
            subscription = []
        else:
            subscription = rng.sample(topics, rng.randint(1, topic_count))
        member: dict = {"member_id": member_id, "topics": subscription}
        if rng.random() < 0.25:
            member["group_instance_id"] = f"instance-{rng.randint(0, 99)}-{n}"
        if with_racks and rng.random() < 0.85:
            member["rack"] = rng.choice(RACKS + ("r9",))
        members.append(member)

    if rng.random() < 0.65:
        _add_previous_round(rng, members, topics, counts)
    return {"id": f"d{index}", "topics": topic_json, "members": members}


def _add_previous_round(rng: random.Random, members: list[dict], topics: list[str], counts: dict[str, int]) -> None:
    generation = rng.randint(1, 30)
    old = [m for m in members if rng.random() < 0.8]
    if not old:
        return
    # A previous subscription is usually the current one; sometimes it was different, which leaves
    # claims on topics the member no longer subscribes to.
    previous_topics = {
        m["member_id"]: set(m["topics"]) if rng.random() < 0.85 else set(rng.sample(topics, rng.randint(1, len(topics))))
        for m in old
    }
    owned: dict[str, list[list]] = {m["member_id"]: [] for m in old}
    for t in topics:
        holders = [m["member_id"] for m in old if t in previous_topics[m["member_id"]]]
        if not holders:
            continue
        shrunk_from = counts[t] + (rng.randint(1, 3) if rng.random() < 0.05 else 0)  # topic had more partitions
        start = rng.randrange(len(holders))
        for p in range(shrunk_from):
            if rng.random() < 0.9:
                owned[holders[(start + p) % len(holders)]].append([t, p])
    generations = {}
    for m in old:
        roll = rng.random()
        generations[m["member_id"]] = (
            generation if roll < 0.8 else max(-1, generation - rng.randint(1, 3)) if roll < 0.95 else -1
        )
    claims = [(mid, tp) for mid, tps in owned.items() for tp in tps]
    if claims and rng.random() < 0.15:
        # Duplicate claims: another old member also reports a partition (stale or same generation).
        for _ in range(rng.randint(1, 4)):
            _, tp = rng.choice(claims)
            other = rng.choice(old)["member_id"]
            if tp not in owned[other]:
                owned[other].append(list(tp))
    if rng.random() < 0.05:
        owned[old[0]["member_id"]].append(["deleted-topic", 0])
    for m in old:
        tps = owned[m["member_id"]]
        if rng.random() < 0.3:
            rng.shuffle(tps)
        if tps:
            m["owned_partitions"] = tps
        if generations[m["member_id"]] != -1 or rng.random() < 0.5:
            m["generation"] = generations[m["member_id"]]


# --- the two Kafka bugs we do not reproduce (spec section 8) ------------------------------------------

def _java_judges_subscriptions_equal(spec: GroupSpec) -> bool:
    """``AbstractStickyAssignor.allSubscriptionsEqual`` as Kafka evaluates it, in HashMap order."""
    by_id = {m.member_id: m for m in spec.members}
    reference: set[str] = set()
    for member_id in hashmap_order([m.member_id for m in spec.members]):
        topics = by_id[member_id].topics
        if not reference:
            reference.update(topics)  # re-initialised while empty: the bug
        elif not (len(topics) == len(reference) and reference.issuperset(topics)):
            return False
    return True


def kafka_empty_subscription_member_first_on_fast_path(spec: GroupSpec) -> bool:
    """Kafka's constrained sticky path runs although a member subscribes to nothing, because that member
    was iterated before the first non-empty one (spec 3.1); Kafka may then hand it partitions."""
    truly_equal = len({frozenset(m.topics) for m in spec.members}) == 1
    return _java_judges_subscriptions_equal(spec) and not truly_equal


def kafka_stale_claim_on_unsubscribed_topic_on_general_path(spec: GroupSpec) -> bool:
    """Kafka's general sticky path builds ``prevAssignment`` from older-generation claims without
    checking the claimant still subscribes to the topic (spec 3.4 quirks): it can move the partition
    back to that member (invalid) or throw a NullPointerException."""
    if _java_judges_subscriptions_equal(spec):
        return False
    subscribed = {t for m in spec.members for t in m.topics}
    live = {t: spec.topics[t].partitions for t in subscribed if t in spec.topics and spec.topics[t].partitions > 0}
    max_generation = max(m.generation for m in spec.members)
    for m in spec.members:
        in_prev_assignment = m.generation < max_generation  # unknown (-1) counts as older too
        if not in_prev_assignment:
            continue
        if any(tp.topic in live and tp.partition < live[tp.topic] and tp.topic not in m.topics for tp in m.owned_partitions):
            return True
    return False


def kafka_keeps_claim_beyond_partition_count(spec: GroupSpec) -> bool:
    """Kafka's sticky assignors keep a claim on a partition number the topic does not have (metadata
    behind the claimant's, e.g. a leader that has not yet seen a partition increase) and assign that
    non-existent partition. Not in spec section 8; our port ignores such claims on purpose
    (documented in ``assignors/sticky/__init__.py``)."""
    subscribed = {t for m in spec.members for t in m.topics}
    live = {t: spec.topics[t].partitions for t in subscribed if t in spec.topics and spec.topics[t].partitions > 0}
    return any(tp.topic in live and tp.partition >= live[tp.topic] for m in spec.members for tp in m.owned_partitions)


STICKY_BUGS = (
    kafka_empty_subscription_member_first_on_fast_path,
    kafka_stale_claim_on_unsubscribed_topic_on_general_path,
    kafka_keeps_claim_beyond_partition_count,
)
KAFKA_BUGS: dict[str, tuple[Callable[[GroupSpec], bool], ...]] = {
    "range": (),
    "roundrobin": (),
    "sticky": STICKY_BUGS,
    "cooperative-sticky": STICKY_BUGS,
}


# --- properties -----------------------------------------------------------------------------------

def all_partitions(spec: GroupSpec) -> set[TopicPartition]:
    subscribed = {t for m in spec.members for t in m.topics}
    return {TopicPartition(t, p) for t in subscribed if t in spec.topics for p in range(spec.topics[t].partitions)}


def validity_problems(spec: GroupSpec, assignment: dict, transferring) -> list[str]:
    problems = []
    subscriptions = {m.member_id: set(m.topics) for m in spec.members}
    seen: Counter = Counter(tp for tps in assignment.values() for tp in tps)
    for member_id, tps in assignment.items():
        for tp in tps:
            if tp.topic not in subscriptions[member_id]:
                problems.append(f"{member_id} got {tp} of a topic it does not subscribe to")
    problems += [f"{tp} assigned {n} times" for tp, n in seen.items() if n > 1]
    existing = all_partitions(spec)
    problems += [f"{tp} does not exist" for tp in seen if tp not in existing][:3]
    missing = all_partitions(spec) - set(seen) - set(transferring)
    if missing:
        problems.append(f"{len(missing)} partitions neither assigned nor transferring, e.g. {sorted(missing)[:3]}")
    both = set(seen) & set(transferring)
    if both:
        problems.append(f"partitions both assigned and withheld: {sorted(both)[:3]}")
    return problems


def assignment_balance_score(assignment: dict) -> int:
    """Kafka's ``getBalanceScore`` of a member -> partitions answer."""
    return balance_score([len(tps) for tps in assignment.values()])


def previously_owned_moves(spec: GroupSpec, assignment: dict) -> int:
    """Claims (member, partition) on existing partitions that the member does not keep."""
    existing = all_partitions(spec)
    return sum(
        1 for m in spec.members for tp in m.owned_partitions
        if tp in existing and tp not in set(assignment[m.member_id])
    )


# --- the comparison --------------------------------------------------------------------------------

@dataclass
class Tally:
    specs: int = 0
    exact_compared: int = 0
    exact_agreed: int = 0
    property_compared: int = 0
    property_agreed: int = 0
    happened_to_be_identical: int = 0
    excluded: Counter = field(default_factory=Counter)
    failures: list = field(default_factory=list)  # (size, spec id, message, spec json)


@pytest.fixture(scope="module")
def runs() -> tuple[list[dict], dict[str, list[dict]]]:
    rng = random.Random(SEED)
    specs = [random_spec(rng, i) for i in range(SPEC_COUNT)]
    lines = [dict(spec, id=f"{spec['id']}/{name}", assignor=name) for name in ASSIGNORS for spec in specs]
    answers = run_reference(lines, timeout=900)
    return specs, {name: answers[i * len(specs):(i + 1) * len(specs)] for i, name in enumerate(ASSIGNORS)}


def _size(spec: GroupSpec) -> int:
    return len(spec.members) * 100 + sum(t.partitions for t in spec.topics.values())


@pytest.mark.parametrize("assignor", ASSIGNORS)
def test_our_assignor_agrees_with_kafkas(assignor, runs):
    specs, java_answers = runs
    assign = registry.get_assignor(assignor)  # a missing module fails here, loudly
    tally = Tally()
    java_sticky = java_answers["sticky"]
    for assignor_index, (raw, java_line) in enumerate(zip(specs, java_answers[assignor])):
        parsed: ParsedSpec = parse_group_spec(raw, assignor)
        spec = parsed.spec
        tally.specs += 1

        def fail(message: str) -> None:
            tally.failures.append((_size(spec), raw["id"], message, json.dumps(dict(raw, assignor=assignor))))

        try:
            ours = assign(spec)
        except Exception as exc:  # noqa: BLE001 - every crash is a finding, reported with its spec
            fail(f"our assignor raised {type(exc).__name__}: {exc}")
            continue
        our_problems = validity_problems(spec, ours.assignment, ours.transferring)
        if our_problems:
            fail("ours is invalid: " + "; ".join(our_problems[:3]))
            continue

        bugs = [bug.__name__ for bug in KAFKA_BUGS[assignor] if bug(spec)]
        if bugs:
            tally.excluded.update(bugs)
            continue
        if "error" in java_line:
            fail(f"Kafka failed where no known bug applies: {java_line['error']}")
            continue
        java = parse_answer(java_line)
        java_problems = validity_problems(spec, java.assignment, java.transferring)
        if java_problems:
            fail("Kafka's answer is invalid where no known bug applies: " + "; ".join(java_problems[:3]))
            continue

        homogeneous = len({frozenset(m.topics) for m in spec.members}) == 1 and bool(spec.members[0].topics)
        if assignor in ("range", "roundrobin") or homogeneous:
            tally.exact_compared += 1
            if assignor == "range":
                same = {m: sorted(tps) for m, tps in ours.assignment.items()} == {m: sorted(tps) for m, tps in java.assignment.items()}
            else:
                same = ours.assignment == java.assignment
            same_withheld = set(ours.transferring) == set(java.transferring)
            if same and same_withheld:
                tally.exact_agreed += 1
            else:
                fail(_difference(ours.assignment, java.assignment, ours.transferring, java.transferring))
            continue

        tally.property_compared += 1
        tally.happened_to_be_identical += ours.assignment == java.assignment
        ours_final, java_final = ours.assignment, java.assignment
        if assignor == "cooperative-sticky":
            # Balance is judged on where the partitions end up after the follow-up round: ours with
            # each withheld partition on its intended owner, Kafka's as its eager StickyAssignor
            # answer on the same group (both run the same assignPartitions and the cooperative one then
            # withholds; checked on every non-excluded spec of the default seed).
            ours_final = {m: list(tps) for m, tps in ours.assignment.items()}
            for tp, owner in ours.transferring.items():
                ours_final[owner].append(tp)
            java_final = parse_answer(java_sticky[assignor_index]).assignment
        problems = []
        if assignment_balance_score(ours_final) > assignment_balance_score(java_final):
            problems.append(f"balance score {assignment_balance_score(ours_final)} > Kafka's {assignment_balance_score(java_final)}")
        ours_moves, java_moves = previously_owned_moves(spec, ours.assignment), previously_owned_moves(spec, java.assignment)
        if ours_moves > java_moves:
            problems.append(f"moves {ours_moves} previously owned partitions, Kafka {java_moves}")
        if problems:
            fail("; ".join(problems))
        else:
            tally.property_agreed += 1

    _report(assignor, tally)
    if tally.failures:
        size, spec_id, message, spec_json = min(tally.failures)
        pytest.fail(
            f"{assignor}: {len(tally.failures)} of {tally.specs} specs disagree with Kafka. Smallest ({spec_id}): "
            f"{message}\nspec: {spec_json}",
            pytrace=False,
        )


def _difference(ours: dict, java: dict, ours_t, java_t) -> str:
    diffs = [f"{m}: ours {[tuple(tp) for tp in ours[m]]} Kafka {[tuple(tp) for tp in java[m]]}" for m in java if ours.get(m) != java[m]]
    if set(ours_t) != set(java_t):
        diffs.append(f"transferring: ours {sorted(ours_t)} Kafka withheld {sorted(java_t)}")
    return "; ".join(diffs[:4])


def _report(assignor: str, t: Tally) -> None:
    excluded = ", ".join(f"{name}: {n}" for name, n in sorted(t.excluded.items())) or "none"
    print(
        f"\n[differential] {assignor}: {t.specs} specs; exact {t.exact_agreed}/{t.exact_compared} agree; "
        f"properties {t.property_agreed}/{t.property_compared} hold (identical anyway: {t.happened_to_be_identical}); "
        f"excluded as Kafka bugs: {excluded}; failures: {len(t.failures)}"
    )


def test_the_generator_covers_the_cases_the_comparison_is_about(runs):
    """Guards the generator itself: each interesting kind of group shows up often enough to count."""
    specs, _ = runs
    parsed = [parse_group_spec(s, "range").spec for s in specs]
    homogeneous = sum(len({frozenset(m.topics) for m in s.members}) == 1 for s in parsed)
    owned = sum(any(m.owned_partitions for m in s.members) for s in parsed)
    racks = sum(any(t.replica_racks is not None for t in s.topics.values()) for s in parsed)
    static = sum(any(m.group_instance_id for m in s.members) for s in parsed)
    duplicate_claims = sum(
        len({(tp) for m in s.members for tp in m.owned_partitions}) < sum(len(m.owned_partitions) for m in s.members)
        for s in parsed
    )
    assert len(parsed) >= 1000
    assert homogeneous > 300 and owned > 500 and racks > 150 and static > 500 and duplicate_claims > 30
