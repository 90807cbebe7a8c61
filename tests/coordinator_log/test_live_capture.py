"""Regenerate records from a live broker with real groups and compare with Kafka's decoding again.

The fast test checks the committed fixture; this one makes new records the same way (real
librdkafka classic and KIP-848 groups and real Java consumers on a fresh 4.1.1 broker, see
``capture.py``), decodes every record of ``__consumer_offsets`` (offset commits included) with
the Python decoder and with Kafka's classes, and requires agreement on every field. About two
minutes on two cores.
"""

from __future__ import annotations

import base64
from collections import Counter

import pytest

from streaming.coordinator_log import decode
from tests.coordinator_log.capture import capture
from tests.coordinator_log.fixture import ensure_built, kafka_decoding
from tests.coordinator_log.kafka_json import Comparison, as_kafka_json, compare

pytestmark = pytest.mark.integration

SCENARIOS = ["rdkafka-range", "rdkafka-cooperative-sticky", "kip848-uniform", "java-cooperative-sticky"]


def test_live_records_agree_with_kafka_field_by_field(kafka_broker, tmp_path):
    ensure_built()
    records = capture(kafka_broker.bootstrap_servers, SCENARIOS, tmp_path)
    answers = kafka_decoding(records)
    total = Comparison()
    kinds = Counter()
    for record, kafka in zip(records, answers):
        assert "error" not in kafka, kafka
        key = base64.b64decode(record["key"])
        value = None if record["value"] is None else base64.b64decode(record["value"])
        total.add(compare(kafka, as_kafka_json(decode(key, value))))
        kinds[(kafka["type"], kafka["version"])] += 1
    assert total.differences == []
    assert total.agreed == total.leaves
    # Each scenario left its mark: classic generations, offset commits, the KIP-848 records.
    assert kinds[(2, 3)] >= 10 and kinds[(1, 4)] >= 10
    assert {(3, 0), (5, 0), (6, 0), (7, 0), (8, 0), (5, None), (8, None)} <= kinds.keys()
    members = [m for kafka in answers for m in kafka.get("members", [])]
    assert any(m.get("subscription", {}).get("ownedPartitions") for m in members)  # cooperative rounds
