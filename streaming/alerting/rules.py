"""Alert rules from the TOML config: thresholds per rule, and per-group overrides by group id pattern.

::

    [alerts.imbalance]
    max_minus_min = 2            # fire when a settled generation's max - min per member exceeds this
    [alerts.rebalance_storm]
    generations = 10             # more than this many generations ...
    window_ms = 600000           # ... within this much event time
    [[alerts.overrides]]
    groups = "batch-*"           # fnmatch pattern(s) on the group id; later overrides win
    [alerts.overrides.imbalance]
    max_minus_min = 20

Every rule has ``enabled`` and ``severity``. Unknown rules, keys and wrong types are errors that
name the key. The rules are frozen and hashable: the job ships them to its Python workers.
"""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from typing import Any, Mapping

from streaming.errors import AlertConfigError

SEVERITIES = ("info", "warning", "critical")


@dataclass(frozen=True)
class Imbalance:
    """A settled generation (not a cooperative revocation round) whose partitions per member are
    too uneven: max - min above ``max_minus_min``, or max / mean above ``max_over_mean`` (0 = off:
    with few partitions per member that ratio is high even for the best assignment)."""
    enabled: bool = True
    severity: str = "warning"
    max_minus_min: int = 2
    max_over_mean: float = 0.0
    min_members: int = 2


@dataclass(frozen=True)
class RebalanceStorm:
    """More than ``generations`` generations within ``window_ms`` of event time."""
    enabled: bool = True
    severity: str = "critical"
    generations: int = 10
    window_ms: int = 600_000


@dataclass(frozen=True)
class MemberFlapping:
    """One member (same group.instance.id, else client.id and host, else member id) joining,
    leaving or expiring more than ``changes`` times within ``window_ms``."""
    enabled: bool = True
    severity: str = "warning"
    changes: int = 4
    window_ms: int = 600_000


@dataclass(frozen=True)
class MemberExpired:
    """At least ``expiries`` members expired by session timeout within ``window_ms``; resolves when
    the window holds fewer."""
    enabled: bool = True
    severity: str = "warning"
    expiries: int = 1
    window_ms: int = 300_000


@dataclass(frozen=True)
class UnassignedPartitions:
    """Subscribed partitions nobody holds for longer than ``duration_ms`` (a cooperative round
    that does not complete, a group whose members cannot take its partitions)."""
    enabled: bool = True
    severity: str = "critical"
    duration_ms: int = 30_000


@dataclass(frozen=True)
class AssignmentDisagreement:
    """The collector's observation of a live group differs from the monitor's computed assignment.

    ``level = "count"`` (default): more than ``partitions`` members hold a different *number* of
    partitions than computed, or are known to one side only. That is a real imbalance or a real
    membership difference; librdkafka's cooperative-sticky legitimately picks other partitions at
    equal counts than Kafka's Java client (docs/collector.md), which this level does not flag.
    ``level = "partition"``: more than ``partitions`` partitions have another owner (exact
    agreement, for groups of Java clients or range/roundrobin)."""
    enabled: bool = True
    severity: str = "warning"
    partitions: int = 0
    level: str = "count"


@dataclass(frozen=True)
class StreamsNotCaughtUp:
    """Kafka Streams: active tasks placed on clients whose lag on them exceeds the group's
    ``acceptable_recovery_lag`` (no caught-up client was left for them, so processing waits for a
    restore), still so ``duration_ms`` after the generation that placed them. Resolves when the
    clients' heartbeats report every such task within the acceptable lag, or the tasks move."""
    enabled: bool = True
    severity: str = "warning"
    duration_ms: int = 60_000


@dataclass(frozen=True)
class ConnectLostWork:
    """Kafka Connect: connectors or tasks of a departed worker still unassigned ``grace_ms`` after
    their ``scheduled.rebalance.max.delay.ms`` delay expired (for example every worker is gone).
    Resolves when a generation leaves no lost work pending."""
    enabled: bool = True
    severity: str = "critical"
    grace_ms: int = 30_000


@dataclass(frozen=True)
class GroupRules:
    imbalance: Imbalance = field(default_factory=Imbalance)
    rebalance_storm: RebalanceStorm = field(default_factory=RebalanceStorm)
    member_flapping: MemberFlapping = field(default_factory=MemberFlapping)
    member_expired: MemberExpired = field(default_factory=MemberExpired)
    unassigned_partitions: UnassignedPartitions = field(default_factory=UnassignedPartitions)
    assignment_disagreement: AssignmentDisagreement = field(default_factory=AssignmentDisagreement)
    streams_not_caught_up: StreamsNotCaughtUp = field(default_factory=StreamsNotCaughtUp)
    connect_lost_work: ConnectLostWork = field(default_factory=ConnectLostWork)


RULE_NAMES = tuple(f.name for f in fields(GroupRules))
_RULE_TYPES = {f.name: f.default_factory for f in fields(GroupRules)}


@dataclass(frozen=True)
class Override:
    patterns: tuple[str, ...]
    #: (rule, key, value) triples, applied over the defaults in order.
    settings: tuple[tuple[str, str, Any], ...]

    def matches(self, group_id: str) -> bool:
        return any(fnmatch.fnmatchcase(group_id, p) for p in self.patterns)


@dataclass(frozen=True)
class AlertRules:
    defaults: GroupRules = field(default_factory=GroupRules)
    overrides: tuple[Override, ...] = ()

    def for_group(self, group_id: str) -> GroupRules:
        # Cached on the instance, by group id only: an lru_cache keyed by (rules, group id) hashed
        # and compared the whole rule tree on every call, several times per group per batch.
        cache = self._by_group
        rules = cache.get(group_id)
        if rules is None:
            if len(cache) >= _GROUPS_CACHED:
                cache.clear()
            rules = cache[group_id] = _rules_for(self, group_id)
        return rules

    @cached_property
    def _by_group(self) -> dict[str, GroupRules]:
        return {}


_GROUPS_CACHED = 4096


def _rules_for(rules: AlertRules, group_id: str) -> GroupRules:
    result = rules.defaults
    for override in rules.overrides:
        if override.matches(group_id):
            for rule, key, value in override.settings:
                result = replace(result, **{rule: replace(getattr(result, rule), **{key: value})})
    return result


def _check(path: str, value: Any, default: Any) -> Any:
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise AlertConfigError(f"{path}: expected true or false, got {value!r}")
    elif isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise AlertConfigError(f"{path}: expected a non-negative integer, got {value!r}")
    elif isinstance(default, float):
        # TOML has nan and inf: refused, as nothing compares with NaN (the rule could never fire)
        # and a group's state, which keeps a firing alert's threshold, holds finite numbers only.
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
            raise AlertConfigError(f"{path}: expected a finite non-negative number, got {value!r}")
        value = float(value)
    elif isinstance(default, str):
        allowed = _CHOICES.get(path.rsplit(".", 1)[-1], SEVERITIES)
        if value not in allowed:
            raise AlertConfigError(f"{path}: expected one of {', '.join(allowed)}, got {value!r}")
    return value


#: The allowed values of a rule's string keys (every other string key is a severity).
_CHOICES = {"severity": SEVERITIES, "level": ("count", "partition")}


def _rule_settings(data: Mapping[str, Any], source: str, skip: tuple[str, ...] = ()) -> list[tuple[str, str, Any]]:
    out = []
    for rule, table in data.items():
        if rule in skip:
            continue
        if rule not in _RULE_TYPES:
            raise AlertConfigError(f"{source}: unknown alert rule [{rule}]; known: {', '.join(RULE_NAMES)}")
        if not isinstance(table, Mapping):
            raise AlertConfigError(f"{source}.{rule}: must be a table")
        default = _RULE_TYPES[rule]()
        known = {f.name for f in fields(default)}
        for key, value in table.items():
            path = f"{source}.{rule}.{key}"
            if key not in known:
                raise AlertConfigError(f"{path}: unknown key; known keys of [{rule}]: {', '.join(sorted(known))}")
            out.append((rule, key, _check(path, value, getattr(default, key))))
    return out


def parse_alert_rules(data: Mapping[str, Any], source: str = "alerts") -> AlertRules:
    """The [alerts] table (without its ``webhook`` sub-table, which delivery reads)."""
    defaults = GroupRules()
    for rule, key, value in _rule_settings(data, source, skip=("overrides", "webhook")):
        defaults = replace(defaults, **{rule: replace(getattr(defaults, rule), **{key: value})})
    overrides = []
    raw = data.get("overrides", [])
    if not isinstance(raw, list):
        raise AlertConfigError(f"{source}.overrides: must be an array of tables ([[alerts.overrides]])")
    for i, item in enumerate(raw):
        path = f"{source}.overrides[{i}]"
        if not isinstance(item, Mapping):
            raise AlertConfigError(f"{path}: must be a table")
        patterns = item.get("groups")
        if isinstance(patterns, str):
            patterns = [patterns]
        if not patterns or not all(isinstance(p, str) and p for p in patterns):
            raise AlertConfigError(f"{path}.groups: expected a group id pattern or a list of them, got {patterns!r}")
        settings = _rule_settings({k: v for k, v in item.items() if k != "groups"}, path)
        overrides.append(Override(tuple(patterns), tuple(settings)))
    return AlertRules(defaults, tuple(overrides))
