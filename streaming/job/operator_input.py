"""What the stateful operator receives: few, narrow, flat columns, a member's heartbeats packed.

Wide rows cost Spark more to move through the Python worker than anything the processor does
(bench/tws_probe.py), so a membership event's fields, a refused record's, or a Streams heartbeat's
task lags travel as one JSON ``payload`` (null for plain heartbeats, the bulk), built by
:func:`narrow_input`; and a member's plain heartbeats of one Kafka partition's slice of the batch
travel as one row (:func:`compacted_input`).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import ArrayType, LongType, StructField, StructType

from schemas.events import MEMBERSHIP_FIELDS

from streaming.job.parse import HEARTBEAT, MEMBERSHIP

#: The kind of a row that carries only time: the newest heartbeat of a slice of the input, the one
#: row with an event-time column (see :func:`compact_heartbeats`). It stands for no record.
CLOCK = "clock"

REJECTED_FROM_INPUT = ("group_id", "event_id", "source_topic", "source_partition", "source_offset", "record_key",
                        "raw_value", "event_time", "kafka_timestamp")
MEMBERSHIP_COLUMNS = tuple(f.name for f in MEMBERSHIP_FIELDS)
#: What the operator receives per row (a map column alone, even all null, cost 1.5 s per 75,000
#: rows in Spark's Arrow writer, so none travels).
#: ``beat_times`` carries the event times of a member's heartbeats packed into one row by
#: :func:`compact_heartbeats` (null on other rows); ``beat_weights`` how many heartbeat records each
#: of them stands for when the reduction dropped some (null: one each; heartbeat_reduction.py).
INPUT_COLUMNS = ("group_key", "kind", "member_id", "event_time", "reject_reason", "payload", "beat_times",
                 "beat_weights")


def narrow_input(parsed, carry: tuple[str, ...] = ()):
    """The operator's input before compaction: :data:`INPUT_COLUMNS` but ``beat_times`` and
    ``beat_weights``, from the parse's rows (and the columns named in ``carry``, unchanged)."""
    from pyspark.sql import functions as F

    refused = F.col("reject_reason").isNotNull()
    # The Kafka record's timestamp is a Spark timestamp; the tables keep epoch milliseconds.
    source = [F.unix_millis(F.col(c)).alias(c) if c == "kafka_timestamp" else F.col(c) for c in REJECTED_FROM_INPUT]
    payload = (F.when(refused, F.to_json(F.struct(*source)))
               .when(F.col("kind") == MEMBERSHIP, F.to_json(F.struct(*[F.col(c) for c in MEMBERSHIP_COLUMNS])))
               .when(F.col("task_lags").isNotNull(), F.to_json(F.struct("task_lags"))))
    # Records that name no group still pass through (to rejected_events) under the "" key.
    group_key = F.coalesce(F.col("group_id"), F.lit("")).alias("group_key")
    return parsed.select(group_key, "kind", "member_id", "event_time", "reject_reason", payload.alias("payload"),
                         *carry)


def compacted_input(narrow, reduce_within_ms: int | None = None):
    """``narrow`` with each member's plain heartbeats of an input partition packed into one row;
    with ``reduce_within_ms`` (``job.min_session_timeout_ms``), only the heartbeats that can change
    a decision (:mod:`streaming.job.heartbeat_reduction`), the others counted in ``beat_weights``.

    Heartbeats are nearly all the traffic, and every row the stateful operator receives costs
    Spark a shuffle write and read and a row-by-row walk in the Python worker's deserialiser
    (bench/tws_probe.py, finding 6). The engine needs only each member's heartbeat times, so a
    member's heartbeats in one Kafka partition's slice of the batch travel as one row whose
    ``beat_times`` lists them and whose ``event_time`` is the newest (what the watermark needs).
    Nothing is lost: the processor unpacks the times, and the engine sorts them itself. Rows with a
    ``payload`` (membership events, refused records, Streams heartbeats with task lags) pass
    through unchanged.
    """
    import functools

    # A new StructType: StructType.add would change the DataFrame's own cached schema in place.
    schema = StructType([*narrow.schema.fields, StructField("beat_times", ArrayType(LongType()), True),
                         StructField("beat_weights", ArrayType(LongType()), True)])
    return narrow.mapInArrow(functools.partial(compact_heartbeats, reduce_within_ms=reduce_within_ms), schema)


def uncompacted_input(narrow):
    """``narrow`` with empty ``beat_times`` and ``beat_weights``: the shape of
    :func:`compacted_input` for records that have nothing to pack (the membership topic's)."""
    from pyspark.sql import functions as F

    return (narrow.withColumn("beat_times", F.lit(None).cast(ArrayType(LongType())))
            .withColumn("beat_weights", F.lit(None).cast(ArrayType(LongType()))))


BEAT_TIMES = pa.field("beat_times", pa.list_(pa.int64()))
BEAT_WEIGHTS = pa.field("beat_weights", pa.list_(pa.int64()))

#: Plain heartbeats packed together at most: a partition's slice of a micro-batch is packed as a
#: whole up to this many (one row per member instead of one per member and Arrow batch), which bounds
#: what the Python worker holds for a slice that was not rate-limited.
PACK_AT_MOST = 1_000_000


def compact_heartbeats(batches, reduce_within_ms: int | None = None):
    """The Arrow side of :func:`compacted_input` (one input partition's record batches).

    A member's plain heartbeats of the whole slice (up to :data:`PACK_AT_MOST` heartbeats) become
    one row; the other rows pass through as they come.

    Each Arrow batch also gets one :data:`CLOCK` row: event time = its newest valid heartbeat, under
    the group key "" (no group). It is the only row the job gives an event-time column, so the
    watermark advances exactly as if every heartbeat had one, while no record can ever fall behind
    it: Spark drops rows behind the watermark before they reach the processor, and a clock row is
    the only thing it may drop (a heartbeat far behind the stream's time is applied instead, and
    counted; it changes nothing).
    """
    yield from pack_heartbeats(batches, _split_parsed, reduce_within_ms)


def _split_parsed(batch):
    """A batch of narrowed rows as :func:`pack_heartbeats` takes it: (the schema out, the rows that
    pass through, the plain heartbeats to pack, the newest valid heartbeat's time or None)."""
    table = pa.Table.from_batches([batch])
    schema = table.schema.append(BEAT_TIMES).append(BEAT_WEIGHTS)
    is_beat = pc.and_(pc.fill_null(pc.equal(table["kind"], HEARTBEAT), False), pc.is_null(table["reject_reason"]))
    # A plain heartbeat: not refused, and no payload (a Streams heartbeat's lags travel there).
    plain_beat = pc.and_(is_beat, pc.is_null(table["payload"]))
    others = table.filter(pc.invert(plain_beat))
    others = (others.append_column(BEAT_TIMES, pa.nulls(others.num_rows, BEAT_TIMES.type))
              .append_column(BEAT_WEIGHTS, pa.nulls(others.num_rows, BEAT_WEIGHTS.type)))
    plain = table.filter(plain_beat).select(["group_key", "member_id", "event_time"])
    return schema, others, plain, pc.max(table["event_time"].filter(is_beat)).as_py()


def pack_heartbeats(batches, split, reduce_within_ms: int | None, names: dict[str, str] | None = None):
    """A partition's record batches with each member's plain heartbeats packed into one row per
    slice of up to :data:`PACK_AT_MOST` heartbeats, and one :data:`CLOCK` row per batch (see
    :func:`compact_heartbeats`).

    ``split(batch)`` says what a batch holds: (the schema out, the rows that pass through in it,
    the plain heartbeats as ``group_key``, ``member_id``, ``event_time``, the newest valid
    heartbeat's time or None). ``names`` maps :data:`INPUT_COLUMNS` to the columns of the schema
    out that take a packed or clock row's values (the same names when not given); the schema's
    other columns are null on those rows."""

    names = names or {}
    waiting: list[pa.Table] = []
    waiting_rows = 0
    schema = None
    for batch in batches:
        schema, passing, plain, newest = split(batch)
        parts = [passing]
        if newest is not None:
            parts.append(_rows_of(schema, names, 1, group_key=pa.array([""]), kind=pa.array([CLOCK]),
                                  event_time=pa.array([newest], pa.int64()),
                                  beat_times=pa.array([[]], BEAT_TIMES.type)))
        yield from pa.concat_tables(parts).to_batches()
        waiting.append(plain)
        waiting_rows += plain.num_rows
        if waiting_rows >= PACK_AT_MOST:
            yield from _packed(pa.concat_tables(waiting), schema, names, reduce_within_ms).to_batches()
            waiting, waiting_rows = [], 0
    if waiting_rows:
        yield from _packed(pa.concat_tables(waiting), schema, names, reduce_within_ms).to_batches()


def _packed(plain, schema, names: dict[str, str], reduce_within_ms: int | None):
    """Plain heartbeats (group_key, member_id, event_time) as packed rows of ``schema``."""

    from streaming.job.heartbeat_reduction import reduce_member_heartbeats

    packed = reduce_member_heartbeats(plain, reduce_within_ms)
    n = packed.num_rows
    return _rows_of(schema, names, n, group_key=packed["group_key"], kind=pa.repeat(HEARTBEAT, n),
                    member_id=packed["member_id"], event_time=packed["event_time"],
                    beat_times=packed["beat_times"], beat_weights=packed["beat_weights"])


def _rows_of(schema, names: dict[str, str], n: int, **values):
    """``n`` rows of ``schema``: ``values`` by their :data:`INPUT_COLUMNS` name in the columns
    ``names`` gives them, every other column null."""

    by_column = {names.get(name, name): array for name, array in values.items()}
    columns = []
    for f in schema:
        array = by_column.get(f.name)
        columns.append(pa.nulls(n, f.type) if array is None else array.cast(f.type))
    # Built against the input's schema: its nullability flags (group_key is never null) must match.
    return pa.Table.from_arrays(columns, schema=schema)
