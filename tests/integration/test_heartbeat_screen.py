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

from streaming.job.heartbeat_screen import PATTERN, parse_screened, screened_input
from streaming.job.operator_input import CLOCK, compacted_input, narrow_input
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


def _mutations(rng: random.Random, count: int) -> list[tuple[bytes, bytes]]:
    """``count`` canonical heartbeats with one or two random byte edits each, keyed b"g"."""
    alphabet = [b'"', b"\\", b"{", b"}", b":", b",", b" ", b"\n", b"0", b"1", b"-", b".", b"e", b"a", b"\x00",
                b"\xc3\xa9", b"\xff", b"u", b"null", b"[", b"]"]
    records = []
    for _ in range(count):
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
    return records


def test_random_mutations_of_canonical_heartbeats_agree_with_the_parse(spark):
    records = _mutations(random.Random(20261126), 3_000)
    pairs = _both(spark, records)
    recognised = _assert_agree(records, pairs)
    # Some mutations keep a canonical heartbeat (a digit for a digit, a letter in an id): the
    # comparison above is then not vacuous.
    assert 100 < len(recognised) < len(records)


def _operator_rows(spark, records, screen: bool, reduce_within_ms):
    """The stateful operator's rows of ``records`` on the heartbeat topic, as the job builds them
    with the screen (screened_input) or without it (parse, narrow, pack)."""
    df = _rows(spark, records)
    if screen:
        rows = screened_input(df, M, H, LIMIT, reduce_within_ms)
    else:
        rows = compacted_input(narrow_input(parse_records(df, M, H, LIMIT)), reduce_within_ms)
    return [r.asDict() for r in rows.collect()]


def _records_and_clock(rows):
    """What the operator makes of its rows: every record (a packed row unpacked into its heartbeat
    times, each with the records it stands for) and the clock rows' times (the watermark's input)."""
    records, clocks = {}, []
    for r in rows:
        if r["kind"] == CLOCK:
            assert r["group_key"] == "" and r["member_id"] is None and r["beat_times"] == [], r
            clocks.append(r["event_time"])
            continue
        times = r["beat_times"] if r["beat_times"] is not None else [r["event_time"]]
        weights = r["beat_weights"] or [1] * len(times)
        for t, w in zip(times, weights):
            key = (r["group_key"], r["kind"], r["member_id"], t, r["reject_reason"], r["payload"])
            records[key] = records.get(key, 0) + w
    return records, clocks


def _member_totals(records):
    """Per (group, member): the heartbeat records counted and the newest heartbeat time."""
    totals = {}
    for (group, kind, member, t, reason, payload), weight in records.items():
        if kind == "heartbeat" and reason is None and payload is None:
            count, newest = totals.get((group, member), (0, -1))
            totals[group, member] = (count + weight, max(newest, t))
    return totals


def test_the_jobs_screened_and_packed_rows_hold_the_same_records_as_the_parse_and_packing(spark):
    rng = random.Random(20261128)
    members = [(f"g{g}", f"m{m}") for g in range(4) for m in range(3)]
    canonical = [beat(group_id=g, member_id=m, event_time=1_767_225_600_000 + 150 * i + rng.randrange(100))
                 for i in range(40) for g, m in members]
    # Valid heartbeats of another serialiser (spaces): the parse's, each with a clock row of its own.
    spaced = [json.dumps(json.loads(v)).encode() for v in rng.sample(canonical, 30)]
    spaced.append(json.dumps(json.loads(beat(group_id="g9", member_id="late-writer",
                                             event_time=1_767_225_900_000))).encode())
    lags = [beat(group_id="g1", member_id="m1", task_lags={"0_1": 5})]
    values = canonical + spaced + lags + [v for v in CANONICAL + NEAR_MISSES]
    records = [(_key(v), v) for v in values] + _mutations(rng, 500)
    rng.shuffle(records)

    unscreened, unscreened_clock = _records_and_clock(_operator_rows(spark, records, False, None))
    screened, screened_clock = _records_and_clock(_operator_rows(spark, records, True, None))
    assert screened == unscreened
    # The newest heartbeat is a near miss (event_time 2^63 - 1) the parse accepts.
    assert max(screened_clock) == max(unscreened_clock) == 9_223_372_036_854_775_807
    assert 1_767_225_900_000 in screened_clock  # the spaced heartbeat's own clock row
    assert sum(unscreened.values()) == len(records)

    # With the reduction the kept heartbeats may differ (the screen reduces only its own), never
    # what each member's heartbeats count for, nor any other record.
    reduced, reduced_clock = _records_and_clock(_operator_rows(spark, records, True, 6_000))
    assert max(reduced_clock) == max(unscreened_clock)
    assert _member_totals(reduced) == _member_totals(unscreened)
    plain = {k for k in unscreened if k[1] == "heartbeat" and k[4] is None and k[5] is None}
    assert {k: w for k, w in reduced.items() if k not in plain} == {k: w for k, w in unscreened.items()
                                                                    if k not in plain}
    kept = [k for k in reduced if k in plain]
    assert len(kept) < len(plain) / 2, (len(kept), len(plain))  # most canonical heartbeats dropped


def test_the_pattern_is_anchored_at_both_ends():
    # Java's and Python's "$" also match before a final newline; RE2's \z does not.
    assert PATTERN.startswith(r"\A") and PATTERN.endswith(r"\z")
