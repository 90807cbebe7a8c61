"""``rebalance-monitor kafka start|stop|status``: the embedded single-node broker."""

from __future__ import annotations

import argparse

from streaming import broker


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "kafka", help="start, stop or inspect the embedded single-node Kafka broker (KRaft)",
        description="A real Apache Kafka broker from the project's Maven jars, no Docker.",
    )
    parser.add_argument("action", choices=("start", "stop", "status"),
                        help="start it (prints its bootstrap address), stop it, or say whether it runs")
    parser.add_argument("--port", type=int, default=broker.DEFAULT_PORT,
                        help=f"client port (default {broker.DEFAULT_PORT}; the controller gets a free port)")
    parser.add_argument("--dir", dest="directory", default=None,
                        help="broker directory: config, data, broker.log (default .state/kafka-PORT)")
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    if args.action == "start":
        st = broker.start(args.port, args.directory)
        print(st.bootstrap_servers)
        return 0
    if args.action == "stop":
        was_running = broker.stop(args.port, args.directory)
        print("stopped" if was_running else "not running")
        return 0
    st = broker.status(args.port, args.directory)
    if st.running:
        print(f"running pid={st.pid} bootstrap={st.bootstrap_servers} dir={st.directory}")
        return 0
    print(f"not running (dir={st.directory})")
    return 3
