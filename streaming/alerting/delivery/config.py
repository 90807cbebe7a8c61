"""``[alerts.webhook]``: where and how alert transitions are POSTed, as one frozen, validated object.

Header values and the URL's path and query are secrets in practice (``Authorization``, tokens
embedded in Slack-style webhook URLs), so neither appears in ``repr`` or in any log line: logs name
the endpoint by :attr:`WebhookConfig.endpoint` (scheme, host and port only).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, Mapping
from urllib.parse import urlsplit

from streaming.errors import WebhookConfigError

#: Labels every alert carries; static labels may not redefine them (that would change identity).
RESERVED_LABELS = ("alertname", "group_id", "severity", "subject")
# Prometheus' label name syntax; Alertmanager rejects anything else.
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
# Set by the sender itself: a configured value would corrupt the request.
_RESERVED_HEADERS = ("content-type", "content-length", "host")


@dataclass(frozen=True, repr=False)
class WebhookConfig:
    #: The receiver's URL (http or https).
    url: str
    #: Per request: connecting, sending and each wait for the response (urllib's socket timeout).
    timeout_ms: int = 5_000
    #: Most alerts in one POST; more pending alerts of a group go in the next POST.
    max_batch: int = 50
    #: First retry delay; each retry doubles it up to ``backoff_max_ms``, with jitter.
    backoff_initial_ms: int = 500
    backoff_max_ms: int = 60_000
    #: Alerts held in memory ahead of the sender; the rest waits in the outbox on disk.
    queue_capacity: int = 1_000
    #: Delivered transitions are kept this long in the outbox (a replayed batch within it is ignored).
    outbox_retention_hours: int = 168
    #: The ``receiver`` field of the payload (Alertmanager puts its receiver's name there).
    receiver: str = "rebalance-monitor"
    #: The ``externalURL`` field: where a human finds the monitor (Alertmanager puts its own URL).
    external_url: str = ""
    #: Added to every alert's labels (so they are part of its fingerprint), e.g. env = "prod".
    static_labels: Mapping[str, str] = field(default_factory=dict)
    #: Sent with every request, e.g. Authorization; values are never logged.
    headers: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _validate(self)
        # Frozen all the way down: the tables are copied and read-only.
        object.__setattr__(self, "static_labels", MappingProxyType(dict(self.static_labels)))
        object.__setattr__(self, "headers", MappingProxyType(dict(self.headers)))

    @property
    def timeout_s(self) -> float:
        return self.timeout_ms / 1000.0

    @property
    def endpoint(self) -> str:
        """The URL without path, query or credentials: safe to log."""
        parts = urlsplit(self.url)
        return f"{parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}"

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.name not in ("url", "headers"))
        masked = {name: "***" for name in self.headers}
        return f"WebhookConfig(endpoint={self.endpoint!r}, {shown}, headers={masked!r})"

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], source: str = "alerts.webhook") -> "WebhookConfig":
        """Build from a parsed TOML table; an unknown key, a wrong type or a bad value is an error naming it."""
        if not isinstance(data, Mapping):
            raise WebhookConfigError(f"{source}: must be a table, got {type(data).__name__}")
        known = {f.name: f for f in fields(cls)}
        values: dict[str, Any] = {}
        for key, item in data.items():
            path = f"{source}.{key}"
            if key not in known:
                raise WebhookConfigError(f"{path}: unknown key; known keys: {', '.join(known)}")
            if key in ("static_labels", "headers"):
                if not isinstance(item, Mapping):
                    raise WebhookConfigError(f"{path}: must be a table of name = \"value\"")
                values[key] = dict(item)  # the values' types are checked with the rest below
            elif known[key].type == "int":
                if isinstance(item, bool) or not isinstance(item, int):
                    raise WebhookConfigError(f"{path}: expected an integer, got {item!r}")
                values[key] = item
            else:
                if not isinstance(item, str):
                    raise WebhookConfigError(f"{path}: expected a string, got {item!r}")
                values[key] = item
        if "url" not in values:
            raise WebhookConfigError(f"{source}.url: missing; the receiver's http(s) URL is required")
        try:
            return cls(**values)
        except WebhookConfigError as exc:
            # __post_init__ names the key; prefix it with where the table came from.
            raise WebhookConfigError(f"{source}.{exc}") from None


def _validate(config: WebhookConfig) -> None:
    parts = urlsplit(config.url) if isinstance(config.url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise WebhookConfigError(f"url: expected an http:// or https:// URL with a host, got "
                                 f"{_url_for_error(config.url)}")
    try:
        parts.port
    except ValueError:
        raise WebhookConfigError(f"url: the port is not a number in {_url_for_error(config.url)}") from None
    for name in ("timeout_ms", "max_batch", "backoff_initial_ms", "backoff_max_ms", "queue_capacity",
                 "outbox_retention_hours"):
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise WebhookConfigError(f"{name}: expected a positive integer, got {value!r}")
    if config.backoff_initial_ms > config.backoff_max_ms:
        raise WebhookConfigError(f"backoff_initial_ms: {config.backoff_initial_ms} is above backoff_max_ms "
                                 f"({config.backoff_max_ms})")
    for name in ("receiver", "external_url"):
        if not isinstance(getattr(config, name), str):
            raise WebhookConfigError(f"{name}: expected a string, got {getattr(config, name)!r}")
    if not config.receiver.strip():
        raise WebhookConfigError("receiver: must not be empty")
    for table in ("static_labels", "headers"):
        for name, value in getattr(config, table).items():
            if not isinstance(name, str) or not isinstance(value, str):
                raise WebhookConfigError(f"{table}.{name}: expected a string, got {value!r}")
    for name in config.static_labels:
        if not _LABEL_NAME.match(name):
            raise WebhookConfigError(f"static_labels.{name}: not a valid label name ([a-zA-Z_][a-zA-Z0-9_]*)")
        if name in RESERVED_LABELS:
            raise WebhookConfigError(f"static_labels.{name}: reserved; every alert sets "
                                     f"{', '.join(RESERVED_LABELS)} itself")
    for name in config.headers:
        if name.lower() in _RESERVED_HEADERS:
            raise WebhookConfigError(f"headers.{name}: set by the sender itself; remove it")


def _url_for_error(url: Any) -> str:
    """The URL as written up to its path: enough to spot the mistake, without echoing a token that
    may be in the path or the credentials (Slack-style webhook URLs carry one there)."""
    if not isinstance(url, str):
        return repr(url)
    scheme, sep, rest = url.partition("://")
    if not sep:  # no scheme at all: the start of what was written is the mistake
        scheme, rest = "", url
    host = rest.split("/", 1)[0].split("?", 1)[0].rsplit("@", 1)[-1]  # never the user:password@
    hidden = len(host) < len(rest) or "@" in rest.split("/", 1)[0]
    shown = f"{scheme}{sep}{host}{'/...' if hidden else ''}"
    hint = f" (no scheme: write http://{shown})" if not sep and host else ""
    return repr(shown) + hint
