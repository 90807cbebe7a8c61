"""A run of one table's rows handed from the stateful operator to the sink as one Arrow block.

The operator's output is ``(table, group_id, payload)`` rows, the payload a row's JSON, which the
sink parses with the table's Arrow schema. That is cheap for the few rows of an ordinary batch, and
costly for a huge group's generation: 10,000 ``assignments`` rows holding 500,000 partitions were
9.9 MiB of JSON from the Python worker through the JVM to the driver, which the sink took 0.16-0.41 s
to parse (docs/benchmarks/job.md). So the operator writes a large run of consecutive rows of such
a table (:data:`MIN_BLOCK_ITEMS`) as one row whose table is :func:`block_table` of it and whose
payload is the rows as an Arrow IPC stream (zstd-compressed, base64 text: the output column is a
string), built from the rows' columns (:func:`schemas.partition_list.partitions_array`): 2.1 MiB for
that generation, read by the sink in about 0.015 s. Same rows, same types: the block has the table's
own schema. Small runs stay JSON rows, which cost less than a block's fixed cost.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from operator import attrgetter

import pyarrow as pa

from schemas import tables
from schemas.arrow import table_arrow_schema
from schemas.partition_list import partitions_array
from schemas.rows import TableRow

#: Tables whose rows travel as blocks: those a huge group writes one row per member of.
BLOCK_TABLES = frozenset({tables.ASSIGNMENTS})
#: A run of rows becomes a block from this many rows plus partitions on. A block has a fixed cost
#: (the IPC stream and its compression: 2.2 ms to write and 0.8 ms to read for a 10-member
#: generation, whose JSON rows cost 0.075 ms), which a large run repays many times over (a
#: 10,000-member generation of 500,000 partitions: 0.08 s to write and 0.02 s to read, against
#: 0.05 s and 0.18-0.45 s as JSON); small groups' generations stay JSON.
MIN_BLOCK_ITEMS = 5_000
_SUFFIX = ":arrow"
_WRITE_OPTIONS = pa.ipc.IpcWriteOptions(compression="zstd")


def block_table(table: str) -> str:
    """The operator output's table name for blocks of ``table``'s rows."""
    return table + _SUFFIX


def worth_a_block(rows: Sequence[TableRow], min_items: int = MIN_BLOCK_ITEMS) -> bool:
    """Whether a run of rows of a block table is large enough to travel as a block."""
    items = len(rows)
    for row in rows:
        if items >= min_items:
            return True
        partitions = row.get("partitions")
        items += len(partitions) if partitions is not None else 0
    return items >= min_items


def encode_block(rows: Sequence[TableRow]) -> str:
    """``rows`` (all of one table) as a block's payload."""
    schema = table_arrow_schema(rows[0].TABLE)
    # Every column of every row in one C call per row, then transposed (a getattr per row and column
    # in Python cost 0.1 s for a huge generation's 10,000 rows). A block table has many columns, so
    # the getter returns a tuple.
    values_by_column = zip(*map(attrgetter(*schema.names), rows))
    columns = [partitions_array(values, f.type) if f.name == "partitions" else pa.array(values, f.type)
               for f, values in zip(schema, values_by_column)]
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema, options=_WRITE_OPTIONS) as writer:
        writer.write_batch(pa.record_batch(columns, schema=schema))
    return base64.b64encode(sink.getvalue()).decode("ascii")


def decode_block(payload: str) -> pa.Table:
    """The rows of a block's payload, with their table's schema."""
    return pa.ipc.open_stream(base64.b64decode(payload)).read_all()
