"""Delivery of alert transitions to a webhook in Alertmanager's format, durable and off the stream's thread.

See docs/alerts-webhook.md for the format, the configuration and the delivery guarantees.
"""

from .config import WebhookConfig
from .dispatcher import AlertDispatcher, DeliveryStats
from .errors import AlertDeliveryError, InvalidAlertError, OutboxError, WebhookConfigError
from .payload import AlertTransition, label_set_fingerprint, webhook_message

__all__ = [
    "AlertDeliveryError",
    "AlertDispatcher",
    "AlertTransition",
    "DeliveryStats",
    "InvalidAlertError",
    "OutboxError",
    "WebhookConfig",
    "WebhookConfigError",
    "label_set_fingerprint",
    "webhook_message",
]
