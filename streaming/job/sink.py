"""Writing a micro-batch of the processor's output to the Delta tables, idempotently.

The processor's output for a batch is small next to its input (a few rows per group that changed,
one stats row per state bucket), so the sink collects it to the driver once, as Arrow, and appends
each table's rows with delta-rs (the ``deltalake`` package): a commit costs about 20 ms there,
against about 330 ms for a Spark Delta write of the same rows, which runs a Spark job per table
(docs/benchmarks/job.md). The tables are ordinary Delta tables; Spark reads and writes them as
before.

Exactly once: each table's commit for batch N carries Delta's own transaction marker, app id
``output.app_id`` and version N (what Spark's ``txnAppId``/``txnVersion`` write options record), and
``userMetadata`` = ``{"app_id": ..., "batch_id": N}`` so that ``DESCRIBE HISTORY`` shows the batch.
If the job dies after some tables committed batch N and Spark replays it, the tables that hold N
already are skipped and the others written: no duplicates, no gaps.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from schemas import tables
from schemas.arrow import table_arrow_schema

from streaming.config import OutputConfig
from streaming.errors import MonitorError
from streaming.job.processor import STATS_TABLE
from streaming.job.row_blocks import block_table, decode_block

OUTPUT_TABLES = (tables.ASSIGNMENTS, tables.REVOCATIONS, tables.BALANCE_METRICS, tables.MEMBER_EVENTS,
                 tables.REJECTED_EVENTS, tables.ASSIGNMENT_CHECKS, tables.ALERTS)
_STATS_COLUMNS = ("records", "membership_accepted", "heartbeats_accepted", "heartbeats_reduced", "late",
                  "rejected", "unknown_member_heartbeats", "groups")


def batch_marker(app_id: str, batch_id: int) -> str:
    """The ``userMetadata`` of a table commit that holds batch ``batch_id`` of job ``app_id``."""
    return json.dumps({"app_id": app_id, "batch_id": batch_id}, separators=(",", ":"))


class DeltaAppender:
    """Appends batches to Delta tables, each batch at most once per table.

    One per query run. It keeps each table open between batches, so a write reads only the commits
    made since the previous one; which batch a table holds comes from the table's own transaction
    marker for ``app_id``, so a new run (after a crash) needs no memory of the old one.
    """

    def __init__(self, app_id: str, storage_options: dict[str, str] | None = None):
        """``storage_options``: delta-rs' settings for object storage
        (:meth:`~streaming.storage.StorageConfig.delta_options`); None on the local disk."""
        self.app_id = app_id
        self._storage_options = storage_options or None
        self._tables: dict[str, object] = {}  # path -> deltalake.DeltaTable

    def last_batch(self, path: str) -> int:
        """The highest batch id this app committed to the table at ``path`` (-1: none, or no table)."""
        table = self._table(path)
        if table is None:
            return -1
        version = table.transaction_version(self.app_id)
        return -1 if version is None else version

    def append_once(self, data: pa.Table, path: str, batch_id: int) -> bool:
        """Append ``data`` as batch ``batch_id`` unless the table holds it already; whether it wrote."""
        from deltalake import CommitProperties, Transaction, write_deltalake

        if batch_id <= self.last_batch(path):
            return False
        table = self._tables.get(path)
        write_deltalake(
            table if table is not None else path, data, mode="append",
            storage_options=None if table is not None else self._storage_options,
            # A release that adds columns to a table keeps appending to the tables of the previous
            # one (old rows read the new columns as null).
            schema_mode="merge",
            # For a table this write creates: a log checkpoint every 100 commits, not Delta's 10.
            # Every table is committed in every batch, so with 10 they all checkpointed in the same
            # batch, every 10th: with Spark's writer that batch's sink took 8-12 s instead of 2 s.
            configuration=None if table is not None else {"delta.checkpointInterval": "100"},
            commit_properties=CommitProperties(
                app_transactions=[Transaction(self.app_id, batch_id)],
                custom_metadata={"userMetadata": batch_marker(self.app_id, batch_id)}))
        return True

    def _table(self, path: str):
        from deltalake import DeltaTable

        table = self._tables.get(path)
        if table is None:
            if not DeltaTable.is_deltatable(path, storage_options=self._storage_options):
                return None
            table = self._tables[path] = DeltaTable(path, storage_options=self._storage_options)
        else:
            # Commits made since (ours, or an OPTIMIZE by someone else): a few small files.
            table.update_incremental()
        return table


def table_rows(output: pa.Table, table: str) -> pa.Table:
    """The rows of ``table`` in the processor's ``output`` (table, group_id, payload), typed: its
    JSON rows, then its Arrow blocks (streaming.job.row_blocks), each in output order."""
    schema = table_arrow_schema(table)
    def payloads(name: str) -> pa.ChunkedArray:
        return output.filter(pc.equal(output["table"], name))["payload"]

    blocks = [decode_block(payload) for payload in payloads(block_table(table)).to_pylist()]
    parts = [_json_rows(payloads(table), table, schema), *blocks]
    return pa.concat_tables([part.select(schema.names).cast(schema) for part in parts])


def _json_rows(payloads: pa.ChunkedArray, table: str, schema: pa.Schema) -> pa.Table:
    if len(payloads) == 0:
        return schema.empty_table()
    # One JSON document per line: json.dumps never writes a raw newline inside a document.
    text = "\n".join(payloads.to_pylist()).encode()
    # A field the table does not have is an error, not a silent drop: the engine's rows are typed
    # (schemas/rows.py), so one can only come from a bug, and it must not vanish.
    options = pa_json.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error")
    try:
        return pa_json.read_json(io.BytesIO(text), parse_options=options, read_options=pa_json.ReadOptions(
            use_threads=False, block_size=max(1 << 20, len(text) + 1)))
    except pa.ArrowInvalid as exc:
        unknown = sorted({key for p in payloads.to_pylist() for key in json.loads(p)} - set(schema.names))
        what = f"unknown column(s) {', '.join(unknown)}" if unknown else str(exc)
        raise MonitorError(f"rows for table {table} do not fit its schema: {what}") from None


def ingest_row(output: pa.Table, batch_id: int) -> pa.Table:
    """The batch's ``ingest_metrics`` row: the processor's per-bucket stats rows summed."""
    stats = output.filter(pc.equal(output["table"], STATS_TABLE))
    totals = dict.fromkeys(_STATS_COLUMNS, 0)
    newest = None
    for payload in stats["payload"].to_pylist():
        for column, value in json.loads(payload).items():
            if column in totals:
                totals[column] += value or 0
            elif column == "max_event_time" and value is not None:
                newest = value if newest is None else max(newest, value)
    lag = None if newest is None else int(time.time() * 1000) - newest
    row = {"batch_id": batch_id, **totals, "max_event_time": newest, "event_time_lag_ms": lag}
    schema = table_arrow_schema(tables.INGEST_METRICS)
    return pa.Table.from_pylist([row], schema=schema)


def output_tables(output: pa.Table, batch_id: int) -> Iterable[tuple[str, pa.Table]]:
    """(table, rows) for every table the batch has rows for, ingest_metrics included."""
    present = set(output["table"].unique().to_pylist())
    for table in OUTPUT_TABLES:
        if table in present or block_table(table) in present:
            yield table, table_rows(output, table)
    if STATS_TABLE in present:
        yield tables.INGEST_METRICS, ingest_row(output, batch_id)


def write_batch(batch, batch_id: int, output: OutputConfig, appender: DeltaAppender,
                alert_dispatcher=None) -> dict[str, pa.Table]:
    """foreachBatch: compute the batch once (to Arrow, on the driver) and append every table."""
    return append_batch(batch.toArrow(), batch_id, output, appender, alert_dispatcher)


def append_batch(rows: pa.Table, batch_id: int, output: OutputConfig, appender: DeltaAppender,
                 alert_dispatcher=None) -> dict[str, pa.Table]:
    """Append a computed batch (the processor's output rows) to every table it has rows for;
    returns the rows written, by table.

    The tables are appended concurrently: each commit is mostly delta-rs work outside the GIL and
    file I/O, so a batch's five to eight commits take about the time of two. Every table gets its
    own marker, so the order of the commits does not matter for exactly once."""
    written = list(output_tables(rows, batch_id))
    with ThreadPoolExecutor(max_workers=len(written) or 1, thread_name_prefix="delta-append") as pool:
        commits = [pool.submit(appender.append_once, data, output.table_path(table), batch_id)
                   for table, data in written]
        for commit in commits:
            commit.result()  # the first failure fails the batch; Spark retries it, and the marker skips what committed
    alerts = dict(written).get(tables.ALERTS)
    if alert_dispatcher is not None and alerts is not None:
        # After the table commit and before the batch commit: a crash in between replays the
        # batch, and the dispatcher's outbox ignores transitions it already holds.
        alert_dispatcher.submit(alerts.to_pylist())
    return dict(written)
