"""Parse and validate the raw Kafka records, with a reason for every record that is refused.

JSON is parsed once into a VARIANT, each field's value is cut out of it once, and each field is
then read with the type the schema gives it. That lets a refusal say exactly what is wrong
("field generation: expected int, got \"abc\"") instead of a bare "malformed", and keeps the whole
check inside Spark. A list of strings is read from the record's text (see _string_array).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from schemas.events import (
    HEARTBEAT_FIELDS,
    MEMBER_EVENT_TYPES,
    MEMBERSHIP_FIELDS,
    SCHEMA_VERSION,
    STREAMS_TASK_ID_PATTERN,
    Array,
    Field,
)
from schemas.spark import spark_type

MEMBERSHIP = "membership"
HEARTBEAT = "heartbeat"

#: Columns that say where a record came from; they travel with valid and rejected records alike.
SOURCE_COLUMNS = ("source_topic", "source_partition", "source_offset", "kafka_timestamp")


#: The column holding each field's own VARIANT, cut out of the record's once. Every read of a field
#: goes to its small variant: a lookup in the record's variant copies the whole record out of the
#: row first (a 100-topic join is 1.3 KB), and a record's fields are read 40 to 70 times.
FIELDS = "field_values"


def _raw(name: str) -> str:
    """SQL for the field's own VARIANT (null when the record has no such key)."""
    return f"{FIELDS}.{name}"


def _present(name: str) -> Column:
    return F.expr(f"{_raw(name)} IS NOT NULL AND NOT is_variant_null({_raw(name)})")


def _typed(f: Field) -> Column:
    if f.type == Array("string"):
        return _string_array(f.name)
    return F.expr(f"try_variant_get({_raw(f.name)}, '$', '{spark_type(f.type).simpleString()}')")


def _string_array(name: str) -> Column:
    """A list of strings, null unless every element is a JSON string or null.

    Reading a VARIANT array as ``array<string>`` casts each element on its own (about 1 us each:
    a second of a 10,000-join burst whose joins list 100 topics), and the cast would pass 1 for
    "1". Jackson reads the record's text in a third of that time; the VARIANT's schema says
    whether every element is a string (``ARRAY<VOID>``: empty, or only nulls).
    """
    strings_only = F.expr(f"schema_of_variant({_raw(name)}) IN ('ARRAY<STRING>', 'ARRAY<VOID>')")
    return F.when(strings_only, F.from_json(F.col("raw_value"), f"struct<{name}: array<string>>")[name])


#: What JSON may stand for each scalar type of the contract, as ``schema_of_variant`` names it.
#: Reading a variant as a type *casts* it, so without this check "12" would pass for 12, 3.5 for
#: 3, true for 1, and 12, [1] or {"a": 1} for the strings "12", "[1]" and '{"a":1}': values the
#: published JSON Schema refuses. JSON integers always come out as BIGINT.
_JSON_KINDS = {
    "string": "= 'STRING'",
    "int": "= 'BIGINT'",
    "long": "= 'BIGINT'",
    "double": "IN ('BIGINT', 'DOUBLE') OR {schema} LIKE 'DECIMAL(%'",
    "boolean": "= 'BOOLEAN'",
}


def _json_kind_is(name: str, field_type: str) -> Column:
    """The field's JSON value is of a kind its type allows (about 0.1 us per field and row)."""
    schema = f"schema_of_variant({_raw(name)})"
    rule = _JSON_KINDS[field_type].replace("{schema}", schema)
    return F.expr(f"({schema} {rule})")


def _field_problems(f: Field) -> list[Column]:
    """Reasons this field makes the record invalid, in order of precedence (null = fine).

    They read the field's typed column, which parse_records has already computed: a typed read
    of a variant costs about half a microsecond, and Spark does not share one between the
    branches of a CASE. A field that has a typed value is present, so a valid record never asks
    the variant whether a field is there; only a record with a field missing or mistyped pays.
    """
    typed = F.col(f.name)
    shown = F.substring(F.expr(f"to_json({_raw(f.name)})"), 1, 80)
    type_name = spark_type(f.type).simpleString()
    mistyped = typed.isNull() & _present(f.name)
    if isinstance(f.type, str):
        mistyped = mistyped | (typed.isNotNull() & ~_json_kind_is(f.name, f.type))
    problems = [
        F.when(mistyped, F.concat(F.lit(f"field {f.name}: expected {type_name}, got "), shown)),
    ]
    if f.required:
        problems.append(F.when(typed.isNull() & ~_present(f.name), F.lit(f"missing required field {f.name}")))
    if f.non_empty:
        problems.append(F.when(F.trim(typed) == "", F.lit(f"field {f.name} must not be empty")))
    if f.enum:
        allowed = ", ".join(f.enum)
        problems.append(F.when(typed.isNotNull() & ~typed.isin(*f.enum),
                               F.concat(F.lit(f"field {f.name}: unknown value '"), typed,
                                        F.lit(f"' (expected one of {allowed})"))))
    if f.minimum is not None:
        problems.append(F.when(typed < f.minimum,
                               F.concat(F.lit(f"field {f.name}: "), typed.cast("string"),
                                        F.lit(f" is below the minimum {f.minimum}"))))
    return problems


def _has_blank_string(name: str) -> Column:
    """Whether the list of strings has a null or blank (spaces only, as ``trim`` sees it) element.

    Spark runs a lambda element by element outside its generated code (0.5 us an element: half a
    second of a burst of 10,000 joins of 100 topics), so it runs only for a list that may have one:
    one with a space anywhere (Kafka's topic names have none), or whose elements joined with NUL
    (a null as an empty piece, NUL at both ends) have two NULs in a row. A NUL inside a name can
    fake that; then the lambda decides.
    """
    joined = F.array_join(F.col(name), "\x00", "")
    may_have = F.contains(joined, F.lit(" ")) | F.contains(F.concat(F.lit("\x00"), joined, F.lit("\x00")),
                                                           F.lit("\x00\x00"))
    return F.when(may_have, F.expr(f"exists({name}, t -> t IS NULL OR trim(t) = '')")).otherwise(False)


def _membership_rules() -> list[Column]:
    m = F.col
    return [
        F.when(m("type").isin(*MEMBER_EVENT_TYPES) & m("member_id").isNull(),
               F.concat(F.lit("missing required field member_id for a "), m("type"), F.lit(" event"))),
        # What a workload event must carry depends on the group type (consumer when not given).
        F.when((m("type") == "workload") & ~F.coalesce(m("group_type"), F.lit("consumer")).isin("streams", "connect")
               & m("workload.topics").isNull(),
               F.lit("missing required field workload.topics for a workload event")),
        F.when((m("type") == "workload") & (m("group_type") == "streams") & m("workload.tasks").isNull(),
               F.lit("missing required field workload.tasks for a workload event of a streams group")),
        F.when((m("type") == "workload") & (m("group_type") == "connect") & m("workload.connectors").isNull(),
               F.lit("missing required field workload.connectors for a workload event of a connect group")),
        F.when(F.expr(" OR ".join(f"exists(workload.tasks.{kind}, t -> t IS NULL OR NOT t RLIKE "
                                  f"'{STREAMS_TASK_ID_PATTERN}')" for kind in ("stateful", "stateless"))),
               F.lit("field workload.tasks: a task id is not of the form '<subtopology>_<partition>' (like '0_1')")),
        F.when(F.expr("exists(workload.connectors, c -> c.name IS NULL OR trim(c.name) = '')"),
               F.lit("field workload.connectors: a connector has no name")),
        F.when(F.expr("exists(workload.connectors, c -> c.tasks IS NULL OR c.tasks < 0)"),
               F.lit("field workload.connectors: a task count is missing or negative")),
        F.when(F.expr("exists(owned_partitions, p -> p.topic IS NULL OR p.partition IS NULL)"),
               F.lit("field owned_partitions: every entry needs a topic and a partition")),
        F.when(F.expr("exists(owned_partitions, p -> p.partition < 0)"),
               F.lit("field owned_partitions: a partition number is negative")),
        F.when(_has_blank_string("topics"), F.lit("field topics: a topic name is empty")),
        F.when(F.expr("exists(workload.topics, t -> t.name IS NULL OR trim(t.name) = '')"),
               F.lit("field workload.topics: a topic has no name")),
        F.when(F.expr("exists(workload.topics, t -> t.partitions IS NULL OR t.partitions < 0)"),
               F.lit("field workload.topics: a partition count is missing or negative")),
        F.when(F.expr("exists(workload.topics, t -> t.racks IS NOT NULL AND size(t.racks) != t.partitions)"),
               F.lit("field workload.topics: racks must list one entry per partition")),
    ]


def parse_records(records: DataFrame, membership_topic: str, heartbeat_topic: str,
                  max_record_bytes: int, carry: tuple[str, ...] = ()) -> DataFrame:
    """Turn Kafka source rows into typed event rows with a ``reject_reason`` column (null = valid).

    (Not ``reason``: that is a field of membership events, the client's own words.)

    The result has ``kind`` (membership or heartbeat), every membership field (heartbeats use a
    subset) and every heartbeat field (``task_lags``), the source columns and ``raw_value`` (kept
    for refused records), and the columns of ``records`` named in ``carry``, unchanged.
    """
    base = records.select(
        *carry,
        F.col("topic").alias("source_topic"),
        F.col("partition").alias("source_partition"),
        F.col("offset").alias("source_offset"),
        F.col("timestamp").alias("kafka_timestamp"),
        F.col("key").cast("string").alias("record_key"),
        # Invalid UTF-8 is replaced (U+FFFD) so the record can still be kept and shown.
        F.expr("make_valid_utf8(cast(value AS STRING))").alias("raw_value"),
        F.expr("is_valid_utf8(cast(value AS STRING))").alias("valid_utf8"),
        F.octet_length("value").alias("record_bytes"),
    ).withColumn(
        "kind",
        F.when(F.col("source_topic") == membership_topic, F.lit(MEMBERSHIP))
        .when(F.col("source_topic") == heartbeat_topic, F.lit(HEARTBEAT)),
    ).withColumn(
        # An oversized record is never parsed: that is the point of the limit.
        "v",
        F.when(F.col("record_bytes") <= max_record_bytes, F.expr("try_parse_json(raw_value)")),
    )
    membership_names = {f.name for f in MEMBERSHIP_FIELDS}
    heartbeat_names = {f.name for f in HEARTBEAT_FIELDS}
    columns = MEMBERSHIP_FIELDS + tuple(f for f in HEARTBEAT_FIELDS if f.name not in membership_names)
    # Keys are matched as written (case-sensitively), as a lookup of '$.name' matches them.
    field_values = ", ".join(f"{f.name}: variant" for f in columns)
    base = base.withColumn(FIELDS, F.expr(f"try_variant_get(v, '$', 'struct<{field_values}>')"))

    # One typed column per field of either kind (Streams task_lags is heartbeat-only). Each field
    # is read only from the records of a kind that has it, null elsewhere: heartbeats, the bulk,
    # have 6 fields of ~25.

    def read(f: Field) -> Column:
        if f.name not in heartbeat_names:
            return F.when(F.col("kind") == MEMBERSHIP, _typed(f))
        if f.name not in membership_names:
            return F.when(F.col("kind") == HEARTBEAT, _typed(f))
        return _typed(f)

    typed = base.select("*", *[read(f).alias(f.name) for f in columns])

    envelope = [
        F.when(F.col("raw_value").isNull(), F.lit("empty record value")),
        F.when(F.col("record_bytes") > max_record_bytes,
               F.concat(F.lit("oversized record: "), F.col("record_bytes").cast("string"),
                        F.lit(f" bytes (limit {max_record_bytes})"))),
        F.when(F.col("kind").isNull(), F.concat(F.lit("record from unexpected topic "), F.col("source_topic"))),
        F.when(~F.col("valid_utf8"), F.lit("record value is not valid UTF-8")),
        F.when(F.col("v").isNull(), F.lit("not valid JSON")),
        # v parsed, so the value is JSON: it is an object when its first non-blank character is
        # "{" (JSON's blanks: space, tab, CR, LF). Far cheaper than asking the variant its schema.
        # Only the left end is trimmed (a right-hand trim with a set of characters walks the whole
        # value), in SQL's words: the two-argument ltrim() logs a deprecation warning.
        F.when(~F.expr("trim(LEADING ' \t\n\r' FROM raw_value)").startswith("{"), F.lit("not a JSON object")),
    ]
    version = [
        F.when(F.col("schema_version") > SCHEMA_VERSION,
               F.concat(F.lit("unsupported schema_version "), F.col("schema_version").cast("string"),
                        F.lit(f" (this job reads version {SCHEMA_VERSION})"))),
    ]
    key_rule = [
        F.when(F.col("record_key").isNotNull() & F.col("group_id").isNotNull()
               & (F.col("record_key") != F.col("group_id")),
               F.concat(F.lit("record key '"), F.col("record_key"), F.lit("' differs from group_id '"),
                        F.col("group_id"), F.lit("'"))),
    ]
    membership_reason = F.coalesce(*[p for f in MEMBERSHIP_FIELDS for p in _field_problems(f)],
                                   *version, *_membership_rules(), *key_rule)
    heartbeat_reason = F.coalesce(*[p for f in HEARTBEAT_FIELDS for p in _field_problems(f)],
                                  *version, *key_rule)
    reason = F.coalesce(
        *envelope,
        F.when(F.col("kind") == MEMBERSHIP, membership_reason).otherwise(heartbeat_reason),
    )
    return typed.withColumn("reject_reason", reason).drop("v", FIELDS, "record_bytes", "valid_utf8")
