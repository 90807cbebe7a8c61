"""Before the query starts: the Kafka cluster answers, and the input topics are there.

Without this, a job pointed at a broker that does not answer waited minutes for Spark's own
timeout and died with a 192-line Java trace that never named the address; a job started before
its topics existed died ten seconds in with ``UnknownTopicOrPartitionException`` and a checkpoint
left behind. Here both are decided first, in seconds, with one line that names the thing and the
fix.

The check uses Kafka's Java AdminClient inside Spark's JVM, with exactly the settings the Kafka
source gets (``[kafka.options]``: SASL, SSL, ...), so it speaks to the cluster as the job will.
"""

from __future__ import annotations

import logging

from streaming.config import KafkaConfig
from streaming.errors import BrokerUnreachableError, InputTopicsError
from streaming.feeds.kafka_io import wait_for_broker

log = logging.getLogger("rebalance_monitor.preflight")


def check_reachable(kafka: KafkaConfig) -> None:
    """Before Spark starts: a bootstrap server accepts connections within ``kafka.connect_timeout_s``
    (a closed port or an unknown host fails here at once; whether the cluster then speaks Kafka
    with these security settings is :func:`ensure_input_topics`' part)."""
    wait_for_broker(kafka.bootstrap_servers, kafka.connect_timeout_s, setting="kafka.bootstrap_servers")


def ensure_input_topics(spark, kafka: KafkaConfig) -> None:
    """Fail within ``kafka.connect_timeout_s`` if no broker answers; create the missing input topics
    (``kafka.create_topics``) or fail naming them."""
    jvm = spark._jvm
    props = jvm.java.util.Properties()
    for key, value in kafka.admin_options().items():
        props.setProperty(key, value)
    timeout_ms = int(kafka.connect_timeout_s * 1000)
    seconds = jvm.java.util.concurrent.TimeUnit.MILLISECONDS
    admin = jvm.org.apache.kafka.clients.admin.Admin.create(props)
    try:
        try:
            names = set(admin.listTopics().names().get(timeout_ms, seconds))
        except Exception as exc:  # py4j wraps the Java TimeoutException or a security failure
            raise BrokerUnreachableError(
                f"no Kafka broker answered at {kafka.bootstrap_servers} within {kafka.connect_timeout_s:g} s "
                f"({_java_cause(exc)}): check kafka.bootstrap_servers (--bootstrap-servers) and the security "
                f"settings in [kafka.options]") from None
        wanted = list(kafka.event_topics)
        missing = [t for t in wanted if t not in names]
        if not missing:
            return
        if not kafka.create_topics:
            raise InputTopicsError(
                f"the input topic(s) {', '.join(missing)} do not exist on {kafka.bootstrap_servers}: create them, "
                f"or set kafka.create_topics = true to let the job create them")
        _create(jvm, admin, kafka, missing, timeout_ms, seconds)
    finally:
        admin.close()


def ensure_metadata_topic(spark, kafka: KafkaConfig, topic: str) -> None:
    """The offsets-topic source's topic-metadata topic on the monitor's cluster, with one partition
    (its descriptions stay in the order they were made); created when missing."""
    from dataclasses import replace

    jvm = spark._jvm
    props = jvm.java.util.Properties()
    for key, value in kafka.admin_options().items():
        props.setProperty(key, value)
    timeout_ms, unit = int(kafka.connect_timeout_s * 1000), jvm.java.util.concurrent.TimeUnit.MILLISECONDS
    admin = jvm.org.apache.kafka.clients.admin.Admin.create(props)
    try:
        if topic not in set(admin.listTopics().names().get(timeout_ms, unit)):
            _create(jvm, admin, replace(kafka, topic_partitions=1), [topic], timeout_ms, unit)
    finally:
        admin.close()


def _create(jvm, admin, kafka: KafkaConfig, topics: list[str], timeout_ms: int, unit) -> None:
    optional = jvm.java.util.Optional
    replication = (optional.of(jvm.java.lang.Short.valueOf(kafka.topic_replication_factor))
                   if kafka.topic_replication_factor > 0 else optional.empty())
    new_topics = jvm.java.util.ArrayList()
    for topic in topics:
        new_topics.add(jvm.org.apache.kafka.clients.admin.NewTopic(
            topic, optional.of(jvm.java.lang.Integer.valueOf(kafka.topic_partitions)), replication))
    try:
        admin.createTopics(new_topics).all().get(timeout_ms, unit)
    except Exception as exc:
        cause = _java_cause(exc)
        if "TopicExistsException" in cause:  # created meanwhile by a producer or another job
            return
        raise InputTopicsError(
            f"the input topic(s) {', '.join(topics)} do not exist on {kafka.bootstrap_servers} and could not be "
            f"created ({cause}): create them with kafka-topics.sh, or grant this client CREATE on the cluster") \
            from None
    log.info("created the input topic(s) %s on %s (%d partitions)", ", ".join(topics), kafka.bootstrap_servers,
             kafka.topic_partitions)


def _java_cause(exc: Exception) -> str:
    """The root cause of a py4j-wrapped Java exception, as ``Class: message`` (one line)."""
    java = getattr(exc, "java_exception", None)
    if java is None:
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    while java.getCause() is not None:
        java = java.getCause()
    message = java.getMessage() or ""
    return f"{java.getClass().getSimpleName()}: {message.splitlines()[0] if message else ''}".rstrip(": ")
