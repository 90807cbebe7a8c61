"""Arrow schemas of the tables, generated from :mod:`schemas.tables` like the Spark ones.

The job's sink turns the processor's JSON rows into Arrow and appends them to Delta without a Spark
job per table (streaming/job/sink.py); these are the types it parses them into. Every field is
nullable, as the Spark schemas are: the tables were first written through Spark's ``from_json``,
whose output is nullable throughout, and a table's schema must not change under its readers.
"""

from __future__ import annotations

import functools

import pyarrow as pa

from .events import Field, FieldType, translate_type

_ATOMS = {"string": pa.string(), "int": pa.int32(), "long": pa.int64(),
          "double": pa.float64(), "boolean": pa.bool_()}


def arrow_type(t: FieldType) -> pa.DataType:
    return translate_type(t, _ATOMS, lambda element: pa.list_(pa.field("element", element)),
                          lambda value: pa.map_(pa.string(), value),
                          lambda fields: pa.struct([pa.field(n, ft) for n, ft in fields]))


def arrow_schema_of(fields: tuple[Field, ...]) -> pa.Schema:
    return pa.schema([pa.field(f.name, arrow_type(f.type)) for f in fields])


@functools.cache
def table_arrow_schema(table: str) -> pa.Schema:
    """The table's Arrow schema, built once per process: the stateful operator asks for it in every
    bucket (streaming.job.row_blocks), and building it leaves reference cycles (the type
    translation's recursive closure) for Python's cyclic collector, which the operator pauses."""
    from .tables import TABLES

    return arrow_schema_of(TABLES[table])
