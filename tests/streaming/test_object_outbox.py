"""The outbox on object storage keeps the SQLite outbox's contract: the same operations give the
same answers. PyArrow's in-memory file system stands in for the bucket (the real S3 API, through
s3proxy, is in tests/integration/test_cluster_storage.py)."""

from __future__ import annotations

import pytest
from pyarrow import fs

from streaming.alerting.delivery.object_outbox import ObjectOutbox
from streaming.alerting.delivery.outbox import Outbox
from streaming.alerting.delivery.payload import AlertTransition
from streaming.storage import Location

FIRED_AT = 1_795_000_000_123


def transition(alert_id: str, status: str = "firing", fired_at: int = FIRED_AT) -> AlertTransition:
    return AlertTransition.from_row({
        "alert_id": alert_id, "rule": "imbalance", "group_id": "orders", "subject": None, "severity": "warning",
        "status": status, "value": 7.0, "threshold": 2.0, "fired_at": fired_at,
        "resolved_at": fired_at + 1000 if status == "resolved" else None, "generation": 3,
        "summary": "s", "description": "d"})


@pytest.fixture(params=["sqlite", "object"])
def reopen(request, tmp_path):
    """A function that opens the outbox again (as a restarted job would), on one storage."""
    bucket = fs._MockFileSystem()

    def open_one():
        if request.param == "sqlite":
            return Outbox(tmp_path / "outbox")
        return ObjectOutbox(Location.over(bucket, "bucket/cp-alert-outbox", "s3a://bucket/cp-alert-outbox"))
    return open_one


def keys(items):
    return [(seq, t.key) for seq, t in items]


def test_a_replayed_transition_is_stored_once_and_order_is_kept(reopen):
    outbox = reopen()
    first = outbox.add([transition("a"), transition("b"), transition("a", "resolved")])
    assert keys(first) == [(1, ("a", FIRED_AT, "firing")), (2, ("b", FIRED_AT, "firing")),
                           (3, ("a", FIRED_AT, "resolved"))]
    # The replay of the batch after a crash, plus one new transition: only the new one is stored.
    again = reopen().add([transition("a"), transition("b"), transition("c"), transition("a", "resolved")])
    assert [t.key for _, t in again] == [("c", FIRED_AT, "firing")] and again[0][0] > 3  # SQLite may skip seqs
    assert keys(reopen().undelivered_after(0, 10)) == keys(first) + keys(again)
    assert reopen().count_undelivered() == 4


def test_delivered_transitions_are_not_read_back_after_a_restart(reopen):
    outbox = reopen()
    outbox.add([transition("a"), transition("b"), transition("c")])
    outbox.mark_delivered([1, 3])
    outbox.record_failure([2], "503 Service Unavailable")
    restarted = reopen()
    assert keys(restarted.undelivered_after(0, 10)) == [(2, ("b", FIRED_AT, "firing"))]
    assert restarted.undelivered_after(2, 10) == []
    assert restarted.count_undelivered() == 1
    assert restarted.add([transition("a")]) == []  # delivered, and still known within the retention


def test_a_limit_reads_the_oldest_first(reopen):
    outbox = reopen()
    outbox.add([transition(f"x{i}") for i in range(5)])
    assert [seq for seq, _ in outbox.undelivered_after(0, 2)] == [1, 2]
    assert [seq for seq, _ in outbox.undelivered_after(2, 2)] == [3, 4]


def test_a_firing_whose_resolution_was_delivered_is_superseded(reopen):
    outbox = reopen()
    outbox.add([transition("a"), transition("a", "resolved"), transition("b"), transition("b", "resolved"),
                transition("a", fired_at=FIRED_AT + 5)])
    outbox.mark_delivered([2])  # a's resolution got through, its firing (refused) did not
    assert reopen().supersede_delivered_resolutions() == 1
    assert keys(reopen().undelivered_after(0, 10)) == [(3, ("b", FIRED_AT, "firing")),
                                                      (4, ("b", FIRED_AT, "resolved")),
                                                      (5, ("a", FIRED_AT + 5, "firing"))]


def test_pruning_forgets_only_delivered_transitions_past_the_retention(reopen):
    outbox = reopen()
    outbox.add([transition("a"), transition("b")])
    outbox.mark_delivered([1])
    assert outbox.prune_delivered(retention_ms=3_600_000) == 0
    assert reopen().prune_delivered(retention_ms=-1_000) == 1  # everything delivered is "old"
    assert keys(reopen().undelivered_after(0, 10)) == [(2, ("b", FIRED_AT, "firing"))]
    # Forgotten: the same transition again is new (as in the SQLite outbox), after every older seq.
    (seq, again), = reopen().add([transition("a")])
    assert again.key == ("a", FIRED_AT, "firing") and seq > 2


def test_an_object_outbox_is_only_objects_named_by_what_they_hold():
    bucket = fs._MockFileSystem()
    outbox = ObjectOutbox(Location.over(bucket, "bucket/o", "s3a://bucket/o"))
    outbox.add([transition("a"), transition("a", "resolved")])
    outbox.mark_delivered([1])
    names = [name for name, _ in outbox.location.list()]
    assert [n[:15] for n in names] == ["d-000000000001.", "t-000000000001-", "t-000000000002-"]
    assert names[1].endswith("-firing.json") and names[2].endswith("-resolved.json")
    assert names[1].split("-")[2] == names[2].split("-")[2]  # one episode
