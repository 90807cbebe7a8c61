"""The job's Prometheus metrics: its health, and each group's rebalances under Kafka's names.

Served on the driver (``[metrics]``, default 127.0.0.1:9108; docs/metrics.md has example PromQL).

* Health, from every micro-batch's progress: batches, records read per topic, input and
  processing rates, lag in records per topic and in seconds of event time, rejected and late
  records, and the time of the last batch (``time() - rebalance_monitor_last_batch_timestamp_seconds``
  is its age).
* Per group, from the ``balance_metrics`` and ``alerts`` rows the job writes, named as Kafka's
  consumer coordinator metrics where the meaning is the same: ``rebalance_total``,
  ``rebalance_rate_per_hour``, ``last_rebalance_seconds_ago``, ``assigned_partitions``; plus members,
  imbalance and open alerts. Only groups matching ``metrics.groups`` are exported, at most
  ``metrics.max_groups`` of them (the most recently rebalanced), so the series stay bounded
  however many groups the cluster has. They count what this job run has seen (Kafka's own
  coordinator metrics also start at zero with the client).
"""

from __future__ import annotations

import fnmatch
import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server
from prometheus_client.core import GaugeMetricFamily

log = logging.getLogger("rebalance_monitor.metrics")
PREFIX = "rebalance_monitor"


@dataclass
class _Group:
    rebalance_total: int = 0
    rate_per_hour: int = 0
    last_rebalance_ms: int = 0
    assigned_partitions: int = 0
    members: int = 0
    imbalance: int = 0
    open_alerts: int = 0


class _GroupCollector:
    """The per-group gauges, computed at scrape time (``last_rebalance_seconds_ago`` moves on)."""

    def __init__(self, groups: "OrderedDict[str, _Group]", lock: threading.Lock):
        self._groups = groups
        self._lock = lock

    def collect(self):
        now_ms = time.time() * 1000
        families = {
            "rebalance_total": ("Generations of the group this job has recorded (Kafka: rebalance-total).",
                                lambda g: g.rebalance_total),
            "rebalance_rate_per_hour": ("Generations in the hour up to the group's latest one (Kafka: "
                                        "rebalance-rate-per-hour).", lambda g: g.rate_per_hour),
            "last_rebalance_seconds_ago": ("Seconds since the group's latest generation, in event time against "
                                           "this clock (Kafka: last-rebalance-seconds-ago).",
                                           lambda g: max(0.0, (now_ms - g.last_rebalance_ms) / 1000)),
            "assigned_partitions": ("Partitions (Streams: active tasks, Connect: tasks) assigned in the latest "
                                    "generation (Kafka: assigned-partitions, summed over members).",
                                    lambda g: g.assigned_partitions),
            "members": ("Members in the latest generation.", lambda g: g.members),
            "imbalance": ("Most minus fewest partitions per member in the latest generation.", lambda g: g.imbalance),
            "open_alerts": ("Alerts of the group firing now.", lambda g: g.open_alerts),
        }
        with self._lock:
            groups = list(self._groups.items())
        for name, (doc, value) in families.items():
            family = GaugeMetricFamily(f"{PREFIX}_{name}", doc, labels=["group_id"])
            for group_id, g in groups:
                family.add_metric([group_id], value(g))
            yield family


class JobMetrics:
    def __init__(self, group_patterns: Iterable[str] = ("*",), max_groups: int = 1000,
                 registry: CollectorRegistry | None = None):
        self.registry = registry or CollectorRegistry()
        self._patterns = tuple(group_patterns)
        self._max_groups = max_groups
        self._groups: "OrderedDict[str, _Group]" = OrderedDict()
        self._lock = threading.Lock()
        r = self.registry
        self.batches = Counter(f"{PREFIX}_batches", "Micro-batches completed.", registry=r)
        self.records = Counter(f"{PREFIX}_input_records", "Records read from Kafka.", ["topic"], registry=r)
        self.rejected = Counter(f"{PREFIX}_rejected_records", "Records refused (in rejected_events).", registry=r)
        self.late = Counter(f"{PREFIX}_late_records", "Records that arrived after their group had moved past "
                            "their time (applied).", registry=r)
        self.input_rate = Gauge(f"{PREFIX}_input_records_per_second", "Input rate of the latest batch.", registry=r)
        self.processing_rate = Gauge(f"{PREFIX}_processed_records_per_second", "Processing rate of the latest batch.",
                                     registry=r)
        self.lag = Gauge(f"{PREFIX}_lag_records", "Records in the topic not read yet, after the latest batch.",
                         ["topic"], registry=r)
        self.event_time_lag = Gauge(f"{PREFIX}_event_time_lag_seconds", "How far the newest event of the latest "
                                    "batch was behind this clock.", registry=r)
        self.last_batch = Gauge(f"{PREFIX}_last_batch_timestamp_seconds", "When the latest batch completed "
                                "(Unix time).", registry=r)
        self.batch_duration = Gauge(f"{PREFIX}_batch_duration_seconds", "Duration of the latest batch.", registry=r)
        r.register(_GroupCollector(self._groups, self._lock))

    # -- health ---------------------------------------------------------------------------------

    def on_progress(self, progress: "BatchProgress") -> None:
        self.batches.inc()
        for topic, n in progress.read_by_topic.items():
            self.records.labels(topic).inc(n)
        for topic, n in progress.lag_by_topic.items():
            self.lag.labels(topic).set(n)
        self.rejected.inc(progress.rejected)
        self.late.inc(progress.late)
        self.input_rate.set(progress.input_rate)
        self.processing_rate.set(progress.processing_rate)
        self.batch_duration.set(progress.duration_ms / 1000)
        if progress.event_time_lag_ms is not None:
            self.event_time_lag.set(progress.event_time_lag_ms / 1000)
        self.last_batch.set(time.time())

    # -- groups ---------------------------------------------------------------------------------

    def on_rows(self, balance_rows: Iterable[Mapping], alert_rows: Iterable[Mapping]) -> None:
        """The batch's balance_metrics and alerts rows (dicts)."""
        with self._lock:
            for row in sorted(balance_rows, key=lambda r: (r["event_time"], r["generation"])):
                g = self._group(row["group_id"])
                if g is None:
                    continue
                g.rebalance_total += 1
                g.rate_per_hour = row["rebalances_last_hour"]
                g.last_rebalance_ms = row["event_time"]
                g.assigned_partitions = row.get("partitions") or row.get("active_tasks") or row.get("tasks") or 0
                g.members = row["members"]
                g.imbalance = row["imbalance"]
            for row in alert_rows:
                g = self._group(row["group_id"])
                if g is not None:
                    g.open_alerts = max(0, g.open_alerts + (1 if row["status"] == "firing" else -1))

    def _group(self, group_id: str) -> _Group | None:
        if not any(fnmatch.fnmatchcase(group_id, p) for p in self._patterns):
            return None
        g = self._groups.pop(group_id, None) or _Group()
        self._groups[group_id] = g  # most recently changed last
        while len(self._groups) > self._max_groups:
            self._groups.popitem(last=False)
        return g


@dataclass(frozen=True)
class BatchProgress:
    """One micro-batch as the progress line and the health metrics see it."""

    batch_id: int
    read_by_topic: Mapping[str, int]
    lag_by_topic: Mapping[str, int]
    duration_ms: int
    input_rate: float
    processing_rate: float
    accepted: int = 0
    rejected: int = 0
    late: int = 0
    groups: int = 0
    generations: int = 0
    event_time_lag_ms: int | None = None


def serve(metrics: JobMetrics, host: str, port: int) -> bool:
    """Serve ``metrics`` over HTTP; a port in use is one warning, not a failure of the job."""
    try:
        start_http_server(port, addr=host, registry=metrics.registry)
    except OSError as exc:
        log.warning("metrics not served: %s:%d is not free (%s); set [metrics] port (0 = off)", host, port,
                    exc.strerror or exc)
        return False
    log.info("metrics at http://%s:%d/metrics", host, port)
    return True
