"""The event and table definitions, and the files generated from them."""

from __future__ import annotations

import json

import pytest

from schemas.docs import generated_files
from schemas.events import HEARTBEAT_FIELDS, MEMBERSHIP_FIELDS, example_event
from schemas.json_schema import heartbeat_schema, membership_schema
from schemas.tables import TABLES


def test_generated_schema_files_and_docs_are_current():
    stale = [str(path) for path, text in generated_files().items() if not path.exists() or path.read_text() != text]
    assert not stale, f"run `python -m schemas.docs`: stale {stale}"


@pytest.mark.parametrize("schema, fields", [(membership_schema(), MEMBERSHIP_FIELDS), (heartbeat_schema(), HEARTBEAT_FIELDS)])
def test_json_schema_lists_every_field_and_the_required_ones(schema, fields):
    assert list(schema["properties"]) == [f.name for f in fields]
    assert schema["required"] == [f.name for f in fields if f.required]
    json.dumps(schema)  # serialisable


def test_examples_use_only_defined_fields():
    names = {f.name for f in MEMBERSHIP_FIELDS}
    assert set(example_event(MEMBERSHIP_FIELDS)) <= names
    assert example_event(HEARTBEAT_FIELDS)["member_id"]


@pytest.mark.parametrize("table", sorted(TABLES))
def test_arrow_table_schemas_match_the_spark_ones(table):
    # The sink writes Arrow, Spark reads the tables: both must describe the same columns.
    from pyspark.sql.pandas.types import to_arrow_schema

    from schemas.arrow import table_arrow_schema
    from schemas.spark import table_schema

    assert table_arrow_schema(table) == to_arrow_schema(table_schema(table))
