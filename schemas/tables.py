"""The Delta tables the job writes, by name. Their columns are documented in docs/tables.md."""

from __future__ import annotations

#: Valid events as read (walking skeleton: replaced by the per-generation tables of the job).
EVENTS = "events"
#: Records the job refused, with where they came from and why.
REJECTED_EVENTS = "rejected_events"

REJECTED_COLUMNS = (
    "source_topic", "source_partition", "source_offset", "kafka_timestamp", "record_key", "raw_value", "reason",
)
