"""Fuzzed, malformed and hostile records never stop the job and are never lost: every record is
either accepted or in rejected_events with a reason, and the counts add up."""

from __future__ import annotations

import json
import random

import pytest

from schemas import tables
from streaming.feeds.kafka_io import produce
from tests.integration.jobs import make_config, read, run_available_now

pytestmark = pytest.mark.integration

VALID = {"schema_version": 1, "event_id": "e", "event_time": 1_700_000_000_000, "group_id": "fuzz",
         "group_type": "consumer", "type": "join", "member_id": "m", "topics": ["t"],
         "owned_partitions": [{"topic": "t", "partition": 0}], "generation": 1, "protocol": "eager",
         "assignor": "range", "session_timeout_ms": 45000}

HOSTILE_VALUES = [None, True, -1, 0, 2**63, -2**63, 1e308, float("-inf"), "", " ", "\u0000", "\ud7ff" * 50,
                  "💥" * 10, "x" * 10_000, [], {}, [[[[[]]]]], {"$": {"$": None}}, "'; DROP TABLE assignments; --",
                  "../../etc/passwd", "null", "NaN"]


def _mutate(rng: random.Random, i: int) -> bytes:
    """A hostile variant of a valid event: replaced, deleted or added fields, broken encodings."""
    event = dict(VALID, event_id=f"fuzz-{i}")
    kind = rng.randrange(7)
    if kind == 0:  # a field gets a hostile value
        event[rng.choice(list(event))] = rng.choice(HOSTILE_VALUES)
    elif kind == 1:  # a required field disappears
        del event[rng.choice(["schema_version", "event_id", "event_time", "group_id", "type", "member_id"])]
    elif kind == 2:  # random bytes
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200)))
    elif kind == 3:  # truncated JSON
        raw = json.dumps(event).encode()
        return raw[: rng.randrange(1, len(raw))]
    elif kind == 4:  # deeply nested value
        nested: object = 1
        for _ in range(rng.randrange(50, 400)):
            nested = [nested]
        event["topics"] = nested
    elif kind == 5:  # nested fields with hostile content
        event["owned_partitions"] = [{"topic": rng.choice(HOSTILE_VALUES), "partition": rng.choice(HOSTILE_VALUES)}]
        event["workload"] = {"topics": [{"name": rng.choice(HOSTILE_VALUES), "partitions": rng.choice(HOSTILE_VALUES)}]}
        event["type"] = "workload"
    else:  # invalid UTF-8 inside an otherwise plausible record
        return json.dumps(event).encode()[:-2] + b"\xff\xfe\"}"
    return json.dumps(event, allow_nan=True).encode()


def test_fuzzed_records_are_accepted_or_rejected_never_lost(spark, kafka_broker, tmp_path, unique_name):
    config = make_config(kafka_broker, tmp_path, unique_name)
    rng = random.Random(20261122)
    records = [_mutate(rng, i) for i in range(400)]
    produce(config.kafka.bootstrap_servers, config.kafka.membership_topic, [("fuzz", r) for r in records])
    # Hostile heartbeats too, and records without a key or with a key that is not the group.
    beats = [_mutate(rng, 1000 + i) for i in range(100)]
    produce(config.kafka.bootstrap_servers, config.kafka.heartbeat_topic,
            [(rng.choice([None, "fuzz", "other"]), b) for b in beats])

    run_available_now(spark, config)

    ingest = read(spark, config, tables.INGEST_METRICS)
    consumed = sum(r["records"] for r in ingest)
    accepted = sum(r["membership_accepted"] + r["heartbeats_accepted"] for r in ingest)
    rejected_rows = read(spark, config, tables.REJECTED_EVENTS)
    assert consumed == len(records) + len(beats)
    assert accepted + len(rejected_rows) == consumed
    assert sum(r["rejected"] for r in ingest) == len(rejected_rows)
    assert all(r["reason"] for r in rejected_rows)
    assert len({(r["source_topic"], r["source_partition"], r["source_offset"])
                for r in rejected_rows if r["source_topic"]}) == len([r for r in rejected_rows if r["source_topic"]])
    # Everything that is not even JSON is among the refused, with that reason.
    not_json = [r for r in records if not _is_json(r)]
    reasons = {r["raw_value"]: r["reason"] for r in rejected_rows}
    assert len(not_json) > 50
    for raw in not_json:
        text = raw.decode("utf-8", errors="replace")
        assert reasons.get(text) in ("not valid JSON", "not a JSON object", "record value is not valid UTF-8"), (
            text[:80], reasons.get(text))


def _is_json(raw: bytes) -> bool:
    try:
        json.loads(raw.decode("utf-8"))
        return True
    except (UnicodeDecodeError, ValueError):
        return False


def _flip(rng: random.Random, raw: bytes) -> bytes:
    data = bytearray(raw)
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(data))
        data[i] ^= 1 << rng.randrange(8)
    return bytes(data)


def test_thousands_of_mutated_records_in_a_valid_history_are_all_accounted_for(spark, kafka_broker, tmp_path,
                                                                                unique_name):
    """3,000 mutated events (fields deleted, hostile values, events dated far ahead, truncated or
    flipped bytes) mixed into a valid group's history on both topics: every record read is either
    accepted or in rejected_events with a reason, batch by batch, and the valid history is intact."""
    from tests import stories
    from tests.integration.jobs import produce_story

    config = make_config(kafka_broker, tmp_path, unique_name)
    rng = random.Random(20261125)
    valid = stories.to_records(stories.eager_range_story(), "valid", 1_700_000_000_000)
    membership, beats = [], []
    for i in range(3_000):
        kind = rng.randrange(4)
        if kind == 0:
            raw = _mutate(rng, 10_000 + i)
        elif kind == 1:  # a plausible event dated up to a year ahead (it moves the stream's time on)
            raw = json.dumps(dict(VALID, event_id=f"ahead-{i}", group_id=f"fuzz-{i % 7}",
                                  event_time=VALID["event_time"] + rng.randrange(1, 365 * 86_400_000))).encode()
        elif kind == 2:
            raw = _flip(rng, json.dumps(dict(VALID, event_id=f"flip-{i}")).encode())
        else:  # a heartbeat with a hostile field
            beat = {"schema_version": 1, "event_id": f"hb-{i}", "event_time": VALID["event_time"] + i,
                    "group_id": f"fuzz-{i % 7}", "member_id": "m"}
            beat[rng.choice(list(beat))] = rng.choice(HOSTILE_VALUES)
            beats.append((rng.choice([None, "fuzz-0", "other"]), json.dumps(beat, allow_nan=True).encode()))
            continue
        membership.append((rng.choice([None, "fuzz", f"fuzz-{i % 7}"]), raw))
    produce(config.kafka.bootstrap_servers, config.kafka.membership_topic, membership)
    produce(config.kafka.bootstrap_servers, config.kafka.heartbeat_topic, beats)
    produce_story(config, valid)
    run_available_now(spark, config)

    produced = len(membership) + len(beats) + len(valid[0]) + len(valid[1])
    ingest = read(spark, config, tables.INGEST_METRICS)
    rejected_rows = read(spark, config, tables.REJECTED_EVENTS)
    assert sum(r["records"] for r in ingest) == produced
    for r in ingest:
        assert r["records"] == r["membership_accepted"] + r["heartbeats_accepted"] + r["rejected"], r
    assert sum(r["rejected"] for r in ingest) == len(rejected_rows)
    assert all(r["reason"] for r in rejected_rows)
    from_source = [(r["source_topic"], r["source_partition"], r["source_offset"]) for r in rejected_rows
                   if r["source_topic"]]
    assert len(set(from_source)) == len(from_source)  # each refused record findable, once
    # The valid group's story is intact: its five changes, in order. (Events dated ahead move the
    # stream's time on, so its last member may expire after them too: a sixth generation is right.)
    triggers = [r["trigger"] for r in sorted(read(spark, config, tables.BALANCE_METRICS), key=lambda r: r["generation"])
                if r["group_id"] == "valid"]
    assert triggers[:5] == ["join", "join", "join", "leave", "expiry"], triggers
