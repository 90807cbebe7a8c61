"""A real single-node Apache Kafka broker (KRaft, combined broker + controller) from Maven jars.

The broker runs as a detached JVM so that ``rebalance-monitor kafka start`` can return while it
keeps running; its directory holds everything about it (config, data, log, pid), so several
brokers with different ports and directories run side by side.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path


from streaming.errors import BrokerError
from streaming.paths import conf_dir, jar_dir, state_dir

#: Not 9092, so the embedded broker never collides with a Kafka the user already runs.
DEFAULT_PORT = 19092
BROKER_HEAP = "-Xmx512m"
MAIN_CLASS = "kafka.Kafka"


@dataclass(frozen=True)
class BrokerStatus:
    directory: Path
    port: int
    pid: int | None

    @property
    def running(self) -> bool:
        return self.pid is not None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"


def broker_dir(port: int = DEFAULT_PORT, directory: str | os.PathLike | None = None) -> Path:
    return Path(directory).resolve() if directory else state_dir() / f"kafka-{port}"


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    java = shutil.which("java")
    if not java:
        raise BrokerError("no 'java' on PATH: install OpenJDK 17 (Kafka 4.x needs Java 17)")
    return java


def _classpath() -> str:
    jars = jar_dir("kafka")
    if not any(jars.glob("kafka_2.13-*.jar")):
        raise BrokerError(f"the Kafka broker jars are missing from {jars}: run scripts/bootstrap first")
    return str(jars / "*")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_in_use(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:``port`` (a broker started elsewhere)."""
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _cluster_id() -> str:
    # Kafka's own generator (Uuid.randomUuid) avoids ids starting with '-'; so do we.
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def _pid_alive(pid: int, directory: Path) -> bool:
    """True if ``pid`` is this directory's broker (a recycled pid of another process is not)."""
    try:
        os.waitpid(pid, os.WNOHANG)  # reap it if it is our own exited child
    except ChildProcessError:
        pass
    try:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                return False
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return MAIN_CLASS.encode() in cmdline and str(directory / "server.properties").encode() in cmdline


def status(port: int = DEFAULT_PORT, directory: str | os.PathLike | None = None) -> BrokerStatus:
    d = broker_dir(port, directory)
    pid = None
    pid_file = d / "broker.pid"
    if pid_file.exists():
        candidate = int(pid_file.read_text().strip() or 0)
        if candidate and _pid_alive(candidate, d):
            pid = candidate
    port = _read_ports(d).get("port", port) if directory else port
    return BrokerStatus(directory=d, port=port, pid=pid)


def _read_ports(d: Path) -> dict:
    f = d / "ports.json"
    return json.loads(f.read_text()) if f.exists() else {}


def _write_config(d: Path, port: int, controller_port: int) -> Path:
    config = d / "server.properties"
    config.write_text(
        "\n".join(
            [
                "# Written by rebalance-monitor kafka start; edits are overwritten.",
                "process.roles=broker,controller",
                "node.id=1",
                f"controller.quorum.voters=1@127.0.0.1:{controller_port}",
                f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
                f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
                "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                "controller.listener.names=CONTROLLER",
                "inter.broker.listener.name=PLAINTEXT",
                f"log.dirs={d / 'data'}",
                "num.partitions=3",
                "offsets.topic.replication.factor=1",
                "offsets.topic.num.partitions=3",
                "transaction.state.log.replication.factor=1",
                "transaction.state.log.min.isr=1",
                "share.coordinator.state.topic.replication.factor=1",
                "share.coordinator.state.topic.min.isr=1",
                # Groups form at once: the embedded broker serves tests and demos, not fleets.
                "group.initial.rebalance.delay.ms=0",
                "auto.create.topics.enable=false",
                # Small segments and indexes keep a laptop's disk and page cache happy.
                "log.segment.bytes=67108864",
                "log.index.size.max.bytes=1048576",
                "",
            ]
        )
    )
    return config


def _format_storage(d: Path, config: Path) -> None:
    if (d / "data" / "meta.properties").exists():
        return
    cmd = [_java(), BROKER_HEAP, "-cp", _classpath(), "kafka.tools.StorageTool", "format",
           "-t", _cluster_id(), "-c", str(config), "--ignore-formatted"]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise BrokerError(f"formatting the broker storage in {d} failed:\n{result.stdout}{result.stderr}")


def wait_until_ready(bootstrap_servers: str, timeout_s: float = 90.0, process: subprocess.Popen | None = None,
                     directory: Path | None = None) -> None:
    """Block until the broker answers a metadata request (not merely accepts TCP connections).

    ``process`` is the broker just started: its exit ends the wait. It is asked directly, not
    through :func:`_pid_alive`: until the child has exec'd Java its command line is still Python's,
    which _pid_alive takes for "not the broker" (a loaded machine once failed a start that way,
    with an empty broker.log)."""
    from confluent_kafka.admin import AdminClient

    deadline = time.monotonic() + timeout_s
    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "log_level": 0})
    while True:
        if process is not None and directory is not None and process.poll() is not None:
            raise BrokerError(f"the broker exited during start-up; its log says:\n{_log_tail(directory)}")
        try:
            metadata = admin.list_topics(timeout=2)
            if metadata.brokers:
                return
        except Exception:  # KafkaException while the broker is still coming up
            pass
        if time.monotonic() > deadline:
            raise BrokerError(f"no metadata from {bootstrap_servers} after {timeout_s:.0f} s")
        time.sleep(0.5)


def _log_tail(d: Path, lines: int = 30) -> str:
    log = d / "broker.log"
    if not log.exists():
        return "(no broker.log)"
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def _die_with_parent_hook():
    """A ``preexec_fn`` under which Linux sends the broker SIGTERM when the thread that started it dies.

    libc is loaded here, before the fork: between fork and exec the child must not take locks that
    another thread of the parent may have held (dlopen does).
    """
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl
    pr_set_pdeathsig = 1
    return lambda: prctl(pr_set_pdeathsig, int(signal.SIGTERM))


def start(port: int = DEFAULT_PORT, directory: str | os.PathLike | None = None,
          timeout_s: float = 90.0, tied_to_caller: bool = False) -> BrokerStatus:
    """Start the broker (format its storage first if new) and wait until it serves metadata.

    Starting a broker that already runs in that directory returns its status unchanged. The broker
    outlives the caller (``rebalance-monitor kafka start``) unless ``tied_to_caller``: then it is
    stopped when the calling process dies, even by SIGKILL (a test run or a benchmark that is killed
    must not leave a broker holding its port and a core).
    """
    d = broker_dir(port, directory)
    current = status(port, d)
    if current.running:
        return current
    d.mkdir(parents=True, exist_ok=True)
    ports = _read_ports(d)
    if ports.get("port") != port:
        ports = {"port": port, "controller_port": _free_port()}
        (d / "ports.json").write_text(json.dumps(ports))
    if port_in_use(port):
        raise BrokerError(f"port {port} is already taken by another process: choose another with --port")
    config = _write_config(d, port, ports["controller_port"])
    _format_storage(d, config)
    cmd = [
        _java(), BROKER_HEAP, "-Xss1m", "-XX:+UseG1GC", "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={conf_dir() / 'kafka-log4j2.properties'}",
        "-cp", _classpath(), MAIN_CLASS, str(config),
    ]
    with open(d / "broker.log", "ab") as log:
        process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   cwd=d, start_new_session=True,
                                   preexec_fn=_die_with_parent_hook() if tied_to_caller else None)
    (d / "broker.pid").write_text(str(process.pid))
    try:
        wait_until_ready(f"127.0.0.1:{port}", timeout_s, process=process, directory=d)
    except BaseException:
        stop(port, d)
        raise
    return BrokerStatus(directory=d, port=port, pid=process.pid)


def stop(port: int = DEFAULT_PORT, directory: str | os.PathLike | None = None,
         timeout_s: float = 30.0) -> bool:
    """Stop the broker: a clean shutdown first, a kill if it does not finish. True if one was running."""
    d = broker_dir(port, directory)
    current = status(port, d)
    pid_file = d / "broker.pid"
    if not current.running:
        pid_file.unlink(missing_ok=True)
        return False
    pid = current.pid
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while _pid_alive(pid, d):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            time.sleep(0.5)
            break
        time.sleep(0.2)
    _pid_alive(pid, d)  # reap
    pid_file.unlink(missing_ok=True)
    return True
