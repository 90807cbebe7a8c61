"""Heartbeats of the contract's own shape recognised without Spark's JSON parse, exactly.

The parse (:mod:`streaming.job.parse`) gives every refused record its precise reason, and pays for
it on every record: JSON to VARIANT, a typed lookup and a JSON-kind check per field, a dozen refusal
rules. Heartbeats are nearly all the input (99.5 % of the benchmark's), and nearly all of them are
written by the collector, the simulator or a client with the same serialiser: compact JSON, the
contract's fields in the contract's order, no escapes. Such a record is recognised here, in one
vectorised pass (Arrow's RE2 over a whole record batch), and only its three fields the job uses
(group, member, event time) are cut out of it. Every other record goes to the parse as before.

Exactness is the point, not a heuristic: :func:`canonical_heartbeat_pattern` accepts only records
that the parse accepts, and cuts out the very values the parse reads from them:

* the whole value must match, anchored at both ends: one JSON object, the fields in the order of
  :data:`schemas.events.HEARTBEAT_FIELDS`, each required one present, optional scalars optional,
  maps absent (a Streams heartbeat's ``task_lags`` travels in a payload: the parse's business);
  so there is no duplicate key, no unknown field, no whitespace;
* strings hold no backslash (no escape to decode), no quote and no control character (which JSON
  refuses unescaped), and must not be blank (a non-blank string is never empty after Spark's
  ``trim``; a blank one goes to the parse, which refuses it with its reason);
* numbers are integers in plain notation, within the field's minimum and, by their number of
  digits, within the range of the field's type (no overflow into a decimal);
* ``schema_version`` is this job's version exactly;
* the value is valid UTF-8 (Arrow's check, as strict as Spark's) and within ``max_record_bytes``;
* the Kafka key is null or the group id's bytes (the parse's key rule).

A record that fails any of these is not refused here: it goes to the parse, which decides. The
exactness test (tests/integration/test_heartbeat_screen.py) runs both over a corpus of near-miss
records and checks that every record recognised here is one the parse accepts with the same
values.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

from schemas.events import HEARTBEAT_FIELDS, SCHEMA_VERSION, Field

#: What the screen adds to each record: the three fields the job needs of a recognised heartbeat
#: (all null for a record left to the parse).
SCREENED_GROUP_ID = "screened_group_id"
SCREENED_MEMBER_ID = "screened_member_id"
SCREENED_EVENT_TIME = "screened_event_time"
SCREENED_COLUMNS = (SCREENED_GROUP_ID, SCREENED_MEMBER_ID, SCREENED_EVENT_TIME)
#: The fields the screen cuts out, in the order of :data:`SCREENED_COLUMNS`.
_EXTRACTED = ("group_id", "member_id", "event_time")

#: Kafka source columns the screen reads and passes on (the value set to null when recognised, so
#: that the parse after it has nothing to parse).
SOURCE_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp")

# A JSON string's content without anything that needs decoding: no quote, no backslash, no
# control character (JSON refuses those unescaped).
_PLAIN_STRING = r'[^"\\\x00-\x1f]*'
# Integers by how many digits always fit the type (int: 9 < 2^31, long: 18 < 2^63).
_MAX_DIGITS = {"int": 9, "long": 18}


def _integer(f: Field) -> str:
    digits = _MAX_DIGITS[f.type]
    positive = f"[1-9][0-9]{{0,{digits - 1}}}"
    if f.minimum is None or f.minimum < -1:
        raise ValueError(f"field {f.name}: the screen handles minimum -1, 0, 1 or the schema version, "
                         f"not {f.minimum}")
    return {-1: f"(?:-1|0|{positive})", 0: f"(?:0|{positive})", 1: positive}[f.minimum]


def _value_pattern(f: Field) -> str | None:
    """The JSON text a field's value may have in a recognised record (None: the field must be absent)."""
    if f.name == "schema_version":
        return str(SCHEMA_VERSION)  # this contract's version; a record of an older one is left to the parse
    if f.type == "string":
        return f'"{_PLAIN_STRING}"'
    if f.type in _MAX_DIGITS:
        return _integer(f)
    if isinstance(f.type, str):
        raise ValueError(f"field {f.name}: the screen has no rule for type {f.type}")
    return None  # a map, array or struct: such a record is the parse's


def canonical_heartbeat_pattern(fields: tuple[Field, ...] = HEARTBEAT_FIELDS) -> str:
    """An RE2 pattern that matches exactly the heartbeats of the canonical shape (module doc)."""
    parts = []
    for f in fields:
        if f.enum:
            raise ValueError(f"field {f.name}: the screen has no rule for enums")
        value = _value_pattern(f)
        if value is None:
            if f.required:
                raise ValueError(f"field {f.name}: a required field the screen cannot read")
            continue
        member = ("," if parts else "") + f'"{re.escape(f.name)}":{value}'
        parts.append(member if f.required else f"(?:{member})?")
    return r"\A\{" + "".join(parts) + r"\}\z"


def _quote_positions(fields: tuple[Field, ...]) -> dict[str, int]:
    """Where each field's value is among a recognised record's pieces split at '"'.

    In ``{"a":"x","b":1,...}`` split at every quote, the field names are the odd pieces and a string
    value the piece after the ':'; a number stands in the piece after its name, between ':' and ','.
    Only fields before the first optional one have a fixed place; the screen needs the ones it cuts
    out and every non-empty string there (checked here, once)."""
    positions, piece = {}, 1
    for f in fields:
        if not f.required:
            break
        positions[f.name] = piece + 2 if f.type == "string" else piece + 1
        piece += 4 if f.type == "string" else 2
    needed = set(_EXTRACTED) | {f.name for f in fields if f.non_empty}
    if needed - set(positions):
        raise ValueError(f"the screen cannot cut out {sorted(needed - set(positions))}: "
                         "not required fields before any optional one")
    return positions


PATTERN = canonical_heartbeat_pattern()
_POSITIONS = _quote_positions(HEARTBEAT_FIELDS)
_NON_EMPTY = tuple(f.name for f in HEARTBEAT_FIELDS if f.non_empty)


class Recognised(NamedTuple):
    """What the screen made of one record batch: which records it recognised (a boolean array, never
    null) and the fields it cut out of them (null for every other record)."""

    mask: object
    group_id: object
    member_id: object
    event_time: object


def recognise(batch, heartbeat_topic: str, max_record_bytes: int) -> Recognised:
    """The canonical heartbeats of one Arrow record batch of Kafka source rows (its ``key``, ``value``
    and ``topic`` read) and their three fields (see the module doc)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = batch.num_rows
    value = batch.column("value")
    try:
        text = value.cast(pa.string())
    except pa.ArrowInvalid:  # invalid UTF-8 somewhere (a hostile producer): those are the parse's
        text = pa.array([_utf8_or_none(v) for v in value.to_pylist()], pa.string())
    candidate = pc.and_(pc.match_substring_regex(text, PATTERN),
                        pc.and_(pc.equal(batch.column("topic"), heartbeat_topic),
                                pc.less_equal(pc.binary_length(value), max_record_bytes)))
    candidate = pc.fill_null(candidate, False)
    # Split only the candidates: a piece's place is fixed only in the canonical shape.
    pieces = pc.split_pattern(pc.if_else(candidate, text, pa.nulls(n, pa.string())), '"')
    cut = {name: pc.list_element(pieces, position) for name, position in _POSITIONS.items()}
    # Not blank: Arrow's whitespace includes the space, the only character Spark's trim removes.
    recognised = candidate
    for name in _NON_EMPTY:
        recognised = pc.and_(recognised, pc.not_equal(pc.utf8_trim_whitespace(cut[name]), ""))
    key = batch.column("key")
    recognised = pc.and_(recognised, pc.or_kleene(pc.is_null(key),
                                                  pc.equal(key, cut["group_id"].cast(pa.binary()))))
    recognised = pc.fill_null(recognised, False)

    def only_recognised(array):
        return pc.if_else(recognised, array, pa.nulls(n, array.type))

    # A number's piece is ':<digits>,' (or ':<digits>}' last).
    event_time = pc.cast(pc.utf8_slice_codeunits(only_recognised(cut["event_time"]), 1, -1), pa.int64())
    return Recognised(recognised, only_recognised(cut["group_id"]), only_recognised(cut["member_id"]), event_time)


def screen_batch(batch, heartbeat_topic: str, max_record_bytes: int):
    """One Arrow record batch of Kafka source rows (:data:`SOURCE_COLUMNS`), with the screened
    columns added and the value of every recognised heartbeat set to null: each record's own row
    (:func:`parse_screened`, the per-record view the exactness test reads)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    found = recognise(batch, heartbeat_topic, max_record_bytes)
    value = batch.column("value")
    columns = [batch.column(name) for name in SOURCE_COLUMNS]
    columns[SOURCE_COLUMNS.index("value")] = pc.if_else(found.mask, pa.nulls(batch.num_rows, value.type), value)
    columns += [found.group_id, found.member_id, found.event_time]
    return pa.RecordBatch.from_arrays(columns, names=[*SOURCE_COLUMNS, *SCREENED_COLUMNS])


def _utf8_or_none(value: bytes | None) -> str | None:
    if value is None:
        return None
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return None


def screen_batches(batches, heartbeat_topic: str, max_record_bytes: int):
    """:func:`screen_batch` over a partition's record batches (the ``mapInArrow`` function)."""
    for batch in batches:
        yield screen_batch(batch, heartbeat_topic, max_record_bytes)


def parse_screened(records, membership_topic: str, heartbeat_topic: str, max_record_bytes: int):
    """The heartbeat topic's Kafka source rows parsed as :func:`~streaming.job.parse.parse_records`
    parses them, the recognised heartbeats through the screen instead.

    The same columns with the same values for every record; only the columns the job reads of a
    recognised heartbeat (kind, group, member, event time; no refusal reason, no task lags) are
    filled: its other fields stay null. One Python step before the parse, which then meets a null
    value for every recognised record (the cheapest row it has: it refuses it as empty at once,
    a reason overwritten here).

    The job reads heartbeats with :func:`screened_input`, which packs what this recognises in the
    same step; this per-record view of the same recognition is what the exactness test and
    bench/parse.py compare with the parse record by record."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    from streaming.job.parse import parse_records

    source = records.select(*SOURCE_COLUMNS)
    schema = StructType([*source.schema.fields, StructField(SCREENED_GROUP_ID, StringType()),
                         StructField(SCREENED_MEMBER_ID, StringType()), StructField(SCREENED_EVENT_TIME, LongType())])
    screened = source.mapInArrow(functools.partial(screen_batches, heartbeat_topic=heartbeat_topic,
                                                   max_record_bytes=max_record_bytes), schema)
    parsed = parse_records(screened, membership_topic, heartbeat_topic, max_record_bytes, carry=SCREENED_COLUMNS)
    # The parse already gives a recognised record its kind (the screen checked the topic) and no
    # task lags (its value is null); the fields the screen cut out and the reason are set here.
    recognised = F.col(SCREENED_GROUP_ID).isNotNull()
    overrides = {"group_id": F.col(SCREENED_GROUP_ID), "member_id": F.col(SCREENED_MEMBER_ID),
                 "event_time": F.col(SCREENED_EVENT_TIME), "reject_reason": F.lit(None)}
    return parsed.select(*[F.when(recognised, overrides[c]).otherwise(F.col(c)).alias(c) if c in overrides
                           else F.col(c) for c in parsed.columns if c not in SCREENED_COLUMNS])


#: Where the screen's packed and clock rows carry their values (by :data:`INPUT_COLUMNS` name):
#: the parse after the screen has columns of the plain names of its own.
_PACKED = {"group_key": "packed_group_key", "kind": "packed_kind", "member_id": "packed_member_id",
           "event_time": "packed_event_time"}


@functools.cache
def _packed_fields():
    """The Arrow fields the screen's step adds to the Kafka columns (the Spark schema is built from
    them): a packed or clock row's values, and the packed heartbeat times and weights."""
    import pyarrow as pa

    from streaming.job.operator_input import BEAT_TIMES, BEAT_WEIGHTS

    return (pa.field(_PACKED["group_key"], pa.string()), pa.field(_PACKED["kind"], pa.string()),
            pa.field(_PACKED["member_id"], pa.string()), pa.field(_PACKED["event_time"], pa.int64()),
            BEAT_TIMES, BEAT_WEIGHTS)


def screened_input(records, membership_topic: str, heartbeat_topic: str, max_record_bytes: int,
                   reduce_within_ms: int | None):
    """The heartbeat topic's Kafka source rows as the stateful operator's rows
    (:func:`~streaming.job.operator_input.compacted_input` of the parse), the canonical heartbeats
    recognised, packed and reduced in one Python step before the parse.

    The same rows as the parse, narrowing and packing would give, up to how heartbeats are grouped
    into packed rows and how many clock rows there are. One Arrow step
    (:func:`screen_and_pack_batches`) recognises the canonical heartbeats, packs each member's (with
    the reduction when ``reduce_within_ms`` is given) and adds a clock row at their newest time;
    what it hands back to the JVM is the packed rows and the records it left to the parse, nothing
    else. The parse then reads only those (a packed row's null value is its cheapest case, its
    results overwritten here). A heartbeat the parse accepts gets a clock row of its own at its event
    time, so that the watermark still follows every valid heartbeat (operator_input.CLOCK); those are
    rare (another serialiser), and travel unpacked, each standing for one record.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_type
    from pyspark.sql.types import ArrayType, LongType, StructField, StructType

    from streaming.job.operator_input import CLOCK, INPUT_COLUMNS, narrow_input
    from streaming.job.parse import HEARTBEAT, parse_records

    source = records.select(*SOURCE_COLUMNS)
    # Every source column nullable: packed and clock rows have no Kafka record of their own.
    schema = StructType([*[StructField(f.name, f.dataType, True) for f in source.schema.fields],
                         *[StructField(f.name, from_arrow_type(f.type)) for f in _packed_fields()]])
    screened = source.mapInArrow(functools.partial(screen_and_pack_batches, heartbeat_topic=heartbeat_topic,
                                                   max_record_bytes=max_record_bytes,
                                                   reduce_within_ms=reduce_within_ms), schema)
    carry = (*_PACKED.values(), "beat_times", "beat_weights")
    narrow = narrow_input(parse_records(screened, membership_topic, heartbeat_topic, max_record_bytes, carry=carry),
                          carry=carry)
    packed = F.col(_PACKED["kind"]).isNotNull()
    parsed_beat = ~packed & (F.col("kind") == HEARTBEAT) & F.col("reject_reason").isNull()
    # A parsed heartbeat twice: itself, and a clock row at its time (False, True).
    copies = F.explode(F.when(parsed_beat, F.array(F.lit(False), F.lit(True))).otherwise(F.array(F.lit(False))))
    clock = F.col("clock_copy")
    own = {
        "group_key": F.when(clock, F.lit("")).when(packed, F.col(_PACKED["group_key"])).otherwise(F.col("group_key")),
        "kind": F.when(clock, F.lit(CLOCK)).when(packed, F.col(_PACKED["kind"])).otherwise(F.col("kind")),
        "member_id": F.when(packed, F.col(_PACKED["member_id"])).when(~clock, F.col("member_id")),
        "event_time": F.when(packed, F.col(_PACKED["event_time"])).otherwise(F.col("event_time")),
        "reject_reason": F.when(~packed, F.col("reject_reason")),
        "payload": F.when(~packed & ~clock, F.col("payload")),
        "beat_times": F.when(clock, F.array().cast(ArrayType(LongType()))).otherwise(F.col("beat_times")),
        "beat_weights": F.col("beat_weights"),
    }
    return narrow.select("*", copies.alias("clock_copy")).select(*[own[c].alias(c) for c in INPUT_COLUMNS])


def screen_and_pack_batches(batches, heartbeat_topic: str, max_record_bytes: int, reduce_within_ms: int | None):
    """The Arrow side of :func:`screened_input` (one input partition's record batches): the
    records the screen does not recognise as they come, the recognised heartbeats packed as
    :func:`~streaming.job.operator_input.pack_heartbeats` packs them."""
    from streaming.job.operator_input import pack_heartbeats

    split = functools.partial(_split_screened, heartbeat_topic=heartbeat_topic, max_record_bytes=max_record_bytes)
    yield from pack_heartbeats(batches, split, reduce_within_ms, _PACKED)


def _split_screened(batch, heartbeat_topic: str, max_record_bytes: int):
    """A batch of Kafka source rows as :func:`~streaming.job.operator_input.pack_heartbeats` takes
    it: the records left to the parse (with the packed columns, null), the recognised heartbeats."""
    import pyarrow as pa
    import pyarrow.compute as pc

    found = recognise(batch, heartbeat_topic, max_record_bytes)
    left = pa.Table.from_batches([batch]).select(list(SOURCE_COLUMNS)).filter(pc.invert(found.mask))
    for f in _packed_fields():
        left = left.append_column(f, pa.nulls(left.num_rows, f.type))
    plain = pa.table({"group_key": found.group_id.filter(found.mask), "member_id": found.member_id.filter(found.mask),
                      "event_time": found.event_time.filter(found.mask)})
    return left.schema, left, plain, pc.max(found.event_time).as_py()
