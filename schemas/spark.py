"""Spark StructTypes of the events, generated from :mod:`schemas.events`."""

from __future__ import annotations

from pyspark.sql import types as T

from .events import HEARTBEAT_FIELDS, MEMBERSHIP_FIELDS, Field, FieldType, translate_type

_ATOMS = {"string": T.StringType(), "int": T.IntegerType(), "long": T.LongType(),
          "double": T.DoubleType(), "boolean": T.BooleanType()}


def spark_type(t: FieldType) -> T.DataType:
    return translate_type(t, _ATOMS, T.ArrayType, lambda value: T.MapType(T.StringType(), value),
                          lambda fields: T.StructType([T.StructField(n, ft) for n, ft in fields]))


def struct_of(fields: tuple[Field, ...]) -> T.StructType:
    return T.StructType([T.StructField(f.name, spark_type(f.type)) for f in fields])


MEMBERSHIP_SCHEMA = struct_of(MEMBERSHIP_FIELDS)
HEARTBEAT_SCHEMA = struct_of(HEARTBEAT_FIELDS)


def table_schema(table: str) -> T.StructType:
    from .tables import TABLES

    return struct_of(TABLES[table])
