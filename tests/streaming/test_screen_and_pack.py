"""screen_and_pack_batches: the canonical heartbeats packed (and reduced), every other record handed
back to the parse as it came, a clock row per batch at the newest recognised heartbeat (pure Arrow)."""

from __future__ import annotations

import json

import pyarrow as pa

from streaming.job.heartbeat_screen import SOURCE_COLUMNS, screen_and_pack_batches

H = "heartbeats"
SCHEMA = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()), ("partition", pa.int32()),
                    ("offset", pa.int64()), ("timestamp", pa.timestamp("us"))])


def beat(group: str, member: str, t: int, separators=(",", ":")) -> bytes:
    return json.dumps({"schema_version": 1, "event_id": f"{member}-{t}", "event_time": t, "group_id": group,
                       "member_id": member}, separators=separators).encode()


def _batch(records: list[tuple[bytes | None, bytes | None, str]], first_offset: int) -> pa.RecordBatch:
    n = len(records)
    return pa.RecordBatch.from_arrays([
        pa.array([k for k, _, _ in records], pa.binary()), pa.array([v for _, v, _ in records], pa.binary()),
        pa.array([t for _, _, t in records], pa.string()), pa.array([0] * n, pa.int32()),
        pa.array(range(first_offset, first_offset + n), pa.int64()), pa.array([0] * n, pa.timestamp("us"))],
        schema=SCHEMA)


CANONICAL = [(b"g1", beat("g1", "a", 1_000 * i), H) for i in range(1, 21)] + \
            [(b"g1", beat("g1", "b", 1_000 * i + 500), H) for i in range(1, 21)] + \
            [(None, beat("g2", "a", 7_000), H)]
LEFT = [(b"g1", beat("g1", "a", 90_000, separators=(", ", ": ")), H),  # valid, but the parse's
        (b"g1", b"not json", H),
        (b"g1", beat("g1", "a", 2_000), "elsewhere"),
        (b"other", beat("g1", "a", 3_000), H),  # a key that is not the group: the parse refuses it
        (b"g1", None, H)]


def _run(reduce_within_ms=None):
    records = CANONICAL[:20] + LEFT[:2] + CANONICAL[20:] + LEFT[2:]
    batches = [_batch(records[:25], 0), _batch(records[25:], 25)]
    out = pa.Table.from_batches(list(screen_and_pack_batches(iter(batches), H, 1_000, reduce_within_ms)))
    return records, out.to_pylist()


def test_records_the_screen_does_not_recognise_go_back_to_the_parse_as_they_came():
    records, rows = _run()
    left = [r for r in rows if r["packed_kind"] is None]
    assert [(r["key"], r["value"], r["topic"]) for r in left] == LEFT
    assert all(r["beat_times"] is None and r["packed_group_key"] is None for r in left)
    assert [r["offset"] for r in left] == [records.index(x) for x in LEFT]


def test_canonical_heartbeats_become_one_packed_row_per_member_with_every_time():
    _, rows = _run()
    packed = {(r["packed_group_key"], r["packed_member_id"]): r for r in rows if r["packed_kind"] == "heartbeat"}
    assert sorted(packed) == [("g1", "a"), ("g1", "b"), ("g2", "a")]
    assert sorted(packed["g1", "a"]["beat_times"]) == [1_000 * i for i in range(1, 21)]
    assert packed["g1", "b"]["packed_event_time"] == 20_500
    assert all(r["key"] is None and r["value"] is None and r["topic"] is None for r in packed.values())


def test_each_batch_gets_a_clock_row_at_its_newest_recognised_heartbeat():
    records, rows = _run()
    clocks = [r for r in rows if r["packed_kind"] == "clock"]
    # The first batch's newest canonical heartbeat; the second's (not the spaced one at 90,000 s:
    # its clock row comes after the parse, screened_input).
    assert [(r["packed_group_key"], r["packed_event_time"], r["beat_times"]) for r in clocks] == \
        [("", 20_000, []), ("", 20_500, [])]


def test_with_the_reduction_the_kept_heartbeats_count_for_all_of_them():
    _, rows = _run(reduce_within_ms=6_000)
    packed = {(r["packed_group_key"], r["packed_member_id"]): r for r in rows if r["packed_kind"] == "heartbeat"}
    a = packed["g1", "a"]
    assert len(a["beat_times"]) < 20 and sum(a["beat_weights"]) == 20
    assert max(a["beat_times"]) == 20_000 == a["packed_event_time"]


def test_the_batches_keep_the_source_columns_first():
    _, rows = _run()
    assert list(rows[0])[:len(SOURCE_COLUMNS)] == list(SOURCE_COLUMNS)
