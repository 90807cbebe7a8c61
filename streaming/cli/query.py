"""``rebalance-monitor query``: SQL over the Delta tables and the ready views (docs/sql.md).

Starts a local Spark session, registers the tables under their names and the views of
:mod:`streaming.reporting.views`, runs one read-only statement and prints the rows as a table, CSV or JSON
Lines. ``--list`` prints every table and view with its columns.
"""

from __future__ import annotations

import argparse
import csv
import io
import re
import sys
from pathlib import Path


from streaming.config import load_config
from streaming.errors import QueryError

FORMATS = ("table", "csv", "json")
#: Rows the table format prints unless --limit says otherwise (csv and json print every row).
DEFAULT_TABLE_LIMIT = 1000
#: Statements the command runs: queries and the catalog's read-only commands. Anything else
#: (INSERT, DELETE, MERGE, DROP, CREATE, SET, ...) could change the history or the session.
READ_ONLY_STATEMENTS = ("SELECT", "WITH", "VALUES", "TABLE", "FROM", "SHOW", "DESCRIBE", "DESC", "EXPLAIN")
_WRITE_NODES = re.compile(r"InsertInto|DeleteFrom|UpdateTable|MergeInto|Create|Replace|Drop|Alter|Truncate|"
                          r"Cache|Refresh|Set[A-Z]|Command$")
_READ_COMMANDS = re.compile(r"^(Show|Describe|Explain)")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "query", help="run SQL over the Delta tables and ready views (see docs/sql.md)",
        description=__doc__.splitlines()[0].split(": ", 1)[1],
        epilog="Tables: assignments, revocations, balance_metrics, member_events, rejected_events, "
               "ingest_metrics. Views: current_assignment, rebalance_history, group_health. "
               "Example: rebalance-monitor query \"SELECT * FROM group_health ORDER BY rebalance_rate_per_hour DESC\"")
    parser.add_argument("sql", nargs="?", help="one SQL statement (SELECT, WITH, SHOW, DESCRIBE, EXPLAIN); "
                                               "- reads it from standard input")
    parser.add_argument("--list", action="store_true", help="print the tables and views with their columns")
    parser.add_argument("--output", help="root directory (or URI) of the Delta tables (default: the config's, ./data)")
    parser.add_argument("--config", help="TOML file (default conf/rebalance-monitor.toml)")
    parser.add_argument("--format", choices=FORMATS, default="table", help="output format (default table)")
    parser.add_argument("--limit", type=int, default=None, metavar="N",
                        help=f"print at most N rows (default {DEFAULT_TABLE_LIMIT} for table, all for csv and json)")
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    sql = sys.stdin.read() if args.sql == "-" else args.sql
    if not args.list and not (sql and sql.strip()):
        raise QueryError("give a SQL statement (or - to read it from standard input), or --list")
    if args.limit is not None and args.limit < 0:
        raise QueryError(f"--limit must not be negative, got {args.limit}")
    config, spark, registered = open_history(args.config, args.output)
    if not registered.tables and not args.list:
        raise QueryError(f"no Delta tables under {config.output.table_path('')} (has the job run there?)")
    if args.list:
        sys.stdout.write(list_names(spark, registered))
        return 0
    limit = args.limit if args.limit is not None else (DEFAULT_TABLE_LIMIT if args.format == "table" else None)
    text, truncated = run_sql(spark, sql, args.format, limit)
    sys.stdout.write(text)
    if truncated:
        print(f"(first {limit} rows; --limit N for more)", file=sys.stderr)
    return 0


def open_history(config_path, output):
    """The job's tables and views in a local session, for ``query`` and ``report``: the config (with
    ``--output`` over it), the session, and what :func:`register_views` registered."""
    from streaming.reporting.views import register_views

    config = load_config(config_path).with_overrides(output=output)
    root = config.output.root
    if "://" not in root and not Path(root).is_dir():
        raise QueryError(f"output directory {Path(root).resolve()} does not exist "
                         "(run the job first, or point --output at its Delta root)")
    spark = query_session(config)
    return config, spark, register_views(spark, config.output)


def query_session(config):
    """The Spark session the ``query`` and ``report`` commands read the tables with: quiet logs,
    and an error in a statement shown once, as one line."""
    from streaming.job.spark_session import build_spark_session

    spark = build_spark_session(config.spark, app_name="rebalance-monitor-query",
                                extra={"spark.sql.pyspark.jvmStacktrace.enabled": "false"})
    # An error in the statement reaches the user once, as one line: not as executor logs, nor as
    # PySpark's own JSON log record of it with the Java stack.
    spark.sparkContext.setLogLevel("FATAL")
    from pyspark.logger import PySparkLogger

    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).disabled = True
    return spark


def _one_line(exc: Exception) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return (lines[0] if lines else type(exc).__name__).rstrip(";")


def check_read_only(spark, sql: str) -> None:
    """Refuse statements that would write, drop or reconfigure anything (raises QueryError)."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException
    from pyspark.errors.exceptions.captured import convert_exception

    try:
        plan = spark._jsparkSession.sessionState().sqlParser().parsePlan(sql)
    except PySparkException as exc:
        raise QueryError(_one_line(exc)) from None
    except Py4JJavaError as exc:  # the parser called directly: PySpark has not converted its error
        raise QueryError(_one_line(convert_exception(exc.java_exception))) from None
    keyword = re.sub(r"^(\s|\(|--[^\n]*\n|/\*.*?\*/)+", "", sql, flags=re.S).split(None, 1)
    first = keyword[0].upper() if keyword else ""
    if first not in READ_ONLY_STATEMENTS:
        raise QueryError(f"only read-only statements run here ({', '.join(READ_ONLY_STATEMENTS)}); "
                         f"got {first or 'nothing'}")
    for line in plan.treeString().splitlines():
        node = re.sub(r"^[\s:|+\-']*", "", line).split(" ", 1)[0]
        if _WRITE_NODES.search(node) and not _READ_COMMANDS.match(node):
            raise QueryError(f"only read-only statements run here; this one has {node}")


def run_sql(spark, sql: str, fmt: str = "table", limit: int | None = None) -> tuple[str, bool]:
    """Run one statement; return (the rows formatted as ``fmt``, whether ``limit`` cut rows off)."""
    from pyspark.errors import PySparkException

    check_read_only(spark, sql)
    try:
        df = spark.sql(sql)
        if limit is not None:
            df = df.limit(limit + 1)
        rows, columns = _collect(df, fmt)
    except PySparkException as exc:
        raise QueryError(_one_line(exc)) from None
    truncated = limit is not None and len(rows) > limit
    rows = rows[:limit] if truncated else rows
    if fmt == "json":
        return "".join(r + "\n" for r in rows), truncated
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(["" if v is None else v for v in r] for r in rows)
        return buf.getvalue(), truncated
    return format_table(columns, rows), truncated


def _collect(df, fmt: str) -> tuple[list, list[str]]:
    """Rows rendered by Spark itself, so timestamps follow the session time zone (UTC by default)
    and the output does not depend on the machine's: JSON Lines as strings, or lists of strings."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    columns = df.columns
    if fmt == "json":
        line = F.to_json(F.struct(*[F.col(f"`{c}`") for c in columns]), {"ignoreNullFields": "false"})
        return [r[0] for r in df.select(line).collect()], columns
    rendered = []
    for i, field in enumerate(df.schema.fields):
        col = F.col(f"`{field.name}`")
        if isinstance(field.dataType, (T.ArrayType, T.MapType, T.StructType)):
            if fmt == "table" and _is_topic_partitions(field.dataType):
                # Kafka's own spelling of a TopicPartition list: t0-0, t0-1
                col = F.array_join(F.transform(col, lambda tp: F.concat_ws("-", tp["topic"], tp["partition"])), ", ")
            else:
                col = F.to_json(col)
        elif isinstance(field.dataType, (T.TimestampType, T.TimestampNTZType)):
            col = F.date_format(col, "yyyy-MM-dd HH:mm:ss.SSS")
        else:
            col = col.cast("string")
        rendered.append(col.alias(f"c{i}"))
    return [list(r) for r in df.select(*rendered).collect()], columns


def _is_topic_partitions(data_type) -> bool:
    from pyspark.sql import types as T

    element = getattr(data_type, "elementType", None)
    return isinstance(element, T.StructType) and element.fieldNames() == ["topic", "partition"]


def format_table(columns: list[str], rows: list[list]) -> str:
    if len(columns) == 1 and any(v and "\n" in v for r in rows for v in r):  # EXPLAIN and the like
        return "".join(f"{r[0]}\n" for r in rows)
    cells = [[("NULL" if v is None else v) for v in r] for r in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+\n"

    def fmt_row(values):
        return "|" + "|".join(f" {v:<{w}} " for v, w in zip(values, widths)) + "|\n"

    out = line + fmt_row(columns) + line + "".join(fmt_row(r) for r in cells) + line
    return out + f"({len(rows)} row{'s' if len(rows) != 1 else ''})\n"


def list_names(spark, registered) -> str:
    """Every table and view with its columns and types."""
    out = []
    for name in registered.names:
        kind = "view" if name in registered.views else "table"
        note = " (not written yet: empty)" if name in registered.missing else ""
        out.append(f"{name} ({kind}){note}")
        for field in spark.table(name).schema.fields:
            out.append(f"  {field.name}  {field.dataType.simpleString()}")
        out.append("")
    return "\n".join(out)
