"""The errors of alert delivery, under the project's root exception."""

from __future__ import annotations

from assignors.errors import RebalanceMonitorError

from ..config import ConfigError


class AlertDeliveryError(RebalanceMonitorError):
    """Root of the errors of alert delivery."""


class InvalidAlertError(AlertDeliveryError, ValueError):
    """An alert transition row lacks a field or has a bad value; the message names the field."""


class WebhookConfigError(AlertDeliveryError, ConfigError):
    """A key of ``[alerts.webhook]`` is missing, unknown or has a bad value; the message names it."""


class OutboxError(AlertDeliveryError):
    """The outbox file cannot be opened or written (a full disk, a remote directory, a closed dispatcher)."""
