"""The command line itself: its version, and help for every flag of every command."""

from __future__ import annotations

import argparse
import subprocess
import sys

from streaming.cli.main import build_parser


def test_version_prints_the_installed_version():
    from importlib.metadata import version

    out = subprocess.run([sys.executable, "-m", "streaming.cli.main", "--version"], capture_output=True, text=True)
    assert out.returncode == 0
    assert out.stdout.strip() == f"rebalance-monitor {version('rebalance-monitor')}"


def test_every_flag_of_every_command_has_help_text():
    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert {"run", "demo", "kafka", "simulate", "collect", "assign", "query", "report"} <= set(commands.choices)
    for name, command in commands.choices.items():
        assert command.description or command.format_usage(), name
        for action in command._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            assert action.help, f"{name} {'/'.join(action.option_strings) or action.dest} has no help text"


def test_simulate_and_collect_against_a_closed_port_fail_in_seconds_with_one_line():
    for command in (["simulate", "--bootstrap-servers", "127.0.0.1:1", "--connect-timeout", "1", "--duration", "5"],
                    ["collect", "--bootstrap-servers", "127.0.0.1:1", "--once", "--timeout", "1"]):
        done = subprocess.run([sys.executable, "-m", "streaming.cli.main", *command], capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip().splitlines() == [
            f"rebalance-monitor {command[0]}: error: no Kafka broker answered at 127.0.0.1:1 within 1 s "
            "(127.0.0.1:1: Connection refused): check --bootstrap-servers and that the cluster is up"], done.stderr
