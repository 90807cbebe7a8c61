"""The project's root exception and the assignor-level errors.

Every error the project raises on purpose derives from :class:`RebalanceMonitorError`, so a caller
can catch the project's errors without catching programming mistakes. Messages name the group,
member or topic at fault and say what to do.
"""


class RebalanceMonitorError(Exception):
    """Root of every error rebalance-monitor raises on purpose."""


class InvalidGroupSpecError(RebalanceMonitorError, ValueError):
    """A group spec is malformed: the message names the field and the value at fault."""


class UnknownAssignorError(RebalanceMonitorError, KeyError):
    """An assignor name that no registered assignor has."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class AssignmentError(RebalanceMonitorError):
    """An assignor could not produce a valid assignment (Kafka's PartitionAssignorException)."""
