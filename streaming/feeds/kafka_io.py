"""Small Kafka client helpers (confluent-kafka) the CLI, the demo and the tests share."""

from __future__ import annotations

import json
import socket
import time
from typing import Iterable, Mapping

from streaming.errors import BrokerUnreachableError, KafkaIOError


def wait_for_broker(bootstrap_servers: str, timeout_s: float, setting: str = "--bootstrap-servers") -> None:
    """Return once a bootstrap server accepts a TCP connection; BrokerUnreachableError naming the
    addresses after ``timeout_s``. Clients asked to talk to a cluster that is not there retry
    for minutes and log every attempt; this says it in one line, in seconds."""
    deadline = time.monotonic() + timeout_s
    while True:
        problems = []
        for server in bootstrap_servers.split(","):
            host, _, port = server.strip().rpartition(":")
            try:
                with socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)),
                                              timeout=max(0.5, min(5.0, deadline - time.monotonic()))):
                    return
            except (OSError, ValueError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
                problems.append(f"{server.strip()}: {reason}")
        if time.monotonic() >= deadline:
            raise BrokerUnreachableError(
                f"no Kafka broker answered at {bootstrap_servers} within {timeout_s:g} s ({'; '.join(problems)}): "
                f"check {setting} and that the cluster is up")
        time.sleep(1)


def ensure_topics(bootstrap_servers: str, topics: Iterable[str], partitions: int = 3,
                  options: Mapping[str, str] | None = None, timeout_s: float = 30.0) -> None:
    """Create the topics that do not exist yet (an existing topic is left as it is)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap_servers, **(options or {})})
    existing = set(admin.list_topics(timeout=timeout_s).topics)
    missing = [t for t in topics if t not in existing]
    if not missing:
        return
    futures = admin.create_topics([NewTopic(t, num_partitions=partitions, replication_factor=1) for t in missing],
                                  operation_timeout=timeout_s)
    for topic, future in futures.items():
        try:
            future.result(timeout=timeout_s)
        except Exception as exc:  # TOPIC_ALREADY_EXISTS from a concurrent creator is fine
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise KafkaIOError(f"could not create topic {topic!r}: {exc}") from exc


def delete_topics(bootstrap_servers: str, topics: Iterable[str], options: Mapping[str, str] | None = None,
                  timeout_s: float = 60.0) -> list[str]:
    """Delete the topics that exist and wait until the broker no longer lists them; returns those
    deleted. (Kafka deletes asynchronously: creating a topic of the same name at once would fail.)"""
    import time

    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap_servers, **(options or {})})
    present = [t for t in topics if t in admin.list_topics(timeout=timeout_s).topics]
    if not present:
        return []
    for topic, future in admin.delete_topics(present, operation_timeout=timeout_s).items():
        try:
            future.result(timeout=timeout_s)
        except Exception as exc:
            if "UNKNOWN_TOPIC_OR_PART" not in str(exc):
                raise KafkaIOError(f"could not delete topic {topic!r}: {exc}") from exc
    deadline = time.monotonic() + timeout_s
    while set(present) & set(admin.list_topics(timeout=timeout_s).topics):
        if time.monotonic() > deadline:
            raise KafkaIOError(f"topics {present} still listed {timeout_s:.0f} s after their deletion")
        time.sleep(0.2)
    return present


def send(producer, topic: str, value, key=None, on_delivery=None) -> None:
    """``producer.produce``, waiting for deliveries to drain while librdkafka's local queue is full
    (it raises BufferError instead of blocking)."""
    while True:
        try:
            producer.produce(topic, value, key, on_delivery=on_delivery)
            return
        except BufferError:
            producer.poll(0.01)


class EventProducer:
    """One idempotent producer (acks=all) for a process's lifetime: the collector sends every
    poll's events through it instead of opening a client per poll (a connection, a metadata
    round trip and a producer id each time)."""

    def __init__(self, bootstrap_servers: str, options: Mapping[str, str] | None = None):
        from confluent_kafka import Producer

        self.bootstrap_servers = bootstrap_servers
        self._producer = Producer({"bootstrap.servers": bootstrap_servers, "enable.idempotence": True,
                                   "acks": "all", "linger.ms": 5,
                                   # librdkafka's informational chatter (retries while a broker warms
                                   # up) is noise here.
                                   "log_level": 3, **(options or {})})

    def send_all(self, topic: str, records: Iterable[tuple[str | None, bytes | str | dict]],
                 timeout_s: float = 60.0) -> int:
        """Produce (key, value) records and wait until every one is acknowledged; returns the count.

        A dict value is sent as JSON. Idempotent, so a retry never duplicates a record.
        """
        errors: list[str] = []

        def on_delivery(err, msg):
            if err is not None:
                errors.append(f"{msg.topic()}: {err}")

        count = 0
        for key, value in records:
            if isinstance(value, dict):
                value = json.dumps(value, separators=(",", ":"))
            send(self._producer, topic, value, key, on_delivery)
            count += 1
            self._producer.poll(0)
        remaining = self._producer.flush(timeout_s)
        if remaining:
            raise KafkaIOError(f"{remaining} records to {topic!r} were not acknowledged within {timeout_s:.0f} s")
        if errors:
            raise KafkaIOError(f"{len(errors)} records failed: {errors[0]}")
        return count

    def close(self, timeout_s: float = 10.0) -> None:
        self._producer.flush(timeout_s)


def produce(bootstrap_servers: str, topic: str, records: Iterable[tuple[str | None, bytes | str | dict]],
            options: Mapping[str, str] | None = None, timeout_s: float = 60.0) -> int:
    """Produce (key, value) records once, with a producer of their own (see :class:`EventProducer`)."""
    producer = EventProducer(bootstrap_servers, options)
    try:
        return producer.send_all(topic, records, timeout_s)
    finally:
        producer.close()
