"""Delivery of alert transitions to a webhook in Alertmanager's format, durable and off the stream's thread.

See docs/alerts-webhook.md for the format, the configuration and the delivery guarantees.
"""

import importlib

#: The public names and their modules, imported on first use (PEP 562): the configuration needs
#: only :class:`WebhookConfig`, not the dispatcher's HTTP client and threads.
_EXPORTS = {
    "WebhookConfig": "config",
    "AlertDispatcher": "dispatcher", "DeliveryStats": "dispatcher",
    "AlertTransition": "payload", "label_set_fingerprint": "payload", "webhook_message": "payload",
}
#: Re-exported for callers of this package (they live in streaming.errors).
_ERRORS = ("AlertDeliveryError", "InvalidAlertError", "OutboxError", "WebhookConfigError")


def __getattr__(name: str):
    if name in _ERRORS:
        return getattr(importlib.import_module("streaming.errors"), name)
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


__all__ = sorted([*_EXPORTS, *_ERRORS])
