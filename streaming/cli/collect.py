"""``rebalance-monitor collect``: feed the monitor from the live consumer groups of a real cluster.

Every ``--interval`` seconds the collector asks the cluster (confluent-kafka AdminClient) which
consumer groups exist (ListGroups), who is in them and what they hold (DescribeGroups /
ConsumerGroupDescribe) and how many partitions their topics have on which racks (DescribeTopics).
:mod:`streaming.feeds.collector` turns the difference to the previous good poll into the monitor's
membership and heartbeat events, produced keyed by group id. A poll that fails emits nothing.
"""

from __future__ import annotations

import argparse
import logging
import re
import signal
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from assignors.model import topic_id_string
from streaming.feeds.collector import (
    CLASSIC, CONSUMER, HEARTBEAT, MEMBERSHIP, ClusterSnapshot, CollectedEvent, Collector,
    CollectorSettings, GroupSnapshot, MemberSnapshot, TopicSnapshot, views_from_events,
)
from streaming.config import KafkaConfig
from streaming.errors import CollectorError, KafkaIOError
from streaming.feeds.kafka_io import EventProducer, ensure_topics, wait_for_broker
from streaming.redaction import mask_secrets, redact

log = logging.getLogger("rebalance_monitor.collector")
_KAFKA_DEFAULTS = KafkaConfig()
DEFAULT_INTERVAL_S = 10.0
#: Consecutive failed polls after which the collector replaces its AdminClient.
RENEW_CLIENT_AFTER_FAILURES = 3
#: Groups with no members are not described: nothing to observe, and a big cluster has many.
_QUIET_STATES = ("EMPTY", "DEAD")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "collect", help="poll a real cluster's consumer groups and produce their membership events",
        description=__doc__.splitlines()[0].split(": ", 1)[1],
        epilog="Credentials (--command-config) are never printed and never put into events.")
    add = parser.add_argument
    add("--bootstrap-servers", required=True, help="the cluster whose consumer groups are observed")
    add("--groups", default=None, metavar="REGEX",
        help="only groups whose whole id matches this regular expression (default: all)")
    add("--interval", type=float, default=DEFAULT_INTERVAL_S, metavar="SECONDS",
        help=f"seconds between polls (default {DEFAULT_INTERVAL_S:g})")
    add("--monitor-bootstrap-servers", default=None,
        help="where to produce the events (default: --bootstrap-servers)")
    add("--membership-topic", default=_KAFKA_DEFAULTS.membership_topic,
        help=f"default {_KAFKA_DEFAULTS.membership_topic}")
    add("--heartbeat-topic", default=_KAFKA_DEFAULTS.heartbeat_topic,
        help=f"default {_KAFKA_DEFAULTS.heartbeat_topic}")
    add("--command-config", type=Path, default=None, metavar="FILE",
        help="librdkafka properties for the observed cluster (security.protocol, sasl.*, ssl.*); "
             "also used for the monitor cluster when it is the same one")
    add("--monitor-command-config", type=Path, default=None, metavar="FILE",
        help="librdkafka properties for the monitor cluster when it is a different one")
    add("--timeout", type=float, default=None, metavar="SECONDS",
        help="per-request timeout (default: the interval, at most 30)")
    add("--once", action="store_true", help="poll once, produce, print what was sent and exit")
    add("--no-resume", action="store_true",
        help="do not read back the membership topic at start (by default the collector resumes from "
             "what it last told the job, so members that left while it was down get their leave)")
    parser.set_defaults(handler=_run)


# -- configuration --------------------------------------------------------------------------------

def read_properties(path: Path) -> dict[str, str]:
    """A Java-style properties file: ``key=value`` / ``key: value``, ``#``/``!`` comments,
    a trailing backslash continues the line."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise CollectorError(f"cannot read --command-config {path}: {exc.strerror}") from None
    props: dict[str, str] = {}
    pending = ""
    for number, raw in enumerate(text.splitlines(), 1):
        line = pending + raw.strip()
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        pending = ""
        if not line or line[0] in "#!":
            continue
        match = re.match(r"([^=:\s]+)\s*[=:]\s*(.*)$", line)
        if not match:
            raise CollectorError(f"{path}:{number}: expected key=value")  # never echo the line
        props[match.group(1)] = match.group(2)
    return props


@dataclass(frozen=True)
class CollectOptions:
    source: dict[str, str]  # librdkafka config for the observed cluster, with bootstrap.servers
    monitor_bootstrap_servers: str
    monitor_options: dict[str, str]
    membership_topic: str
    heartbeat_topic: str
    group_pattern: re.Pattern | None
    interval_s: float
    timeout_s: float


def options_from(args: argparse.Namespace) -> CollectOptions:
    if not args.interval > 0:
        raise CollectorError(f"--interval must be > 0 seconds, got {args.interval!r}")
    if args.membership_topic == args.heartbeat_topic:
        raise CollectorError("--membership-topic and --heartbeat-topic must differ")
    try:
        pattern = re.compile(args.groups) if args.groups else None
    except re.error as exc:
        raise CollectorError(f"--groups is not a regular expression: {exc}") from None
    extra = read_properties(args.command_config) if args.command_config else {}
    extra.pop("bootstrap.servers", None)
    monitor = args.monitor_bootstrap_servers or args.bootstrap_servers
    if args.monitor_command_config:
        monitor_options = read_properties(args.monitor_command_config)
    elif monitor == args.bootstrap_servers:
        monitor_options = dict(extra)
    else:
        monitor_options = {}
    monitor_options.pop("bootstrap.servers", None)
    timeout = args.timeout if args.timeout is not None else min(30.0, max(1.0, args.interval))
    return CollectOptions(
        source={"bootstrap.servers": args.bootstrap_servers, **extra}, monitor_bootstrap_servers=monitor,
        monitor_options=monitor_options, membership_topic=args.membership_topic,
        heartbeat_topic=args.heartbeat_topic, group_pattern=pattern, interval_s=args.interval,
        timeout_s=timeout)


def admin_client(config: Mapping[str, str]):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    try:
        return AdminClient({"log_level": 3, **config})
    except (KafkaException, ValueError, TypeError) as exc:
        raise CollectorError(f"bad client configuration {mask_secrets(config)}: {redact(str(exc), config)}") \
            from None


# -- reading one snapshot -------------------------------------------------------------------------

class PollFailed(Exception):
    """This poll saw nothing trustworthy; the message says why (never a credential)."""


def _transient_codes() -> frozenset:
    """Errors that say the cluster (not one group) is out of reach: the whole poll is void."""
    from confluent_kafka import KafkaError

    return frozenset(getattr(KafkaError, name) for name in (
        "_TIMED_OUT", "_TRANSPORT", "_ALL_BROKERS_DOWN", "_DESTROY", "_RESOLVE", "_WAIT_COORD",
        "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS",
        "REQUEST_TIMED_OUT", "NETWORK_EXCEPTION") if hasattr(KafkaError, name))


def _code(exc: BaseException):
    err = exc.args[0] if exc.args else None
    return err.code() if hasattr(err, "code") else None


def _assignment(a) -> tuple[tuple[str, int], ...] | None:
    if a is None:
        return None
    return tuple((tp.topic, tp.partition) for tp in (a.topic_partitions or ()))


def _enum_name(value) -> str:
    return getattr(value, "name", None) or str(value or "UNKNOWN")


def group_snapshot(d) -> GroupSnapshot:
    """A ConsumerGroupDescription (duck-typed) as the core's snapshot."""
    group_type = CONSUMER if _enum_name(getattr(d, "type", None)) == "CONSUMER" else CLASSIC
    members = tuple(
        MemberSnapshot(member_id=m.member_id, client_id=m.client_id, host=m.host,
                       group_instance_id=m.group_instance_id, assignment=_assignment(m.assignment),
                       target_assignment=_assignment(getattr(m, "target_assignment", None)))
        for m in d.members or ())
    return GroupSnapshot(group_id=d.group_id, state=_enum_name(d.state), type=group_type,
                         partition_assignor=d.partition_assignor or None, members=members)


def topic_snapshot(t) -> TopicSnapshot:
    """A TopicDescription (duck-typed): partition count, per partition its replicas' racks, and the
    topic id in Kafka's own spelling."""
    partitions = sorted(t.partitions, key=lambda p: p.id)
    racks = tuple(tuple(sorted({n.rack for n in p.replicas if getattr(n, "rack", None)})) for p in partitions)
    return TopicSnapshot(name=t.name, partitions=len(partitions), racks=racks if any(racks) else None,
                         topic_id=_kafka_topic_id(getattr(t, "topic_id", None)))


def _kafka_topic_id(client_uuid) -> str | None:
    """confluent-kafka's ``Uuid``, spelled as Kafka's ``Uuid.toString`` does.

    ``str()`` of it is librdkafka's *standard* base64 (``+`` and ``/``) where Kafka, its tools and
    its coordinator records use the URL-safe alphabet, so the id is rebuilt from its two halves.
    """
    if client_uuid is None:
        return None
    high = client_uuid.get_most_significant_bits() & 0xFFFF_FFFF_FFFF_FFFF
    low = client_uuid.get_least_significant_bits() & 0xFFFF_FFFF_FFFF_FFFF
    return topic_id_string(uuid.UUID(int=(high << 64) | low))


def read_snapshot(admin, time_ms: int, pattern: re.Pattern | None, timeout_s: float) -> ClusterSnapshot:
    """One poll of the cluster; raises PollFailed when any part of the picture is missing."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka._model import TopicCollection

    try:
        listing = admin.list_consumer_groups(request_timeout=timeout_s).result(timeout=timeout_s + 5)
    except KafkaException as exc:
        raise PollFailed(f"ListGroups failed: {exc.args[0]}") from None
    except Exception as exc:  # a future that never resolves, a closed client
        raise PollFailed(f"ListGroups failed: {type(exc).__name__}: {exc}") from None
    if listing.errors:
        # A broker that did not answer may coordinate groups we would then think are gone.
        raise PollFailed(f"ListGroups incomplete: {listing.errors[0]}")
    wanted = sorted(g.group_id for g in listing.valid or ()
                    if (pattern is None or pattern.fullmatch(g.group_id))
                    and _enum_name(getattr(g, "state", None)) not in _QUIET_STATES)

    groups: dict[str, GroupSnapshot] = {}
    unobserved: set[str] = set()
    if wanted:
        futures = admin.describe_consumer_groups(wanted, request_timeout=timeout_s)
        for group_id, future in futures.items():
            try:
                g = group_snapshot(future.result(timeout=timeout_s + 5))
            except KafkaException as exc:
                code = _code(exc)
                if code == KafkaError.GROUP_ID_NOT_FOUND:
                    continue  # deleted between ListGroups and DescribeGroups
                if code in _transient_codes():
                    raise PollFailed(f"DescribeGroups of {group_id!r} failed: {exc.args[0]}") from None
                # About this group only (not authorized, not a consumer-protocol group, ...): the
                # others are still worth reporting, and this one is neither gone nor alive.
                log.warning("group %r could not be described (%s); it is left as last seen", group_id,
                            exc.args[0])
                unobserved.add(group_id)
                continue
            except Exception as exc:
                raise PollFailed(f"DescribeGroups of {group_id!r} failed: {type(exc).__name__}: {exc}") from None
            if g.state not in _QUIET_STATES:
                groups[group_id] = g

    names = sorted({t for g in groups.values() for m in g.members
                    for tps in (m.assignment, m.target_assignment) for t, _ in tps or ()})
    topics: dict[str, TopicSnapshot] = {}
    if names:
        futures = admin.describe_topics(TopicCollection(names), request_timeout=timeout_s)
        for name, future in futures.items():
            try:
                topics[name] = topic_snapshot(future.result(timeout=timeout_s + 5))
            except KafkaException as exc:
                if _code(exc) == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    continue  # deleted: the workload drops it
                raise PollFailed(f"DescribeTopics of {name!r} failed: {exc.args[0]}") from None
            except Exception as exc:
                raise PollFailed(f"DescribeTopics of {name!r} failed: {type(exc).__name__}: {exc}") from None
    return ClusterSnapshot(time_ms=time_ms, groups=groups, topics=topics, unobserved=frozenset(unobserved))


# -- resuming: what this collector told the job before it (re)started -----------------------------

def read_back(bootstrap_servers: str, topic: str, options: Mapping[str, str], pattern: re.Pattern | None,
              timeout_s: float = 60.0) -> list[dict]:
    """The membership topic's records from its beginning to its current end, JSON-decoded, of the
    groups whose key matches ``pattern`` (records that are not JSON objects are skipped)."""
    import json

    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": "rebalance-monitor-collector-resume",
                         "enable.auto.commit": False, "log_level": 3, **options})
    try:
        metadata = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
        if metadata is None or metadata.error is not None:
            return []  # nothing was ever produced there
        ends: dict[int, int] = {}
        starts: list = []
        for partition in sorted(metadata.partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout_s)
            if high > low:
                ends[partition] = high
                starts.append(TopicPartition(topic, partition, low))
        consumer.assign(starts)
        out: list[dict] = []
        deadline = time.monotonic() + timeout_s
        while ends:
            if time.monotonic() > deadline:
                raise KafkaIOError(f"reading back {topic!r} took longer than {timeout_s:.0f} s")
            for message in consumer.consume(1000, timeout=0.5):
                if message.error() is not None:
                    continue
                key = message.key().decode(errors="replace") if message.key() else ""
                if message.offset() < ends.get(message.partition(), -1) and (
                        pattern is None or pattern.fullmatch(key)):
                    try:
                        value = json.loads(message.value())
                    except (TypeError, ValueError):
                        value = None
                    if isinstance(value, dict):
                        out.append(value)
            for tp in consumer.position([TopicPartition(topic, p) for p in list(ends)]):
                if tp.offset >= ends[tp.partition]:
                    del ends[tp.partition]
        return out
    except KafkaException as exc:
        raise KafkaIOError(f"reading back {topic!r}: {exc.args[0]}") from None
    finally:
        consumer.close()


# -- the loop -------------------------------------------------------------------------------------

@dataclass
class PollResult:
    time_ms: int
    ok: bool
    events: list[CollectedEvent]
    error: str | None = None

    def summary(self) -> str:
        if not self.ok:
            return f"poll at {self.time_ms} failed, nothing emitted: {self.error}"
        kinds: dict[str, int] = {}
        for e in self.events:
            kind = e.value["type"] if e.kind == MEMBERSHIP else "heartbeat"
            kinds[kind] = kinds.get(kind, 0) + 1
        parts = ", ".join(f"{k} {kinds[k]}" for k in ("workload", "join", "leave", "update", "heartbeat")
                          if k in kinds) or "no events"
        groups = len({e.group_id for e in self.events})
        return f"poll at {self.time_ms}: {groups} groups with events; {parts}"


class CollectorRunner:
    """One AdminClient, one producer and one core for the collector's lifetime, and the
    poll -> produce -> commit step."""

    def __init__(self, options: CollectOptions, settings: CollectorSettings | None = None,
                 clock: Callable[[], float] = time.time):
        self.options = options
        self.collector = Collector(settings or CollectorSettings.for_interval(options.interval_s))
        self.admin = admin_client(options.source)
        self.producer = EventProducer(options.monitor_bootstrap_servers, options.monitor_options)
        self.clock = clock
        self.last_time_ms = -1

    def resume(self, timeout_s: float = 60.0) -> int:
        """Start from what this collector last told the job, read back from the membership topic.

        Without it a restarted collector starts from nothing: every member gets a second join
        (harmless) and a member that left while it was down never gets its leave (its partitions
        stay assigned in the job). Returns the number of members resumed.
        """
        events = read_back(self.options.monitor_bootstrap_servers, self.options.membership_topic,
                           self.options.monitor_options, self.options.group_pattern, timeout_s)
        views = views_from_events(events)
        self.collector.restore(views)
        mine = [int(e["event_time"]) for e in events if e.get("source") == "collector"]
        if mine:  # never emit at or before what was already sent
            self.last_time_ms = max(self.last_time_ms, max(mine))
        members = sum(len(v.members) for v in views.values())
        log.info("resumed from %s: %d groups, %d members as last told to the job", self.options.membership_topic,
                 len(views), members)
        return members

    def poll_time(self) -> int:
        # Event time must never go backwards, even when the wall clock does.
        self.last_time_ms = max(int(self.clock() * 1000), self.last_time_ms + 1)
        return self.last_time_ms

    def poll(self) -> PollResult:
        """Read the cluster and diff; nothing is remembered until :meth:`deliver` succeeds."""
        time_ms = self.poll_time()
        try:
            snapshot = read_snapshot(self.admin, time_ms, self.options.group_pattern, self.options.timeout_s)
        except PollFailed as exc:
            error = redact(str(exc), self.options.source)
            self.collector.plan(None, error)
            if self.collector.failed_polls % RENEW_CLIENT_AFTER_FAILURES == 0:
                # A client that lived through a broker restart can keep failing against the
                # restarted cluster (librdkafka 2.16 stays on stale coordinator connections),
                # while a new client gets answers at once.
                log.info("renewing the admin client after %d failed polls", self.collector.failed_polls)
                self.admin = admin_client(self.options.source)
            return PollResult(time_ms, False, [], error)
        views, events = self.collector.plan(snapshot)
        self._pending = (views, time_ms)
        return PollResult(time_ms, True, events)

    def deliver(self, result: PollResult) -> None:
        if not result.ok:
            return
        by_kind = {MEMBERSHIP: self.options.membership_topic, HEARTBEAT: self.options.heartbeat_topic}
        # Membership first: the job holds them until heartbeats move the group's time past them.
        for kind in (MEMBERSHIP, HEARTBEAT):
            records = [(e.group_id, e.value) for e in result.events if e.kind == kind]
            if records:
                self.producer.send_all(by_kind[kind], records)
        views, time_ms = self._pending
        self.collector.commit(views, time_ms)

    def close(self) -> None:
        self.producer.close()

    def step(self) -> PollResult:
        result = self.poll()
        if result.ok:
            try:
                self.deliver(result)
            except KafkaIOError as exc:
                result.ok, result.error = False, f"events not delivered, will diff again: " \
                                                 f"{redact(str(exc), self.options.monitor_options)}"
                log.warning("poll at %d: %s", result.time_ms, result.error)
        return result


def _run(args: argparse.Namespace) -> int:
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    options = options_from(args)
    # Either cluster not answering is one line in seconds, not minutes of client retries.
    wait_for_broker(options.source["bootstrap.servers"], options.timeout_s)
    if options.monitor_bootstrap_servers != options.source["bootstrap.servers"]:
        wait_for_broker(options.monitor_bootstrap_servers, options.timeout_s,
                        setting="--monitor-bootstrap-servers")
    log.info("collecting from %s every %g s (client config %s) into %s: %s, %s", options.source["bootstrap.servers"],
             options.interval_s, mask_secrets(options.source), options.monitor_bootstrap_servers,
             options.membership_topic, options.heartbeat_topic)
    try:
        ensure_topics(options.monitor_bootstrap_servers, [options.membership_topic, options.heartbeat_topic],
                      options=options.monitor_options, timeout_s=options.timeout_s)
    except Exception as exc:
        raise CollectorError(f"monitor topics unavailable on {options.monitor_bootstrap_servers}: "
                             f"{redact(str(exc), options.monitor_options)}") from None
    runner = CollectorRunner(options)
    if not args.no_resume:
        try:
            runner.resume(timeout_s=max(60.0, options.timeout_s))
        except (KafkaIOError, KeyError, TypeError, ValueError) as exc:
            log.warning("could not resume from %s (%s): starting from nothing, so members that left while "
                        "the collector was down get no leave", options.membership_topic,
                        redact(str(exc), options.monitor_options))
    try:
        return _collect(args, options, runner)
    finally:
        runner.close()


def _collect(args: argparse.Namespace, options: CollectOptions, runner: CollectorRunner) -> int:
    if args.once:
        result = runner.step()
        print(result.summary(), flush=True)
        if not result.ok:
            raise CollectorError(result.error or "poll failed")
        return 0

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    next_at = time.monotonic()
    while not stop.is_set():
        result = runner.step()
        if result.ok:  # a failure was logged where it happened
            log.info("%s", result.summary())
        next_at += options.interval_s
        if next_at < time.monotonic():  # a slow poll: skip the missed ticks, do not burst
            next_at = time.monotonic() + options.interval_s
        stop.wait(max(0.0, next_at - time.monotonic()))
    log.info("stopped")
    return 0
