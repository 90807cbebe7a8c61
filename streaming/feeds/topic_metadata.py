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
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from typing import Callable, Mapping

from assignors.model import topic_id_string

log = logging.getLogger("rebalance_monitor.topic_metadata")

KEY = "topics"


def _kafka_topic_id(client_uuid) -> str | None:
    """confluent-kafka's ``Uuid`` in Kafka's own (URL-safe) spelling, as the coordinator's records use."""
    if client_uuid is None:
        return None
    high = client_uuid.get_most_significant_bits() & 0xFFFF_FFFF_FFFF_FFFF
    low = client_uuid.get_least_significant_bits() & 0xFFFF_FFFF_FFFF_FFFF
    value = (high << 64) | low
    return topic_id_string(uuid.UUID(int=value)) if value else None


def describe_topics(admin, timeout_s: float = 15.0) -> list[dict]:
    """Every topic of the cluster but the internal ones: name, partition count, topic id; by name."""
    from confluent_kafka._model import TopicCollection

    names = sorted(t for t in admin.list_topics(timeout=timeout_s).topics if not t.startswith("__"))
    if not names:
        return []
    out = []
    for name, future in admin.describe_topics(TopicCollection(names), request_timeout=timeout_s).items():
        try:
            t = future.result(timeout=timeout_s + 5)
        except Exception as exc:  # deleted between the listing and the description
            log.debug("topic %r not described: %s", name, exc)
            continue
        out.append({"name": t.name, "partitions": len(t.partitions),
                    "topic_id": _kafka_topic_id(getattr(t, "topic_id", None))})
    return sorted(out, key=lambda t: t["name"])


class TopicMetadataPublisher:
    """Describes the observed cluster's topics and writes each description to the monitor's topic."""

    def __init__(self, source_admin: Mapping[str, str], monitor_bootstrap: str, monitor_options: Mapping[str, str],
                 topic: str, interval_s: float, clock: Callable[[], float] = time.time, *, admin=None,
                 producer=None):
        from confluent_kafka import Producer
        from confluent_kafka.admin import AdminClient

        self._admin = admin or AdminClient(dict(source_admin))
        self._producer = producer or Producer({"bootstrap.servers": monitor_bootstrap, **monitor_options,
                                               "enable.idempotence": True, "linger.ms": 0})
        self.topic = topic
        self.interval_s = interval_s
        self._clock = clock
        self._last: list[dict] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def publish_once(self) -> dict:
        """Describe the topics now and write the description; returns what was written."""
        topics = describe_topics(self._admin)
        now = int(self._clock() * 1000)
        record = {"event_time": now, "topics": topics} if topics != self._last else {"event_time": now,
                                                                                        "unchanged": True}
        failures: list[str] = []
        self._producer.produce(self.topic, key=KEY.encode(), value=json.dumps(record).encode(),
                               on_delivery=lambda err, _msg: failures.append(str(err)) if err else None)
        if self._producer.flush(30) or failures:
            raise RuntimeError(f"the topic description was not written to {self.topic}: {failures or 'timed out'}")
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
        self._producer.flush(10)
