"""Issue 17: the group coordinator's log (``__consumer_offsets``) as a source of the job, end to end.

Real librdkafka groups join, leave cleanly, crash (expelled after the session timeout) and restart
statically on the real broker; then the real job reads ``__consumer_offsets`` (Spark's Kafka
source, real Delta tables) with the topic-metadata publisher's description of the broker's topics.
What the job recorded is compared with the coordinator's log read independently, and with what
the clients themselves held (their own ``assignment()``).
"""

from __future__ import annotations

import base64
import json
import sys
from collections import Counter, defaultdict
from dataclasses import replace

import pytest

from schemas import tables
from streaming.coordinator_log import decode
from streaming.feeds.kafka_io import ensure_topics, produce
from streaming.source_config import OffsetsTopicConfig
from tests.coordinator_log.capture import Member, read_offsets_topic
from tests.coordinator_log.fixture import load
from tests.integration.jobs import make_config, read, run_available_now
from tests.integration.real_groups import RealGroup, play_steps, topics_with_colliding_ids

pytestmark = pytest.mark.integration

PARTITIONS = (3, 5, 7)
#: The broker's group.min.session.timeout.ms: the crashed member is expelled after it.
CRASH_SESSION_MS = 6000


def _config(kafka_broker, tmp_path, name: str, topic: str = "__consumer_offsets"):
    config = make_config(kafka_broker, tmp_path, name)
    source = OffsetsTopicConfig(enabled=True, topic=topic, metadata_topic=f"topic-metadata-{name}",
                                metadata_interval_s=0)
    ensure_topics(config.kafka.bootstrap_servers, [source.metadata_topic], partitions=1)
    return replace(config, offsets_topic=source)


def _describe_topics(spark, config) -> None:
    """What the job's run() does at start: describe the observed cluster's topics once."""
    from streaming.job.topic_metadata import publisher

    described = publisher(spark, config, interval_s=0)
    try:
        described.start()
    finally:
        described.close()


def _topics(bootstrap: str, name: str) -> dict[str, int]:
    topics = {f"ot-{letter}-{name}": n for letter, n in zip("abc", PARTITIONS)}
    for topic, n in topics.items():
        ensure_topics(bootstrap, [topic], partitions=n)
    return topics


def _written_by_coordinator(bootstrap: str, group_id: str) -> list[tuple[int, int, dict]]:
    """(generation, timestamp, member -> partitions) of every GroupMetadata record of the group, read
    from the log by a plain consumer, in log order."""
    out = []
    for r in read_offsets_topic(bootstrap):
        key = base64.b64decode(r["key"])
        if key[:2] != b"\x00\x02" or r["value"] is None:
            continue
        record = decode(key, base64.b64decode(r["value"]))
        if record.group_id != group_id:
            continue
        held = {m.member_id: frozenset((t.topic, p) for t in m.decoded_assignment.assigned_partitions
                                       for p in t.partitions)
                for m in record.value.members if m.decoded_assignment is not None}
        out.append((record.value.generation, r["timestamp"], held))
    return out


def _topic_ids(spark, config) -> dict[str, str]:
    """Topic id -> name, from the descriptions the job read (the publisher's, Kafka's spelling)."""
    out = {}
    for row in spark.read.format("kafka").option("kafka.bootstrap.servers", config.kafka.bootstrap_servers) \
            .option("subscribe", config.offsets_topic.metadata_topic).load().selectExpr("CAST(value AS STRING)").collect():
        for t in json.loads(row[0]).get("topics") or ():
            out[t["topic_id"]] = t["name"]
    return out


def _crash_member(group: RealGroup, name: str) -> Member:
    config = {**group.config, "client.id": f"{group.group_id}-{name}", "session.timeout.ms": CRASH_SESSION_MS}
    return Member(name, [sys.executable, "-m", "tests.coordinator_log.member", json.dumps(config),
                         ",".join(sorted(group.topics))])


def _recorded(spark, config, group_id: str):
    metrics = sorted((r for r in read(spark, config, tables.BALANCE_METRICS) if r["group_id"] == group_id),
                     key=lambda r: r["generation"])
    held: dict[int, dict[str, frozenset]] = defaultdict(dict)
    for r in read(spark, config, tables.ASSIGNMENTS):
        if r["group_id"] == group_id:
            held[r["generation"]][r["member_id"]] = frozenset((p["topic"], p["partition"]) for p in r["partitions"])
    checks = sorted((r for r in read(spark, config, tables.ASSIGNMENT_CHECKS) if r["group_id"] == group_id),
                    key=lambda r: r["generation"])
    events = [r for r in read(spark, config, tables.MEMBER_EVENTS) if r["group_id"] == group_id]
    return metrics, held, checks, events


def _play(group: RealGroup) -> None:
    """A static member first (its id sorts first, so Java's order and librdkafka's agree), two
    dynamic joins, a clean leave, a crash expelled after the session timeout, a static restart."""
    (static,) = group.join(1, static=True)
    group.settle()
    group.join(2)
    group.settle()
    group.leave(group.consumers[1:2])
    group.settle()
    crashing = _crash_member(group, "crashing")
    crashing.wait_for("assigned ot-")  # its first line is its empty assignment, before it joins
    crashing.crash()
    group.settle(timeout_s=CRASH_SESSION_MS / 1000 + 60)  # the coordinator expelled it
    group.restart(static)
    group.settle()


# librdkafka has no eager "sticky" (its consumer refuses it); Kafka's Java clients run it below.
@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_every_generation_the_coordinator_wrote_is_recorded_with_what_the_clients_held(
        kafka_broker, spark, tmp_path, unique_name, strategy):
    bootstrap = kafka_broker.bootstrap_servers
    config = _config(kafka_broker, tmp_path, unique_name)
    topics = _topics(bootstrap, unique_name)
    group_id = f"ot-{strategy}-{unique_name}"
    group = RealGroup(bootstrap, group_id, topics, strategy=strategy)
    try:
        _play(group)
        # The group stays up (stable: the coordinator writes nothing) until the log has been read
        # twice, by the job and by a plain consumer.
        _describe_topics(spark, config)
        run_available_now(spark, config)
        written = _written_by_coordinator(bootstrap, group_id)
    finally:
        group.close()
    metrics, held, checks, events = _recorded(spark, config, group_id)
    numbers = [g for g, _, members in written if g > 0]
    # Every generation the coordinator wrote (a static member's replacement rewrites its generation).
    assert [m["generation"] for m in metrics] == sorted(set(numbers))
    firsts = {}
    for g, at, members in written:
        firsts.setdefault(g, (at, members))
    for m in metrics:
        at, members = firsts[m["generation"]]
        assert m["event_time"] == at and m["members"] == len(members)
        assert held.get(m["generation"], {}) == members
        assert m["assignor"] == strategy
    # What each client held once the group settled is a generation the job recorded (a restarted
    # static member under the id it replaced: its generation was recorded before the restart).
    replaced = {e["member_id"]: e["previous_member_id"] for e in events if e["event"] == "static_rejoin"}
    for settled in group.generations:
        assert {replaced.get(m, m): tps for m, tps in settled.assignment.items()} in held.values(), settled
    durations = [b["event_time"] - a["event_time"] for a, b in zip(metrics, metrics[1:])]
    kinds = sorted(e["event"] for e in events)
    assert (kinds.count("joined"), kinds.count("left"), kinds.count("static_rejoin")) == (4, 2, 1), kinds
    report = {"strategy": strategy, "generations": len(metrics), "shortest_ms": min(durations),
              "checks": len(checks), "agreeing": sum(c["agrees"] for c in checks),
              "phases": [m["phase"] for m in metrics]}
    print(f"offsets-topic source: {report}")
    (tmp_path / "report.json").write_text(json.dumps(report))
    assert len(checks) == len([m for m in metrics if m["members"]])
    if strategy == "cooperative-sticky":
        # The revocation round lasts until the members rejoin: tens of milliseconds on a quiet
        # machine, seconds on a loaded one. Its length is reported (the print above), not asserted:
        # every generation the coordinator wrote is recorded whatever its length (asserted above).
        assert "revocation" in report["phases"]
    if strategy in ("range", "roundrobin"):
        assert [c for c in checks if not c["agrees"]] == []
    # librdkafka's cooperative-sticky is a port of an older Kafka sticky assignor (docs/collector.md):
    # its checks are reported (the print above), and every difference is a choice of partitions,
    # never how many a member holds (nor how many are withheld in a revocation round).
    for c in checks:
        gained = Counter(d["computed_member"] for d in c["differing"])
        lost = Counter(d["actual_member"] for d in c["differing"])
        assert gained == lost, c


def test_undecodable_records_land_in_rejected_events_and_nothing_else_is_lost(
        kafka_broker, spark, tmp_path, unique_name):
    """A copy of the log stands in for it: real records of a real group (the decoder's captured
    fixture) with an unknown type, an unknown version, a truncated value and garbage among them."""
    bootstrap = kafka_broker.bootstrap_servers
    copy = f"offsets-copy-{unique_name}"
    ensure_topics(bootstrap, [copy], partitions=1)
    config = _config(kafka_broker, tmp_path, unique_name, topic=copy)
    real = [r for r in load() if r["source"] == "captured: cap-rdkafka-range"]
    group_record = next(r for r in real if r["kafka"].get("type") == 2 and r["value"] is not None)
    bad = [
        (b"\x00\x63\x00\x01g", b"\x00\x00"),  # type 99
        (group_record["key"], b"\x00\x09" + group_record["value"][2:]),  # GroupMetadata v9
        (group_record["key"], group_record["value"][: len(group_record["value"]) // 2]),  # truncated
        (b"\xde\xad\xbe\xef", b"\x01\x02\x03"),  # garbage
    ]
    records = [(r["key"], r["value"]) for r in real[:6]] + bad[:2] + [(r["key"], r["value"]) for r in real[6:]] + bad[2:]
    produce(bootstrap, copy, records)
    _describe_topics(spark, config)
    run_available_now(spark, config)

    rejected = [r for r in read(spark, config, tables.REJECTED_EVENTS) if r["source_topic"] == copy]
    reasons = sorted(r["reason"] for r in rejected)
    assert len(rejected) == 4, reasons
    assert any("unknown record type 99" in r for r in reasons)
    assert any("unknown version" in r and "v9" in r for r in reasons)
    assert sum("GroupMetadata (type 2)" in r for r in reasons) == 2  # the truncated one and v9
    assert any("unknown record type -8531" in r for r in reasons)  # 0xdead as an int16
    assert all(r["raw_value"] and r["source_offset"] is not None for r in rejected)
    metrics, held, checks, _ = _recorded(spark, config, "cap-rdkafka-range")
    assert [m["generation"] for m in metrics] == [1, 2, 3, 4, 5, 6, 7]
    assert all(c["agrees"] for c in checks if c["generation"] <= 3)


def test_kip848_groups_every_target_epoch_with_each_members_real_target(kafka_broker, spark, tmp_path, unique_name):
    bootstrap = kafka_broker.bootstrap_servers
    config = _config(kafka_broker, tmp_path, unique_name)
    # Two topic ids in one bucket of the coordinator's HashMap: the targets' listed order matters.
    topics = topics_with_colliding_ids(bootstrap, f"ot-848-{unique_name}", PARTITIONS)
    groups = {assignor: RealGroup(bootstrap, f"ot-848-{remote}-{unique_name}", topics, group_protocol="consumer",
                                  remote_assignor=remote)
              for remote, assignor in (("uniform", "uniform"), ("range", "server-range"))}
    try:
        for group in groups.values():
            play_steps(group)
        _describe_topics(spark, config)
        run_available_now(spark, config)
        log = read_offsets_topic(bootstrap)
    finally:
        for group in groups.values():
            group.close()

    for assignor, group in groups.items():
        # The fold, done here by hand on the log read by a plain consumer: target per member per epoch.
        expected: dict[int, dict] = {}
        targets: dict[str, frozenset] = {}
        for r in log:
            key = base64.b64decode(r["key"])
            if key[:2] not in (b"\x00\x06", b"\x00\x07"):
                continue
            record = decode(key, None if r["value"] is None else base64.b64decode(r["value"]))
            if record.group_id != group.group_id:
                continue
            if record.type == 7:
                if record.value is None:
                    targets.pop(record.key.member_id, None)
                else:
                    targets[record.key.member_id] = frozenset(
                        (t.topic_id, p) for t in record.value.topic_partitions for p in t.partitions)
            elif record.value is not None:
                expected[record.value.assignment_epoch] = dict(targets)
        metrics, held, checks, _ = _recorded(spark, config, group.group_id)
        from streaming.coordinator_log import kafka_uuid

        names = _topic_ids(spark, config)
        expected = {e: {m: frozenset((names[kafka_uuid(tid)], p) for tid, p in tps) for m, tps in members.items()}
                    for e, members in expected.items()}
        assert {e: held.get(e, {}) for e in expected} == expected
        assert [m["generation"] for m in metrics if m["members"]] == sorted(expected)
        for settled in group.generations:  # what the clients held once they reached the target
            assert settled.assignment in held.values(), settled
        assert checks and all(c["agrees"] and c["computed_assignor"] == assignor for c in checks), checks
        print(f"KIP-848 {assignor}: {len(expected)} target epochs, {sum(c['agrees'] for c in checks)} of "
              f"{len(checks)} checks agree")


def _renamed(key: bytes, group_id: str) -> bytes:
    """A record key with another group id (every key starts with its int16 type and the group id)."""
    length = int.from_bytes(key[2:4], "big")
    name = group_id.encode()
    return key[:2] + len(name).to_bytes(2, "big") + name + key[4 + length:]


#: The crash test's copies of the captured groups and its kills.
COPIES, KILLS = 16, 1


def test_sigkill_and_restart_give_the_tables_of_an_uninterrupted_run(kafka_broker, spark, tmp_path, unique_name):
    """test_crash_safety's pattern on this source: a copy of the log with the captured real groups'
    records, sixteen times under other group ids, read in small batches by a job killed mid-batch.
    One kill: test_crash_safety repeats kills on the event topics; what this adds is the source's own
    offsets and the coordinator-written generations across a restart (each kill costs a JVM start)."""
    from tests.integration.test_crash_safety import _kill_mid_batch, _start_job
    from tests.integration.jobs import history

    bootstrap = kafka_broker.bootstrap_servers
    copy = f"offsets-copy-{unique_name}"
    ensure_topics(bootstrap, [copy], partitions=1)  # a group's records share a partition, as in the log
    captured = [r for r in load() if r["source"].startswith("captured")]
    records = [(_renamed(r["key"], f"{r['source'].split(': ')[1]}-{i}"), r["value"])
               for i in range(COPIES) for r in captured]
    produce(bootstrap, copy, records)

    crashed = _config(kafka_broker, tmp_path / "crashed", unique_name, topic=copy)
    config_file = tmp_path / "job.toml"
    config_file.write_text(f"""
[kafka]
bootstrap_servers = "{bootstrap}"
membership_topic = "{crashed.kafka.membership_topic}"
heartbeat_topic = "{crashed.kafka.heartbeat_topic}"

[offsets_topic]
enabled = true
topic = "{copy}"
metadata_topic = "{crashed.offsets_topic.metadata_topic}"
metadata_interval_s = 0
max_offsets_per_trigger = 400

[output]
root = "{crashed.output.root}"
checkpoint = "{crashed.output.checkpoint}"

[job]
trigger_interval = "0 seconds"
""")
    from pathlib import Path

    checkpoint = Path(crashed.output.checkpoint_path)
    log = tmp_path / "job.log"
    kills = []
    for k in range(KILLS):
        job = _start_job(config_file, log)
        kills.append(_kill_mid_batch(job, checkpoint, after_commits=(k + 1) * 2))
    assert kills == sorted(kills) and len(set(kills)) == KILLS, kills
    final = _start_job(config_file, log)
    assert final.wait(600) == 0, log.read_text()[-3000:]

    uninterrupted = _config(kafka_broker, tmp_path / "uninterrupted", unique_name, topic=copy)
    run_available_now(spark, uninterrupted)
    crashed_history, clean_history = history(spark, crashed), history(spark, uninterrupted)
    assert len(clean_history[tables.BALANCE_METRICS]) > 10 * COPIES
    assert len(clean_history[tables.ASSIGNMENT_CHECKS]) > 5 * COPIES
    for table in clean_history:
        extra = sorted(set(crashed_history[table]) - set(clean_history[table]))
        missing = sorted(set(clean_history[table]) - set(crashed_history[table]))
        assert not extra and not missing, f"{table} after {KILLS} kills: extra {extra[:2]}, missing {missing[:2]}"
        assert crashed_history[table] == clean_history[table], f"{table}: duplicated rows after {KILLS} kills"


@pytest.mark.parametrize("assignor", ["sticky", "cooperative-sticky"])
def test_java_clients_sticky_family_the_projects_assignor_agrees_on_every_generation(
        kafka_broker, spark, tmp_path, unique_name, assignor):
    """Kafka's own Java consumer (4.1.1, the coordinator reference's jars) with the sticky family:
    joins, a static member, a crash expelled after the session timeout, a clean leave."""
    import time

    from tests.coordinator_log.capture import EXPIRY_S, STEP_S, Capture
    from tests.coordinator_log.fixture import ensure_built

    ensure_built()
    bootstrap = kafka_broker.bootstrap_servers
    config = _config(kafka_broker, tmp_path, unique_name)
    topics = sorted(_topics(bootstrap, unique_name))
    group_id = f"ot-java-{assignor}-{unique_name}"
    capture = Capture(bootstrap, tmp_path)
    try:
        a = capture.java_consumer("a", group_id, topics, assignor)
        a.wait_for("assigned ot-")
        b = capture.java_consumer("b", group_id, topics, assignor, instance_id=f"{group_id}-static")
        b.wait_for("assigned ot-")
        time.sleep(STEP_S)
        crashing = capture.java_consumer("crashing", group_id, topics, assignor)
        crashing.wait_for("assigned ot-")
        time.sleep(STEP_S)
        crashing.crash()
        time.sleep(EXPIRY_S)
        d = capture.java_consumer("d", group_id, topics, assignor)
        d.wait_for("assigned ot-")
        time.sleep(STEP_S)
        a.leave()
        time.sleep(STEP_S * 2)
        _describe_topics(spark, config)
        run_available_now(spark, config)
        written = _written_by_coordinator(bootstrap, group_id)
    finally:
        capture.stop_all()

    metrics, held, checks, _ = _recorded(spark, config, group_id)
    assert [m["generation"] for m in metrics] == sorted({g for g, _, _ in written if g > 0})
    firsts = {}
    for g, at, members in written:
        firsts.setdefault(g, members)
    assert {m["generation"]: held.get(m["generation"], {}) for m in metrics} == \
        {m["generation"]: firsts[m["generation"]] for m in metrics}
    assert len(checks) == len([m for m in metrics if m["members"]]) >= 4
    print(f"Java {assignor}: {len(metrics)} generations, {sum(c['agrees'] for c in checks)} of {len(checks)} "
          f"checks agree")
    assert all(c["agrees"] for c in checks), [c for c in checks if not c["agrees"]]
