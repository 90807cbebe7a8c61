"""The report's time window: ``--since``/``--until`` as ISO-8601 or epoch milliseconds, in UTC.

The tables keep event time as epoch milliseconds, so the window is two optional epoch-ms bounds,
both inclusive. An ISO-8601 time without an offset is taken as UTC, never as the machine's zone,
so the same command gives the same report anywhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone

from streaming.errors import TimeWindowError

_EPOCH_MS = re.compile(r"^\d+$")
EXAMPLE = "2026-11-22T03:00:00Z or 1795316400000"


def parse_time(value: str, flag: str = "time") -> int:
    """Epoch milliseconds from ISO-8601 (offset or Z; none = UTC) or from epoch milliseconds."""
    text = value.strip()
    if _EPOCH_MS.match(text):
        return int(text)
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise TimeWindowError(f"{flag}: expected an ISO-8601 time or epoch milliseconds "
                              f"(e.g. {EXAMPLE}), got {value!r}") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    millis = int(parsed.timestamp() * 1000)
    if millis < 0:
        raise TimeWindowError(f"{flag}: {value!r} is before 1970-01-01T00:00:00Z")
    return millis


def format_utc(epoch_ms: int | None) -> str:
    """``2023-11-14 22:13:20.000 UTC`` (``-`` for none): the one way the report writes a time."""
    if epoch_ms is None:
        return "-"
    t = datetime.fromtimestamp(epoch_ms / 1000, tz=timezone.utc)
    return t.strftime("%Y-%m-%d %H:%M:%S.") + f"{t.microsecond // 1000:03d} UTC"


@dataclass(frozen=True)
class TimeWindow:
    """Event-time bounds in epoch ms, both inclusive; None = open on that side."""

    since_ms: int | None = None
    until_ms: int | None = None

    @classmethod
    def parse(cls, since: str | None, until: str | None) -> "TimeWindow":
        window = cls(since_ms=None if since is None else parse_time(since, "--since"),
                     until_ms=None if until is None else parse_time(until, "--until"))
        if window.since_ms is not None and window.until_ms is not None and window.since_ms > window.until_ms:
            raise TimeWindowError(f"--since ({format_utc(window.since_ms)}) is after "
                                  f"--until ({format_utc(window.until_ms)})")
        return window

    def sql_condition(self, column: str) -> str:
        """A SQL predicate on an epoch-ms column (the bounds are integers, never user text)."""
        parts = []
        if self.since_ms is not None:
            parts.append(f"{column} >= {int(self.since_ms)}")
        if self.until_ms is not None:
            parts.append(f"{column} <= {int(self.until_ms)}")
        return " AND ".join(parts) or "TRUE"

    def describe(self) -> str:
        if self.since_ms is None and self.until_ms is None:
            return "the whole history"
        return f"from {format_utc(self.since_ms) if self.since_ms is not None else 'the start'} " \
               f"to {format_utc(self.until_ms) if self.until_ms is not None else 'the end'}"
