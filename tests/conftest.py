"""Fixtures shared by the whole suite: a real Kafka broker and a real Spark session.

Both are session-scoped because starting them is the slow part (seconds each); tests isolate
themselves with their own topics and their own Delta/checkpoint directories.
"""

from __future__ import annotations

import socket
import uuid

import pytest


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
        broker.stop(port, directory)


@pytest.fixture(scope="session")
def spark():
    from streaming.spark import build_spark_session

    session = build_spark_session(extra={"spark.sql.shuffle.partitions": "2"})
    yield session
    session.stop()


@pytest.fixture
def unique_name():
    """A fresh suffix for topics and directories, so tests never see each other's data."""
    return uuid.uuid4().hex[:10]
