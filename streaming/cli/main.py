"""The ``rebalance-monitor`` command: one subcommand per module, each with a ``register`` function.

A command module exposes ``register(subparsers)``, which adds its parser and sets ``handler`` to a
function taking the parsed arguments and returning an exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback
from importlib.metadata import PackageNotFoundError, version

from assignors.errors import RebalanceMonitorError

# Imported lazily by name so that `rebalance-monitor assign` never pays for loading PySpark.
COMMAND_MODULES = (
    "streaming.cli.kafka",
    "streaming.cli.run",
    "streaming.cli.demo",
    "streaming.cli.assign",
    "streaming.cli.simulate",
    "streaming.cli.collect",
    "streaming.cli.query",
    "streaming.cli.report",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rebalance-monitor",
        description="Per-generation history of Kafka group rebalances, computed with Kafka's assignors.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:  # a real missing dependency, not a command still to be written
                raise
            continue
        module.register(subparsers)
    for command in subparsers.choices.values():
        command.add_argument("--verbose", action="store_true",
                             help="on an expected failure, show the stack trace as well as the one-line error")
    return parser


def _version() -> str:
    try:
        return version("rebalance-monitor")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except RebalanceMonitorError as exc:
        if getattr(args, "verbose", False):
            traceback.print_exc()
        print(f"rebalance-monitor {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
