"""Which settings are secret, and how they are shown: the one place that knows.

Kafka client settings (Spark's ``kafka.*`` options, librdkafka properties) carry credentials under
names like ``sasl.jaas.config``, ``sasl.password``, ``ssl.key.password`` or
``sasl.oauthbearer.client.secret``. Their values never reach a log line, an error message or a
``repr``: configuration objects, the collector and the job mask them with these functions.
"""

from __future__ import annotations

from typing import Mapping

#: Substrings of a setting's name that mark its value as a credential (matched case-insensitively).
SECRET_KEY_PARTS = ("password", "secret", "jaas", "token", "key")
MASK = "***"


def is_secret(key: str) -> bool:
    k = key.lower()
    return any(part in k for part in SECRET_KEY_PARTS)


def mask_secrets(settings: Mapping[str, object]) -> dict[str, object]:
    """The settings with every credential-like value replaced, for logs, messages and reprs."""
    return {k: (MASK if is_secret(k) else v) for k, v in settings.items()}


def redact(text: str, settings: Mapping[str, object]) -> str:
    """``text`` with every secret value of ``settings`` masked (client libraries quote bad values)."""
    for key, value in settings.items():
        if is_secret(key) and value and len(str(value)) >= 3:
            text = text.replace(str(value), MASK)
    return text
