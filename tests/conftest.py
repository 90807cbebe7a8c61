"""Fixtures shared by the whole suite: a real Kafka broker and a real Spark session.

Both are session-scoped because starting them is the slow part (seconds each); tests isolate
themselves with their own topics and their own Delta/checkpoint directories.

Every test that needs a broker, Spark or a JVM carries the ``integration`` marker: the tests under
``tests/integration/`` and the differential tests against Kafka's Java classes get it here, others
say so themselves. ``make test-fast`` (``-m "not integration"``) must start none of them, and
:func:`_real_parts_need_the_integration_marker` makes sure it does not.
"""

from __future__ import annotations

import gc
import socket
import uuid
from pathlib import Path

import pytest
from hypothesis import settings

# Hypothesis' per-example deadline is a timed assertion: on a busy 2-core machine it fails tests
# that are correct. Speed is measured by the benchmarks in bench/, never by a test.
settings.register_profile("no-deadline", deadline=None)
settings.load_profile("no-deadline")


def pytest_collection_modifyitems(config, items):
    for item in items:
        path = Path(str(item.fspath))
        if "integration" in path.parts or ("java" in path.stem and path.stem.startswith("test_differential")):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(autouse=True)
def _real_parts_need_the_integration_marker(request, monkeypatch):
    """A test without the marker that starts a broker, Spark or the Java reference fails at once."""
    if request.node.get_closest_marker("integration") is not None:
        return

    def refuse(what):
        def starting(*args, **kwargs):
            raise AssertionError(f"{request.node.nodeid} starts {what}: mark it integration")
        return starting

    monkeypatch.setattr("streaming.broker.start", refuse("the Kafka broker"))
    monkeypatch.setattr("streaming.job.spark_session.build_spark_session", refuse("Spark"))
    monkeypatch.setattr("pyspark.sql.SparkSession.Builder.getOrCreate", refuse("Spark"))
    monkeypatch.setattr("tests.java_reference.ensure_built", refuse("the Java reference (a JVM)"))
    monkeypatch.setattr("tests.coordinator_log.fixture.ensure_built", refuse("the coordinator reference (a JVM)"))
    monkeypatch.setattr("tests.integration.cluster.start_object_store", refuse("s3proxy (a JVM)"))
    monkeypatch.setattr("tests.integration.cluster.start_standalone", refuse("a standalone Spark cluster"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory):
    """A real single-node KRaft broker on a free port, stopped at the end even if tests fail."""
    from streaming import broker

    directory = tmp_path_factory.mktemp("kafka")
    port = free_port()
    status = broker.start(port, directory, tied_to_caller=True)
    try:
        yield status
    finally:
        # Clients the tests left for the garbage collector (confluent-kafka has no close() for
        # producers and admin clients) would otherwise outlive the broker and print a "Connect
        # ... failed" line every few milliseconds until the interpreter exits.
        gc.collect()
        broker.stop(port, directory)


@pytest.fixture(scope="session")
def spark():
    from streaming.job.spark_session import build_spark_session

    session = build_spark_session(extra={"spark.sql.shuffle.partitions": "2"})
    yield session
    session.stop()


@pytest.fixture
def unique_name():
    """A fresh suffix for topics and directories, so tests never see each other's data."""
    return uuid.uuid4().hex[:10]
