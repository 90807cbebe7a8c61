"""Every error the job and its commands raise on purpose, under one root.

:class:`MonitorError` is to ``streaming/`` what :mod:`assignors.errors` is to the assignors; both
derive from the project's root :class:`~assignors.errors.RebalanceMonitorError`, which the command
line turns into one line on stderr and exit code 2. Catch the specific type where a caller can do
something about it, the root where it can only report it. Messages name the setting, file, topic,
group or field at fault and say what to do.
"""

from __future__ import annotations

from assignors.errors import RebalanceMonitorError


class MonitorError(RebalanceMonitorError):
    """Root of the errors of the job, its sources and sinks, and the command line."""


# -- configuration ---------------------------------------------------------------------------------


class ConfigError(MonitorError):
    """The configuration file or a flag has a bad key or value."""


class AlertConfigError(ConfigError):
    """A bad key or value in the ``[alerts]`` configuration."""


class CheckpointMismatchError(ConfigError):
    """The checkpoint's state was written with keys or a layout this job cannot resume."""


# -- input -----------------------------------------------------------------------------------------


class InvalidEventError(MonitorError, ValueError):
    """A membership event the engine cannot take; the message names the field at fault."""


class CoordinatorRecordError(MonitorError, ValueError):
    """A record of ``__consumer_offsets`` that :mod:`streaming.coordinator_log` cannot decode.

    The message names the record type, the value version and what is wrong (an unknown type or
    version, truncated at byte N, trailing bytes, bad UTF-8, ...), so that the record can be put in
    ``rejected_events`` with that reason while the job goes on.
    """


# -- alert delivery --------------------------------------------------------------------------------


class AlertDeliveryError(MonitorError):
    """Root of the errors of alert delivery."""


class InvalidAlertError(AlertDeliveryError, ValueError):
    """An alert transition row lacks a field or has a bad value; the message names the field."""


class WebhookConfigError(AlertDeliveryError, ConfigError):
    """A key of ``[alerts.webhook]`` is missing, unknown or has a bad value; the message names it."""


class OutboxError(AlertDeliveryError):
    """The outbox file cannot be opened or written (a full disk, a remote directory, a closed dispatcher)."""


# -- the outside world -----------------------------------------------------------------------------


class BrokerError(MonitorError):
    """The embedded broker could not be started, reached or stopped."""


class BrokerUnreachableError(MonitorError):
    """No broker of the configured Kafka cluster answered in time."""


class InputTopicsError(MonitorError):
    """The job's input topics do not exist and may not, or could not, be created."""


class CheckpointInUseError(MonitorError):
    """Another job runs on the same checkpoint."""


class StorageError(MonitorError):
    """The tables' or the checkpoint's storage cannot be reached or read as configured ([storage])."""


class KafkaIOError(MonitorError):
    """A topic could not be created or events could not be delivered."""


class CollectorError(MonitorError):
    """The collector's configuration is unusable or its cluster could not be read."""


class SparkSetupError(MonitorError):
    """Spark cannot be started as configured (typically: the jars were never fetched)."""


class SimulationError(MonitorError, ValueError):
    """A simulation option is out of range; the message names the option and the value."""


# -- reading the tables back -----------------------------------------------------------------------


class QueryError(MonitorError):
    """A statement that cannot run: bad SQL, not read-only, or no tables where --output points."""


class NoGroupHistoryError(MonitorError):
    """The group has no generations in the tables (or none in the requested window)."""


class TimeWindowError(MonitorError):
    """A --since/--until value that is no time, or a window that ends before it starts."""
