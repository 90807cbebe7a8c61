"""``rebalance-monitor report``: one group's story as an HTML page with PNG charts (docs/report.md).

Reads the group's generations, assignments, member events and (when present) alerts from the
Delta tables with Spark SQL, draws the charts with matplotlib and writes ``DIR/index.html``
(charts inlined, so the page is one file to send around) with every chart also as a PNG beside it.
"""

from __future__ import annotations

import argparse
import sys


DEFAULT_OUT = "report"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report", help="write a group's rebalance history as an HTML page with PNG charts (see docs/report.md)",
        description=__doc__.splitlines()[0].split(": ", 1)[1],
        epilog="Example: rebalance-monitor report --group orders --since 2026-11-22T00:00:00Z --out report-orders")
    parser.add_argument("--group", required=True, help="the group id")
    parser.add_argument("--since", metavar="TIME",
                        help="only history at or after TIME: ISO-8601 (no offset = UTC) or epoch ms")
    parser.add_argument("--until", metavar="TIME",
                        help="only history at or before TIME: ISO-8601 (no offset = UTC) or epoch ms")
    parser.add_argument("--out", default=DEFAULT_OUT, metavar="DIR",
                        help=f"directory for index.html and the PNGs (default ./{DEFAULT_OUT})")
    # --output as in `query`; --output-root says the same in the report's own words.
    parser.add_argument("--output", "--output-root", dest="output", metavar="PATH",
                        help="root directory (or URI) of the Delta tables (default: the config's, ./data)")
    parser.add_argument("--config", help="TOML file (default conf/rebalance-monitor.toml)")
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    # Imported here, not at the top: the CLI starts without pandas, matplotlib or PySpark.
    from streaming.reporting.report import TimeWindow, load_group_history, write_report
    from streaming.cli.query import open_history

    window = TimeWindow.parse(args.since, args.until)  # bad times fail before Spark starts
    config, spark, _ = open_history(args.config, args.output)
    history = load_group_history(spark, config.output, args.group, window)
    written = write_report(history, args.out)
    print(f"wrote {written.page} ({len(written.charts)} charts: "
          f"{', '.join(p.name for p in written.charts)})", file=sys.stderr)
    return 0
