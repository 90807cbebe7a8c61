"""Optional topic ids in consumer-group specs: Kafka's own spelling in JSON, ``uuid.UUID`` in the model,
every malformed id refused by name, and the generated schema declaring the field."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from assignors import InvalidGroupSpecError
from assignors.codec import TOPIC_FIELDS, format_group_spec, parse_group_spec
from assignors.model import topic_id_from_string, topic_id_string

REPO = Path(__file__).resolve().parents[2]
#: A topic id as kafka-topics --describe prints it, and the Uuid it stands for.
KAFKA_ID = "Y2Wm4ZT0SBOWqCR_pWkHOw"
AS_UUID = uuid.UUID("6365a6e1-94f4-4813-96a8-247fa569073b")


def spec_with(topic_entry: dict, **more_topics) -> dict:
    return {"id": "s", "assignor": "uniform", "topics": {"t": topic_entry, **more_topics},
            "members": [{"member_id": "m", "topics": ["t"]}]}


def test_kafkas_base64_spelling_is_the_uuid_and_back():
    assert topic_id_from_string(KAFKA_ID) == AS_UUID
    assert topic_id_string(AS_UUID) == KAFKA_ID


def test_a_topic_id_survives_the_codec_both_ways():
    parsed = parse_group_spec(spec_with({"partitions": 2, "topic_id": KAFKA_ID})).spec
    assert parsed.topics["t"].topic_id == AS_UUID
    assert format_group_spec(parsed)["topics"]["t"] == {"partitions": 2, "topic_id": KAFKA_ID}
    without = parse_group_spec(spec_with({"partitions": 2})).spec
    assert without.topics["t"].topic_id is None and "topic_id" not in format_group_spec(without)["topics"]["t"]


@pytest.mark.parametrize("bad, problem", [
    ("not-an-id", "not a Kafka topic id (22 characters"),
    (KAFKA_ID + "==", "canonical form"),
    (KAFKA_ID[:-1] + "x", "canonical form (expected 'Y2Wm4ZT0SBOWqCR_pWkHOw')"),
    (KAFKA_ID.replace("_", "/"), "canonical form"),
    ("AAAAAAAAAAAAAAAAAAAAAA", "reserved"),
    ("AAAAAAAAAAAAAAAAAAAAAQ", "reserved"),
    (12, "must be a string"),
])
def test_a_malformed_topic_id_is_refused_naming_the_topic(bad, problem):
    with pytest.raises(InvalidGroupSpecError, match=r"topics\['t'\]\.topic_id: .*" + problem.replace("(", r"\(").replace(")", r"\)")):
        parse_group_spec(spec_with({"partitions": 2, "topic_id": bad}))


def test_two_topics_with_one_id_are_refused():
    with pytest.raises(InvalidGroupSpecError, match=r"topics\['u'\]\.topic_id: .* already the id of topic 't'"):
        parse_group_spec(spec_with({"partitions": 2, "topic_id": KAFKA_ID}, u={"partitions": 1, "topic_id": KAFKA_ID}))


def test_the_schema_file_declares_what_the_parser_accepts():
    schema = json.loads((REPO / "schemas" / "assign_consumer.schema.json").read_text())
    topic = schema["properties"]["topics"]["additionalProperties"]
    assert list(topic["properties"]) == [f.name for f in TOPIC_FIELDS] == ["partitions", "racks", "topic_id"]
    assert topic["additionalProperties"] is False and topic["required"] == ["partitions"]
    assert list(schema["properties"]) == ["id", "assignor", "topics", "members"]
