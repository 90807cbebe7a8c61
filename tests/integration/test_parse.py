"""Every way a record can be refused gives a reason that names what is wrong (real Spark)."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import functions as F

from streaming.job.parse import parse_records

pytestmark = pytest.mark.integration

M, H = "membership-topic", "heartbeat-topic"
GOOD = {"schema_version": 1, "event_id": "e1", "event_time": 1000, "group_id": "g", "type": "join",
        "member_id": "m1", "topics": ["t"], "owned_partitions": [{"topic": "t", "partition": 0}]}


def _parse(spark, records, limit=1000):
    rows = [(key, value if isinstance(value, bytes) or value is None else value.encode(), topic, 0, i)
            for i, (key, value, topic) in enumerate(records)]
    df = spark.createDataFrame(rows, "key string, value binary, topic string, partition int, offset long")
    df = df.withColumn("key", F.col("key").cast("binary")).withColumn("timestamp", F.current_timestamp())
    return parse_records(df, M, H, limit).orderBy("source_offset").collect()


CASES = [
    (json.dumps(GOOD), None),
    ("not json", "not valid JSON"),
    ("[1,2]", "not a JSON object"),
    (json.dumps({**GOOD, "generation": "abc"}), 'field generation: expected int, got "abc"'),
    # Reading a variant as a type casts it; the contract's types are JSON's, so none of these pass.
    (json.dumps({**GOOD, "event_time": "1000"}), 'field event_time: expected bigint, got "1000"'),
    (json.dumps({**GOOD, "generation": 3.5}), "field generation: expected int, got 3.5"),
    (json.dumps({**GOOD, "generation": True}), "field generation: expected int, got true"),
    (json.dumps({**GOOD, "member_id": 12}), "field member_id: expected string, got 12"),
    (json.dumps({**GOOD, "member_id": {"a": 1}}), 'field member_id: expected string, got {"a":1}'),
    (json.dumps({**GOOD, "generation": 7, "session_timeout_ms": 45000}), None),
    # Nor do list elements: a topic name is a JSON string, not 1 read as "1" (nor a list as its JSON).
    (json.dumps({**GOOD, "topics": [1]}), "field topics: expected array<string>, got [1]"),
    (json.dumps({**GOOD, "topics": ["t", {"a": 1}]}), 'field topics: expected array<string>, got ["t",{"a":1}]'),
    (json.dumps({**GOOD, "topics": [["t"]]}), 'field topics: expected array<string>, got [["t"]]'),
    (json.dumps({**GOOD, "topics": "t"}), 'field topics: expected array<string>, got "t"'),
    (json.dumps({**GOOD, "topics": ["t", None]}), "field topics: a topic name is empty"),
    (json.dumps({**GOOD, "topics": ["t", "  "]}), "field topics: a topic name is empty"),
    (json.dumps({**GOOD, "topics": [""]}), "field topics: a topic name is empty"),
    (json.dumps({k: v for k, v in GOOD.items() if k != "group_id"}), "missing required field group_id"),
    (json.dumps({**GOOD, "group_id": " "}), "field group_id must not be empty"),
    (json.dumps({**GOOD, "type": "explode"}), "field type: unknown value 'explode' (expected one of join, leave, update, workload)"),
    (json.dumps({**GOOD, "event_time": -5}), "field event_time: -5 is below the minimum 0"),
    (json.dumps({**GOOD, "schema_version": 2}), "unsupported schema_version 2 (this job reads version 1)"),
    (json.dumps({**GOOD, "type": "leave", "member_id": None}), "missing required field member_id for a leave event"),
    (json.dumps({**GOOD, "owned_partitions": [{"topic": "t", "partition": -1}]}),
     "field owned_partitions: a partition number is negative"),
    (json.dumps({**GOOD, "type": "workload", "workload": {"topics": [{"name": "t", "partitions": -3}]}}),
     "field workload.topics: a partition count is missing or negative"),
    (json.dumps({**GOOD, "type": "workload", "workload": {"topics": [{"name": "t", "partitions": 2, "racks": [["a"]]}]}}),
     "field workload.topics: racks must list one entry per partition"),
    (json.dumps({**GOOD, "type": "workload"}), "missing required field workload.topics for a workload event"),
    ("x" * 1001, "oversized record: 1001 bytes (limit 1000)"),
    # JSON that is not an object, also behind JSON's blanks; an object behind them is fine.
    ("\n\t [1, 2]", "not a JSON object"),
    ('"just a string"', "not a JSON object"),
    ("42", "not a JSON object"),
    (" \r\n" + json.dumps(GOOD), None),
]


def test_each_refusal_names_what_is_wrong(spark):
    rows = _parse(spark, [("g", value, M) for value, _ in CASES])
    assert [r.reject_reason for r in rows] == [reason for _, reason in CASES]
    assert rows[0].member_id == "m1" and rows[0].owned_partitions[0].partition == 0


def test_heartbeats_need_only_their_own_fields_and_a_matching_key(spark):
    hb = {"schema_version": 1, "event_id": "h", "event_time": 5, "group_id": "g", "member_id": "m"}
    rows = _parse(spark, [
        ("g", json.dumps(hb), H),
        ("g", json.dumps({**hb, "member_id": None}), H),
        ("other", json.dumps(hb), H),
        (None, None, H),
        ("g", json.dumps(hb), "stray-topic"),
        ("g", json.dumps({**hb, "event_time": "5"}), H),
    ])
    assert [r.kind for r in rows] == ["heartbeat", "heartbeat", "heartbeat", "heartbeat", None, "heartbeat"]
    assert [r.reject_reason for r in rows] == [
        None,
        "missing required field member_id",
        "record key 'other' differs from group_id 'g'",
        "empty record value",
        "record from unexpected topic stray-topic",
        'field event_time: expected bigint, got "5"',
    ]


def test_topic_names_are_read_as_written(spark):
    """Escapes, non-ASCII, an empty list, a key that differs only in case (keys match as written),
    and NUL inside names, which the blank-name check's shortcut joins with."""
    lists = [["q\"uote", "back\\slash", "\u00e9", "\u2028", "💥"], [], ["a\u0000", "\u0000b"], ["a b", " x "]]
    rows = _parse(spark, [("g", json.dumps({**GOOD, "topics": t}), M) for t in lists]
                  + [("g", json.dumps({**GOOD, "topics": ["t"], "Topics": [1]}), M)])
    assert [r.reject_reason for r in rows] == [None] * 5
    assert [r.topics for r in rows] == lists + [["t"]]
