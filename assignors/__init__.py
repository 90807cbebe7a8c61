"""Kafka's partition assignors as a pure library: a group spec in, an assignment out.

No Spark, no I/O, no clock: every function here is a deterministic function of its arguments.
"""

from .errors import (
    AssignmentError,
    InvalidGroupSpecError,
    RebalanceMonitorError,
    UnknownAssignorError,
)
from .model import (
    UNKNOWN_GENERATION,
    GroupAssignment,
    GroupSpec,
    MemberSpec,
    TopicPartition,
    TopicSpec,
)
from .registry import COOPERATIVE_ASSIGNORS, CONSUMER_ASSIGNOR_NAMES, assign, get_assignor

__all__ = [
    "AssignmentError",
    "COOPERATIVE_ASSIGNORS",
    "CONSUMER_ASSIGNOR_NAMES",
    "GroupAssignment",
    "GroupSpec",
    "InvalidGroupSpecError",
    "MemberSpec",
    "RebalanceMonitorError",
    "TopicPartition",
    "TopicSpec",
    "UNKNOWN_GENERATION",
    "UnknownAssignorError",
    "assign",
    "get_assignor",
]
