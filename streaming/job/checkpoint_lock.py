"""One job per checkpoint: a second one is refused at start, naming the one that holds it.

Two queries on one checkpoint do not fail at once: the second idled for minutes, then died with
``CONCURRENT_STREAM_LOG_UPDATE`` (and both write the same Delta tables meanwhile). The job takes an
exclusive lock on a file beside the checkpoint for its whole life; the operating system releases
it when the process ends, however it ends, so a crashed job never leaves a stale lock.

Local checkpoints only: on object storage there is no lock to take (the driver must be the single
writer; see docs/deploy.md).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import time
from pathlib import Path

from streaming.errors import CheckpointInUseError

log = logging.getLogger("rebalance_monitor.checkpoint")


class CheckpointLock:
    """Hold with ``with CheckpointLock(path):``; raises CheckpointInUseError if another process holds it."""

    def __init__(self, checkpoint: str):
        self.checkpoint = checkpoint
        self._file = None

    def __enter__(self) -> "CheckpointLock":
        if "://" in self.checkpoint and not self.checkpoint.startswith("file:"):
            log.info("checkpoint %s is not local: no lock is taken", self.checkpoint)
            return self
        directory = Path(self.checkpoint.removeprefix("file://").removeprefix("file:"))
        directory.parent.mkdir(parents=True, exist_ok=True)
        path = directory.parent / f"{directory.name}.lock"
        handle = open(path, "a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = _holder(handle.read())
            handle.close()
            raise CheckpointInUseError(
                f"checkpoint {directory} is in use by another rebalance-monitor job{holder}: stop that job first, "
                f"or run this one with its own --checkpoint and output") from None
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps({"pid": os.getpid(), "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}))
        handle.flush()
        self._file = handle
        return self

    def __exit__(self, *exc) -> None:
        if self._file is not None:
            self._file.close()  # closing releases the lock
            self._file = None


def _holder(text: str) -> str:
    try:
        info = json.loads(text)
        return f" (pid {info['pid']}, started {info['started']})"
    except (ValueError, KeyError, TypeError):
        return ""
