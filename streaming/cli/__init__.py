"""Subcommands of the ``rebalance-monitor`` CLI; see :mod:`streaming.cli.main`."""
