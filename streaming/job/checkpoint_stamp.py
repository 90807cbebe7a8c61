"""What a checkpoint's state was written with, checked before the job resumes from it.

Spark resumes a stateful query from any checkpoint whose sources match. But the job's state is keyed
by state bucket (:mod:`streaming.job.bucket_keys`), and a checkpoint written with other bucket keys or
another bucket count would hand a bucket's groups to a key that never receives their events, while
their timers still fire. So the first run writes a stamp beside Spark's files, and a later run refuses
a checkpoint whose stamp differs, or that has Spark's offsets but no stamp (written by an older
version), with an error that says what to do.

The stamp lives in the checkpoint itself, local or on object storage (``s3a://``, through
:class:`~streaming.storage.Location`): a driver restarted on another host checks it as it finds the
checkpoint.
"""

from __future__ import annotations

import json
import logging

from streaming.errors import CheckpointMismatchError
from streaming.storage import Credentials, Location, StorageConfig

log = logging.getLogger("rebalance_monitor.checkpoint")

STAMP_FILE = "rebalance-monitor-state.json"
#: Bump when the state's keys or layout change in a way an old checkpoint cannot be read with.
#: 3: bucket keys spread over the shuffle (bucket_keys.py); 2: one state value per bucket.
STATE_LAYOUT = 3


#: What to do about a checkpoint this job cannot resume (also said for Spark's own refusals, job.py).
NEW_CHECKPOINT_ADVICE = ("Start with a new --checkpoint, and a new output.app_id in the config so the Delta "
                         "writes of the new checkpoint are not mistaken for ones already done.")


def check_or_write(checkpoint: str | Location, state_buckets: int, storage: StorageConfig | None = None,
                   credentials: Credentials | None = None) -> None:
    """Refuse a checkpoint written with another state layout or bucket count; stamp a new one."""
    location = checkpoint if isinstance(checkpoint, Location) else Location(checkpoint, storage, credentials)
    directory = location.location
    text = location.read_bytes(STAMP_FILE)
    if text is not None:
        try:
            found = json.loads(text)
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
    if location.list("offsets"):
        raise CheckpointMismatchError(
            f"checkpoint {directory} was written by an older rebalance-monitor (no {STAMP_FILE}); its state "
            f"layout cannot be resumed. {NEW_CHECKPOINT_ADVICE}")
    location.write_bytes(STAMP_FILE, (json.dumps({"state_layout": STATE_LAYOUT, "state_buckets": state_buckets})
                                      + "\n").encode())
