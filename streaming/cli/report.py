"""``rebalance-monitor report``: one group's story as an HTML page with PNG charts (docs/report.md).

Reads the group's generations, assignments, member events, alerts and assignment checks from the
Delta tables with DataFusion (no Spark), draws the charts with matplotlib and writes
``DIR/index.html`` (charts inlined, so the page is one file to send around) with every chart also
as a PNG beside it.
"""

from __future__ import annotations

import argparse
import sys

DEFAULT_REPORT_DIR = "report"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report", help="write a group's rebalance history as an HTML page with PNG charts (see docs/report.md)",
        description=__doc__.splitlines()[0].split(": ", 1)[1],
        # No abbreviations: "--out" must never be taken for "--output" (the Delta root).
        allow_abbrev=False,
        epilog="Example: rebalance-monitor report --group orders --since 2026-11-22T00:00:00Z --report-dir report-orders")
    parser.add_argument("--group", required=True, metavar="GROUP_ID", help="the group id (required)")
    parser.add_argument("--since", metavar="TIME",
                        help="only history at or after TIME: ISO-8601 (no offset = UTC) or epoch ms")
    parser.add_argument("--until", metavar="TIME",
                        help="only history at or before TIME: ISO-8601 (no offset = UTC) or epoch ms")
    parser.add_argument("--report-dir", metavar="DIR",
                        help=f"directory to write index.html and the PNGs into (default ./{DEFAULT_REPORT_DIR}; "
                             "created if needed, files in it overwritten)")
    parser.add_argument("--output", metavar="ROOT",
                        help="root directory (or URI) of the Delta tables to read (default: the config's "
                             "output.root, ./data), as in run and query")
    parser.add_argument("--config", metavar="FILE", help="TOML file (default conf/rebalance-monitor.toml)")
    # The names before --report-dir and --output settled; kept so that old scripts still run.
    parser.add_argument("--out", dest="old_report_dir", metavar="DIR", help=argparse.SUPPRESS)
    parser.add_argument("--output-root", dest="old_output", metavar="ROOT", help=argparse.SUPPRESS)
    parser.set_defaults(handler=_run)


def _settled(args: argparse.Namespace) -> tuple[str, str | None]:
    """(report directory, Delta root) from the flags, the deprecated spellings included."""
    from streaming.errors import ConfigError

    report_dir, output = args.report_dir, args.output
    for old, new, value, current in (("--out", "--report-dir", args.old_report_dir, report_dir),
                                     ("--output-root", "--output", args.old_output, output)):
        if value is None:
            continue
        if current is not None:
            raise ConfigError(f"{old} is the old name of {new}: give {new} only")
        print(f"rebalance-monitor report: {old} is deprecated, use {new}", file=sys.stderr)
    return (report_dir or args.old_report_dir or DEFAULT_REPORT_DIR), (output or args.old_output)


def _run(args: argparse.Namespace) -> int:
    # Imported here, not at the top: the CLI starts without pandas, matplotlib or pyarrow.
    from streaming.cli.query import open_history
    from streaming.reporting.report import TimeWindow, load_group_history, write_report

    report_dir, output = _settled(args)
    window = TimeWindow.parse(args.since, args.until)  # bad times fail before any table is read
    _, history = open_history(args.config, output)
    written = write_report(load_group_history(history, args.group, window), report_dir)
    print(f"wrote {written.page} ({len(written.charts)} charts: "
          f"{', '.join(p.name for p in written.charts)})", file=sys.stderr)
    return 0
