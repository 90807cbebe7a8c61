"""Kafka Streams' task assignor (spec section 4): ``HighAvailabilityTaskAssignor`` (KIP-441), and
``FallbackPriorTaskAssignor`` when the changelog end offsets are missing, as Kafka 4.1 runs them.

A :class:`StreamsGroupSpec` (clients with capacity, lags and tags; stateful and stateless tasks;
configs; the leader's ``now_ms``) in, a :class:`StreamsAssignment` (active, standby and warm-up
tasks per client, and whether and when to probe again) out.
"""

from .high_availability import assign_streams_ha
from .model import (
    LATEST_OFFSET,
    LONG_MAX,
    UNKNOWN_OFFSET_SUM,
    InvalidStreamsSpecError,
    StreamsAssignment,
    StreamsAssignmentConfig,
    StreamsClient,
    StreamsClientAssignment,
    StreamsGroupSpec,
    task_sort_key,
)

__all__ = [
    "LATEST_OFFSET",
    "LONG_MAX",
    "UNKNOWN_OFFSET_SUM",
    "InvalidStreamsSpecError",
    "StreamsAssignment",
    "StreamsAssignmentConfig",
    "StreamsClient",
    "StreamsClientAssignment",
    "StreamsGroupSpec",
    "assign_streams_ha",
    "task_sort_key",
]
