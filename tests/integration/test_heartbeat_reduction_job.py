"""The job with its heartbeat reduction (streaming/job/heartbeat_reduction.py) and heartbeat screen
(streaming/job/heartbeat_screen.py) and without either, over the same topics: the same history,
every record counted, and most heartbeats never shuffled."""

from __future__ import annotations

from dataclasses import replace

import pytest

from schemas import tables
from tests import stories
from tests.integration.jobs import (history, make_config, produce_story, read, run_available_now, simulate_into,
                                     with_job)

pytestmark = pytest.mark.integration

START = 1_700_000_000_000


def test_the_same_topics_with_and_without_the_reduction_give_the_same_history(spark, kafka_broker, tmp_path,
                                                                             unique_name):
    reduced = make_config(kafka_broker, tmp_path / "reduced", unique_name)
    # Consumer groups (eager and cooperative, static members that bounce, members that crash and
    # expire), Streams applications (task lags in heartbeats), Connect clusters and refused records,
    # heartbeating every second: a 6 s window holds six heartbeats of a member.
    simulate_into(reduced, "--groups", "6", "--members", "2-5", "--partitions", "3-8", "--churn-per-minute", "4",
                  "--heartbeat-interval-ms", "1000", "--session-timeout-ms", "10000", "--static-share", "0.3",
                  "--cooperative-share", "0.5", "--crash-share", "0.5", "--streams-share", "0.25",
                  "--connect-share", "0.25", "--bad-share", "0.01", "--duration", "120",
                  "--start-time-ms", str(START), "--seed", "11")
    # And the scenario story whose expiry falls between two heartbeats of the others.
    produce_story(reduced, stories.to_records(stories.eager_range_story(), "eager", START))
    # Small batches: heartbeats wait in the state across batches, and the bucket timers fire.
    reduced = replace(reduced, kafka=replace(reduced.kafka, max_offsets_per_trigger=1_500))
    full = with_job(replace(reduced, output=replace(reduced.output, root=str(tmp_path / "full" / "data"),
                                                    checkpoint=str(tmp_path / "full" / "checkpoint"))),
                    reduce_heartbeats=False, screen_heartbeats=False)
    assert reduced.job.reduce_heartbeats and reduced.job.screen_heartbeats
    assert reduced.output.root != full.output.root
    run_available_now(spark, reduced, timeout_s=600)
    run_available_now(spark, full, timeout_s=600)

    reduced_history, full_history = history(spark, reduced), history(spark, full)
    assert len(full_history[tables.BALANCE_METRICS]) > 20  # the input really rebalanced
    assert any("expired" in repr(r) for r in full_history[tables.MEMBER_EVENTS])
    assert len(full_history[tables.REJECTED_EVENTS]) > 0
    for table in full_history:
        only_reduced = sorted(set(reduced_history[table]) - set(full_history[table]))
        only_full = sorted(set(full_history[table]) - set(reduced_history[table]))
        assert not only_reduced and not only_full, \
            f"{table}: only with the reduction {only_reduced[:3]}, only without {only_full[:3]}"
        assert reduced_history[table] == full_history[table]

    reduced_ingest = {r["batch_id"]: r for r in read(spark, reduced, tables.INGEST_METRICS)}
    full_ingest = {r["batch_id"]: r for r in read(spark, full, tables.INGEST_METRICS)}
    assert sorted(reduced_ingest) == sorted(full_ingest)  # the same micro-batches
    for batch_id, with_reduction in reduced_ingest.items():
        without = full_ingest[batch_id]
        for column in ("records", "membership_accepted", "heartbeats_accepted", "rejected", "groups"):
            assert with_reduction[column] == without[column], (batch_id, column)
        assert with_reduction["records"] == (with_reduction["membership_accepted"]
                                             + with_reduction["heartbeats_accepted"] + with_reduction["rejected"])
        assert without["heartbeats_reduced"] == 0
    accepted = sum(r["heartbeats_accepted"] for r in reduced_ingest.values())
    dropped = sum(r["heartbeats_reduced"] for r in reduced_ingest.values())
    assert dropped > accepted / 2, (dropped, accepted)
