"""The Delta tables the job writes: names and columns, the one definition.

docs/tables.md and the Spark schemas the sink uses come from here. Event times are epoch
milliseconds of event time (never wall-clock), so a replay writes identical rows; ``assignor_ms``
is the one measured value.
"""

from __future__ import annotations

from .events import Array, Field, Struct

TOPIC_PARTITION = Struct((("topic", "string"), ("partition", "int")))

ASSIGNMENTS = "assignments"
REVOCATIONS = "revocations"
BALANCE_METRICS = "balance_metrics"
MEMBER_EVENTS = "member_events"
REJECTED_EVENTS = "rejected_events"
INGEST_METRICS = "ingest_metrics"
ASSIGNMENT_CHECKS = "assignment_checks"
ALERTS = "alerts"

PARTITION_DIFFERENCE = Struct((("topic", "string"), ("partition", "int"), ("computed_member", "string"),
                               ("actual_member", "string")))
UNIT_DIFFERENCE = Struct((("unit", "string"), ("unit_id", "string"), ("computed_member", "string"),
                          ("actual_member", "string")))

_GEN = (
    Field("group_id", "string", "The group.", required=True),
    Field("generation", "long", "The generation, counted by the monitor from 1; for a group recorded from the "
          "coordinator's log, the coordinator's own number (classic) or target-assignment epoch (KIP-848).",
          required=True),
    Field("event_time", "long", "Event time (epoch ms) at which the generation completed.", required=True),
)

TABLES: dict[str, tuple[Field, ...]] = {
    ASSIGNMENTS: _GEN + (
        Field("member_id", "string", "A member of this generation; one row per member.", required=True),
        Field("group_instance_id", "string", "Its static id, if any."),
        Field("partitions", Array(TOPIC_PARTITION), "What the member holds after this generation."),
        Field("assignor", "string", "Assignor that computed it (Kafka name).", required=True),
        Field("protocol", "string", "eager or cooperative.", required=True),
        Field("trigger", "string", "join, leave, update, workload, expiry or cooperative_followup (from the "
              "coordinator's log also static_rejoin, or unknown when no member changed); "
              "probing_rebalance (Kafka Streams, warm-ups in flight) or scheduled_rebalance (Kafka Connect: "
              "lost work's delay or the back-off between revoking rounds expired).", required=True),
        Field("phase", "string", "complete; revocation (a cooperative round that withholds moving "
              "partitions); followup (the round that assigns them).", required=True),
        Field("group_type", "string", "consumer, streams or connect.", required=True),
        Field("active_tasks", Array("string"), "Kafka Streams: active tasks of the member (null for other groups)."),
        Field("standby_tasks", Array("string"), "Kafka Streams: standby replicas of the member."),
        Field("warmup_tasks", Array("string"), "Kafka Streams: warm-up replicas (copies restoring so that an "
              "active can move here once caught up; Kafka ships them as standbys)."),
        Field("process_id", "string", "Kafka Streams: the member's client (process)."),
        Field("connectors", Array("string"), "Kafka Connect: connectors the worker runs (null for other groups)."),
        Field("tasks", Array("string"), "Kafka Connect: connector tasks the worker runs, as Kafka prints them "
              "(`<connector>-<task>`)."),
    ),
    REVOCATIONS: _GEN + (
        Field("member_id", "string", "The member that gave the partition (task, connector) up.", required=True),
        Field("topic", "string", "Topic (null for Streams and Connect units)."),
        Field("partition", "int", "Partition (null for Streams and Connect units)."),
        Field("to_member", "string", "Who gets it (now, or in the follow-up round); null if nobody."),
        Field("reason", "string", "moved, member_left, unsubscribed, deleted or duplicate; Kafka Connect also "
              "balance (revoked by the incremental assignor to even out the load).", required=True),
        Field("unit", "string", "What was revoked: partition, task (a Streams active task or a Connect "
              "connector task) or connector.", required=True),
        Field("unit_id", "string", "Its id: `<topic>-<partition>`, a Streams task id (`0_3`), a Connect task "
              "(`<connector>-<task>`) or a connector name.", required=True),
    ),
    BALANCE_METRICS: _GEN + (
        Field("trigger", "string", "What opened the rebalance.", required=True),
        Field("trigger_member", "string", "The member whose change opened it (null for workload changes)."),
        Field("assignor", "string", "Assignor (Kafka name).", required=True),
        Field("protocol", "string", "eager or cooperative.", required=True),
        Field("group_type", "string", "consumer, streams or connect.", required=True),
        Field("phase", "string", "complete, revocation or followup.", required=True),
        Field("members", "int", "Members in the generation.", required=True),
        Field("partitions", "int", "Partitions assigned (assigned-partitions summed over members)."),
        Field("min_per_member", "int", "Fewest partitions of a member.", required=True),
        Field("max_per_member", "int", "Most partitions of a member.", required=True),
        Field("mean_per_member", "double", "Mean partitions per member.", required=True),
        Field("stddev_per_member", "double", "Population standard deviation of partitions per member.", required=True),
        Field("imbalance", "int", "max_per_member - min_per_member.", required=True),
        Field("balance_score", "long", "Kafka's balance score: sum over member pairs of |size difference|.", required=True),
        Field("moved", "int", "Partitions now with another member than before (incl. from departed members).", required=True),
        Field("stickiness", "double", "Share of retainable partitions that stayed with their owner.", required=True),
        Field("unassigned", "int", "Subscribed partitions nobody holds after this generation "
              "(withheld in a cooperative revocation round).", required=True),
        Field("assignor_ms", "double", "Time the assignor took (a measurement; differs between replays).", required=True),
        Field("rebalances_last_hour", "int", "Generations of this group in the hour up to this one "
              "(Kafka: rebalance-rate-per-hour).", required=True),
        Field("rebalance_started_at", "long", "Event time of the change that opened the rebalance.", required=True),
        Field("unit", "string", "What the per-member columns (min/max/mean/stddev_per_member, imbalance, "
              "balance_score, moved, stickiness) count: partition (consumer groups), active_task (Kafka "
              "Streams) or task (Kafka Connect connector tasks). `partitions` is null for Streams and Connect.", required=True),
        Field("clients", "int", "Kafka Streams: clients (processes) in the generation."),
        Field("threads", "int", "Kafka Streams: stream threads over all clients (the assignor's capacity)."),
        Field("active_tasks", "int", "Kafka Streams: active tasks assigned."),
        Field("standby_tasks", "int", "Kafka Streams: standby replicas assigned."),
        Field("warmup_tasks", "int", "Kafka Streams: warm-up replicas in flight."),
        Field("min_actives_per_thread", "double", "Kafka Streams: fewest active tasks per thread of a client."),
        Field("max_actives_per_thread", "double", "Kafka Streams: most active tasks per thread of a client."),
        Field("min_standbys_per_thread", "double", "Kafka Streams: fewest standbys per thread of a client."),
        Field("max_standbys_per_thread", "double", "Kafka Streams: most standbys per thread of a client."),
        Field("not_caught_up_actives", "int", "Kafka Streams: actives placed on a client whose lag on the task "
              "exceeds acceptable_recovery_lag (no caught-up client was left for them)."),
        Field("probing_rebalance_at", "long", "Kafka Streams: event time of the probing rebalance the assignor "
              "asked for (warm-ups in flight); null when none."),
        Field("connectors", "int", "Kafka Connect: connectors assigned."),
        Field("tasks", "int", "Kafka Connect: connector tasks assigned."),
        Field("min_connectors_per_worker", "int", "Kafka Connect: fewest connectors of a worker."),
        Field("max_connectors_per_worker", "int", "Kafka Connect: most connectors of a worker."),
        Field("min_tasks_per_worker", "int", "Kafka Connect: fewest tasks of a worker."),
        Field("max_tasks_per_worker", "int", "Kafka Connect: most tasks of a worker."),
        Field("lost_pending", "int", "Kafka Connect: lost connectors and tasks (their worker left) held back, "
              "waiting for it to return or for the delay to expire."),
        Field("revoked", "int", "Kafka Connect: connectors and tasks revoked in this round."),
        Field("delay_ms", "long", "Kafka Connect: the delay the assignor gave out (scheduled rebalance for lost "
              "work, or the back-off between revoking rounds); 0 = none."),
        Field("scheduled_rebalance_at", "long", "Kafka Connect: event time of the scheduled rebalance "
              "(generation event_time + delay_ms); null when none."),
    ),
    MEMBER_EVENTS: (
        Field("group_id", "string", "The group.", required=True),
        Field("event_time", "long", "When it was applied (event time; a late event's is the group's time then).", required=True),
        Field("member_id", "string", "The member (null for workload changes)."),
        Field("event", "string", "joined, rejoined, updated, left, expired, static_rejoin, workload_changed, "
              "workload_unchanged, leave_of_unknown_member.", required=True),
        Field("group_instance_id", "string", "Static id."),
        Field("client_id", "string", "client.id."),
        Field("host", "string", "Host."),
        Field("reason", "string", "Reason given by the client, or why the monitor expired the member."),
        Field("event_id", "string", "The input event (null for expiries)."),
        Field("previous_member_id", "string", "For static_rejoin: the member id it replaced."),
        Field("late", "boolean", "The event arrived after the group had moved past its time.", required=True),
        Field("generation_before", "long", "The group's generation when the event was applied.", required=True),
    ),
    REJECTED_EVENTS: (
        Field("group_id", "string", "The group, when it could be read."),
        Field("event_id", "string", "The event id, when it could be read."),
        Field("event_time", "long", "The event time, when it could be read."),
        Field("source_topic", "string", "Kafka topic of the record."),
        Field("source_partition", "int", "Kafka partition."),
        Field("source_offset", "long", "Kafka offset."),
        Field("kafka_timestamp", "long", "Kafka record timestamp (epoch ms)."),
        Field("record_key", "string", "Record key."),
        Field("raw_value", "string", "The record value as received."),
        Field("reason", "string", "What is wrong with it.", required=True),
    ),
    ASSIGNMENT_CHECKS: (
        Field("group_id", "string", "A group the collector observes in a live cluster, or one recorded from "
              "the coordinator's log.", required=True),
        Field("generation", "long", "The monitor's generation compared (its own count, not the coordinator's); "
              "from the coordinator's log, the coordinator's generation (or KIP-848 epoch) checked: the "
              "project's assignor on the inputs it recorded, against the assignment it recorded.", required=True),
        Field("event_time", "long", "Event time of the newest observation or generation in the comparison.", required=True),
        Field("agrees", "boolean", "The monitor's computed assignment equals the group's actual one: "
              "every partition has the same owner and both sides have the same members.", required=True),
        Field("members_compared", "int", "Members on either side.", required=True),
        Field("partitions_compared", "int", "Partitions assigned on either side.", required=True),
        Field("differing", Array(PARTITION_DIFFERENCE), "Each partition whose owner differs: the member "
              "the monitor computed and the member that actually holds it (null = nobody).", required=True),
        Field("unmatched_members", Array("string"), "Members known to only one side.", required=True),
        Field("computed_assignor", "string", "The assignor the monitor ran (Kafka name).", required=True),
        Field("reported_assignor", "string", "The assignor as the coordinator reports it."),
        Field("group_state", "string", "The coordinator's group state at the observation (STABLE)."),
        Field("units_compared", "int", "Kafka Connect: connectors and tasks assigned on either side (null for "
              "consumer groups, whose `partitions_compared` counts)."),
        Field("differing_units", Array(UNIT_DIFFERENCE), "Kafka Connect: each connector or task (`unit`: "
              "connector or task, `unit_id` as in revocations) whose worker differs: the worker the monitor's "
              "assignor gives it and the worker that holds it after the generation (null = nobody)."),
    ),
    ALERTS: (
        Field("alert_id", "string", "Stable id of the condition: rule, group and subject. Every episode of the "
              "same condition, firing and resolved, has it (the webhook's fingerprint derives from the same labels).", required=True),
        Field("rule", "string", "imbalance, rebalance_storm, member_flapping, member_expired, "
              "unassigned_partitions, assignment_disagreement, streams_not_caught_up or connect_lost_work.", required=True),
        Field("group_id", "string", "The group.", required=True),
        Field("subject", "string", "What in the group the alert is about (the member, for member_flapping); "
              "null for group-wide rules."),
        Field("severity", "string", "info, warning or critical (from the rule's configuration).", required=True),
        Field("status", "string", "firing (the episode starts) or resolved (it ends); one row each.", required=True),
        Field("value", "double", "The measured value when the row was written.", required=True),
        Field("threshold", "double", "The rule's threshold for the group (after overrides).", required=True),
        Field("fired_at", "long", "Event time (epoch ms) at which the episode started.", required=True),
        Field("resolved_at", "long", "Event time at which it ended; null on the firing row."),
        Field("generation", "long", "The group's generation when the row was written.", required=True),
        Field("summary", "string", "One line for humans.", required=True),
        Field("description", "string", "Details: the measurements and thresholds.", required=True),
    ),
    INGEST_METRICS: (
        Field("batch_id", "long", "Micro-batch id.", required=True),
        Field("records", "long", "Records consumed in the batch: membership_accepted + "
              "heartbeats_accepted + rejected.", required=True),
        Field("membership_accepted", "long", "Membership events accepted (applied in event-time order, "
              "now or in a later batch).", required=True),
        Field("heartbeats_accepted", "long", "Heartbeats accepted (those the job dropped before its stateful "
              "step included).", required=True),
        Field("heartbeats_reduced", "long", "Of the heartbeats accepted, those dropped before the job's stateful "
              "step because they could change no decision: a member's heartbeats between its first and last in "
              "one window of job.min_session_timeout_ms (0 with job.reduce_heartbeats off)."),
        Field("late", "long", "Accepted records that arrived after their group had moved past their time: "
              "membership events (applied at the group's time, and flagged in member_events) and heartbeats "
              "(applied; they change nothing). A dropped heartbeat is counted with the last heartbeat of its "
              "member's window.", required=True),
        Field("rejected", "long", "Records refused, each in rejected_events with the reason.", required=True),
        Field("unknown_member_heartbeats", "long", "Heartbeats of members the group does not know.", required=True),
        Field("groups", "long", "Groups with events in the batch.", required=True),
        Field("max_event_time", "long", "Newest event time among the batch's accepted records (null: none)."),
        Field("event_time_lag_ms", "long", "How far that newest event time was behind the driver's clock when the "
              "batch was written: the job's lag in event time (a measurement; negative for events dated ahead)."),
    ),
}
