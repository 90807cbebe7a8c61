"""One POST to the webhook, classified the way Alertmanager's webhook notifier classifies it.

2xx is delivered. 5xx, 408 and 429, a refused or reset connection and a timeout are worth retrying.
Any other status (a wrong URL, a rejected token, a payload the receiver refuses) will not get better
by retrying the same request, so the sender sets those alerts aside for this run (see
:mod:`.dispatcher`). Redirects are not followed: urllib would turn a redirected POST into a GET.
"""

from __future__ import annotations

import email.utils
import random
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timezone
from http.client import HTTPException
from typing import Callable, Mapping

_RETRYABLE_STATUSES = frozenset({408, 429})
_ERROR_BODY_CHARS = 200
_DRAIN_BYTES = 65_536


@dataclass(frozen=True)
class PostResult:
    delivered: bool
    retryable: bool
    #: What went wrong, for the log and the outbox (never contains header values).
    error: str = ""
    status: int | None = None
    #: The receiver's Retry-After (on 429/503), in seconds, if it sent a usable one.
    retry_after_s: float | None = None


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None  # urllib then raises HTTPError with the 3xx status


class WebhookClient:
    def __init__(self, url: str, headers: Mapping[str, str], timeout_s: float):
        self._url = url
        self._headers = {"User-Agent": "rebalance-monitor", **headers, "Content-Type": "application/json"}
        self._timeout_s = timeout_s
        self._opener = urllib.request.build_opener(_NoRedirect)

    def post(self, body: bytes) -> PostResult:
        request = urllib.request.Request(self._url, data=body, headers=self._headers, method="POST")
        try:
            with self._opener.open(request, timeout=self._timeout_s) as response:
                response.read(_DRAIN_BYTES)  # the answer's content does not matter, only its status
                return PostResult(delivered=True, retryable=False, status=response.status)
        except urllib.error.HTTPError as exc:
            detail = _error_body(exc)
            retryable = exc.code >= 500 or exc.code in _RETRYABLE_STATUSES
            retry_after = _retry_after_s(exc.headers.get("Retry-After") if exc.headers else None)
            return PostResult(delivered=False, retryable=retryable, status=exc.code,
                              error=f"HTTP {exc.code} {exc.reason}{f': {detail}' if detail else ''}",
                              retry_after_s=retry_after)
        except urllib.error.URLError as exc:
            return PostResult(delivered=False, retryable=True, error=f"cannot connect: {exc.reason}")
        except (TimeoutError, OSError, HTTPException) as exc:
            # TimeoutError: no response within timeout_s; OSError/HTTPException: connection reset or
            # closed mid-response. The receiver may have processed the request: resending is the
            # at-least-once side of the contract (receivers dedup by fingerprint).
            return PostResult(delivered=False, retryable=True, error=f"{type(exc).__name__}: {exc}")


def _retry_after_s(value: str | None) -> float | None:
    """Retry-After as seconds from now: either delta-seconds or an HTTP date (RFC 9110)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


def _error_body(exc: urllib.error.HTTPError) -> str:
    try:
        text = exc.read(_ERROR_BODY_CHARS).decode("utf-8", "replace")
    except (OSError, HTTPException):
        return ""
    return " ".join(text.split())


class Backoff:
    """Exponential back-off with "equal jitter": half of the current step fixed, half random.

    The fixed half keeps a minimum spacing between attempts; the random half spreads several
    monitors that lost the same receiver at the same time so they do not retry in lockstep.
    """

    def __init__(self, initial_s: float, max_s: float, rng: Callable[[], float] = random.random):
        self._initial_s = initial_s
        self._max_s = max_s
        self._rng = rng

    def delay(self, failed_attempts: int, retry_after_s: float | None = None) -> float:
        """Seconds to wait after ``failed_attempts`` failures in a row (1 for the first failure).

        A receiver's Retry-After is honoured up to ``max_s``: a receiver asking for an hour must not
        hold alerts back longer than the configured ceiling.
        """
        step = min(self._max_s, self._initial_s * 2 ** min(max(failed_attempts - 1, 0), 62))
        delay = step / 2 + self._rng() * step / 2
        return max(delay, min(retry_after_s, self._max_s)) if retry_after_s is not None else delay
