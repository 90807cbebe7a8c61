"""The embedded broker is a real Kafka: it starts, serves clients, runs beside others and stops."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from confluent_kafka import Consumer

from streaming import broker
from streaming.feeds.kafka_io import ensure_topics, produce
from tests.conftest import free_port

pytestmark = pytest.mark.integration


def _java_brokers_in(directory) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = open(f"/proc/{entry}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if b"kafka.Kafka" in cmdline and str(directory / "server.properties").encode() in cmdline:
            pids.append(int(entry))
    return pids


def test_broker_round_trips_records_over_a_real_connection(kafka_broker, unique_name):
    topic = f"roundtrip-{unique_name}"
    ensure_topics(kafka_broker.bootstrap_servers, [topic], partitions=1)
    produce(kafka_broker.bootstrap_servers, topic, [("k", {"n": i}) for i in range(5)])
    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap_servers, "group.id": f"g-{unique_name}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    seen = []
    try:
        for _ in range(60):
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                seen.append(json.loads(msg.value())["n"])
            if len(seen) == 5:
                break
    finally:
        consumer.close()
    assert seen == [0, 1, 2, 3, 4]


def test_cli_starts_two_brokers_side_by_side_and_stops_them_without_leftovers(tmp_path):
    cli = [sys.executable, "-m", "streaming.cli.main", "kafka"]
    brokers = [(free_port(), tmp_path / "a"), (free_port(), tmp_path / "b")]
    try:
        for port, directory in brokers:
            out = subprocess.run([*cli, "start", "--port", str(port), "--dir", str(directory)],
                                 capture_output=True, text=True, timeout=120)
            assert out.returncode == 0, out.stderr
            assert out.stdout.strip() == f"127.0.0.1:{port}"
        for port, directory in brokers:
            out = subprocess.run([*cli, "status", "--port", str(port), "--dir", str(directory)],
                                 capture_output=True, text=True, timeout=60)
            assert out.returncode == 0 and f"bootstrap=127.0.0.1:{port}" in out.stdout
            assert len(_java_brokers_in(directory)) == 1
        # A second start of a running broker is a no-op that still prints the address.
        port, directory = brokers[0]
        again = subprocess.run([*cli, "start", "--port", str(port), "--dir", str(directory)],
                               capture_output=True, text=True, timeout=60)
        assert again.stdout.strip() == f"127.0.0.1:{port}"
        assert len(_java_brokers_in(directory)) == 1
    finally:
        for port, directory in brokers:
            subprocess.run([*cli, "stop", "--port", str(port), "--dir", str(directory)],
                           capture_output=True, text=True, timeout=60)
    for port, directory in brokers:
        assert _java_brokers_in(directory) == []
        out = subprocess.run([*cli, "status", "--port", str(port), "--dir", str(directory)],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 3 and "not running" in out.stdout


def test_start_refuses_a_port_another_process_holds(tmp_path):
    import socket

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(broker.BrokerError, match=f"port {port} is already taken"):
            broker.start(port, tmp_path / "taken")
    assert _java_brokers_in(tmp_path / "taken") == []


def test_stop_of_a_broker_that_is_not_running_says_so(tmp_path):
    assert broker.stop(free_port(), tmp_path / "never") is False


def test_a_broker_tied_to_its_caller_stops_when_the_caller_is_killed(tmp_path):
    import signal
    import time

    port = free_port()
    directory = tmp_path / "tied"
    # The caller is a process of its own, started the way pytest starts the session's broker.
    script = ("import sys; from streaming import broker; "
              f"broker.start({port}, {str(directory)!r}, tied_to_caller=True); "
              "print('ready', flush=True); sys.stdin.read()")
    caller = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, cwd=os.getcwd())
    try:
        assert caller.stdout.readline().strip() == "ready"
        assert len(_java_brokers_in(directory)) == 1
        caller.send_signal(signal.SIGKILL)
        caller.wait(10)
        deadline = time.monotonic() + 60
        while _java_brokers_in(directory) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _java_brokers_in(directory) == []
    finally:
        caller.kill()
        broker.stop(port, directory)

