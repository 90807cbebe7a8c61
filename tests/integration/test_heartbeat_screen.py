"""The heartbeat screen recognises only what the parse accepts, with the parse's values (real Spark).

The oracle is :func:`parse_records` itself: every record goes through both paths and the columns
the job reads must agree, record by record, over canonical heartbeats, near misses of every rule
the screen relies on, and a few thousand random mutations of canonical records.
"""

from __future__ import annotations

import json
import random

import pytest
from pyspark.sql import functions as F

from streaming.job.heartbeat_screen import PATTERN, parse_screened
from streaming.job.parse import parse_records

pytestmark = pytest.mark.integration

M, H = "membership-topic", "heartbeat-topic"
LIMIT = 400
#: What the stateful operator reads of a heartbeat (operator_input.narrow_input).
READ = ("kind", "group_id", "member_id", "event_time", "reject_reason", "task_lags")


def beat(**fields) -> bytes:
    event = {"schema_version": 1, "event_id": "e-1", "event_time": 1_767_225_600_042, "group_id": "g",
             "member_id": "consumer-1-7f3a"}
    event.update(fields)
    return json.dumps({k: v for k, v in event.items() if v is not DROP}, separators=(",", ":"), ensure_ascii=False).encode()


DROP = object()
CANONICAL = [
    beat(),
    beat(generation=4),
    beat(generation=-1),
    beat(generation=0),
    beat(generation=999_999_999),
    beat(event_time=0),
    beat(event_time=999_999_999_999_999_999),
    beat(group_id="orders-service", member_id="m é 中 😀", event_id="\u2028x"),
    beat(member_id=" m "),  # not blank: the parse keeps the spaces
    beat(group_id="g\x7f"),  # DEL is not a control character to JSON
]
NEAR_MISSES = [
    beat(generation=None),  # null is fine to the parse but not the canonical shape
    beat(generation=-2),
    beat(generation=2_147_483_647),
    beat(generation=2_147_483_648),
    beat(generation=1.0),
    beat(generation="4"),
    beat(generation=True),
    beat(event_time=-1),
    beat(event_time=9_223_372_036_854_775_807),
    beat(event_time=9_223_372_036_854_775_808),
    beat(event_time=1.5),
    beat(event_time="1000"),
    beat(schema_version=2),
    beat(schema_version=0),
    beat(schema_version="1"),
    beat(event_id=""),
    beat(event_id=" "),
    beat(group_id="\t"),
    beat(member_id=""),
    beat(member_id=DROP),
    beat(group_id=DROP),
    beat(member_id=12),
    beat(member_id=None),
    beat(task_lags={"0_1": 5}),
    beat(task_lags=None),
    beat(extra="field"),
    beat(member_id='quote"inside'),
    beat(member_id="back\\slash"),
    beat(member_id="tab\there"),
    beat().replace(b'"g"', b'"\\u0067"'),  # the same group, escaped
    beat().replace(b":1,", b": 1,"),
    beat().replace(b"1767225600042", b"01767225600042"),  # leading zero: not JSON
    beat().replace(b"1767225600042", b"1.767225600042e12"),
    beat().replace(b"1767225600042", b"1767225600042.0"),
    beat() + b"\n",
    beat() + b" ",
    b" " + beat(),
    b"\xef\xbb\xbf" + beat(),  # a byte order mark
    beat().replace(b'"g"', b'"g\x00"'),
    beat().replace(b'"g"', b'"g\x1f"'),
    beat().replace(b'"g"', b'"g\xff"'),  # invalid UTF-8
    beat().replace(b'"g"', b'"g\xed\xa0\x80"'),  # a surrogate encoded in UTF-8
    beat().replace(b'"g"', b'"g\xc0\xaf"'),  # an overlong encoding
    beat().replace(b',"member_id"', b',"group_id":"g","member_id"'),  # a duplicate key
    beat().replace(b'"schema_version":1,', b"") + b"",
    beat()[:-1] + b',"member_id":"other"}',
    beat()[:-1],
    beat()[:-1] + b",}",
    b"{" + beat()[1:-1] + b"}}",
    beat(event_id="x" * (LIMIT - 80)),  # over the record size limit
    b"",
    None,
]


def _key(value: bytes | None) -> bytes:
    """The record key a producer gives: the group id (b"g" when the value has none to read)."""
    try:
        return json.loads(value)["group_id"].encode()
    except (TypeError, ValueError, KeyError, AttributeError):
        return b"g"


def _rows(spark, records, topic=H):
    """Kafka source rows for ``records`` (key, value) on ``topic``."""
    rows = [(key, value, topic, 0, i) for i, (key, value) in enumerate(records)]
    df = spark.createDataFrame(rows, "key binary, value binary, topic string, partition int, offset long")
    return df.withColumn("timestamp", F.timestamp_millis(F.lit(1_767_225_600_000))).repartition(2)


def _both(spark, records, topic=H):
    """Each record's columns as the parse and as the screen read them: [(parsed, screened)]."""
    df = _rows(spark, records, topic)
    parsed = {r.source_offset: r.asDict() for r in parse_records(df, M, H, LIMIT).collect()}
    screened = {r.source_offset: r.asDict() for r in parse_screened(df, M, H, LIMIT).collect()}
    assert parsed.keys() == screened.keys() == set(range(len(records)))
    return [(parsed[i], screened[i]) for i in range(len(records))]


def _recognised(screened: dict) -> bool:
    # The screen leaves the other fields null; the parse always reads event_id of a valid record.
    return screened["reject_reason"] is None and screened["event_id"] is None


def _assert_agree(records, pairs):
    recognised = []
    for (key, value), (parsed, screened) in zip(records, pairs):
        if _recognised(screened):
            recognised.append(value)
            assert parsed["reject_reason"] is None, (value, parsed["reject_reason"])
            assert {c: screened[c] for c in READ} == {c: parsed[c] for c in READ}, value
        else:
            assert screened == parsed, value
    return recognised


def test_canonical_heartbeats_are_recognised_and_everything_else_is_parsed(spark):
    records = [(_key(v), v) for v in CANONICAL + NEAR_MISSES] + [(None, beat()), (b"other", beat()),
                                                                  (b"\xff", beat())]
    recognised = _assert_agree(records, _both(spark, records))
    # Recognised: every canonical heartbeat and the one with no key, nothing else.
    assert recognised == CANONICAL + [beat()]


def test_a_heartbeat_on_another_topic_is_left_to_the_parse(spark):
    records = [(b"g", beat())]
    [(parsed, screened)] = _both(spark, records, topic="elsewhere")
    assert screened == parsed
    assert parsed["reject_reason"] == "record from unexpected topic elsewhere"


def test_random_mutations_of_canonical_heartbeats_agree_with_the_parse(spark):
    rng = random.Random(20261126)
    alphabet = [b'"', b"\\", b"{", b"}", b":", b",", b" ", b"\n", b"0", b"1", b"-", b".", b"e", b"a", b"\x00",
                b"\xc3\xa9", b"\xff", b"u", b"null", b"[", b"]"]
    records = []
    for _ in range(3_000):
        value = bytearray(beat(generation=rng.choice([DROP, 3, -1])))
        for _ in range(rng.randint(1, 2)):
            at = rng.randrange(len(value) + 1)
            action = rng.random()
            if action < 0.4:
                value[at:at + 1] = rng.choice(alphabet)
            elif action < 0.7:
                value[at:at] = rng.choice(alphabet)
            else:
                del value[at:at + rng.randint(1, 3)]
        records.append((b"g", bytes(value)))
    pairs = _both(spark, records)
    recognised = _assert_agree(records, pairs)
    # Some mutations keep a canonical heartbeat (a digit for a digit, a letter in an id): the
    # comparison above is then not vacuous.
    assert 100 < len(recognised) < len(records)


def test_the_pattern_is_anchored_at_both_ends():
    # Java's and Python's "$" also match before a final newline; RE2's \z does not.
    assert PATTERN.startswith(r"\A") and PATTERN.endswith(r"\z")
