"""A checkpoint is resumed only with the state layout and bucket count it was written with."""

from __future__ import annotations

import json

import pytest

from streaming.errors import StorageError
from streaming.job.checkpoint_stamp import STAMP_FILE, STATE_LAYOUT, CheckpointMismatchError, check_or_write
from streaming.storage import Location


def test_a_new_checkpoint_gets_a_stamp_and_is_then_resumed(tmp_path):
    checkpoint = tmp_path / "cp"
    check_or_write(str(checkpoint), 32)
    assert json.loads((checkpoint / STAMP_FILE).read_text()) == {"state_layout": STATE_LAYOUT, "state_buckets": 32}
    (checkpoint / "offsets").mkdir()
    (checkpoint / "offsets" / "0").write_text("v1")
    check_or_write(str(checkpoint), 32)  # the same job resumes


def test_another_bucket_count_is_refused_by_name(tmp_path):
    check_or_write(str(tmp_path), 32)
    with pytest.raises(CheckpointMismatchError, match="job.state_buckets = 32, the config says 16"):
        check_or_write(str(tmp_path), 16)


def test_another_state_layout_is_refused(tmp_path):
    (tmp_path / STAMP_FILE).write_text(json.dumps({"state_layout": STATE_LAYOUT - 1, "state_buckets": 32}))
    with pytest.raises(CheckpointMismatchError, match=f"state layout {STATE_LAYOUT - 1}.*new --checkpoint"):
        check_or_write(str(tmp_path), 32)


def test_a_checkpoint_of_an_older_version_without_a_stamp_is_refused(tmp_path):
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "0").write_text("v1")
    with pytest.raises(CheckpointMismatchError, match="older rebalance-monitor"):
        check_or_write(str(tmp_path), 32)
    assert not (tmp_path / STAMP_FILE).exists()


@pytest.mark.parametrize("text, problem", [("{", "not valid JSON"), ("[3, 32]", "not a JSON object")])
def test_a_stamp_that_is_not_a_json_object_is_named(tmp_path, text, problem):
    (tmp_path / STAMP_FILE).write_text(text)
    with pytest.raises(CheckpointMismatchError, match=problem):
        check_or_write(str(tmp_path), 32)


def test_a_checkpoint_on_object_storage_is_stamped_and_checked_there(tmp_path, monkeypatch):
    from pyarrow import fs

    monkeypatch.chdir(tmp_path)
    bucket = fs._MockFileSystem()  # PyArrow's in-memory file system stands in for the bucket
    checkpoint = Location.over(bucket, "bucket/checkpoints/job", "s3a://bucket/checkpoints/job")
    check_or_write(checkpoint, 32)
    assert json.loads(checkpoint.read_bytes(STAMP_FILE)) == {"state_layout": STATE_LAYOUT, "state_buckets": 32}
    with pytest.raises(CheckpointMismatchError, match="s3a://bucket/checkpoints/job was written with "
                                                      "job.state_buckets = 32, the config says 16"):
        check_or_write(checkpoint, 16)
    assert list(tmp_path.iterdir()) == []  # no local look-alike of the URI was made


def test_an_older_checkpoint_on_object_storage_is_refused():
    from pyarrow import fs

    checkpoint = Location.over(fs._MockFileSystem(), "bucket/cp", "s3a://bucket/cp")
    checkpoint.write_bytes("offsets/0", b"v1")
    with pytest.raises(CheckpointMismatchError, match="older rebalance-monitor"):
        check_or_write(checkpoint, 32)


def test_a_checkpoint_uri_the_job_cannot_write_is_named():
    with pytest.raises(StorageError, match="s3://bucket/checkpoints/job: not a local path or an s3a:// URI"):
        check_or_write("s3://bucket/checkpoints/job", 32)
