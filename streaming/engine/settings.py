"""What the engine needs to know besides the events: its timings and the alert rules.

The values come from the job's configuration (:meth:`streaming.config.JobConfig.engine_settings`),
which holds every default: this class has none, so a default cannot drift between the TOML, the
configuration and the engine. Frozen and hashable: the job ships it to its Python workers.
"""

from __future__ import annotations

from dataclasses import dataclass

from streaming.alerting.rules import AlertRules


@dataclass(frozen=True)
class EngineSettings:
    #: Changes within this much event time of the first one become one generation.
    coalesce_ms: int
    #: How far behind a group's newest heartbeat a membership event may arrive and still be
    #: applied in event-time order: the engine applies a group's events up to its newest
    #: heartbeat minus this (its *safe time*).
    allowed_lateness_ms: int
    #: Event time between a cooperative revocation round and its follow-up generation.
    cooperative_followup_ms: int
    #: How far the stream's time (its newest heartbeat) must be past a group's own time before it
    #: moves the group on: the job's watermark delay. Only a silent group (every member stopped
    #: heartbeating) needs the stream's time; the margin absorbs the skew between Kafka partitions
    #: read at different speeds, so a group whose heartbeats are merely not read yet is never
    #: expired for it, and Spark drops no heartbeat as late unless it is this far behind.
    idle_group_grace_ms: int
    #: Kafka's group.min.session.timeout.ms: a join or update declaring a shorter session timeout
    #: is refused, as the coordinator refuses it. So every member's timeout is at least this, which
    #: the job's heartbeat reduction relies on (streaming/job/heartbeat_reduction.py).
    min_session_timeout_ms: int
    alert_rules: AlertRules
