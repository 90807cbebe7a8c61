"""Kafka Connect's assignors (spec section 5): eager (V0) and incremental cooperative (V1/V2).

Pure functions: a :class:`ConnectGroupSpec` (and, for the incremental protocol, the leader's
previous :class:`ConnectAssignorState` and the current time) in, a :class:`ConnectAssignment` out.
"""

from .eager import assign_connect_eager
from .incremental import assign_connect_incremental, revoking_backoff_ms
from .model import (
    DEFAULT_SCHEDULED_REBALANCE_MAX_DELAY_MS,
    ConnectAssignment,
    ConnectAssignorState,
    ConnectGroupSpec,
    ConnectorTaskId,
    ConnectWorkerAssignment,
    ConnectWorkerSpec,
    InvalidConnectSpecError,
)

__all__ = [
    "DEFAULT_SCHEDULED_REBALANCE_MAX_DELAY_MS",
    "ConnectAssignment",
    "ConnectAssignorState",
    "ConnectGroupSpec",
    "ConnectWorkerAssignment",
    "ConnectWorkerSpec",
    "ConnectorTaskId",
    "InvalidConnectSpecError",
    "assign_connect_eager",
    "assign_connect_incremental",
    "revoking_backoff_ms",
]
