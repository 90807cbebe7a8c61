"""The decoder against Kafka's own decoding, field by field, on the committed fixture (no broker, no JVM).

The fixture (``fixtures/coordinator_records.jsonl``, made by ``tests/coordinator_log/fixture.py``)
holds records copied from a live 4.1.1 broker's ``__consumer_offsets`` after real groups ran
(librdkafka classic and KIP-848 groups, Java consumers, a Kafka Streams application, Connect
workers) and records written by Kafka's own serde for what a 4.1 broker no longer writes, each with
the JSON Kafka's classes decode it into.
"""

from __future__ import annotations

from collections import Counter

import pytest

from streaming.coordinator_log import RecordType, decode
from tests.coordinator_log.fixture import load
from tests.coordinator_log.kafka_json import Comparison, as_kafka_json, compare

ROWS = load()


def _label(row) -> str:
    return f"{row['source']} (type {row['kafka'].get('type')} v{row['kafka'].get('version')})"


@pytest.mark.parametrize("row", ROWS, ids=[f"{i}-{_label(r)}" for i, r in enumerate(ROWS)])
def test_every_field_agrees_with_kafka(row):
    assert "error" not in row["kafka"], f"Kafka refused a fixture record: {row['kafka']['error']}"
    comparison = compare(row["kafka"], as_kafka_json(decode(row["key"], row["value"])))
    assert comparison.differences == []
    assert comparison.leaves > 0


def test_the_embedded_protocols_agree_member_by_member():
    """Kafka's leader-side decoding of each member's bytes is in the comparison, not skipped."""
    members = [m for row in ROWS for m in row["kafka"].get("members", [])]
    assert members and not [m for m in members if "error" in m]
    decoded = Counter(("streams" if "streams" in m.get("subscription", {}) else
                       "sticky" if "sticky" in m.get("subscription", {}) else
                       "connect" if "url" in m.get("subscription", {}) else
                       "consumer") for m in members if "subscription" in m)
    assert {"consumer", "sticky", "streams", "connect"} <= decoded.keys()


def test_the_fixture_covers_every_type_and_every_version_kafka_41_reads():
    seen = {(r["kafka"]["type"], r["kafka"]["version"]) for r in ROWS}
    types = {t for t, _ in seen}
    assert types == {int(t) for t in RecordType}
    for record_type, versions in ((RecordType.OFFSET_COMMIT, range(5)), (RecordType.GROUP_METADATA, range(5))):
        assert {(int(record_type), v) for v in versions} <= seen
    # Real groups wrote these: what a production cluster's topic is made of.
    captured = {(r["kafka"]["type"], r["kafka"]["version"]) for r in ROWS if r["source"].startswith("captured")}
    assert {(1, 4), (2, 3), (3, 0), (5, 0), (6, 0), (7, 0), (8, 0), (5, None), (7, None), (8, None)} <= captured


def test_agreement_figures():
    """The whole fixture at once: every leaf of Kafka's JSON is matched (the figure in the report)."""
    total = Comparison()
    for row in ROWS:
        total.add(compare(row["kafka"], as_kafka_json(decode(row["key"], row["value"]))))
    assert total.differences == []
    assert total.agreed == total.leaves > 1000
