"""Alert evaluation for one group, in event time: each condition fires once per episode and
resolves when it clears, as rows of the ``alerts`` table.

The engine (:mod:`streaming.engine`) tells the evaluator what happened (a generation, a
member change, an expiry, a comparison with the live group) and asks it for its next deadline:
windowed rules resolve, and the unassigned-partitions rule fires, at an exact event time, so the
alerts depend only on the events, never on micro-batch boundaries or the wall clock. Pure: no
Spark, no I/O.
"""

from __future__ import annotations

import bisect
import hashlib
from dataclasses import dataclass, field
from typing import Callable, Mapping

from schemas.rows import AlertRow

from streaming.alerting.rules import GroupRules

FIRING = "firing"
RESOLVED = "resolved"


@dataclass
class OpenAlert:
    rule: str
    subject: str | None
    fired_at: int
    value: float
    threshold: float
    severity: str
    summary: str


@dataclass
class AlertState:
    """What a group's alerts remember between batches (stored in the group's state)."""
    open: dict[str, OpenAlert] = field(default_factory=dict)
    #: Event times of the generations, expiries and per-member changes still inside their windows.
    generations: list[int] = field(default_factory=list)
    expiries: list[int] = field(default_factory=list)
    member_changes: dict[str, list[int]] = field(default_factory=dict)
    unassigned_since: int | None = None
    unassigned: int = 0
    #: Streams: task -> [process id, lag] of actives on clients that are not caught up, and since when.
    lagging: dict[str, list] = field(default_factory=dict)
    lagging_since: int | None = None
    #: Connect: lost connectors and tasks held back, and when their delay expires.
    lost_pending: int = 0
    lost_due: int | None = None

    def to_json(self) -> dict:
        """Plain data for the state codec, which serialises it at once (no copies needed). By hand
        rather than dataclasses.asdict: this runs for every group in every batch, and asdict's
        deep copy was a fifth of the processor's time."""
        return {**vars(self), "open": {k: vars(a) for k, a in self.open.items()}}

    @classmethod
    def from_json(cls, data: dict) -> "AlertState":
        return cls(open={k: OpenAlert(**v) for k, v in data["open"].items()}, generations=data["generations"],
                   expiries=data["expiries"], member_changes=data["member_changes"],
                   unassigned_since=data["unassigned_since"], unassigned=data["unassigned"],
                   lagging=data["lagging"], lagging_since=data["lagging_since"],
                   lost_pending=data["lost_pending"], lost_due=data["lost_due"])


def alert_id(rule: str, group_id: str, subject: str | None) -> str:
    """Stable across episodes and restarts: the same condition of the same group is the same alert."""
    return hashlib.sha1(f"{rule}\x00{group_id}\x00{subject or ''}".encode()).hexdigest()[:16]


def _in_window(times: list[int], at: int, window_ms: int) -> list[int]:
    """The times in (at - window, at]; an event leaves the window exactly window_ms after it."""
    return times[bisect.bisect_right(times, at - window_ms):]


def _drop_below(times: list[int], keep: int, window_ms: int) -> int:
    """When the window, holding ``times``, will hold fewer than ``keep`` + 1 of them."""
    return times[len(times) - keep - 1] + window_ms


class AlertEvaluator:
    def __init__(self, state: AlertState, group_id: str, rules: GroupRules,
                 emit: Callable[[AlertRow], None], generation: Callable[[], int]):
        self.s = state
        self.group_id = group_id
        self.rules = rules
        self.emit = emit
        self.generation = generation

    # -- transitions ----------------------------------------------------------------------------

    def _fire(self, rule: str, subject: str | None, at: int, value: float, threshold: float,
              summary: str, description: str) -> None:
        key = f"{rule}|{subject or ''}"
        if key in self.s.open:
            return
        severity = getattr(self.rules, rule).severity
        self.s.open[key] = OpenAlert(rule, subject, at, value, threshold, severity, summary)
        self._row(self.s.open[key], FIRING, None, value, description)

    def _resolve(self, rule: str, subject: str | None, at: int, value: float, description: str) -> None:
        alert = self.s.open.pop(f"{rule}|{subject or ''}", None)
        if alert is not None:
            self._row(alert, RESOLVED, at, value, description)

    def _row(self, alert: OpenAlert, status: str, resolved_at: int | None, value: float, description: str) -> None:
        self.emit(AlertRow(
            alert_id=alert_id(alert.rule, self.group_id, alert.subject), rule=alert.rule,
            group_id=self.group_id, subject=alert.subject, severity=alert.severity, status=status,
            value=float(value), threshold=float(alert.threshold), fired_at=alert.fired_at,
            resolved_at=resolved_at, generation=self.generation(), summary=alert.summary,
            description=description))

    def _is_open(self, rule: str, subject: str | None = None) -> bool:
        return f"{rule}|{subject or ''}" in self.s.open

    # -- what happened --------------------------------------------------------------------------

    def on_generation(self, at: int, phase: str, members: int, imbalance: int, max_per_member: int,
                      mean_per_member: float, unassigned: int) -> None:
        storm = self.rules.rebalance_storm
        if storm.enabled:
            self.s.generations = _in_window(self.s.generations + [at], at, storm.window_ms)
            n = len(self.s.generations)
            if n > storm.generations:
                self._fire("rebalance_storm", None, at, n, storm.generations,
                           f"{self.group_id}: {n} generations in {storm.window_ms // 1000} s",
                           f"More than {storm.generations} generations within {storm.window_ms} ms of event time.")

        rule = self.rules.imbalance
        if rule.enabled and phase != "revocation":  # a revocation round is uneven by design
            ratio = max_per_member / mean_per_member if mean_per_member else 0.0
            by_spread = members >= rule.min_members and imbalance > rule.max_minus_min
            by_ratio = members >= rule.min_members and rule.max_over_mean > 0 and ratio > rule.max_over_mean
            if by_spread or by_ratio:
                value, threshold = (imbalance, rule.max_minus_min) if by_spread else (ratio, rule.max_over_mean)
                self._fire("imbalance", None, at, value, threshold,
                           f"{self.group_id}: partitions per member differ by {imbalance}",
                           f"max {max_per_member}, mean {mean_per_member:.2f} over {members} members; "
                           f"thresholds max-min > {rule.max_minus_min}"
                           + (f", max/mean > {rule.max_over_mean}" if rule.max_over_mean else "") + ".")
            else:
                self._resolve("imbalance", None, at, imbalance, f"max - min is {imbalance} after this generation.")

        rule = self.rules.unassigned_partitions
        if rule.enabled:
            self.s.unassigned = unassigned
            if unassigned == 0:
                self.s.unassigned_since = None
                self._resolve("unassigned_partitions", None, at, 0, "Every subscribed partition has an owner.")
            elif self.s.unassigned_since is None:
                self.s.unassigned_since = at

    def on_member_change(self, at: int, identity: str) -> None:
        rule = self.rules.member_flapping
        if not rule.enabled:
            return
        changes = self.s.member_changes
        # Re-inserted at the end: the dict stays ordered by each member's last change, so the
        # members whose changes all left the window are a prefix and the pruning stops at the
        # first recent one (a scan of every member per join was quadratic: 23 s for 10,000 joins).
        changes[identity] = _in_window(changes.pop(identity, []) + [at], at, rule.window_ms)
        stale = []
        for other, times in changes.items():
            if times and times[-1] > at - rule.window_ms:
                break
            if not self._is_open("member_flapping", other):
                stale.append(other)
        for other in stale:
            del changes[other]  # bounded: only members with changes inside the window
        n = len(changes[identity])
        if n > rule.changes:
            self._fire("member_flapping", identity, at, n, rule.changes,
                       f"{self.group_id}: member {identity} joined or left {n} times",
                       f"More than {rule.changes} joins, leaves or expiries of {identity} within "
                       f"{rule.window_ms} ms of event time.")

    def on_expiry(self, at: int, member_id: str) -> None:
        rule = self.rules.member_expired
        if not rule.enabled:
            return
        self.s.expiries = _in_window(self.s.expiries + [at], at, rule.window_ms)
        n = len(self.s.expiries)
        if n >= max(1, rule.expiries):
            self._fire("member_expired", None, at, n, rule.expiries,
                       f"{self.group_id}: {n} member(s) expired by session timeout",
                       f"Last: {member_id} at {at}; {n} expiries within {rule.window_ms} ms of event time.")

    def on_check(self, at: int, differing_partitions: int, differing_members: int) -> None:
        """``differing_members``: members whose partition count differs, or known to one side only."""
        rule = self.rules.assignment_disagreement
        if not rule.enabled:
            return
        n = differing_members if rule.level == "count" else differing_partitions
        what = "members hold another number of partitions" if rule.level == "count" else "partitions have another owner"
        if n > rule.partitions:
            self._fire("assignment_disagreement", None, at, n, rule.partitions,
                       f"{self.group_id}: the live group's assignment differs from the computed one",
                       f"{n} {what} than computed ({differing_partitions} partitions differ in all); "
                       f"see assignment_checks.")
        else:
            self._resolve("assignment_disagreement", None, at, n,
                          f"The live group's assignment agrees with the computed one at the {rule.level} level.")

    def on_streams_generation(self, at: int, active_client: Mapping[str, str],
                              newly_lagging: Mapping[str, tuple[str, int]]) -> None:
        """A Streams generation: ``newly_lagging`` are actives it placed on clients that are not caught
        up; actives already lagging that stayed on their client keep lagging until a report says otherwise."""
        if not self.rules.streams_not_caught_up.enabled:
            return
        lagging = {t: [pid, lag] for t, (pid, lag) in newly_lagging.items()}
        for task, (pid, lag) in self.s.lagging.items():
            if task not in lagging and active_client.get(task) == pid:
                lagging[task] = [pid, lag]
        self._set_lagging(at, lagging)

    def on_streams_lags(self, at: int, process_id: str, lags: Mapping[str, int], acceptable_lag: int) -> None:
        """A lag report of one of ``process_id``'s members."""
        if not self.s.lagging:
            return
        lagging = dict(self.s.lagging)
        for task, lag in lags.items():
            held = lagging.get(task)
            if held is not None and held[0] == process_id:
                if 0 <= lag <= acceptable_lag or lag == -2:  # -2: running it as active, current
                    del lagging[task]
                else:
                    lagging[task] = [process_id, lag]
        self._set_lagging(at, lagging)

    def _set_lagging(self, at: int, lagging: dict[str, list]) -> None:
        self.s.lagging = lagging
        if not lagging:
            self.s.lagging_since = None
            self._resolve("streams_not_caught_up", None, at, 0, "Every active task is on a caught-up client.")
        elif self.s.lagging_since is None:
            self.s.lagging_since = at

    def on_connect_generation(self, at: int, lost_pending: int, lost_due: int | None) -> None:
        if not self.rules.connect_lost_work.enabled:
            return
        self.s.lost_pending = lost_pending
        if lost_pending == 0:
            self.s.lost_due = None
            self._resolve("connect_lost_work", None, at, 0, "No lost connector or task is pending.")
        elif self.s.lost_due is None:
            self.s.lost_due = lost_due

    # -- time -----------------------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        """The next event time at which an alert resolves or fires without any event."""
        r, s = self.rules, self.s
        candidates = []
        if self._is_open("rebalance_storm") and len(s.generations) > r.rebalance_storm.generations:
            candidates.append(_drop_below(s.generations, r.rebalance_storm.generations, r.rebalance_storm.window_ms))
        # An open windowed alert always has more events in its window than its threshold allows
        # (it resolves at the deadline where that stops being true), so each has a deadline.
        keep = max(1, r.member_expired.expiries) - 1
        if self._is_open("member_expired") and len(s.expiries) > keep:
            candidates.append(_drop_below(s.expiries, keep, r.member_expired.window_ms))
        for alert in s.open.values():
            times = s.member_changes.get(alert.subject or "", []) if alert.rule == "member_flapping" else []
            if len(times) > r.member_flapping.changes:
                candidates.append(_drop_below(times, r.member_flapping.changes, r.member_flapping.window_ms))
        if s.unassigned_since is not None and not self._is_open("unassigned_partitions"):
            candidates.append(s.unassigned_since + r.unassigned_partitions.duration_ms)
        if s.lagging_since is not None and not self._is_open("streams_not_caught_up"):
            candidates.append(s.lagging_since + r.streams_not_caught_up.duration_ms)
        if s.lost_due is not None and not self._is_open("connect_lost_work"):
            candidates.append(s.lost_due + r.connect_lost_work.grace_ms)
        return min(candidates) if candidates else None

    def at_deadline(self, at: int) -> None:
        """Apply every time-based transition due at ``at`` (the engine calls this in event-time order)."""
        r, s = self.rules, self.s
        if self._is_open("rebalance_storm"):
            s.generations = _in_window(s.generations, at, r.rebalance_storm.window_ms)
            if len(s.generations) <= r.rebalance_storm.generations:
                self._resolve("rebalance_storm", None, at, len(s.generations),
                              f"{len(s.generations)} generations in the last {r.rebalance_storm.window_ms} ms.")
        if self._is_open("member_expired"):
            s.expiries = _in_window(s.expiries, at, r.member_expired.window_ms)
            if len(s.expiries) < max(1, r.member_expired.expiries):
                self._resolve("member_expired", None, at, len(s.expiries),
                              f"No more than {len(s.expiries)} expiries in the last {r.member_expired.window_ms} ms.")
        for alert in [a for a in s.open.values() if a.rule == "member_flapping"]:
            times = _in_window(s.member_changes.get(alert.subject, []), at, r.member_flapping.window_ms)
            s.member_changes[alert.subject] = times
            if len(times) <= r.member_flapping.changes:
                self._resolve("member_flapping", alert.subject, at, len(times),
                              f"{len(times)} changes of {alert.subject} in the last {r.member_flapping.window_ms} ms.")
        streams = r.streams_not_caught_up
        if s.lagging_since is not None and at >= s.lagging_since + streams.duration_ms:
            worst = max(lag for _, lag in s.lagging.values())
            self._fire("streams_not_caught_up", None, at, len(s.lagging), streams.duration_ms,
                       f"{self.group_id}: {len(s.lagging)} active task(s) on clients that are not caught up",
                       f"Restoring since {s.lagging_since} (event time): "
                       + ", ".join(f"{t} on {pid} (lag {lag})" for t, (pid, lag) in sorted(s.lagging.items()))
                       + f"; largest lag {worst}.")
        lost = r.connect_lost_work
        if s.lost_due is not None and at >= s.lost_due + lost.grace_ms:
            self._fire("connect_lost_work", None, at, s.lost_pending, lost.grace_ms,
                       f"{self.group_id}: {s.lost_pending} lost connector(s)/task(s) still unassigned",
                       f"Their delay expired at {s.lost_due} (event time); still pending {lost.grace_ms} ms later.")
        rule = r.unassigned_partitions
        if s.unassigned_since is not None and at >= s.unassigned_since + rule.duration_ms:
            self._fire("unassigned_partitions", None, at, s.unassigned, rule.duration_ms,
                       f"{self.group_id}: {s.unassigned} partitions unassigned for {rule.duration_ms // 1000} s",
                       f"Unassigned since {s.unassigned_since} (event time); threshold {rule.duration_ms} ms.")
