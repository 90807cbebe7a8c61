"""``rebalance-monitor simulate``: produce simulated consumer-group traffic to the two input topics.

The records come from :mod:`streaming.feeds.simulator` (seeded, simulated event time); this command only
paces them on the wall clock (a token bucket) and ships them with one batching, lz4-compressing
librdkafka producer, then prints what it sent and how fast.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

from streaming.config import KafkaConfig
from streaming.errors import KafkaIOError
from streaming.feeds.kafka_io import ensure_topics, send, wait_for_broker
from streaming.feeds.simulator import HEARTBEAT, MEMBERSHIP, Simulation, SimulationConfig, SimulationError

_DEFAULTS = SimulationConfig()
_KAFKA_DEFAULTS = KafkaConfig()
#: Simulated traffic when neither --duration nor --events is given: one minute of event time.
DEFAULT_DURATION_S = 60.0
#: librdkafka's default message.max.bytes; raised only when oversized records must get through.
_LIBRDKAFKA_MAX_MESSAGE_BYTES = 1_000_000


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "simulate", help="produce simulated consumer-group membership and heartbeat events to Kafka",
        description=__doc__.splitlines()[0].split(": ", 1)[1],
        epilog="Event times are simulated: the same flags (with --start-time-ms) give the same records, "
               "whatever --rate is.")
    add = parser.add_argument
    add("--bootstrap-servers", default=_KAFKA_DEFAULTS.bootstrap_servers,
        help=f"Kafka bootstrap servers (default {_KAFKA_DEFAULTS.bootstrap_servers})")
    add("--connect-timeout", type=float, default=float(_KAFKA_DEFAULTS.connect_timeout_s), metavar="SECONDS",
        help=f"give up, naming the address, if no broker answers within this time "
             f"(default {_KAFKA_DEFAULTS.connect_timeout_s})")
    add("--membership-topic", default=_KAFKA_DEFAULTS.membership_topic,
        help=f"default {_KAFKA_DEFAULTS.membership_topic}")
    add("--heartbeat-topic", default=_KAFKA_DEFAULTS.heartbeat_topic,
        help=f"default {_KAFKA_DEFAULTS.heartbeat_topic}")
    add("--groups", type=int, default=_DEFAULTS.groups, help=f"consumer groups (default {_DEFAULTS.groups})")
    add("--members", type=_count_or_range, default=_DEFAULTS.members,
        help=f"members per group, N or LOW-HIGH (default {_DEFAULTS.members})")
    add("--topics", type=int, default=_DEFAULTS.topics, help=f"topics per group (default {_DEFAULTS.topics})")
    add("--partitions", type=_count_or_range, default=_DEFAULTS.partitions,
        help=f"partitions per topic, N or LOW-HIGH (default {_DEFAULTS.partitions})")
    add("--churn-per-minute", type=float, default=_DEFAULTS.churn_per_minute,
        help=f"member joins + departures per minute per group (default {_DEFAULTS.churn_per_minute})")
    add("--heartbeat-interval-ms", type=int, default=_DEFAULTS.heartbeat_interval_ms,
        help=f"default {_DEFAULTS.heartbeat_interval_ms}")
    add("--session-timeout-ms", type=int, default=_DEFAULTS.session_timeout_ms,
        help=f"default {_DEFAULTS.session_timeout_ms}")
    add("--static-share", type=float, default=_DEFAULTS.static_share,
        help="share of members with a group.instance.id; they bounce instead of leaving (default 0)")
    add("--cooperative-share", type=float, default=_DEFAULTS.cooperative_share,
        help=f"share of cooperative-sticky groups; the rest are eager (default {_DEFAULTS.cooperative_share})")
    add("--crash-share", type=float, default=_DEFAULTS.crash_share,
        help="share of groups whose departing members crash instead of leaving (default 0)")
    add("--streams-share", type=float, default=_DEFAULTS.streams_share,
        help="share of groups that are Kafka Streams applications (task lags in heartbeats; default 0)")
    add("--connect-share", type=float, default=_DEFAULTS.connect_share,
        help="share of groups that are Kafka Connect clusters (connectors and tasks; default 0)")
    add("--bad-share", type=float, default=_DEFAULTS.bad_share,
        help="share of deliberately invalid records, for the rejected-events path (default 0)")
    add("--oversized-bytes", type=int, default=_DEFAULTS.oversized_bytes,
        help=f"size of an oversized bad record; match the job's kafka.max_record_bytes + 1 "
             f"(default {_DEFAULTS.oversized_bytes})")
    add("--rate", type=float, default=10_000.0,
        help="records per second of wall-clock time; 0 = as fast as possible (default 10000)")
    stop = parser.add_mutually_exclusive_group()
    stop.add_argument("--duration", type=float, default=None, metavar="SECONDS",
                      help=f"seconds of simulated event time to produce (default {DEFAULT_DURATION_S:g})")
    stop.add_argument("--events", type=int, default=None, metavar="N", help="produce exactly N records")
    add("--seed", type=int, default=_DEFAULTS.seed, help=f"random seed (default {_DEFAULTS.seed})")
    add("--start-time-ms", type=int, default=None,
        help="event time of the simulation's start, epoch ms (default: now, rounded to the second)")
    parser.set_defaults(handler=_run)


def _count_or_range(text: str) -> int | tuple[int, int]:
    """``8`` or ``5-15``; range checks are SimulationConfig's, so the message is the same everywhere."""
    try:
        if "-" in text.strip()[1:]:
            low, high = text.split("-", 1)
            return int(low), int(high)
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N or LOW-HIGH, got {text!r}") from None


class _TokenBucket:
    """Paces production on the wall clock; a burst of a tenth of a second keeps batches efficient."""

    def __init__(self, rate: float):
        self.rate = rate
        self.capacity = max(1.0, rate / 10)
        self.tokens = self.capacity
        self.last = time.monotonic()

    def take(self, n: int) -> None:
        while True:
            now = time.monotonic()
            self.tokens = min(self.capacity, self.tokens + (now - self.last) * self.rate)
            self.last = now
            if self.tokens >= min(n, self.capacity):
                self.tokens -= n  # may go negative for a batch larger than the burst: repaid by waiting
                return
            time.sleep((min(n, self.capacity) - self.tokens) / self.rate)


def _config_from(args: argparse.Namespace) -> SimulationConfig:
    start = args.start_time_ms if args.start_time_ms is not None else int(time.time()) * 1000
    return SimulationConfig(
        groups=args.groups, members=args.members, topics=args.topics, partitions=args.partitions,
        churn_per_minute=args.churn_per_minute, heartbeat_interval_ms=args.heartbeat_interval_ms,
        session_timeout_ms=args.session_timeout_ms, static_share=args.static_share,
        cooperative_share=args.cooperative_share, crash_share=args.crash_share, bad_share=args.bad_share,
        streams_share=args.streams_share, connect_share=args.connect_share, oversized_bytes=args.oversized_bytes, start_time_ms=start, seed=args.seed)


def _check_run_options(args: argparse.Namespace) -> None:
    if not math.isfinite(args.rate) or args.rate < 0:
        raise SimulationError(f"--rate must be a number of records per second >= 0, got {args.rate!r}")
    if args.duration is not None and (not math.isfinite(args.duration) or args.duration <= 0):
        raise SimulationError(f"--duration must be a number of seconds > 0, got {args.duration!r}")
    if args.events is not None and args.events < 1:
        raise SimulationError(f"--events must be >= 1, got {args.events!r}")
    if args.membership_topic == args.heartbeat_topic:
        raise SimulationError(f"--membership-topic and --heartbeat-topic must differ, both are "
                              f"{args.membership_topic!r}")


def _producer(bootstrap_servers: str, config: SimulationConfig, errors: list[str]):
    from confluent_kafka import Producer

    def on_error(err, msg):  # called for failed deliveries only (delivery.report.only.error)
        if len(errors) < 10:
            errors.append(f"{msg.topic()}: {err}")
        else:
            errors[-1] = f"... and more; last: {msg.topic()}: {err}"

    settings = {
        "bootstrap.servers": bootstrap_servers,
        # Idempotent with acks=all: librdkafka's retries never duplicate or reorder a group's events.
        "enable.idempotence": True,
        "acks": "all",
        # Throughput: big lz4 batches and a deep local queue; a per-record callback would cost more
        # Python time than the produce call itself, so only failures call back.
        "linger.ms": 20,
        "batch.size": 1_000_000,
        "compression.type": "lz4",
        "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576,
        "delivery.report.only.error": True,
        "on_delivery": on_error,
        "log_level": 3,
    }
    if config.bad_share > 0 and "oversized" in config.bad_kinds:
        # Oversized records are the point of that bad kind; the broker sees them lz4-compressed
        # (a few KB), so only the client's own uncompressed-size check needs to make room.
        settings["message.max.bytes"] = max(_LIBRDKAFKA_MAX_MESSAGE_BYTES, config.oversized_bytes + 65_536)
    return Producer(settings)


def send_simulated(producer, topic_of: dict[str, str], batch) -> None:
    """Send a batch of the simulation's records, each to its kind's topic."""
    for kind, key, value, _bad in batch:
        send(producer, topic_of[kind], value, key)
        producer.poll(0)


def _run(args: argparse.Namespace) -> int:
    _check_run_options(args)
    config = _config_from(args)
    duration = args.duration if args.duration is not None else (None if args.events else DEFAULT_DURATION_S)
    end_time_ms = config.start_time_ms + round(duration * 1000) if duration is not None else None

    wait_for_broker(args.bootstrap_servers, args.connect_timeout)
    ensure_topics(args.bootstrap_servers, [args.membership_topic, args.heartbeat_topic])
    errors: list[str] = []
    producer = _producer(args.bootstrap_servers, config, errors)
    topic_of = {MEMBERSHIP: args.membership_topic, HEARTBEAT: args.heartbeat_topic}
    bucket = _TokenBucket(args.rate) if args.rate > 0 else None
    # Small batches at low rates keep the pacing smooth; large ones at high rates keep Python lean.
    batch_size = 4_096 if bucket is None else int(min(4_096, max(1, args.rate / 50)))
    simulation = Simulation(config)

    started = time.monotonic()
    sent = 0
    for batch in simulation.batches(batch_size, max_records=args.events, end_time_ms=end_time_ms):
        if bucket is not None:
            bucket.take(len(batch))
        send_simulated(producer, topic_of, batch)
        sent += len(batch)
        if errors:
            break  # the broker refuses records: stop instead of piling up more failures
    remaining = producer.flush(60)
    elapsed = time.monotonic() - started
    if remaining:
        raise KafkaIOError(f"{remaining} of {sent} records were not acknowledged within 60 s "
                           f"by {args.bootstrap_servers}")
    if errors:
        raise KafkaIOError(f"records failed to reach {args.bootstrap_servers}: {'; '.join(errors)}")
    _print_summary(args, simulation, elapsed)
    return 0


def _print_summary(args: argparse.Namespace, simulation: Simulation, elapsed: float) -> None:
    stats, config = simulation.stats, simulation.config
    first = stats.first_event_time
    span = (stats.last_event_time - first) / 1000 if first is not None else 0.0
    types = ", ".join(f"{k} {v}" for k, v in sorted(stats.membership_types.items()))
    bad = ", ".join(f"{k} {v}" for k, v in sorted(stats.bad.items()) if v) or "none"
    rate = stats.total / elapsed if elapsed > 0 else float("inf")
    target = f"{args.rate:,.0f}/s" if args.rate > 0 else "unlimited"
    lines = [
        f"simulated {config.groups} groups, seed {config.seed}, start-time-ms {config.start_time_ms}, "
        f"{span:.1f} s of event time",
        f"membership records: {stats.records[MEMBERSHIP]} to {args.membership_topic} (valid: {types})",
        f"heartbeat records: {stats.records[HEARTBEAT]} to {args.heartbeat_topic}",
        f"bad records (included above): {sum(stats.bad.values())} ({bad})",
        f"churn: {stats.churn_events} events, {stats.leaves} leaves, {stats.crashes} crashes, "
        f"{stats.static_bounces} static bounces",
        f"produced {stats.total} records in {elapsed:.2f} s: {rate:,.0f} records/s (target {target})",
    ]
    print("\n".join(lines), file=sys.stdout, flush=True)

