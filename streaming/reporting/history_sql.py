"""The tables and views in this process, without Spark: DataFusion over the Delta tables.

DataFusion is the SQL engine inside the ``deltalake`` package the job's sink writes with
(``deltalake.QueryBuilder``), so ``rebalance-monitor query`` and ``report`` answer in well under a
second instead of paying Spark's start-up (20 s and more) to read a few thousand rows. The names
are the same as in a Spark session (:mod:`streaming.reporting.views`): every table of
``schemas/tables.py`` (an empty stand-in for one not written yet) and the ready views, from the same
definitions.

Statements are read-only: the history is written once, by the job. A statement is checked before it
runs, from its first keyword and from DataFusion's logical plan of it (``EXPLAIN`` plans without
running anything): a plan that would write a table or a file, or change the session, is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from schemas.tables import TABLES

from streaming.config import OutputConfig
from streaming.errors import QueryError
from streaming.reporting.views import DATAFUSION, VIEW_NAMES, Registered, view_statements

#: Statements that run: queries and the catalog's read-only commands.
READ_ONLY_STATEMENTS = ("SELECT", "WITH", "VALUES", "SHOW", "DESCRIBE", "DESC", "EXPLAIN")
#: Logical plan nodes that write or reconfigure (DataFusion's LogicalPlan: Dml, Copy, Ddl, Statement).
_WRITE_NODES = re.compile(r"^(Dml|CopyTo|Create\w*|Drop\w*|SetVariable|ResetVariable|Transaction\w*|"
                          r"Prepare|Execute|Deallocate|Statement)\b")
#: What may come between EXPLAIN and the statement it explains.
_EXPLAIN_OPTIONS = re.compile(r"^EXPLAIN(\s+(ANALYZE|VERBOSE|FORMAT\s+\w+))*\s+", re.I)
#: Leading blanks, parentheses and comments before a statement's first keyword.
_LEADING = re.compile(r"^(\s|\(|--[^\n]*(\n|$)|/\*.*?\*/)+", re.S)
#: Leading blanks and comments (the parentheses of a query stay: they are part of it).
_COMMENTS = re.compile(r"^(\s|--[^\n]*(\n|$)|/\*.*?\*/)+", re.S)
#: DataFusion settings for these reads: information_schema backs SHOW TABLES and SHOW COLUMNS.
SESSION_CONFIG = {"datafusion.catalog.information_schema": "true"}


def one_line(exc: BaseException) -> str:
    """DataFusion's message on one line (it spreads "caused by" chains and hints over several)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip() and ln.strip() != "caused by"]
    text = ""
    for line in lines:  # a cause after a colon, a hint after a sentence
        text += line if not text else (" " if text.endswith((".", "?", ":")) else ": ") + line
    return text or type(exc).__name__


def sql_string(value: str) -> str:
    """``value`` as a SQL string literal. DataFusion reads a quote doubled as a quote and nothing
    else in a standard literal (no backslash escapes), so free text such as a group id cannot end
    the literal early."""
    return "'" + value.replace("'", "''") + "'"


def _first_keyword(sql: str) -> str:
    words = _LEADING.sub("", sql).split(None, 1)
    return words[0].upper().rstrip(";") if words else ""


@dataclass
class HistorySql:
    """A DataFusion session with the job's tables and the ready views registered."""

    output: OutputConfig
    registered: Registered
    _builder: object  # deltalake.QueryBuilder

    @property
    def names(self) -> tuple[str, ...]:
        return self.registered.names

    def check_read_only(self, sql: str) -> None:
        """Refuse a statement that would write, drop or reconfigure anything (raises QueryError)."""
        first = _first_keyword(sql)
        if first not in READ_ONLY_STATEMENTS:
            raise QueryError(f"only read-only statements run here ({', '.join(READ_ONLY_STATEMENTS)}); "
                             f"got {first or 'nothing'}")
        statement = sql
        while _first_keyword(statement) == "EXPLAIN":  # EXPLAIN ANALYZE runs what it explains: check that
            statement = _EXPLAIN_OPTIONS.sub("", _COMMENTS.sub("", statement), count=1)
            if _first_keyword(statement) not in READ_ONLY_STATEMENTS:
                raise QueryError(f"only read-only statements run here; EXPLAIN of {_first_keyword(statement) or 'nothing'}")
        if _first_keyword(statement) in ("SHOW", "DESCRIBE", "DESC"):
            return  # they read the catalog, and DataFusion does not EXPLAIN them
        for row in self._run(f"EXPLAIN {statement}").to_pylist():
            if row["plan_type"] != "logical_plan":
                continue
            for line in row["plan"].splitlines():
                node = line.strip()
                if _WRITE_NODES.match(node):
                    raise QueryError(f"only read-only statements run here; this one has {node.split(':')[0]}")

    def execute(self, sql: str) -> pa.RecordBatchReader:
        """Run one read-only statement; its rows as a stream of Arrow batches."""
        self.check_read_only(sql)
        return self._stream(sql)

    def query(self, sql: str) -> pa.Table:
        """Run one read-only statement; all its rows."""
        return read_all(self.execute(sql))

    def schema(self, name: str) -> pa.Schema:
        """The columns of a table or view, as the engine gives them."""
        return self._run(f"SELECT * FROM {name} LIMIT 0").schema

    def _run(self, sql: str) -> pa.Table:
        """A statement of ours, not the user's: no read-only check."""
        return read_all(self._stream(sql))

    def _stream(self, sql: str) -> pa.RecordBatchReader:
        try:
            return pa.RecordBatchReader.from_stream(self._builder.execute(sql))
        except Exception as exc:  # deltalake raises DeltaError or a bare Exception from the engine
            raise QueryError(one_line(exc)) from None


def without_views(data_type: pa.DataType) -> pa.DataType:
    """``data_type`` with DataFusion's view types (``string_view``, ...) as their plain forms, which
    every pyarrow conversion (to pandas, to Python lists) handles."""
    t = data_type
    if pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t):
        return pa.list_(pa.field(t.value_field.name, without_views(t.value_type)))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, without_views(f.type)) for f in t])
    return t


def to_pandas(table: pa.Table):
    """The rows as a pandas DataFrame (view types made plain first: pandas cannot take a list of them)."""
    schema = pa.schema([pa.field(f.name, without_views(f.type)) for f in table.schema])
    return table.cast(schema).to_pandas()


def read_all(reader: pa.RecordBatchReader, limit: int | None = None) -> pa.Table:
    """The reader's rows (at most ``limit``); an error while they are computed is a QueryError."""
    batches, rows = [], 0
    try:
        for batch in reader:
            batches.append(batch)
            rows += batch.num_rows
            if limit is not None and rows >= limit:
                break
    except Exception as exc:  # a runtime error in the statement (a bad cast, a division by zero)
        raise QueryError(one_line(exc)) from None
    table = pa.Table.from_batches(batches, schema=reader.schema)
    return table if limit is None else table.slice(0, limit)


def open_history_sql(output: OutputConfig, storage_options: dict[str, str] | None = None) -> HistorySql:
    """The tables under ``output`` (stand-ins for those not written yet) and the ready views;
    ``storage_options``: delta-rs' settings when they are on object storage ([storage])."""
    from deltalake import DeltaTable, QueryBuilder

    root = output.root
    if "://" not in root and not Path(root).is_dir():
        raise QueryError(f"output directory {Path(root).resolve()} does not exist "
                         "(run the job first, or point --output at its Delta root)")
    builder = QueryBuilder(SESSION_CONFIG)
    written = []
    for table in TABLES:
        path = output.table_path(table)
        if DeltaTable.is_deltatable(path, storage_options=storage_options):
            builder.register(table, DeltaTable(path, storage_options=storage_options))
            written.append(table)
    missing = tuple(t for t in TABLES if t not in written)
    history = HistorySql(output, Registered(tables=tuple(written), missing=missing, views=VIEW_NAMES), builder)
    for statement in view_statements(DATAFUSION, missing):
        history._run(statement)
    return history
