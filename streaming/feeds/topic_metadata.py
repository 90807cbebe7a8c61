"""The observed cluster's topics, described on the driver and written to a monitor topic.

The coordinator's log says which topics a group subscribes to and which partitions each member got,
but not how many partitions a topic has (nor, for KIP-848 groups, which name a topic id stands
for). The engine may do no I/O, so the job's driver describes the cluster's topics every few
seconds and writes each description into ``offsets_topic.metadata_topic``: the job reads it like
any input, so a replay measures every generation against the same descriptions
(:mod:`streaming.engine.topic_catalog` says how a description is chosen for a generation).

A description is ``{"event_time": ms, "topics": [{"name", "partitions", "topic_id"}, ...]}`` when
anything changed since the last one this process wrote (always, for its first), else
``{"event_time": ms, "unchanged": true}``: a small record that still tells the job up to when
the catalog is known. Internal topics (``__consumer_offsets``, ``__transaction_state``, ...) are
left out: no group subscribes to them.

How the cluster is described and how a record is written are given to the publisher
(:func:`streaming.job.topic_metadata.start_publisher` uses Kafka's Java clients in Spark's JVM,
with exactly the settings the Kafka source gets).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Callable

log = logging.getLogger("rebalance_monitor.topic_metadata")

#: The key of every description (one partition: they stay in the order they were made).
KEY = b"topics"

Describe = Callable[[], list[dict]]
Send = Callable[[bytes, bytes], None]


class TopicMetadataPublisher:
    """Describes the observed cluster's topics and writes each description to the monitor's topic."""

    def __init__(self, describe: Describe, send: Send, interval_s: float, clock: Callable[[], float] = time.time,
                 on_close: Callable[[], None] | None = None):
        self._describe = describe
        self._send = send
        self.interval_s = interval_s
        self._clock = clock
        self._on_close = on_close
        self._last: list[dict] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def publish_once(self) -> dict:
        """Describe the topics now and write the description; returns what was written."""
        topics = sorted((t for t in self._describe() if not t["name"].startswith("__")), key=lambda t: t["name"])
        now = int(self._clock() * 1000)
        record = {"event_time": now, "topics": topics} if topics != self._last else {"event_time": now,
                                                                                        "unchanged": True}
        self._send(KEY, json.dumps(record, separators=(",", ":")).encode())
        self._last = topics
        return record

    def start(self) -> None:
        """Publish now, then every ``interval_s`` in a thread (a failed round is logged and retried)."""
        self.publish_once()
        if self.interval_s <= 0:
            return
        self._thread = threading.Thread(target=self._loop, name="topic-metadata", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.publish_once()
            except Exception as exc:  # the observed cluster away for a moment: generations wait meanwhile
                log.warning("could not describe the observed cluster's topics: %s", exc)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
        if self._on_close is not None:
            self._on_close()
