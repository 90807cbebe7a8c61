"""What a checkpoint's state was written with, checked before the job resumes from it.

Spark resumes a stateful query from any checkpoint whose sources match. But the job's state is keyed
by state bucket (:mod:`streaming.job.bucket_keys`), and a checkpoint written with other bucket keys or
another bucket count would hand a bucket's groups to a key that never receives their events, while
their timers still fire. So the first run writes a stamp beside Spark's files, and a later run refuses
a checkpoint whose stamp differs, or that has Spark's offsets but no stamp (written by an older
version), with an error that says what to do.

Only local checkpoints get a stamp; on cluster storage (``s3://...``) the check is skipped and
logged.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from streaming.errors import CheckpointMismatchError

log = logging.getLogger("rebalance_monitor.checkpoint")

STAMP_FILE = "rebalance-monitor-state.json"
#: Bump when the state's keys or layout change in a way an old checkpoint cannot be read with.
#: 3: bucket keys spread over the shuffle (bucket_keys.py); 2: one state value per bucket.
STATE_LAYOUT = 3


#: What to do about a checkpoint this job cannot resume (also said for Spark's own refusals, job.py).
NEW_CHECKPOINT_ADVICE = ("Start with a new --checkpoint, and a new output.app_id in the config so the Delta "
                         "writes of the new checkpoint are not mistaken for ones already done.")


def check_or_write(checkpoint: str, state_buckets: int) -> None:
    """Refuse a checkpoint written with another state layout or bucket count; stamp a new one."""
    if "://" in checkpoint and not checkpoint.startswith("file:"):
        log.info("checkpoint %s is not local: its state layout is not checked", checkpoint)
        return
    directory = Path(checkpoint.removeprefix("file://").removeprefix("file:"))
    stamp_path = directory / STAMP_FILE
    if stamp_path.exists():
        try:
            found = json.loads(stamp_path.read_text())
        except ValueError as exc:
            raise CheckpointMismatchError(f"checkpoint {directory}: {STAMP_FILE} is not valid JSON ({exc})") from exc
        if not isinstance(found, dict):
            raise CheckpointMismatchError(f"checkpoint {directory}: {STAMP_FILE} is not a JSON object")
        if found.get("state_layout") != STATE_LAYOUT:
            raise CheckpointMismatchError(
                f"checkpoint {directory} holds state layout {found.get('state_layout')}; this job writes layout "
                f"{STATE_LAYOUT} and cannot resume it. {NEW_CHECKPOINT_ADVICE}")
        if found.get("state_buckets") != state_buckets:
            raise CheckpointMismatchError(
                f"checkpoint {directory} was written with job.state_buckets = {found.get('state_buckets')}, "
                f"the config says {state_buckets}: the bucket count is fixed per checkpoint. "
                f"Set it back, or: {NEW_CHECKPOINT_ADVICE}")
        return
    if (directory / "offsets").is_dir() and any((directory / "offsets").iterdir()):
        raise CheckpointMismatchError(
            f"checkpoint {directory} was written by an older rebalance-monitor (no {STAMP_FILE}); its state "
            f"layout cannot be resumed. {NEW_CHECKPOINT_ADVICE}")
    directory.mkdir(parents=True, exist_ok=True)
    stamp_path.write_text(json.dumps({"state_layout": STATE_LAYOUT, "state_buckets": state_buckets}) + "\n")
