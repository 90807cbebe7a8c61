"""Computed versus actual through the real job: collector events on the real broker, the Spark
query, and the ``assignment_checks`` Delta table."""

from __future__ import annotations

import pytest

from schemas import tables
from tests import stories
from tests.integration.jobs import make_config, produce_story, read, run_available_now

pytestmark = pytest.mark.integration

START = 1_700_000_000_000


def test_the_job_writes_one_comparison_per_settled_generation(spark, kafka_broker, tmp_path, unique_name):
    config = make_config(kafka_broker, tmp_path, unique_name)
    story = stories.real_range_group()
    # The second observation disagrees: the live group kept partition 3 on a.
    story = [e for e in story if not (isinstance(e, dict) and e["event_time"] == 5_500)]
    story += [stories.collector_observation(5_500, "update", "a", (0, 1, 2, 3)),
              stories.collector_observation(5_500, "update", "b", (4, 5))]
    story = stories.in_time_order(story)
    produce_story(config, stories.to_records(story, "live", START))
    # Another group keeps the stream's time (the watermark) moving for two minutes: long past the
    # live group's members' 10 s session timeout after their heartbeats stop at 12 s.
    busy = stories.eager_range_story() + stories.heartbeats(["a"], 32_000, 120_000)
    produce_story(config, stories.to_records(busy, "busy", START))
    run_available_now(spark, config)

    checks = sorted(read(spark, config, tables.ASSIGNMENT_CHECKS), key=lambda r: r["generation"])
    assert [(c["generation"], c["agrees"]) for c in checks] == [(1, True), (2, False)]
    assert checks[1]["differing"] == [{"topic": "t0", "partition": 3, "computed_member": "b",
                                       "actual_member": "a"}]
    assert checks[1]["event_time"] == START + 6_000 and checks[1]["group_state"] == "STABLE"
    # The live group's members were not expired (the collector reports departures), while the
    # simulated group's silent member was.
    expired = {(e["group_id"], e["member_id"]) for e in read(spark, config, tables.MEMBER_EVENTS)
               if e["event"] == "expired"}
    assert expired == {("busy", "c")}

