"""Spark StructTypes of the events, generated from :mod:`schemas.events`."""

from __future__ import annotations

from pyspark.sql import types as T

from .events import HEARTBEAT_FIELDS, MEMBERSHIP_FIELDS, Array, Field, FieldType, Map, Struct

_ATOMS = {"string": T.StringType(), "int": T.IntegerType(), "long": T.LongType(),
          "double": T.DoubleType(), "boolean": T.BooleanType()}


def spark_type(t: FieldType) -> T.DataType:
    if isinstance(t, str):
        return _ATOMS[t]
    if isinstance(t, Array):
        return T.ArrayType(spark_type(t.element))
    if isinstance(t, Map):
        return T.MapType(T.StringType(), spark_type(t.value))
    if isinstance(t, Struct):
        return T.StructType([T.StructField(n, spark_type(ft)) for n, ft in t.fields])
    raise TypeError(f"unknown field type {t!r}")


def struct_of(fields: tuple[Field, ...]) -> T.StructType:
    return T.StructType([T.StructField(f.name, spark_type(f.type)) for f in fields])


MEMBERSHIP_SCHEMA = struct_of(MEMBERSHIP_FIELDS)
HEARTBEAT_SCHEMA = struct_of(HEARTBEAT_FIELDS)


def table_schema(table: str) -> T.StructType:
    from .tables import TABLES

    return struct_of(TABLES[table])
