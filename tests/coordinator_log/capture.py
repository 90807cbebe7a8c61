"""Real groups on the embedded broker, and the raw records they leave in ``__consumer_offsets``.

Each scenario runs a real group through joins, clean leaves, crashes (a member killed, expelled
after its session timeout) and static restarts, then the whole offsets topic is read back raw:

- librdkafka (confluent-kafka) consumers with range, roundrobin and cooperative-sticky (classic
  protocol, eager and cooperative), static members, and a KIP-848 group (``group.protocol=consumer``)
  with the server assignors ``uniform`` and ``range``;
- Java consumers (kafka-clients 4.1.1) with sticky and cooperative-sticky, a Kafka Streams 4.1.1
  application, and Kafka Connect 4.1.1 distributed workers (sessioned and eager), all from
  ``.cache/jars/coordinator-reference/`` (``scripts/build-coordinator-reference``).

Reading the topic raw (what the Spark job's source does with ``kafka.*`` options): a plain
consumer that ``assign``s every partition of ``__consumer_offsets`` from the beginning, without
committing, and keeps each record's key and value bytes (a null value is a tombstone).

Run: ``python -m tests.coordinator_log.capture --out DIR [--scenario NAME ...]`` writes
``DIR/records.jsonl``; ``tests/coordinator_log/fixture.py`` turns that into the committed fixture.
The integration test runs the same scenarios against a fresh broker.
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

REPO = Path(__file__).resolve().parents[2]
REFERENCE_DIR = REPO / ".cache" / "jars" / "coordinator-reference"
MAIN_CLASS = "rebalancemonitor.coordinatorreference.CoordinatorReference"
OFFSETS_TOPIC = "__consumer_offsets"
#: The broker's minimum (group.min.session.timeout.ms): a crashed classic member is expelled after it.
SESSION_TIMEOUT_MS = 6000
#: Time for a rebalance to complete after a cue (the broker forms groups at once: no initial delay).
STEP_S = 3.0
EXPIRY_S = SESSION_TIMEOUT_MS / 1000 + 4

log = logging.getLogger("coordinator_log.capture")


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home else "java"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Member:
    """A group member in its own process: ``leave`` closes its stdin (clean), ``crash`` kills it."""

    def __init__(self, name: str, command: list[str]):
        self.name = name
        self.command = command
        self.lines: list[str] = []
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, text=True, cwd=REPO)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, prefix: str, timeout_s: float = 90.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not any(line.startswith(prefix) for line in self.lines):
            if self.process.poll() is not None:
                raise RuntimeError(f"member {self.name} exited ({self.process.returncode}) before {prefix!r}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"member {self.name} printed no {prefix!r} within {timeout_s:.0f} s")
            time.sleep(0.2)

    def leave(self, timeout_s: float = 60.0) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def crash(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()


class Capture:
    """The scenarios' shared context: the broker's address, topics, members to clean up."""

    def __init__(self, bootstrap: str, workdir: Path):
        self.bootstrap = bootstrap
        self.workdir = workdir
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.members: list[Member] = []

    # -- topics -------------------------------------------------------------------------------------

    def topics(self, partitions: dict[str, int], messages: int = 200) -> None:
        futures = self.admin.create_topics([NewTopic(t, n, 1) for t, n in partitions.items()])
        for f in futures.values():
            f.result()
        producer = Producer({"bootstrap.servers": self.bootstrap})
        for topic, n in partitions.items():
            for i in range(messages):
                producer.produce(topic, key=f"k{i % 17}".encode(), value=f"v{i}".encode(), partition=i % n)
        producer.flush(30)

    # -- members ------------------------------------------------------------------------------------

    def rdkafka(self, name: str, group: str, topics: list[str], **config) -> Member:
        settings = {"bootstrap.servers": self.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                    "enable.auto.commit": True, "auto.commit.interval.ms": 1000, "client.id": name}
        if config.get("group.protocol") != "consumer":
            settings.update({"session.timeout.ms": SESSION_TIMEOUT_MS, "heartbeat.interval.ms": 1000})
        settings.update(config)
        return self._start(Member(name, [sys.executable, "-m", "tests.coordinator_log.member",
                                         json.dumps(settings), ",".join(topics)]))

    def java_consumer(self, name: str, group: str, topics: list[str], assignor: str,
                      instance_id: str | None = None) -> Member:
        return self._start(Member(name, [_java(), "-Xmx128m", "-cp", str(REFERENCE_DIR / "*"), MAIN_CLASS, "--member",
                                         "consumer", self.bootstrap, group, ",".join(topics), assignor,
                                         instance_id or "-", str(SESSION_TIMEOUT_MS)]))

    def streams(self, name: str, application_id: str, input_topic: str, output_topic: str) -> Member:
        state_dir = self.workdir / f"streams-{name}"
        return self._start(Member(name, [_java(), "-Xmx256m", "-cp", str(REFERENCE_DIR / "*"), MAIN_CLASS, "--member",
                                         "streams", self.bootstrap, application_id, input_topic, output_topic,
                                         str(state_dir), "-"]))

    def connect_worker(self, name: str, group: str, protocol: str) -> tuple[Member, int]:
        port = _free_port()
        properties = self.workdir / f"connect-{name}.properties"
        properties.write_text("\n".join([
            f"bootstrap.servers={self.bootstrap}", f"group.id={group}", f"connect.protocol={protocol}",
            f"config.storage.topic={group}-configs", f"offset.storage.topic={group}-offsets",
            f"status.storage.topic={group}-status", "config.storage.replication.factor=1",
            "offset.storage.replication.factor=1", "status.storage.replication.factor=1",
            "offset.storage.partitions=1", "status.storage.partitions=1",
            "key.converter=org.apache.kafka.connect.json.JsonConverter",
            "value.converter=org.apache.kafka.connect.json.JsonConverter",
            f"listeners=http://127.0.0.1:{port}", "plugin.discovery=service_load",
            f"session.timeout.ms={SESSION_TIMEOUT_MS}", "heartbeat.interval.ms=1000",
            "scheduled.rebalance.max.delay.ms=8000", "offset.flush.interval.ms=1000", "",
        ]))
        member = self._start(Member(name, [_java(), "-Xmx256m", "-cp", str(REFERENCE_DIR / "*"),
                                           "org.apache.kafka.connect.cli.ConnectDistributed", str(properties)]))
        return member, port

    def _start(self, member: Member) -> Member:
        self.members.append(member)
        return member

    def stop_all(self) -> None:
        for member in self.members:
            member.leave(timeout_s=30)


def _wait_for_rest(port: int, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/connectors", timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"Connect worker on port {port} did not answer within {timeout_s:.0f} s")
            time.sleep(1)


def _create_connector(port: int, name: str, tasks: int) -> None:
    body = json.dumps({"name": name, "config": {
        "connector.class": "rebalancemonitor.coordinatorreference.IdleSourceConnector", "tasks.max": str(tasks)}})
    request = urllib.request.Request(f"http://127.0.0.1:{port}/connectors", data=body.encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(request, timeout=10):
                return
        except OSError as e:  # 409 while the worker is still joining
            if time.monotonic() > deadline:
                raise RuntimeError(f"connector {name} could not be created: {e}")
            time.sleep(1)


# -- scenarios ----------------------------------------------------------------------------------------


def rdkafka_classic(c: Capture, assignor: str) -> None:
    """Joins, a clean leave, a crash expelled after the session timeout, a static member restarting."""
    group, topic = f"cap-rdkafka-{assignor}", f"cap-rdkafka-{assignor}-t"
    c.topics({topic: 6, f"{topic}2": 3})
    topics = [topic, f"{topic}2"]
    strategy = {"partition.assignment.strategy": assignor}
    a = c.rdkafka("a", group, topics, **strategy)
    a.wait_for("assigned c")
    b = c.rdkafka("b", group, topics, **strategy)
    time.sleep(STEP_S)
    crashing = c.rdkafka("crashing", group, topics, **strategy)
    time.sleep(STEP_S)
    static = c.rdkafka("static", group, topics, **strategy, **{"group.instance.id": f"{group}-static"})
    time.sleep(STEP_S)
    b.leave()
    time.sleep(STEP_S)
    crashing.crash()
    time.sleep(EXPIRY_S)
    static.crash()  # back within the session timeout under the same instance id: a static rejoin
    c.rdkafka("static-again", group, topics, **strategy, **{"group.instance.id": f"{group}-static"})
    time.sleep(STEP_S * 2)


def rdkafka_kip848(c: Capture, assignor: str) -> None:
    """A KIP-848 group: the coordinator assigns (server assignor), members reconcile by epochs."""
    group, topic = f"cap-kip848-{assignor}", f"cap-kip848-{assignor}-t"
    c.topics({topic: 6, f"{topic}2": 2})
    config = {"group.protocol": "consumer", "group.remote.assignor": assignor}
    a = c.rdkafka("a", group, [topic, f"{topic}2"], **config)
    a.wait_for("assigned c")
    b = c.rdkafka("b", group, [topic], **config)
    time.sleep(STEP_S)
    d = c.rdkafka("c", group, [topic, f"{topic}2"], **config)
    time.sleep(STEP_S)
    b.leave()
    time.sleep(STEP_S)
    d.leave()
    time.sleep(STEP_S)


def java_classic(c: Capture, assignor: str) -> None:
    group, topic = f"cap-java-{assignor}", f"cap-java-{assignor}-t"
    c.topics({topic: 5})
    a = c.java_consumer("a", group, [topic], assignor)
    a.wait_for("assigned c")
    b = c.java_consumer("b", group, [topic], assignor, instance_id=f"{group}-static")
    b.wait_for("assigned")
    crashing = c.java_consumer("crashing", group, [topic], assignor)
    crashing.wait_for("assigned")
    time.sleep(STEP_S)
    crashing.crash()
    time.sleep(EXPIRY_S)
    a.leave()
    time.sleep(STEP_S * 2)


def kafka_streams(c: Capture) -> None:
    app, source, sink = "cap-streams-app", "cap-streams-in", "cap-streams-out"
    c.topics({source: 4, sink: 4})
    first = c.streams("s1", app, source, sink)
    first.wait_for("state RUNNING", timeout_s=120)
    second = c.streams("s2", app, source, sink)
    second.wait_for("state RUNNING", timeout_s=120)
    time.sleep(STEP_S * 2)  # a probing rebalance or a follow-up may come after warm-ups
    second.leave()
    time.sleep(STEP_S * 2)


def kafka_connect(c: Capture, protocol: str) -> None:
    group = f"cap-connect-{protocol}"
    first, port = c.connect_worker("w1", group, protocol)
    _wait_for_rest(port)
    _create_connector(port, f"{group}-idle-a", 3)
    _create_connector(port, f"{group}-idle-b", 2)
    time.sleep(STEP_S * 2)
    second, port2 = c.connect_worker("w2", group, protocol)
    _wait_for_rest(port2)
    time.sleep(STEP_S * 3)  # incremental cooperative: two rounds (revoke, then assign)
    second.leave()
    time.sleep(10 if protocol == "eager" else 14)  # the scheduled rebalance delay, 8 s, then its round
    first.leave()


SCENARIOS: dict[str, Callable[[Capture], None]] = {
    "rdkafka-range": lambda c: rdkafka_classic(c, "range"),
    "rdkafka-roundrobin": lambda c: rdkafka_classic(c, "roundrobin"),
    "rdkafka-cooperative-sticky": lambda c: rdkafka_classic(c, "cooperative-sticky"),
    "kip848-uniform": lambda c: rdkafka_kip848(c, "uniform"),
    "kip848-range": lambda c: rdkafka_kip848(c, "range"),
    "java-sticky": lambda c: java_classic(c, "sticky"),
    "java-cooperative-sticky": lambda c: java_classic(c, "cooperative-sticky"),
    "streams": kafka_streams,
    "connect-sessioned": lambda c: kafka_connect(c, "sessioned"),
    "connect-eager": lambda c: kafka_connect(c, "eager"),
}
#: The scenarios that need the Java reference's jars (the others need only the broker and Python).
JAVA_SCENARIOS = ("java-sticky", "java-cooperative-sticky", "streams", "connect-sessioned", "connect-eager")


def read_offsets_topic(bootstrap: str, timeout_s: float = 60.0) -> list[dict]:
    """Every record of ``__consumer_offsets`` up to its current end, raw (key and value bytes)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "coordinator-log-capture-reader",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        metadata = consumer.list_topics(OFFSETS_TOPIC, timeout=10)
        partitions = sorted(metadata.topics[OFFSETS_TOPIC].partitions)
        consumer.assign([TopicPartition(OFFSETS_TOPIC, p, 0) for p in partitions])  # 0: from the start
        done: set[int] = set()
        records = []
        deadline = time.monotonic() + timeout_s
        while len(done) < len(partitions):
            if time.monotonic() > deadline:
                raise RuntimeError(f"reading {OFFSETS_TOPIC} did not reach its end in {timeout_s:.0f} s")
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    done.add(message.partition())
                    continue
                raise RuntimeError(f"reading {OFFSETS_TOPIC}: {message.error()}")
            value = message.value()
            records.append({"partition": message.partition(), "offset": message.offset(),
                            "timestamp": message.timestamp()[1],
                            "key": base64.b64encode(message.key()).decode(),
                            "value": None if value is None else base64.b64encode(value).decode()})
        return records
    finally:
        consumer.close()


def capture(bootstrap: str, scenarios: list[str], workdir: Path) -> list[dict]:
    """Run the scenarios on the broker at ``bootstrap`` and return the offsets topic's records."""
    c = Capture(bootstrap, workdir)
    try:
        for name in scenarios:
            log.info("scenario %s", name)
            started = time.monotonic()
            SCENARIOS[name](c)
            log.info("scenario %s took %.1f s", name, time.monotonic() - started)
    finally:
        c.stop_all()
    time.sleep(2)  # the last leaves' records
    return read_offsets_topic(bootstrap)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="directory for records.jsonl")
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS),
                        help="a scenario to run (repeatable; default: all)")
    parser.add_argument("--bootstrap", help="an already running broker (default: start the embedded one)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    from streaming import broker

    args.out.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="coordinator-log-capture-"))
    try:
        if args.bootstrap:
            records = capture(args.bootstrap, args.scenario or list(SCENARIOS), workdir)
        else:
            port = _free_port()
            status = broker.start(port, workdir / "kafka", tied_to_caller=True)
            try:
                records = capture(status.bootstrap_servers, args.scenario or list(SCENARIOS), workdir)
            finally:
                broker.stop(port, workdir / "kafka")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    with open(args.out / "records.jsonl", "w") as f:
        for record in records:
            f.write(json.dumps(record) + "\n")
    log.info("%d records written to %s", len(records), args.out / "records.jsonl")


if __name__ == "__main__":
    main()
