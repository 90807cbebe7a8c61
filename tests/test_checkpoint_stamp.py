"""A checkpoint is resumed only with the state layout and bucket count it was written with."""

from __future__ import annotations

import json

import pytest

from streaming.job.checkpoint_stamp import STAMP_FILE, STATE_LAYOUT, CheckpointMismatchError, check_or_write


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


def test_a_checkpoint_on_cluster_storage_is_not_checked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    check_or_write("s3://bucket/checkpoints/job", 32)
    assert list(tmp_path.iterdir()) == []  # no local look-alike of the URI was made
