"""The coordinator's log as a source, without Spark: real records (the decoder's fixture, captured
from real groups on a real broker) through the job's decoding step, the engine and the processor."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from schemas import tables
from streaming.config import parse_config
from streaming.engine import GroupState, advance
from streaming.engine.events import CoordinatorGeneration
from streaming.engine.topic_catalog import TopicCatalog
from streaming.errors import ConfigError
from streaming.job.offsets_source import COORDINATOR, TOPIC_METADATA, input_row
from streaming.testing import ProcessorHarness, engine_settings, output_rows, roundtrip
from tests.coordinator_log.fixture import load

T0 = 1_700_000_000_000
TOPIC = "__consumer_offsets"


def _captured() -> dict[str, list[dict]]:
    """The fixture's captured records, per group, as operator input rows (offset = position)."""
    out = defaultdict(list)
    for i, r in enumerate(load()):
        if r["source"].startswith("captured"):
            row = input_row(r["key"], r["value"], TOPIC, 7, i, T0 + 10 * i)
            if row is not None:
                out[row["group_key"]].append(row)
    return out


CAPTURED = _captured()


def _generations(group_id: str) -> list[CoordinatorGeneration]:
    return [CoordinatorGeneration.from_json(json.loads(r["payload"])) for r in CAPTURED[group_id]]


def _catalog_for(gens: list[CoordinatorGeneration], at: int = T0 - 1) -> TopicCatalog:
    """A description of the captured groups' topics before their first record, and a marker after
    the last. (The capture has no description: every partition of these topics was assigned in
    some generation, so the counts are the highest partition assigned + 1.)"""
    counts: dict[str, int] = {}
    for g in gens:
        for m in g.members:
            for tp in m.assignment or ():
                counts[tp.topic] = max(counts.get(tp.topic, 0), tp.partition + 1)
    return _catalog([{"name": t, "partitions": n} for t, n in sorted(counts.items())], at)


def _catalog(topics: list[dict], at: int = T0 - 1) -> TopicCatalog:
    """A description of ``topics`` at ``at`` (before the records), and a marker after the last."""
    catalog = TopicCatalog()
    catalog.apply({"event_time": at, "topics": topics})
    catalog.apply({"event_time": T0 + 10**9, "unchanged": True})
    return catalog


def _record_maker(group_id: str = "g"):
    """A maker of KIP-848 records of ``group_id``, numbered in the order they are made (the log's)."""
    from itertools import count

    from streaming.engine.coordinator_events import ConsumerGroupRecord

    offsets = count()

    def record(record_type: int, member_id: str | None = None, **fields) -> ConsumerGroupRecord:
        offset = next(offsets)
        return ConsumerGroupRecord(group_id=group_id, event_time=T0 + offset, partition=0, offset=offset,
                                   record_type=record_type, member_id=member_id, **fields)
    return record


def _run(group_id: str, batches: list[list[CoordinatorGeneration]], catalog: TopicCatalog):
    state = GroupState(group_id=group_id)
    rows = []
    for batch in batches:
        out, _ = advance(state, [], [], [], engine_settings(), coordinator_generations=batch, topic_catalog=catalog)
        rows.extend(out)
        state = roundtrip(state)
    return rows, state


def _table(rows, table: str) -> list[dict]:
    return [r.to_json() for r in rows if r.table == table]


@pytest.mark.parametrize("group_id", ["cap-rdkafka-range", "cap-rdkafka-roundrobin", "cap-java-sticky",
                                      "cap-java-cooperative-sticky", "cap-rdkafka-cooperative-sticky"])
def test_every_generation_the_coordinator_wrote_is_recorded_with_the_assignment_it_gave(group_id):
    gens = _generations(group_id)
    rows, state = _run(group_id, [gens], _catalog_for(gens))
    # Generation 0 (the group's creation, Empty) has nothing to record; a generation written twice
    # (a static member replaced) is one generation.
    written = sorted({g.generation for g in gens if g.generation > 0})
    metrics = _table(rows, tables.BALANCE_METRICS)
    assert [m["generation"] for m in metrics] == written
    assignments = defaultdict(dict)
    for a in _table(rows, tables.ASSIGNMENTS):
        assignments[a["generation"]][a["member_id"]] = sorted((p["topic"], p["partition"]) for p in a["partitions"])
    firsts = {}
    for g in gens:
        firsts.setdefault(g.generation, g)
    for number in written:
        g = firsts[number]
        assert assignments.get(number, {}) == {m.member_id: sorted(m.assignment or ()) for m in g.members}
    assert state.generation == written[-1] and state.coordinator_backlog == []


@pytest.mark.parametrize("group_id", ["cap-java-sticky", "cap-java-cooperative-sticky"])
def test_the_projects_assignor_agrees_with_kafkas_java_clients_on_every_generation(group_id):
    gens = _generations(group_id)
    rows, _ = _run(group_id, [gens], _catalog_for(gens))
    checks = _table(rows, tables.ASSIGNMENT_CHECKS)
    with_members = sorted({g.generation for g in gens if g.members})
    assert [c["generation"] for c in checks] == with_members
    assert all(c["agrees"] and c["computed_assignor"] == gens[-2].protocol for c in checks), checks


@pytest.mark.parametrize("group_id", ["cap-rdkafka-range", "cap-rdkafka-roundrobin"])
def test_librdkafka_eager_groups_agree_until_a_static_member_joins(group_id):
    """Kafka's Java range and roundrobin order a static member (group.instance.id) before dynamic
    ones; librdkafka orders members by member id only. The checks agree on every generation
    without a static member and name the difference on the others."""
    gens = _generations(group_id)
    rows, _ = _run(group_id, [gens], _catalog_for(gens))
    static = {g.generation for g in gens if any(m.group_instance_id for m in g.members)}
    checks = _table(rows, tables.ASSIGNMENT_CHECKS)
    assert checks and all(c["agrees"] for c in checks if c["generation"] not in static)
    assert static and not any(c["agrees"] for c in checks if c["generation"] in static)


def test_a_cooperative_group_records_its_revocation_round_and_follow_up_as_the_coordinator_wrote_them():
    gens = _generations("cap-java-cooperative-sticky")
    rows, _ = _run("g", [gens], _catalog_for(gens))
    metrics = _table(rows, tables.BALANCE_METRICS)
    phases = [(m["generation"], m["phase"], m["trigger"]) for m in metrics]
    assert (2, "revocation", "join") in phases and (3, "followup", "cooperative_followup") in phases
    revocation = next(m for m in metrics if m["generation"] == 2)
    assert revocation["unassigned"] > 0 and revocation["members"] == 2
    moved = [r for r in _table(rows, tables.REVOCATIONS) if r["generation"] == 2]
    assert moved and all(r["reason"] == "moved" for r in moved)


def test_batch_boundaries_and_redelivered_records_change_nothing():
    gens = _generations("cap-rdkafka-cooperative-sticky")
    catalog = _catalog_for(gens)
    whole, _ = _run("g", [gens], catalog)
    split, _ = _run("g", [gens[:3], gens[2:5], list(reversed(gens[4:])), gens], catalog)
    assert [r.to_json() for r in split] == [r.to_json() for r in whole]


def test_a_generation_waits_until_the_topics_have_been_described_at_its_time():
    gens = _generations("cap-rdkafka-range")
    catalog = _catalog_for(gens)
    early = TopicCatalog.from_json(json.loads(json.dumps(catalog.to_json())))
    early.described_until = gens[3].event_time - 1  # described just before the fourth record
    state = GroupState(group_id="g")
    rows, _ = advance(state, [], [], [], engine_settings(), coordinator_generations=gens, topic_catalog=early)
    assert [m["generation"] for m in _table(rows, tables.BALANCE_METRICS)] == [1, 2]
    state = roundtrip(state)
    assert [g.offset for g in state.coordinator_backlog] == [g.offset for g in gens[3:]]
    rows, _ = advance(state, [], [], [], engine_settings(), topic_catalog=catalog)
    assert [m["generation"] for m in _table(rows, tables.BALANCE_METRICS)] == [3, 4, 5, 6, 7]


def test_the_catalog_gives_each_generation_the_description_of_its_time():
    catalog = TopicCatalog()
    catalog.apply({"event_time": 100, "topics": [{"name": "a", "partitions": 3, "topic_id": None}]})
    catalog.apply({"event_time": 200, "unchanged": True})
    catalog.apply({"event_time": 300, "topics": [{"name": "a", "partitions": 6, "topic_id": None},
                                                  {"name": "b", "partitions": 1, "topic_id": None}]})
    catalog.apply({"event_time": 400, "topics": [{"name": "b", "partitions": 1, "topic_id": None}]})
    assert not catalog.apply({"event_time": 350, "unchanged": True})  # older than what is known
    parts = lambda at: {n: t.partitions for n, t in catalog.as_of(at, ["a", "b", "c"]).items()}  # noqa: E731
    assert parts(50) == {"a": 3, "b": 1}  # before the first description: the first of each topic
    assert parts(250) == {"a": 3}  # b did not exist yet
    assert parts(300) == {"a": 6, "b": 1}
    assert parts(450) == {"b": 1}  # a deleted
    assert catalog.covers(400) and not catalog.covers(401)
    assert TopicCatalog.from_json(json.loads(json.dumps(catalog.to_json()))) == catalog


@pytest.mark.parametrize("key, value, reason", [
    (b"\x00\x63\x00\x01g", b"\x00\x00", "unknown record type 99"),
    (b"\x00\x02\x00\x01g", b"\x00\x09\x00\x00", "unknown version"),
    (b"\x00\x02\x00\x01g", b"\x00\x03\x00\x08consu", "GroupMetadata (type 2)"),
    (b"\xde\xad", b"\xbe\xef\x00", "unknown record type"),
    (None, b"\x00", "has no record type"),
])
def test_undecodable_records_become_refused_rows_with_the_decoders_reason(key, value, reason):
    row = input_row(key, value, TOPIC, 3, 42, T0)
    assert row["kind"] == COORDINATOR and reason in row["reject_reason"]
    source = json.loads(row["payload"])
    assert (source["source_topic"], source["source_partition"], source["source_offset"]) == (TOPIC, 3, 42)
    assert source["raw_value"] == value.hex()


def test_offset_commits_and_other_groups_records_are_set_aside():
    rows = load()
    kinds = defaultdict(set)
    for r in rows:
        row = input_row(r["key"], r["value"], TOPIC, 0, 0, T0)
        kinds[r["kafka"].get("type")].add(None if row is None else row["kind"])
    assert kinds[1] == {None} and kinds[8] == {None} and kinds[19] == {None}  # commits, current assignments, KIP-1071
    assert kinds[2] >= {COORDINATOR} and kinds[5] == kinds[7] == {COORDINATOR}


def _frame(rows: list[dict]):
    import pandas as pd

    return pd.DataFrame([{**r, "beat_times": None} for r in rows],
                        columns=["group_key", "kind", "member_id", "event_time", "reject_reason", "payload",
                                 "beat_times"])


def _description(at: int, catalog: TopicCatalog) -> dict:
    topics = [{"name": n, "partitions": e[-1][1], "topic_id": None} for n, e in catalog.history.items()]
    return {"group_key": "", "kind": TOPIC_METADATA, "member_id": None, "event_time": at, "reject_reason": None,
            "payload": json.dumps({"event_time": at, "topics": topics})}


def test_the_processor_keeps_the_catalog_and_wakes_the_groups_that_waited_for_it():
    group = "cap-rdkafka-roundrobin"
    rows = CAPTURED[group]
    catalog = _catalog_for(_generations(group))
    harness = ProcessorHarness()
    garbage = input_row(b"\xff", b"\x00", TOPIC, 0, 1, T0)
    out = output_rows(harness.send(_frame(rows + [garbage])))
    assert [t for t, _ in out if t == tables.BALANCE_METRICS] == []  # no description yet: waits
    assert [r["reason"] for t, r in out if t == tables.REJECTED_EVENTS] == [garbage["reject_reason"]]
    assert harness.bucket().waiting == {group}
    out = output_rows(harness.send(_frame([_description(T0 + 10**6, catalog)])))
    assert [r["generation"] for t, r in out if t == tables.BALANCE_METRICS] == [1, 2, 3, 4, 5, 6]
    bucket = harness.bucket()
    assert bucket.waiting == set() and bucket.catalog.covers(T0 + 10**6)


def test_the_offsets_topic_section():
    config = parse_config({"offsets_topic": {"enabled": True, "bootstrap_servers": "other:9092",
                                             "options": {"security.protocol": "SASL_SSL",
                                                         "sasl.jaas.config": "secret"}}})
    source = config.offsets_topic
    opts = source.source_options(config.kafka)
    assert opts["kafka.bootstrap.servers"] == "other:9092" and opts["subscribe"] == "__consumer_offsets"
    assert opts["kafka.isolation.level"] == "read_committed" and opts["kafka.security.protocol"] == "SASL_SSL"
    assert "secret" not in repr(source)
    assert source.admin_options(config.kafka)["bootstrap.servers"] == "other:9092"
    assert source.metadata_source_options(config.kafka)["kafka.bootstrap.servers"] == config.kafka.bootstrap_servers
    same = parse_config({"kafka": {"options": {"security.protocol": "SSL"}}, "offsets_topic": {"enabled": True}})
    assert same.offsets_topic.source_options(same.kafka)["kafka.security.protocol"] == "SSL"
    with pytest.raises(ConfigError, match="offsets_topic.enable"):
        parse_config({"offsets_topic": {"enable": True}})


# -- KIP-848 groups ---------------------------------------------------------------------------------


def _kip848(group_id: str):
    """The captured KIP-848 group's records as engine inputs, and a catalog naming its topic ids (the
    capture's topics: ``<group>-t`` with 6 partitions, ``<group>-t2`` with 2)."""
    from streaming.job.processor import _recorded

    records = [_recorded(json.loads(r["payload"])) for r in CAPTURED[group_id]]
    sizes: dict[str, int] = {}
    for r in records:
        for topic_id, ps in (r.target or {}).items() if hasattr(r, "target") else ():
            sizes[topic_id] = max(sizes.get(topic_id, 0), max(ps) + 1)
    names = {6: f"{group_id}-t", 2: f"{group_id}-t2"}
    catalog = _catalog([{"name": names[n], "partitions": n, "topic_id": topic_id} for topic_id, n in sizes.items()])
    return records, catalog, {v: k for k, v in sizes.items()}


@pytest.mark.parametrize("group_id, assignor", [("cap-kip848-uniform", "uniform"),
                                                ("cap-kip848-range", "server-range")])
def test_a_kip848_group_has_one_generation_per_target_epoch_with_each_members_real_target(group_id, assignor):
    records, catalog, _ = _kip848(group_id)
    rows, state = _run(group_id, [records], catalog)
    epochs = [r.epoch for r in records if r.record_type == 6]
    metrics = _table(rows, tables.BALANCE_METRICS)
    # Every target-assignment epoch, then Empty at the group epoch of the last leave.
    last_group_epoch = [r.epoch for r in records if r.record_type == 3][-1]
    assert [m["generation"] for m in metrics] == epochs + [last_group_epoch]
    assert {(m["assignor"], m["protocol"]) for m in metrics} == {(assignor, "cooperative")}
    # The target per member is the fold of the type-7 records up to the epoch's type-6 record.
    expected: dict[int, dict] = {}
    targets: dict[str, set] = {}
    for r in records:
        if r.record_type == 7:
            if r.tombstone:
                targets.pop(r.member_id, None)
            else:
                targets[r.member_id] = {(catalog.name_of(t), p) for t, ps in r.target.items() for p in ps}
        if r.record_type == 6:
            expected[r.epoch] = {m: frozenset(tps) for m, tps in targets.items()}
    got: dict[int, dict] = defaultdict(dict)
    for a in _table(rows, tables.ASSIGNMENTS):
        got[a["generation"]][a["member_id"]] = frozenset((p["topic"], p["partition"]) for p in a["partitions"])
    assert {e: got[e] for e in epochs} == expected
    checks = _table(rows, tables.ASSIGNMENT_CHECKS)
    assert [c["generation"] for c in checks] == epochs
    assert all(c["agrees"] and c["computed_assignor"] == assignor for c in checks), checks
    # Nobody left in the fold; the member map keeps its slots (Kafka's never shrinks) and no key.
    assert (state.kip848["members"], state.kip848["targets"], state.kip848["table"][1]) == ({}, {}, [])


def test_a_kip848_fold_does_not_depend_on_batch_boundaries():
    records, catalog, _ = _kip848("cap-kip848-uniform")
    whole, _ = _run("g", [records], catalog)
    cut = [records[i:i + 3] for i in range(0, len(records), 3)]
    split, _ = _run("g", cut, catalog)
    assert [r.to_json() for r in split] == [r.to_json() for r in whole]


def test_the_publisher_writes_a_full_description_when_something_changed_else_a_marker():
    from streaming.feeds.topic_metadata import TopicMetadataPublisher

    cluster = {"orders": 6, "__consumer_offsets": 50}
    sent, now = [], iter([1.0, 2.0, 3.0])
    publisher = TopicMetadataPublisher(lambda: [{"name": n, "partitions": p, "topic_id": None} for n, p in cluster.items()],
                                       lambda key, value: sent.append((key, json.loads(value))), 0,
                                       clock=lambda: next(now))
    publisher.publish_once()
    publisher.publish_once()
    cluster["payments"] = 3
    publisher.publish_once()
    assert [v for _, v in sent] == [
        {"event_time": 1000, "topics": [{"name": "orders", "partitions": 6, "topic_id": None}]},
        {"event_time": 2000, "unchanged": True},
        {"event_time": 3000, "topics": [{"name": "orders", "partitions": 6, "topic_id": None},
                                        {"name": "payments", "partitions": 3, "topic_id": None}]}]
    catalog = TopicCatalog()
    for _, v in sent:
        catalog.apply(v)
    assert {n: t.partitions for n, t in catalog.as_of(2500, ["orders", "payments"]).items()} == {"orders": 6}


def test_a_kip848_target_record_is_walked_in_the_order_it_lists_its_topics():
    """The type-7 record lists a member's target in the coordinator's HashMap order, and Kafka's
    uniform assignor walks the next epoch's previous target in that order (topic ids b and c share
    a bucket: m1 keeps the one listed first whole). The fold must keep the record's order: sorted
    by topic id, the engine computes another target than the coordinator's (asserted)."""
    from assignors.model import topic_id_string

    from tests.stories import COLLIDING_COUNTS, COLLIDING_IDS, uniform_after_second_join

    ids = {n: topic_id_string(u) for n, u in COLLIDING_IDS.items()}
    # b and c listed against their ids' order, which is what a sort by topic id would give.
    pair = sorted("bc", key=ids.get, reverse=True)
    listed = [(t, p) for t in (*pair, "a") for p in range(COLLIDING_COUNTS[t])]
    expected = uniform_after_second_join(listed)
    assert expected != uniform_after_second_join(sorted(listed, key=lambda tp: (ids[tp[0]], tp[1])))

    def target_of(tps):
        out: dict[str, list[int]] = {}
        for topic, p in tps:
            out.setdefault(ids[topic], []).append(p)
        return {t: tuple(ps) for t, ps in out.items()}

    record = _record_maker()

    def joined(member_id):
        return record(5, member_id, topics=tuple(COLLIDING_COUNTS), server_assignor="uniform")

    records = [joined("m1"), record(3, epoch=1), record(7, "m1", target=target_of(listed)), record(6, epoch=1),
               joined("m2"), record(3, epoch=2), record(7, "m1", target=target_of(expected["m1"])),
               record(7, "m2", target=target_of(expected["m2"])), record(6, epoch=2)]
    catalog = _catalog([{"name": n, "partitions": k, "topic_id": ids[n]} for n, k in COLLIDING_COUNTS.items()])
    for batches in ([records], [records[:4], records[4:]]):  # the order survives the state store too
        rows, _ = _run("g", batches, catalog)
        assert [(c["generation"], c["agrees"]) for c in _table(rows, tables.ASSIGNMENT_CHECKS)] == [(1, True), (2, True)]


def test_a_static_replacement_in_the_log_puts_the_new_id_in_its_own_place_in_the_member_map():
    """The coordinator's records of a static member restarting under a new id: the old id's
    tombstones, then the new id's metadata and target, and no new target epoch. When a member then
    leaves, the fold must walk the new id in its own place in the member map (which decides who
    keeps the extra partition), not as a member joining last."""
    from tests.stories import static_replacement_case

    case = static_replacement_case()
    topic_id = "AAAAAAAAAAAAAAAAAAAAAg"  # Uuid(0, 2)
    record = _record_maker()

    def metadata(member_id, instance=None):
        return record(5, member_id, topics=("t0",), server_assignor="uniform", group_instance_id=instance)

    def epoch(number, targets):
        return [record(3, epoch=number), *(record(7, m, target={topic_id: tuple(ps)}) for m, ps in targets.items()),
                record(6, epoch=number)]

    a, b, b2, c = case.a, case.b, case.b2, case.c
    records = [metadata(a), *epoch(1, case.targets[0]), metadata(b, "i-b"), *epoch(2, case.targets[1]),
               metadata(c), *epoch(3, case.targets[2])]
    # replaceMember: the old id removed (current assignment, target, metadata), the new id added.
    records += [record(8, b, tombstone=True), record(7, b, tombstone=True), record(5, b, tombstone=True),
                metadata(b2, "i-b"), record(7, b2, target={topic_id: tuple(case.targets[2][b])})]
    records += [record(7, c, tombstone=True), record(5, c, tombstone=True), *epoch(4, case.expected)]
    catalog = _catalog([{"name": "t0", "partitions": case.partitions, "topic_id": topic_id}])
    for batches in ([records], [records[:-5], records[-5:]]):
        rows, _ = _run("g", batches, catalog)
        checks = _table(rows, tables.ASSIGNMENT_CHECKS)
        assert [(c["generation"], c["agrees"]) for c in checks] == [(1, True), (2, True), (3, True), (4, True)], case
