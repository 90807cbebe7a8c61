"""A state bucket survives its bytes: groups, deadlines and the timer, and it refuses foreign bytes."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from streaming.engine import GroupState
from streaming.engine.codec import encode_state
from streaming.job.state_bucket import RecentStates, StateBucket


def _state(group_id: str, generation: int) -> GroupState:
    state = GroupState(group_id=group_id)
    state.generation = generation
    return state


def test_groups_deadlines_and_timer_come_back_from_the_bytes():
    bucket = StateBucket()
    bucket.save(_state("orders", 3), deadline=5_000)
    bucket.save(_state("payments", 7), deadline=None)  # nothing due: no deadline kept
    bucket.timer_at = 5_000

    again = StateBucket.from_bytes(bucket.to_bytes())

    assert again.load("orders").generation == 3
    assert again.load("payments").generation == 7
    assert again.deadlines == {"orders": 5_000}
    assert again.timer_at == 5_000
    assert not again.changed


def test_a_bucket_written_in_format_1_is_read_and_written_again_in_the_current_format():
    # state_bucket_v1.bin: the bucket above as the previous release wrote it (an uncompressed
    # stream; each group's blob in group state format 6, its JSON compressed on its own).
    old = StateBucket.from_bytes((Path(__file__).parent / "fixtures" / "state_bucket_v1.bin").read_bytes())
    assert old.load("orders") == _state("orders", 3) and old.load("payments") == _state("payments", 7)
    assert old.deadlines == {"orders": 5_000} and old.timer_at == 5_000
    old.save(old.load("orders"), deadline=5_000)
    again = StateBucket.from_bytes(old.to_bytes())
    assert again.load("orders") == _state("orders", 3) and again.load("payments") == _state("payments", 7)


def test_the_bucket_compresses_its_groups_together():
    bucket = StateBucket()
    for i in range(30):
        bucket.save(_state(f"group-{i:02d}", i), deadline=None)
    raw = sum(len(b) for b in bucket.blobs.values())
    assert len(bucket.to_bytes()) < raw / 2


def test_a_group_the_batch_does_not_touch_keeps_its_bytes():
    bucket = StateBucket()
    bucket.save(_state("quiet", 1), deadline=None)
    bucket.save(_state("busy", 1), deadline=None)
    quiet_bytes = bucket.blobs["quiet"]

    again = StateBucket.from_bytes(bucket.to_bytes())
    again.save(_state("busy", 2), deadline=9)

    assert again.blobs["quiet"] == quiet_bytes
    assert again.blobs["busy"] == encode_state(_state("busy", 2))


def test_an_unknown_group_starts_empty():
    state = StateBucket().load("new-group")
    assert state.group_id == "new-group"
    assert state.generation == 0 and not state.members


def test_due_groups_are_those_the_watermark_reached_in_a_stable_order():
    bucket = StateBucket(deadlines={"c": 10, "a": 10, "b": 30, "d": 9})
    assert bucket.due(10) == ["a", "c", "d"]
    assert bucket.earliest_deadline() == 9
    assert StateBucket().earliest_deadline() is None


def test_a_saved_deadline_of_none_removes_the_old_one():
    bucket = StateBucket(deadlines={"g": 100})
    bucket.save(_state("g", 1), deadline=None)
    assert bucket.deadlines == {}


def test_bytes_of_another_format_are_refused_with_the_version_named():
    schema = pa.schema([("group_id", pa.string())], metadata={"format": "0"})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as writer:
        writer.write_batch(pa.record_batch([pa.array(["g"])], schema=schema))
    with pytest.raises(ValueError, match="state bucket format '0' is not one of 1, 2: this job cannot read"):
        StateBucket.from_bytes(sink.getvalue().to_pybytes())


def test_a_recent_state_is_handed_out_only_against_the_bytes_it_was_written_as():
    recent = RecentStates()
    state = _state("g", 4)
    blob = encode_state(state)
    recent.put("g", blob, state)
    assert recent.take("g", encode_state(_state("g", 5))) is None  # someone wrote the group since
    assert recent.take("g", blob) is None  # the failed take removed the entry
    recent.put("g", blob, state)
    assert recent.take("g", blob) is state
    assert recent.take("g", blob) is None  # handed out once: a batch that fails leaves nothing


def test_recent_states_keep_neither_huge_states_nor_more_than_their_capacity():
    recent = RecentStates()
    recent.CAPACITY = 2
    for name in ("a", "b", "c"):
        recent.put(name, name.encode(), _state(name, 1))
    assert recent.take("a", b"a") is None  # the oldest went
    assert recent.take("c", b"c").group_id == "c"
    recent.put("huge", b"x" * (RecentStates.MAX_BLOB_BYTES + 1), _state("huge", 1))
    assert recent.take("huge", b"x" * (RecentStates.MAX_BLOB_BYTES + 1)) is None


def test_a_bucket_reuses_the_state_object_it_saved_while_the_bytes_are_unchanged():
    bucket = StateBucket()
    state = _state("g", 2)
    bucket.save(state, deadline=None)
    again = StateBucket.from_bytes(bucket.to_bytes())
    assert again.load("g") is state
    again.save(state, deadline=None)
    # Bytes that some other writer produced are decoded, not matched to the object kept here.
    other = StateBucket()
    other.blobs["g"] = encode_state(_state("g", 9))
    assert other.load("g").generation == 9
