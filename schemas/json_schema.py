"""JSON Schema (draft 2020-12) of the events, generated from :mod:`schemas.events`."""

from __future__ import annotations

from .events import (
    HEARTBEAT_FIELDS,
    MEMBER_EVENT_TYPES,
    MEMBERSHIP_FIELDS,
    SCHEMA_VERSION,
    Field,
    FieldType,
    translate_type,
)

_ATOMS = {"string": {"type": "string"}, "int": {"type": "integer"}, "long": {"type": "integer"},
          "double": {"type": "number"}, "boolean": {"type": "boolean"}}


def json_type(t: FieldType) -> dict:
    atoms = {name: dict(schema) for name, schema in _ATOMS.items()}  # fresh: _property adds to them
    return translate_type(t, atoms, lambda element: {"type": "array", "items": element},
                          lambda value: {"type": "object", "additionalProperties": value},
                          lambda fields: {"type": "object", "properties": dict(fields)})


def _property(f: Field) -> dict:
    prop = json_type(f.type)
    if not f.required:
        prop = {"anyOf": [prop, {"type": "null"}]} if "type" in prop else prop
    target = prop["anyOf"][0] if "anyOf" in prop else prop
    if f.enum:
        target["enum"] = list(f.enum)
    if f.minimum is not None:
        target["minimum"] = f.minimum
    if f.non_empty:
        target["pattern"] = r"\S"
    prop["description"] = f.doc
    return prop


def schema_of(title: str, fields: tuple[Field, ...]) -> dict:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": title,
        "type": "object",
        "properties": {f.name: _property(f) for f in fields},
        "required": [f.name for f in fields if f.required],
    }
    schema["properties"]["schema_version"]["maximum"] = SCHEMA_VERSION
    return schema


def membership_schema() -> dict:
    schema = schema_of("rebalance-monitor membership event", MEMBERSHIP_FIELDS)
    schema["allOf"] = [
        {"if": {"properties": {"type": {"enum": list(MEMBER_EVENT_TYPES)}}}, "then": {"required": ["member_id"]}},
        {"if": {"properties": {"type": {"const": "workload"}}}, "then": {"required": ["workload"]}},
    ]
    return schema


def heartbeat_schema() -> dict:
    return schema_of("rebalance-monitor heartbeat event", HEARTBEAT_FIELDS)
