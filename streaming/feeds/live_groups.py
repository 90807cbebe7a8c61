"""A few real consumer groups on cue, for the demo: confluent-kafka (librdkafka) consumers that join
and leave a group on a real broker, so that its coordinator writes real generations into
``__consumer_offsets`` for the job to record through the offsets-topic source.

Each consumer polls in its own thread (one that stops polling stops taking part in rebalances) and
closes with a LeaveGroup. Nothing here is the monitor: the groups are its subject.
"""

from __future__ import annotations

import threading
import time
from typing import Mapping

from streaming.feeds.kafka_io import ensure_topics


class _Consumer(threading.Thread):
    def __init__(self, config: Mapping[str, object], topics: list[str]):
        super().__init__(daemon=True)
        self.config = dict(config)
        self.topics = topics
        self._leave = threading.Event()

    def run(self) -> None:
        from confluent_kafka import Consumer

        consumer = Consumer(self.config)
        consumer.subscribe(self.topics)
        try:
            while not self._leave.is_set():
                consumer.poll(0.1)
        finally:
            consumer.close()

    def leave(self) -> None:
        self._leave.set()
        self.join(timeout=60)


def offsets_topic_end(bootstrap_servers: str, topic: str = "__consumer_offsets") -> str:
    """Spark's JSON starting offsets at the current end of ``topic``: a demo records only its own
    groups, not those an earlier demo left in the broker's log."""
    import json

    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": "rebalance-monitor-demo-probe",
                         "enable.auto.commit": False})
    try:
        metadata = consumer.list_topics(timeout=30).topics.get(topic)
        if metadata is None or metadata.error is not None or not metadata.partitions:
            return "earliest"  # a new broker: the coordinator creates the topic with the first group
        ends = {str(p): consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                for p in metadata.partitions}
    finally:
        consumer.close()
    return json.dumps({topic: ends})


def play(bootstrap_servers: str, prefix: str, strategies: tuple[str, ...] = ("range", "cooperative-sticky"),
         step_s: float = 4.0) -> list[str]:
    """For each strategy, a group on two topics: one member, then three, then two, then none; each
    step ``step_s`` apart so that every rebalance completes. Returns the group ids."""
    topics = [f"{prefix}-orders", f"{prefix}-payments"]
    ensure_topics(bootstrap_servers, topics[:1], partitions=6)
    ensure_topics(bootstrap_servers, topics[1:], partitions=4)
    time.sleep(1)  # the new topics reach the broker's metadata before anyone subscribes
    groups = []
    everyone: list[_Consumer] = []
    for strategy in strategies:
        group_id = f"{prefix}-{strategy}"
        groups.append(group_id)
        config = {"bootstrap.servers": bootstrap_servers, "group.id": group_id, "log_level": 0,
                  "partition.assignment.strategy": strategy, "enable.auto.commit": False,
                  "topic.metadata.refresh.interval.ms": 2000}
        members = [_Consumer({**config, "client.id": f"{group_id}-{i}"}, topics) for i in range(1, 4)]
        members[0].start()
        time.sleep(step_s)
        members[1].start()
        members[2].start()
        time.sleep(step_s)
        members[1].leave()
        time.sleep(step_s)
        everyone += [members[0], members[2]]
    for c in everyone:
        c.leave()
    return groups
