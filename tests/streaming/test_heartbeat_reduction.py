"""The heartbeat reduction (streaming/job/heartbeat_reduction.py): which heartbeats travel on, what
the others are counted as, and that the engine decides the same with them dropped."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.engine import GroupState, advance
from streaming.job.heartbeat_reduction import reduce_member_heartbeats
from streaming.job.operator_input import compact_heartbeats
from streaming.job.processor import BucketRows
from streaming.testing import (ProcessorHarness, engine_settings, feed, input_frame, membership_events,
                               output_rows, roundtrip, rows_of)
from tests.stories import eager_range_story, heartbeats, join, leave, workload

WINDOW = 6_000  # job.min_session_timeout_ms's default, Kafka's group.min.session.timeout.ms
SETTINGS = engine_settings(coalesce_ms=1_000, allowed_lateness_ms=2_000, cooperative_followup_ms=500)
MEASURED = {"assignor_ms"}


def _reduced(times, member="a", group="g", window=WINDOW):
    """(kept times, weights) of one member's heartbeats at ``times``."""
    beats = pa.table({"group_key": pa.array([group] * len(times), pa.string()),
                      "member_id": pa.array([member] * len(times), pa.string()),
                      "event_time": pa.array(times, pa.int64())})
    (row,) = reduce_member_heartbeats(beats, window).to_pylist()
    pairs = sorted(zip(row["beat_times"], row["beat_weights"]))
    assert row["event_time"] == max(times)
    return [t for t, _ in pairs], [w for _, w in pairs]


# -- the rule, on its edges ------------------------------------------------------------------------

def test_a_members_only_heartbeat_is_kept_and_stands_for_itself():
    assert _reduced([7_000]) == ([7_000], [1])


def test_of_a_window_only_the_first_and_last_heartbeat_travel_and_the_last_carries_the_dropped_ones():
    # One window [6,000, 12,000): five heartbeats, three dropped.
    assert _reduced([6_000, 7_000, 8_000, 9_000, 11_999]) == ([6_000, 11_999], [1, 4])


def test_a_gap_exactly_at_the_minimum_session_timeout_keeps_both_of_its_ends():
    # 6,000 apart: neighbours in two windows, both kept, so the engine sees the same gap (a member
    # with a 6 s session does not expire on it, one ms more would).
    kept, weights = _reduced([0, 1_000, 6_000, 12_001])
    assert kept == [0, 1_000, 6_000, 12_001] and weights == [1, 1, 1, 1]
    kept, _ = _reduced([0, 3_000, 5_999, 6_000, 9_000, 11_999])
    assert kept == [0, 5_999, 6_000, 11_999]


def test_heartbeats_at_one_time_are_one_kept_heartbeat_that_counts_them_all():
    assert _reduced([2_000, 2_000, 2_000]) == ([2_000], [3])


def test_every_heartbeat_is_counted_once_and_the_newest_is_the_rows_event_time():
    times = [0, 500, 700, 5_000, 6_100, 6_200, 30_000, 30_001, 47_999, 48_000]
    kept, weights = _reduced(times)
    assert sum(weights) == len(times)
    assert kept == [0, 5_000, 6_100, 6_200, 30_000, 30_001, 47_999, 48_000]


def test_without_a_window_every_heartbeat_travels():
    beats = pa.table({"group_key": ["g", "g", "g"], "member_id": ["a", "a", "b"],
                      "event_time": pa.array([1, 2, 3], pa.int64())})
    rows = {r["member_id"]: r for r in reduce_member_heartbeats(beats, None).to_pylist()}
    assert sorted(rows["a"]["beat_times"]) == [1, 2] and rows["a"]["beat_weights"] is None


#: The packing step's input columns (operator_input.narrow_input).
NARROW = pa.schema([pa.field("group_key", pa.string(), nullable=False), ("kind", pa.string()),
                    ("member_id", pa.string()), ("event_time", pa.int64()), ("reject_reason", pa.string()),
                    ("payload", pa.string())])


def _beat(member: str, t: int, payload: str | None = None) -> dict:
    """A heartbeat row of group g as the packing step receives it."""
    return {"group_key": "g", "kind": "heartbeat", "member_id": member, "event_time": t, "reject_reason": None,
            "payload": payload}


def test_streams_heartbeats_with_lags_and_refused_records_are_never_dropped_and_counts_stay_exact():
    rows = [_beat("s1", t) for t in range(1_000, 6_000, 500)]
    lags = [_beat("s1", t, payload='{"task_lags":{"0_1":%d}}' % t) for t in (1_200, 2_200, 3_200)]
    refused = [{"group_key": "", "kind": "heartbeat", "member_id": None, "event_time": None,
                "reject_reason": "not JSON", "payload": '{"raw_value":"x"}'}]
    batch = pa.RecordBatch.from_pylist(rows + lags + refused, schema=NARROW)
    out = pd.DataFrame(pa.Table.from_batches(list(compact_heartbeats(iter([batch]), reduce_within_ms=WINDOW)))
                       .to_pylist())
    columns = BucketRows(out)
    assert columns.records.sum() == len(rows) + len(lags) + len(refused)
    assert columns.reduced.sum() == len(rows) - 2  # one window: its first and last heartbeat travel
    beats = np.flatnonzero((out["kind"] == "heartbeat") & out["reject_reason"].isna())
    assert columns.lag_reports(beats) == [("s1", t, {"0_1": t}) for t in (1_200, 2_200, 3_200)]
    members, times = columns.heartbeats(beats)
    assert sorted(times) == [1_000, 1_200, 2_200, 3_200, 5_500]
    assert sum(columns.heartbeat_weights(beats)) == len(rows) + len(lags)
    assert out["reject_reason"].notna().sum() == 1


def test_a_members_heartbeats_of_a_whole_partition_slice_are_reduced_together_whatever_its_arrow_batches():
    rows = [_beat("a", t) for t in range(1_000, 6_000, 500)]
    batches = [pa.RecordBatch.from_pylist(rows[:4], schema=NARROW), pa.RecordBatch.from_pylist(rows[4:], schema=NARROW)]
    out = pa.Table.from_batches(list(compact_heartbeats(iter(batches), reduce_within_ms=WINDOW))).to_pylist()
    (packed,) = [r for r in out if r["kind"] == "heartbeat"]
    assert sorted(zip(packed["beat_times"], packed["beat_weights"])) == [(1_000, 1), (5_500, len(rows) - 1)]
    assert [r["event_time"] for r in out if r["kind"] == "clock"] == [2_500, 5_500]  # one per Arrow batch


# -- the engine decides the same with the reduced heartbeats -----------------------------------------

def _comparable(rows):
    return [(r.table, {k: v for k, v in r.to_json().items() if k not in MEASURED}) for r in rows]


def _run(batches, window):
    """The engine over ``batches`` with the heartbeats reduced as the job reduces them (or not)."""
    state, rows, stats = GroupState(group_id="g"), [], []
    for batch in batches:
        frame = input_frame("g", batch, window)
        columns = BucketRows(frame)
        beats = np.flatnonzero(frame["kind"] == "heartbeat")
        members, times = columns.heartbeats(beats)
        out, batch_stats = advance(state, membership_events(batch), members, times, SETTINGS,
                                   heartbeat_weights=columns.heartbeat_weights(beats))
        rows += out
        stats.append(batch_stats)
        state = roundtrip(state)
    return rows, stats, state


def _assert_same_history(batches):
    full_rows, full_stats, full_state = _run(batches, None)
    reduced_rows, reduced_stats, reduced_state = _run(batches, WINDOW)
    assert _comparable(reduced_rows) == _comparable(full_rows)
    for full, reduced in zip(full_stats, reduced_stats):
        assert (reduced.heartbeats_accepted, reduced.membership_accepted, reduced.rejected) == \
            (full.heartbeats_accepted, full.membership_accepted, full.rejected)
    assert reduced_state.clock == full_state.clock and reduced_state.frontier == full_state.frontier
    assert set(reduced_state.members) == set(full_state.members)
    return full_rows


def test_the_eager_story_in_any_batches_has_the_same_history_with_the_reduction():
    story = eager_range_story()
    for size in (3, 11, 40, len(story)):
        rows = _assert_same_history([story[i:i + size] for i in range(0, len(story), size)])
        assert [r["member_id"] for r in rows_of(rows, "member_events") if r["event"] == "expired"] == ["c"]


def test_a_member_whose_gaps_approach_its_session_timeout_expires_at_the_same_time():
    # a's heartbeats thin out: 1 s, then 5 s, then 7 s apart (a 7 s session: the 7,001 ms gap expires it).
    times = [1_000, 2_000, 3_000, 8_000, 13_000, 20_000, 27_001]
    story = [workload(0), join(500, "a", session=7_000), join(500, "b", session=60_000)]
    story += [("hb", "a", t) for t in times] + heartbeats(["b"], 1_000, 40_000, every=700)
    story.sort(key=lambda e: e["event_time"] if isinstance(e, dict) else e[2])
    rows = _assert_same_history([story])
    expired = [(r["member_id"], r["event_time"]) for r in rows_of(rows, "member_events") if r["event"] == "expired"]
    assert expired == [("a", 27_000)]


def test_a_join_below_the_minimum_session_timeout_is_refused_as_kafka_refuses_it():
    state = GroupState(group_id="g")
    rows, stats = feed(state, [workload(0), join(1_000, "a", session=5_999), join(1_000, "b", session=6_000)]
                       + heartbeats(["a", "b"], 1_500, 9_000), SETTINGS)
    assert set(state.members) == {"b"}
    (refused,) = rows_of(rows, "rejected_events")
    assert "session_timeout_ms 5999 is below job.min_session_timeout_ms 6000" in refused["reason"]
    assert (stats.membership_accepted, stats.rejected) == (2, 1)


@st.composite
def _stories(draw):
    """A group whose members join, heartbeat with random gaps (some longer than their session),
    leave or fall silent; cut into random batches."""
    members = draw(st.integers(1, 4))
    events = [workload(0, partitions=draw(st.integers(1, 8)))]
    for m in range(members):
        name = f"m{m}"
        t = draw(st.integers(1, 5_000))
        session = draw(st.sampled_from([6_000, 7_000, 10_000]))
        events.append(join(t, name, session=session))
        for _ in range(draw(st.integers(0, 40))):
            t += draw(st.one_of(st.integers(0, 2_500), st.integers(5_000, 11_000)))
            events.append(("hb", name, t))
        if draw(st.booleans()):
            events.append(leave(t + draw(st.integers(1, 3_000)), name))
    events.sort(key=lambda e: e["event_time"] if isinstance(e, dict) else e[2])
    cuts = sorted(draw(st.lists(st.integers(0, len(events)), max_size=6)))
    bounds = [0, *cuts, len(events)]
    return [events[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]


@settings(max_examples=150, deadline=None)
@given(_stories())
def test_any_story_has_the_same_history_with_the_reduction(batches):
    _assert_same_history(batches)


# -- through the processor, with its state bucket and timer ------------------------------------------

def _through_processor(batches, window):
    harness = ProcessorHarness(SETTINGS)
    out, watermark = [], 0
    for batch in batches:
        out += output_rows(harness.send(input_frame("g", batch, window), watermark))
        newest = max((e[2] for e in batch if isinstance(e, tuple)), default=watermark)
        watermark = max(watermark, newest - 3_000)
        for _ in range(3):  # the bucket's timer, as Spark fires it when the watermark passes it
            out += output_rows(harness.fire(watermark))
    return out


@pytest.mark.parametrize("size", [5, 17, 60])
def test_the_processor_writes_the_same_rows_with_the_reduction_and_counts_every_heartbeat(size):
    story = eager_range_story()
    batches = [story[i:i + size] for i in range(0, len(story), size)]
    full, reduced = _through_processor(batches, None), _through_processor(batches, WINDOW)
    assert _table_rows(reduced) == _table_rows(full)
    for f, r in zip(_stats(full), _stats(reduced), strict=True):
        assert (r["records"], r["heartbeats_accepted"]) == (f["records"], f["heartbeats_accepted"])
        assert r["records"] == r["membership_accepted"] + r["heartbeats_accepted"] + r["rejected"]
    assert sum(r.get("heartbeats_reduced", 0) for r in _stats(reduced)) > 0
    assert sum(r.get("heartbeats_reduced", 0) for r in _stats(full)) == 0


def _table_rows(pairs):
    return [(t, {k: v for k, v in r.items() if k not in MEASURED}) for t, r in pairs if t != "_stats"]


def _stats(pairs):
    return [r for t, r in pairs if t == "_stats"]
