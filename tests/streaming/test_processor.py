"""The job's stateful processor without Spark (streaming.testing's harness): the engine's rows as
JSON, its state bucket and timer, refused records and the batch's counts."""

from __future__ import annotations

import gc
import json

import pandas as pd

from streaming.testing import ProcessorHarness, input_frame, output_rows, run_story
from tests.stories import eager_range_story, heartbeats, join, workload

MEASURED = {"assignor_ms"}


def _comparable(pairs):
    return [(t, {k: v for k, v in r.items() if k not in MEASURED}) for t, r in pairs if t != "_stats"]


def _engine_pairs(rows):
    return [(r.table, {k: v for k, v in r.to_json().items()}) for r in rows]


def test_the_processor_writes_the_rows_the_engine_computes_alone_batch_after_batch():
    story = eager_range_story()
    batches = [story[i:i + 7] for i in range(0, len(story), 7)]
    harness = ProcessorHarness()
    got = []
    for batch in batches:
        got += output_rows(harness.send(input_frame("g", batch)))
    expected, _ = run_story(batches)
    assert _comparable(got) == _comparable(_engine_pairs(expected))
    assert {t for t, _ in got} >= {"assignments", "balance_metrics", "member_events", "revocations"}


def test_the_collector_finds_no_garbage_after_a_bucket():
    """The processor pauses Python's cyclic collector while it works on a bucket; anything left in a
    reference cycle is freed only by the next collection, which walks everything the bucket
    allocated (0.3 s after a huge group's batch when the engine's batch context was a cycle)."""
    story = eager_range_story()
    frames = [input_frame("g", story[i:i + 7]) for i in range(0, len(story), 7)]
    harness = ProcessorHarness()
    harness.send(frames[0])  # imports and caches first
    gc.collect()
    collected = []

    def on_collection(phase, info):
        if phase == "stop":
            collected.append(info["collected"])

    gc.callbacks.append(on_collection)
    try:
        for frame in frames[1:]:
            harness.send(frame)
        gc.collect()
    finally:
        gc.callbacks.remove(on_collection)
    assert sum(collected) == 0


def test_a_silent_group_is_moved_on_by_the_bucket_timer_when_the_watermark_reaches_it():
    harness = ProcessorHarness()
    story = [workload(0), join(1_000, "a", session=10_000)] + heartbeats(["a"], 1_500, 6_000)
    harness.send(input_frame("g", story))
    # The timer sits at the group's next deadline; nothing fires before it.
    (timer,) = harness.handle.timers
    assert harness.bucket().deadlines == {"g": timer}
    assert harness.fire(timer - 1).empty
    expired = []
    watermark = timer
    for _ in range(5):  # an early timer re-arms at the next deadline, as in Spark
        out = output_rows(harness.fire(watermark))
        expired += [r for t, r in out if t == "member_events" and r["event"] == "expired"]
        if expired or not harness.handle.timers:
            break
        watermark = max(harness.handle.timers)
    assert [(r["member_id"], r["event_time"]) for r in expired] == [("a", 15_500)]


def test_refused_records_reach_rejected_events_and_every_record_is_counted_once():
    frame = input_frame("g", [workload(0), join(1_000, "a")] + heartbeats(["a"], 1_500, 4_000))
    refused = {"group_key": "g", "kind": "heartbeat", "member_id": None, "event_time": None,
               "reject_reason": "not valid JSON", "beat_times": None,
               "payload": json.dumps({"group_id": "g", "source_topic": "rebalance.heartbeats", "source_partition": 0,
                                      "source_offset": 41, "raw_value": "{oops"})}
    # Checked by the parser, refused by the engine's own check: still a row with the reason.
    bad_member = {"group_key": "g", "kind": "membership", "member_id": "b", "event_time": 2_000,
                  "reject_reason": None, "beat_times": None,
                  "payload": json.dumps({"event_id": "j-b", "event_time": 2_000, "type": "join"})}
    out = output_rows(ProcessorHarness().send(pd.concat([frame, pd.DataFrame([refused, bad_member])],
                                                        ignore_index=True)))
    rejected = [r for t, r in out if t == "rejected_events"]
    assert sorted(r["reason"] for r in rejected) == ["missing required field member_id for a join event",
                                                     "not valid JSON"]
    assert [r["source_offset"] for r in rejected if r["reason"] == "not valid JSON"] == [41]
    (stats,) = [r for t, r in out if t == "_stats"]
    assert stats["records"] == 2 + 3 + 2  # two membership events, three heartbeats, two refused records
    assert stats["records"] == stats["membership_accepted"] + stats["heartbeats_accepted"] + stats["rejected"]
    assert stats["rejected"] == 2
    assert stats["max_event_time"] == 3_500  # the newest accepted record (refused ones have no time)
