"""``[offsets_topic]``: the group coordinator's log as a source of the job (docs/coordinator-log.md).

Its own section, because the log may live on another cluster than the monitor's topics, with its
own security settings (the job needs Describe and Read on ``__consumer_offsets`` there).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Mapping

from streaming.redaction import mask_secrets


@dataclass(frozen=True)
class OffsetsTopicConfig:
    #: Read the coordinator's log (off: only the event topics, as before).
    enabled: bool = False
    #: The observed cluster; empty: the [kafka] cluster.
    bootstrap_servers: str = ""
    #: The topic read; a copy of the log can stand in for it (tests, a mirrored cluster).
    topic: str = "__consumer_offsets"
    #: "earliest": each group's latest state that compaction kept, then everything after it.
    starting_offsets: str = "earliest"
    #: Records of the log per micro-batch when catching up (0 = no limit): offset commits, nearly all
    #: of it, are dropped cheaply, but a big cluster's log read from the earliest offset is large.
    max_offsets_per_trigger: int = 2_000_000
    #: On the monitor's cluster: where the job's publisher writes the observed cluster's topics.
    metadata_topic: str = "rebalance.topic-metadata"
    #: Seconds between two descriptions of the observed cluster's topics (0: only at start).
    metadata_interval_s: int = 10
    #: Passed to the Kafka source and the admin client as kafka.<key> (SASL/SSL of the observed cluster).
    options: Mapping[str, str] = field(default_factory=dict)

    def bootstrap(self, kafka) -> str:
        return self.bootstrap_servers or kafka.bootstrap_servers

    def source_options(self, kafka) -> dict[str, str]:
        """Spark's Kafka source on the coordinator's log."""
        opts = {"kafka.bootstrap.servers": self.bootstrap(kafka), "subscribe": self.topic,
                "startingOffsets": self.starting_offsets, "failOnDataLoss": "false",
                # The coordinator writes a transactional offset commit's records before its marker:
                # only committed ones are history.
                "kafka.isolation.level": "read_committed", "kafka.fetch.max.wait.ms": "50"}
        if self.max_offsets_per_trigger > 0:
            opts["maxOffsetsPerTrigger"] = str(self.max_offsets_per_trigger)
        inherited = {} if self.bootstrap_servers else kafka.options  # the monitor's cluster: its settings
        for key, value in {**inherited, **self.options}.items():
            opts[key if key.startswith("kafka.") else f"kafka.{key}"] = str(value)
        return opts

    def admin_options(self, kafka) -> dict[str, str]:
        """An AdminClient on the observed cluster (the topic-metadata publisher's)."""
        opts = {"bootstrap.servers": self.bootstrap(kafka)}
        if not self.bootstrap_servers:  # the monitor's cluster: its settings apply
            opts.update(kafka.admin_options())
        opts.update({key.removeprefix("kafka."): str(value) for key, value in self.options.items()})
        return opts

    def metadata_source_options(self, kafka) -> dict[str, str]:
        """Spark's Kafka source on the topic-metadata topic (on the monitor's cluster)."""
        opts = kafka.source_options(self.metadata_topic)
        opts["startingOffsets"] = "earliest"  # every description since the first: replays need them
        return opts

    def __repr__(self) -> str:  # the options may hold credentials
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.name != "options")
        return f"OffsetsTopicConfig({shown}, options={mask_secrets(self.options)!r})"
