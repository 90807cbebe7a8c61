"""The topic-metadata publisher (:mod:`streaming.feeds.topic_metadata`) on Kafka's Java clients.

An AdminClient on the observed cluster and a producer on the monitor's, both in Spark's JVM with
exactly the settings the Kafka sources get (``[offsets_topic.options]``, ``[kafka.options]``:
SASL, SSL, ... written for the Java client), so the publisher speaks to each cluster as the job
does. Topic ids come as Kafka prints them (``Uuid.toString``), the coordinator records' spelling.
"""

from __future__ import annotations

from typing import Mapping

from streaming.config import Config
from streaming.feeds.topic_metadata import TopicMetadataPublisher

TIMEOUT_MS = 30_000


def _properties(jvm, settings: Mapping[str, str]):
    props = jvm.java.util.Properties()
    for key, value in settings.items():
        props.setProperty(key, str(value))
    return props


def publisher(spark, config: Config, interval_s: float | None = None) -> TopicMetadataPublisher:
    """A publisher for ``config.offsets_topic`` (not started)."""
    jvm = spark._jvm
    source, kafka = config.offsets_topic, config.kafka
    unit = jvm.java.util.concurrent.TimeUnit.MILLISECONDS
    admin = jvm.org.apache.kafka.clients.admin.Admin.create(_properties(jvm, source.admin_options(kafka)))
    serializer = "org.apache.kafka.common.serialization.ByteArraySerializer"
    producer_settings = {key: value for key, value in kafka.admin_options().items()
                         if key not in ("request.timeout.ms", "default.api.timeout.ms")}
    producer_settings.update({"key.serializer": serializer, "value.serializer": serializer, "acks": "all",
                              "enable.idempotence": "true"})
    producer = jvm.org.apache.kafka.clients.producer.KafkaProducer(_properties(jvm, producer_settings))

    def describe() -> list[dict]:
        names = admin.listTopics().names().get(TIMEOUT_MS, unit)  # internal topics are not listed
        if names.isEmpty():
            return []
        described = admin.describeTopics(names).allTopicNames().get(TIMEOUT_MS, unit)
        return [{"name": name, "partitions": d.partitions().size(), "topic_id": d.topicId().toString()}
                for name, d in ((name, described.get(name)) for name in described.keySet())]

    def send(key: bytes, value: bytes) -> None:
        record = jvm.org.apache.kafka.clients.producer.ProducerRecord(source.metadata_topic, bytearray(key),
                                                                      bytearray(value))
        producer.send(record).get(TIMEOUT_MS, unit)

    def close() -> None:
        producer.close()
        admin.close()

    return TopicMetadataPublisher(describe, send, source.metadata_interval_s if interval_s is None else interval_s,
                                  on_close=close)
