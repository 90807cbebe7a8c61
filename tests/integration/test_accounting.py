"""Every record the Kafka source reads is accounted for: per micro-batch, records = accepted +
rejected, and records = what the source read, even when some records are far behind the stream's
event time (Spark drops rows behind a stateful operator's watermark without a trace)."""

from __future__ import annotations

import pytest

from schemas import tables
from streaming.job.main import start_query
from tests import stories
from tests.integration.jobs import make_config, produce_story, read

pytestmark = pytest.mark.integration

LIVE = 1_700_000_000_000
FUTURE = LIVE + 3_600_000  # a simulator run dated an hour ahead, on the same topics


def _run(spark, config) -> list[dict]:
    """Run available-now; the source's rows read per batch, from the query's own progress."""
    query = start_query(spark, config, available_now=True)
    assert query.awaitTermination(300), "the query did not finish within 300 s"
    assert query.exception() is None, query.exception()
    return [{"batch_id": p["batchId"], "read": sum(s["numInputRows"] for s in p["sources"])}
            for p in query.recentProgress if sum(s["numInputRows"] for s in p["sources"])]


def test_records_behind_the_watermark_are_applied_and_counted_never_dropped(spark, kafka_broker, tmp_path,
                                                                             unique_name):
    config = make_config(kafka_broker, tmp_path, unique_name)
    future = stories.to_records(stories.eager_range_story(), "ahead", FUTURE)
    produce_story(config, future)
    progress = _run(spark, config)
    # The stream's time is now an hour ahead of the live group's: its heartbeats are all behind
    # the watermark.
    live = stories.to_records(stories.eager_range_story(), "live", LIVE)
    produce_story(config, live)
    progress += _run(spark, config)

    produced = sum(len(m) + len(b) for m, b in (future, live))
    ingest = {r["batch_id"]: r for r in read(spark, config, tables.INGEST_METRICS)}
    assert sum(r["records"] for r in ingest.values()) == produced == sum(p["read"] for p in progress)
    for p in progress:  # batch by batch: what the source read is what the job accounted for
        row = ingest[p["batch_id"]]
        assert row["records"] == p["read"]
        assert row["records"] == row["membership_accepted"] + row["heartbeats_accepted"] + row["rejected"]
    assert sum(r["heartbeats_accepted"] for r in ingest.values()) == len(future[1]) + len(live[1])
    # The live group's events were applied (at the stream's time): its members joined.
    joined = {e["member_id"] for e in read(spark, config, tables.MEMBER_EVENTS)
              if e["group_id"] == "live" and e["event"] == "joined"}
    assert joined == {"a", "b", "c"}
