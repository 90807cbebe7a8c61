"""Alert transitions (rows of the ``alerts`` table) and the JSON Alertmanager POSTs to a webhook.

The message is the one Alertmanager's ``webhook_config`` receiver sends (``version`` "4"), so any
receiver written for Alertmanager (PagerDuty and Opsgenie bridges, alertmanager-webhook-logger,
custom handlers) accepts ours unchanged. Its fields, as Alertmanager fills them:

- ``status``: "firing" if any alert in the message is firing, else "resolved";
- ``groupLabels``: the labels the message is grouped by (here ``group_id``); ``groupKey`` is
  ``{}:`` followed by them in Prometheus' label-set notation;
- ``commonLabels`` / ``commonAnnotations``: the pairs every alert of the message shares;
- ``truncatedAlerts``: alerts left out by ``max_alerts``; always 0 here, because alerts beyond
  ``max_batch`` go in the next POST instead of being dropped;
- per alert: ``startsAt``, and ``endsAt`` "0001-01-01T00:00:00Z" (Go's zero time) while firing;
  ``fingerprint`` is Prometheus' label-set fingerprint (FNV-1a 64 over the sorted labels, 16 hex
  digits), so it is the same for the firing and the resolved transition of an alert, and the same
  value Alertmanager would compute for these labels.
"""

from __future__ import annotations

import json
import math
import numbers
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any, Mapping, Sequence

from streaming.errors import InvalidAlertError

WEBHOOK_VERSION = "4"
#: Go's zero time.Time, which Alertmanager writes as endsAt of an alert still firing.
GO_ZERO_TIME = "0001-01-01T00:00:00Z"
# The alert rules allow these (streaming.alerting.rules.SEVERITIES); Alertmanager itself accepts any value.
SEVERITIES = ("info", "warning", "critical")
STATUSES = ("firing", "resolved")

_FNV64_OFFSET = 14695981039346656037
_FNV64_PRIME = 1099511628211
_MASK64 = (1 << 64) - 1
_SEPARATOR = 0xFF  # cannot occur in UTF-8, so "a"+"bc" and "ab"+"c" hash differently


@dataclass(frozen=True)
class AlertTransition:
    """One row of the ``alerts`` table: an alert episode starting (firing) or ending (resolved).

    ``(alert_id, fired_at, status)`` identifies the transition; submitting it again is a no-op.
    """

    alert_id: str
    rule: str
    group_id: str
    subject: str | None
    severity: str
    status: str
    value: float
    threshold: float
    fired_at: int
    resolved_at: int | None
    generation: int | None
    summary: str
    description: str

    @property
    def key(self) -> tuple[str, int, str]:
        return self.alert_id, self.fired_at, self.status

    @classmethod
    def from_row(cls, row: Any) -> "AlertTransition":
        """Validate a dict (or a Spark ``Row``) with the ``alerts`` table's columns."""
        if hasattr(row, "asDict"):
            row = row.asDict()
        if not isinstance(row, Mapping):
            raise InvalidAlertError(f"alert row: expected a mapping of the alerts table's columns, "
                                    f"got {type(row).__name__}")
        where = f"alert row {row.get('alert_id')!r}"

        def text(name: str, *, optional: bool = False) -> str | None:
            if name not in row:
                raise InvalidAlertError(f"{where}: missing field {name!r}")
            value = row[name]
            if value is None and optional:
                return None
            if not isinstance(value, str) or (not optional and name not in ("summary", "description")
                                              and not value):
                raise InvalidAlertError(f"{where}: field {name!r} must be a non-empty string, got {value!r}")
            return value

        def integer(name: str, *, optional: bool = False) -> int | None:
            if name not in row:
                raise InvalidAlertError(f"{where}: missing field {name!r}")
            value = row[name]
            if value is None and optional:
                return None
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise InvalidAlertError(f"{where}: field {name!r} must be an integer, got {value!r}")
            return int(value)

        def number(name: str) -> float:
            if name not in row:
                raise InvalidAlertError(f"{where}: missing field {name!r}")
            value = row[name]
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value):
                raise InvalidAlertError(f"{where}: field {name!r} must be a number, got {value!r}")
            return float(value)

        transition = cls(
            alert_id=text("alert_id"), rule=text("rule"), group_id=text("group_id"),
            subject=text("subject", optional=True), severity=text("severity"), status=text("status"),
            value=number("value"), threshold=number("threshold"), fired_at=integer("fired_at"),
            resolved_at=integer("resolved_at", optional=True), generation=integer("generation", optional=True),
            summary=text("summary"), description=text("description"))
        if transition.severity not in SEVERITIES:
            raise InvalidAlertError(f"{where}: severity {transition.severity!r} is not one of {SEVERITIES}")
        if transition.status not in STATUSES:
            raise InvalidAlertError(f"{where}: status {transition.status!r} is not one of {STATUSES}")
        if transition.status == "resolved" and transition.resolved_at is None:
            raise InvalidAlertError(f"{where}: a resolved transition needs resolved_at")
        return transition

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "AlertTransition":
        return cls(**json.loads(text))


def label_set_fingerprint(labels: Mapping[str, str]) -> str:
    """Prometheus' ``LabelSet.Fingerprint()`` as 16 lowercase hex digits (what Alertmanager sends)."""
    h = _FNV64_OFFSET
    for name in sorted(labels):
        for part in (name, labels[name]):
            for byte in part.encode("utf-8"):
                h = ((h ^ byte) * _FNV64_PRIME) & _MASK64
            h = ((h ^ _SEPARATOR) * _FNV64_PRIME) & _MASK64
    return f"{h:016x}"


def rfc3339_utc(epoch_ms: int) -> str:
    """Epoch milliseconds as Go's RFC 3339 (nano) text in UTC: trailing zeros of the fraction dropped."""
    seconds, millis = divmod(epoch_ms, 1000)
    base = datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    fraction = f".{millis:03d}".rstrip("0") if millis else ""
    return f"{base}{fraction}Z"


def alert_labels(transition: AlertTransition, static_labels: Mapping[str, str]) -> dict[str, str]:
    labels = dict(static_labels)
    labels.update(alertname=transition.rule, group_id=transition.group_id, severity=transition.severity)
    if transition.subject:
        labels["subject"] = transition.subject
    return labels


def _number_text(value: float) -> str:
    return str(int(value)) if value.is_integer() else repr(value)


def webhook_alert(transition: AlertTransition, static_labels: Mapping[str, str]) -> dict[str, Any]:
    """One entry of the message's ``alerts`` array."""
    labels = alert_labels(transition, static_labels)
    annotations = {"summary": transition.summary, "description": transition.description,
                   "value": _number_text(transition.value), "threshold": _number_text(transition.threshold)}
    if transition.generation is not None:
        annotations["generation"] = str(transition.generation)
    resolved = transition.status == "resolved"
    return {
        "status": transition.status,
        "labels": dict(sorted(labels.items())),
        "annotations": dict(sorted(annotations.items())),
        "startsAt": rfc3339_utc(transition.fired_at),
        "endsAt": rfc3339_utc(transition.resolved_at) if resolved else GO_ZERO_TIME,
        "generatorURL": "",
        "fingerprint": label_set_fingerprint(labels),
    }


def _label_set_text(labels: Mapping[str, str]) -> str:
    # Prometheus' LabelSet.String(): sorted name="value" pairs, values quoted like Go's %q.
    return "{" + ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in sorted(labels.items())) + "}"


def _common(maps: Sequence[Mapping[str, str]]) -> dict[str, str]:
    first, *rest = maps
    return {k: v for k, v in sorted(first.items()) if all(m.get(k) == v for m in rest)}


def webhook_message(group_id: str, transitions: Sequence[AlertTransition], *, receiver: str,
                    static_labels: Mapping[str, str], external_url: str = "") -> dict[str, Any]:
    """The whole POST body for some transitions of one consumer group, in Alertmanager's format."""
    if not transitions:
        raise ValueError("webhook_message needs at least one transition")
    alerts = [webhook_alert(t, static_labels) for t in transitions]
    group_labels = {"group_id": group_id}
    return {
        "version": WEBHOOK_VERSION,
        "groupKey": "{}:" + _label_set_text(group_labels),
        "truncatedAlerts": 0,
        "status": "firing" if any(a["status"] == "firing" for a in alerts) else "resolved",
        "receiver": receiver,
        "groupLabels": group_labels,
        "commonLabels": _common([a["labels"] for a in alerts]),
        "commonAnnotations": _common([a["annotations"] for a in alerts]),
        "externalURL": external_url,
        "alerts": alerts,
    }
