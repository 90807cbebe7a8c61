"""The job's configuration: one frozen, validated object read from TOML.

Unknown keys and wrong types are errors that name the key, because a typo in a config file
otherwise silently falls back to a default.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping

from streaming.alerting.delivery.config import WebhookConfig
from streaming.alerting.rules import AlertRules, parse_alert_rules
from streaming.engine.settings import EngineSettings
from streaming.errors import ConfigError
from streaming.paths import conf_dir
from streaming.redaction import mask_secrets
from streaming.storage import StorageConfig
from streaming.source_config import OffsetsTopicConfig

DEFAULT_CONFIG_FILE = "rebalance-monitor.toml"
#: What Spark's processing-time trigger reads: a number and a unit ("2 seconds", "500 milliseconds").
_DURATION = re.compile(r"^\s*\d+\s+(milliseconds?|seconds?|minutes?|hours?|days?)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class KafkaConfig:
    bootstrap_servers: str = "127.0.0.1:19092"
    membership_topic: str = "rebalance.membership"
    heartbeat_topic: str = "rebalance.heartbeats"
    starting_offsets: str = "earliest"
    # Heartbeat records per micro-batch when there is a backlog (catching up). A batch has about a
    # second of fixed cost (planning, Python workers, state commit, Delta commits), so bigger
    # batches catch up faster: 500,000 ran at 1.3-1.4x the events/s of 200,000 (docs/benchmarks/job.md).
    # Live traffic is far below it, so it does not change the latency of a running job.
    max_offsets_per_trigger: int = 500_000
    max_record_bytes: int = 1_048_576
    #: How long the job waits for the cluster to answer at start before it gives up, naming it.
    connect_timeout_s: int = 15
    #: Create the input topics at start when they are missing (else: fail at once, naming them).
    create_topics: bool = True
    topic_partitions: int = 3
    #: 0 = the broker's default.replication.factor.
    topic_replication_factor: int = 0
    options: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.starting_offsets not in ("earliest", "latest"):
            try:
                offsets = json.loads(self.starting_offsets)
            except ValueError:
                offsets = None
            if not isinstance(offsets, dict):
                raise ConfigError(f"kafka.starting_offsets: {self.starting_offsets!r} is not 'earliest', 'latest' "
                                  "or Spark's JSON offsets (e.g. '{\"rebalance.heartbeats\": {\"0\": 42}}')")

    @property
    def event_topics(self) -> tuple[str, str]:
        """(membership topic, heartbeat topic): the order the job reads them in, which its
        checkpoint records (a query's sources are matched by position)."""
        return self.membership_topic, self.heartbeat_topic

    def source_options(self, topic: str) -> dict[str, str]:
        """Options for Spark's Kafka source reading ``topic``, with pass-through settings prefixed ``kafka.``.

        Only the heartbeat topic gets ``maxOffsetsPerTrigger``: membership events are few, and
        reading all of them each micro-batch means every membership event up to the heartbeats'
        time has arrived when the job applies that time (see docs/time.md).
        """
        opts = {
            "kafka.bootstrap.servers": self.bootstrap_servers,
            "subscribe": topic,
            "startingOffsets": self.starting_offsets,
            # A topic recreated by a test or an operator must not kill a long-running monitor.
            "failOnDataLoss": "false",
            # The Kafka consumer sends its next fetch before it hands back the records it has, and
            # sends no other fetch to that broker while one is pending. On a quiet partition (the
            # membership topic's) the broker holds that fetch for fetch.max.wait.ms (500 ms by
            # default), so the next micro-batch's task waited for it: 0.1-0.4 s of every batch at
            # 10K heartbeats/s. [kafka.options] can still set it.
            "kafka.fetch.max.wait.ms": "50",
        }
        if topic == self.heartbeat_topic and self.max_offsets_per_trigger > 0:
            opts["maxOffsetsPerTrigger"] = str(self.max_offsets_per_trigger)
        for key, value in self.options.items():
            opts[key if key.startswith("kafka.") else f"kafka.{key}"] = str(value)
        return opts

    def admin_options(self) -> dict[str, str]:
        """Settings for a Kafka AdminClient that talks to the cluster as the Kafka source does."""
        timeout_ms = str(self.connect_timeout_s * 1000)
        opts = {"bootstrap.servers": self.bootstrap_servers, "request.timeout.ms": timeout_ms,
                "default.api.timeout.ms": timeout_ms}
        opts.update({key.removeprefix("kafka."): str(value) for key, value in self.options.items()})
        return opts

    def redacted_options(self) -> dict[str, str]:
        return mask_secrets(self.options)

    def __repr__(self) -> str:  # the options may hold credentials (SASL, SSL)
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.name != "options")
        return f"KafkaConfig({shown}, options={self.redacted_options()!r})"


@dataclass(frozen=True)
class OutputConfig:
    root: str = "data"
    checkpoint: str = "checkpoints/job"
    app_id: str = "rebalance-monitor-v1"

    def table_path(self, table: str) -> str:
        return str(Path(self.root).resolve() / table) if "://" not in self.root else f"{self.root.rstrip('/')}/{table}"

    @property
    def checkpoint_path(self) -> str:
        return self.checkpoint if "://" in self.checkpoint else str(Path(self.checkpoint).resolve())


@dataclass(frozen=True)
class JobConfig:
    trigger_interval: str = "2 seconds"
    #: Changes within this much event time of the first one become one generation.
    coalesce_ms: int = 1_000
    #: How far behind a group's newest heartbeat a membership event may arrive and still be
    #: applied in event-time order (the engine's safe time; see EngineSettings).
    allowed_lateness_ms: int = 2_000
    #: Event time between a cooperative revocation round and its follow-up generation.
    cooperative_followup_ms: int = 500
    #: A group whose members all stopped heartbeating is moved on by the stream's time once that
    #: is this far past the group's own time (wider than the skew between Kafka partitions); also
    #: the watermark delay of the stateful operator.
    idle_group_grace_ms: int = 30_000
    #: Groups are spread over this many keys of Spark's stateful operator (each key costs Spark a
    #: fixed amount per batch). Part of the checkpoint: changing it needs a new checkpoint.
    state_buckets: int = 32
    #: Kafka's group.min.session.timeout.ms on the observed cluster: the smallest session timeout
    #: a member can have. A join or update that declares less is refused, as the coordinator refuses
    #: it (INVALID_SESSION_TIMEOUT); and the heartbeats a member sends within this much time of each
    #: other cannot expire it, which is what lets the job drop most of them before the shuffle
    #: (streaming/job/heartbeat_reduction.py).
    min_session_timeout_ms: int = 6_000
    #: Drop the heartbeats that cannot change any decision before the shuffle into the stateful
    #: operator (they are still counted as accepted). Off only to compare: the history is the same.
    reduce_heartbeats: bool = True
    #: Recognise heartbeats of the contract's canonical shape (compact JSON, the contract's field
    #: order, no escapes: what the collector and simulator write) in one vectorised Python step
    #: instead of Spark's full parse, exactly (streaming/job/heartbeat_screen.py). Off only to
    #: compare: the history is the same.
    screen_heartbeats: bool = True

    def __post_init__(self) -> None:
        if self.state_buckets < 1:
            raise ConfigError(f"job.state_buckets: must be at least 1, got {self.state_buckets}")
        if self.min_session_timeout_ms < 1:
            raise ConfigError(f"job.min_session_timeout_ms: must be at least 1 ms (Kafka's "
                              f"group.min.session.timeout.ms, 6000 by default), got {self.min_session_timeout_ms}")
        if not isinstance(self.trigger_interval, str) or not _DURATION.match(self.trigger_interval):
            raise ConfigError(f"job.trigger_interval: {self.trigger_interval!r} is not a duration; write it as "
                              "Spark does, e.g. '2 seconds', '500 milliseconds' or '0 seconds' (as fast as it can)")

    def engine_settings(self, alert_rules: AlertRules) -> EngineSettings:
        """The engine's settings: these timings and ``alert_rules`` (the engine has no defaults)."""
        return EngineSettings(coalesce_ms=self.coalesce_ms, allowed_lateness_ms=self.allowed_lateness_ms,
                              cooperative_followup_ms=self.cooperative_followup_ms,
                              idle_group_grace_ms=self.idle_group_grace_ms,
                              min_session_timeout_ms=self.min_session_timeout_ms, alert_rules=alert_rules)


@dataclass(frozen=True)
class AlertsConfig:
    """``[alerts]``: the rules (see :mod:`streaming.alerting.rules`) and, optionally, the webhook."""
    rules: AlertRules = field(default_factory=AlertRules)
    webhook: WebhookConfig | None = None
    #: Directory (or s3a:// URI) of the webhook's outbox, where undelivered alerts survive a restart;
    #: default: <checkpoint>-alert-outbox, beside the checkpoint on the same storage, so that a
    #: driver restarted on another host finds it as it finds the checkpoint.
    outbox: str | None = None

    def outbox_dir(self, output: "OutputConfig") -> str:
        if self.outbox:
            return self.outbox if "://" in self.outbox else str(Path(self.outbox).resolve())
        return output.checkpoint_path.rstrip("/") + "-alert-outbox"


def _parse_alerts(data: Any, source: str) -> AlertsConfig:
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: [alerts] must be a table")
    rules = parse_alert_rules({k: v for k, v in data.items() if k != "outbox"}, f"{source}: alerts")
    webhook = WebhookConfig.from_mapping(data["webhook"], f"{source}: alerts.webhook") if "webhook" in data else None
    outbox = data.get("outbox")
    if outbox is not None:
        _check_type(f"{source}: alerts.outbox", outbox, "str")
    return AlertsConfig(rules=rules, webhook=webhook, outbox=outbox)


@dataclass(frozen=True)
class MetricsConfig:
    """``[metrics]``: the Prometheus endpoint on the driver (docs/metrics.md)."""
    #: 0 = no endpoint.
    port: int = 9108
    host: str = "127.0.0.1"
    #: Group id patterns (fnmatch) whose per-group series are exported ...
    groups: tuple[str, ...] = ("*",)
    #: ... and at most this many groups (the most recently rebalanced), to bound the series.
    max_groups: int = 1000


@dataclass(frozen=True)
class SparkConfig:
    master: str = "local[2]"
    conf: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Config:
    kafka: KafkaConfig = field(default_factory=KafkaConfig)
    output: OutputConfig = field(default_factory=OutputConfig)
    job: JobConfig = field(default_factory=JobConfig)
    spark: SparkConfig = field(default_factory=SparkConfig)
    alerts: AlertsConfig = field(default_factory=AlertsConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    storage: StorageConfig = field(default_factory=StorageConfig)
    offsets_topic: OffsetsTopicConfig = field(default_factory=OffsetsTopicConfig)

    def engine_settings(self) -> EngineSettings:
        """What the per-group engine needs: the [job] timings and the alert rules."""
        return self.job.engine_settings(self.alerts.rules)

    def with_overrides(self, *, bootstrap_servers: str | None = None, membership_topic: str | None = None,
                       heartbeat_topic: str | None = None, output: str | None = None,
                       checkpoint: str | None = None) -> "Config":
        """The common command-line flags, which win over the file."""
        kafka = replace(self.kafka, **{k: v for k, v in {
            "bootstrap_servers": bootstrap_servers, "membership_topic": membership_topic,
            "heartbeat_topic": heartbeat_topic}.items() if v is not None})
        out = replace(self.output, **{k: v for k, v in {"root": output, "checkpoint": checkpoint}.items()
                                      if v is not None})
        return replace(self, kafka=kafka, output=out)


_SECTIONS = {"kafka": KafkaConfig, "output": OutputConfig, "job": JobConfig, "spark": SparkConfig,
             "metrics": MetricsConfig, "offsets_topic": OffsetsTopicConfig, "storage": StorageConfig}
_FREE_FORM = {("kafka", "options"), ("spark", "conf"), ("offsets_topic", "options")}
#: Strings whose empty value means "as elsewhere" (the offsets topic's cluster: the [kafka] one).
_MAY_BE_EMPTY = {("offsets_topic", "bootstrap_servers"), ("storage", "uri"), ("storage", "endpoint"),
                 ("storage", "credentials_file")}


def _check_type(path: str, value: Any, expected: Any) -> Any:
    if expected == "tuple[str, ...]":
        if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.strip() for v in value):
            raise ConfigError(f"{path}: expected a list of non-empty strings, got {value!r}")
        return tuple(value)
    kind = {"int": int, "str": str, "bool": bool}.get(expected) if isinstance(expected, str) else expected
    if kind is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{path}: expected true or false, got {value!r}")
    elif kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{path}: expected an integer, got {value!r}")
        if value < 0:
            raise ConfigError(f"{path}: must not be negative, got {value}")
    elif kind is str:
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{path}: expected a non-empty string, got {value!r}")
    return value


def parse_config(data: Mapping[str, Any], source: str = "config") -> Config:
    sections = {}
    for name, value in data.items():
        if name == "alerts":
            sections[name] = _parse_alerts(value, source)
            continue
        if name not in _SECTIONS:
            raise ConfigError(f"{source}: unknown section [{name}]; known: {', '.join(_SECTIONS)}, alerts")
        if not isinstance(value, Mapping):
            raise ConfigError(f"{source}: [{name}] must be a table")
        cls = _SECTIONS[name]
        known = {f.name: f for f in fields(cls)}
        values = {}
        for key, item in value.items():
            path = f"{source}: {name}.{key}"
            if key not in known:
                raise ConfigError(f"{path}: unknown key; known keys of [{name}]: {', '.join(known)}")
            if (name, key) in _FREE_FORM:
                if not isinstance(item, Mapping):
                    raise ConfigError(f"{path}: must be a table of settings")
                values[key] = {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in item.items()}
            elif (name, key) in _MAY_BE_EMPTY and item == "":
                values[key] = item
            else:
                values[key] = _check_type(path, item, known[key].type)
        try:
            sections[name] = cls(**values)
        except ConfigError as exc:  # a check across keys, or of a value's form: name the file too
            raise ConfigError(f"{source}: {exc}") from None
    storage = sections.get("storage")
    if storage is not None and storage.uri:  # relative tables and checkpoint live under storage.uri
        output = sections.get("output", OutputConfig())
        sections["output"] = replace(output, root=storage.resolve(output.root),
                                     checkpoint=storage.resolve(output.checkpoint))
    return Config(**sections)


def load_config(path: str | Path | None = None) -> Config:
    """Read the TOML file (default ``conf/rebalance-monitor.toml``) and validate it."""
    file = Path(path) if path else conf_dir() / DEFAULT_CONFIG_FILE
    if not file.exists():
        if path:
            raise ConfigError(f"config file {file} does not exist")
        return Config()
    try:
        data = tomllib.loads(file.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: not valid TOML: {exc}") from None
    return parse_config(data, source=str(file))
