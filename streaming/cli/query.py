"""``rebalance-monitor query``: SQL over the Delta tables and the ready views (docs/sql.md).

Reads the tables the job wrote under the output root with DataFusion, the SQL engine inside the
``deltalake`` package (no Spark: an answer takes well under a second), with the tables under their
names and the views of :mod:`streaming.reporting.views`; runs one read-only statement and prints
the rows as a table, CSV or JSON Lines. ``--list`` prints every table and view with its columns;
``--spark-sql`` prints the Spark SQL that gives a ``spark-sql`` session the same names.
"""

from __future__ import annotations

import argparse
import base64
import csv
import io
import json
import math
import sys
from datetime import date, datetime, timezone
from decimal import Decimal

from schemas.tables import TABLES

from streaming.config import load_config
from streaming.errors import QueryError
from streaming.reporting.views import VIEW_NAMES

FORMATS = ("table", "csv", "json")
#: Rows the table format prints unless --limit says otherwise (csv and json print every row).
DEFAULT_TABLE_LIMIT = 1000


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "query", help="run SQL over the Delta tables and ready views (see docs/sql.md)",
        description=__doc__.splitlines()[0].split(": ", 1)[1],
        epilog=f"Tables: {', '.join(TABLES)}. Views: {', '.join(VIEW_NAMES)}. "
               "The SQL is DataFusion's (docs/sql.md says where it differs from Spark SQL). "
               "Example: rebalance-monitor query \"SELECT * FROM group_health ORDER BY rebalance_rate_per_hour DESC\"")
    parser.add_argument("sql", nargs="?", metavar="SQL",
                        help="one read-only SQL statement (SELECT, WITH, VALUES, SHOW, DESCRIBE, EXPLAIN); "
                             "- reads it from standard input")
    parser.add_argument("--list", action="store_true", help="print every table and view with its columns, then exit")
    parser.add_argument("--spark-sql", action="store_true",
                        help="print the Spark SQL that registers the tables and views in a spark-sql session "
                             "(for spark-sql -i FILE), then exit")
    parser.add_argument("--output", metavar="ROOT",
                        help="root directory (or URI) of the Delta tables (default: the config's output.root, ./data)")
    parser.add_argument("--config", metavar="FILE", help="TOML file (default conf/rebalance-monitor.toml)")
    parser.add_argument("--format", choices=FORMATS, default="table",
                        help="table (default): for reading; csv: with a header; json: JSON Lines, one object a row")
    parser.add_argument("--limit", type=int, default=None, metavar="N",
                        help=f"print at most N rows (default {DEFAULT_TABLE_LIMIT} for table, all for csv and json)")
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    sql = sys.stdin.read() if args.sql == "-" else args.sql
    listing = args.list or args.spark_sql
    if not listing and not (sql and sql.strip()):
        raise QueryError("give a SQL statement (or - to read it from standard input), --list or --spark-sql")
    if args.limit is not None and args.limit < 0:
        raise QueryError(f"--limit must not be negative, got {args.limit}")
    config, history = open_history(args.config, args.output)
    if args.spark_sql:
        from streaming.reporting.views import spark_sql_script

        sys.stdout.write(spark_sql_script(config.output, history.registered.tables))
        return 0
    if not history.registered.tables and not args.list:
        raise QueryError(f"no Delta tables under {config.output.table_path('')} (has the job run there?)")
    if args.list:
        sys.stdout.write(list_names(history))
        return 0
    limit = args.limit if args.limit is not None else (DEFAULT_TABLE_LIMIT if args.format == "table" else None)
    text, truncated = run_sql(history, sql, args.format, limit)
    sys.stdout.write(text)
    if truncated:
        print(f"(first {limit} rows; --limit N for more)", file=sys.stderr)
    return 0


def open_history(config_path, output):
    """The config (with ``--output`` over it) and the tables and views under its output root, for
    ``query`` and ``report``."""
    from streaming.reporting.history_sql import open_history_sql

    from streaming.storage import is_object_store

    config = load_config(config_path).with_overrides(output=output)
    options = None
    if is_object_store(config.output.root):  # the tables on S3: the job's own [storage] settings
        options = config.storage.delta_options(config.storage.load_credentials())
    return config, open_history_sql(config.output, options)


def run_sql(history, sql: str, fmt: str = "table", limit: int | None = None) -> tuple[str, bool]:
    """Run one statement; return (the rows formatted as ``fmt``, whether ``limit`` cut rows off)."""
    from streaming.reporting.history_sql import read_all

    table = read_all(history.execute(sql), None if limit is None else limit + 1)
    truncated = limit is not None and table.num_rows > limit
    if truncated:
        table = table.slice(0, limit)
    return format_rows(table, fmt), truncated


def format_rows(table, fmt: str) -> str:
    """An Arrow table as ``fmt``: times in UTC (``2023-11-14 22:13:20.000``; ISO-8601 in JSON),
    lists and structs as JSON, and in the table format a list of topic-partitions Kafka's way
    (``t0-0, t0-1``)."""
    columns = table.column_names
    rows = table.to_pylist()
    if fmt == "json":
        return "".join(json.dumps({c: _json_value(r[c]) for c in columns}, ensure_ascii=False,
                                  separators=(",", ":")) + "\n" for r in rows)
    partition_lists = {f.name for f in table.schema if fmt == "table" and _is_topic_partitions(f.type)}
    cells = [[_text(r[c], c in partition_lists) for c in columns] for r in rows]
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(["" if v is None else v for v in r] for r in cells)
        return buf.getvalue()
    return format_table(columns, cells)


def _utc(value: datetime) -> datetime:
    return value.astimezone(timezone.utc).replace(tzinfo=None) if value.tzinfo else value


def _json_value(value):
    """A value as JSON: timestamps as ISO-8601 UTC with milliseconds, nested values alike."""
    if isinstance(value, datetime):
        t = _utc(value)
        return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, list):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items()}
    return value


def _text(value, topic_partitions: bool = False) -> str | None:
    """A value as a cell of the table or CSV format (None stays None: NULL or empty)."""
    if value is None:
        return None
    if topic_partitions:
        return ", ".join(f"{tp['topic']}-{tp['partition']}" for tp in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        t = _utc(value)
        return t.strftime("%Y-%m-%d %H:%M:%S.") + f"{t.microsecond // 1000:03d}"
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, dict)):
        return json.dumps(_json_value(value), ensure_ascii=False, separators=(",", ":"))
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return str(value)


def _is_topic_partitions(data_type) -> bool:
    import pyarrow as pa

    if not (pa.types.is_list(data_type) or pa.types.is_large_list(data_type)):
        return False
    element = data_type.value_type
    return pa.types.is_struct(element) and [element.field(i).name for i in range(element.num_fields)] == [
        "topic", "partition"]


def format_table(columns: list[str], rows: list[list]) -> str:
    if any(v and "\n" in v for r in rows for v in r):  # EXPLAIN and the like: each row as a block
        return "".join("\n".join(v for v in r if v) + "\n" for r in rows)
    cells = [[("NULL" if v is None else v) for v in r] for r in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+\n"

    def fmt_row(values):
        return "|" + "|".join(f" {v:<{w}} " for v, w in zip(values, widths)) + "|\n"

    out = line + fmt_row(columns) + line + "".join(fmt_row(r) for r in cells) + line
    return out + f"({len(rows)} row{'s' if len(rows) != 1 else ''})\n"


def sql_type(data_type) -> str:
    """An Arrow type in the SQL names docs/sql.md and docs/tables.md use (Spark's spelling)."""
    import pyarrow as pa

    t = data_type
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_int32(t) or pa.types.is_int16(t) or pa.types.is_int8(t):
        return "int"
    if pa.types.is_integer(t):
        return "bigint"
    if pa.types.is_float64(t):
        return "double"
    if pa.types.is_float32(t):
        return "float"
    if pa.types.is_timestamp(t):
        return "timestamp"
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t):
        return f"array<{sql_type(t.value_type)}>"
    if pa.types.is_struct(t):
        return "struct<" + ",".join(f"{t.field(i).name}:{sql_type(t.field(i).type)}" for i in range(t.num_fields)) + ">"
    if pa.types.is_map(t):
        return f"map<{sql_type(t.key_type)},{sql_type(t.item_type)}>"
    return str(t)


def list_names(history) -> str:
    """Every table and view with its columns and types."""
    registered = history.registered
    out = []
    for name in registered.names:
        kind = "view" if name in registered.views else "table"
        note = " (not written yet: empty)" if name in registered.missing else ""
        out.append(f"{name} ({kind}){note}")
        for field in history.schema(name):
            out.append(f"  {field.name}  {sql_type(field.type)}")
        out.append("")
    return "\n".join(out)
