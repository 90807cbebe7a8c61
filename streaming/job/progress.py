"""One line per micro-batch on stderr, and the health metrics, from the query's own progress.

Spark reports each completed micro-batch to a :class:`StreamingQueryListener` (what the Kafka
source read, up to which offsets, the latest offsets it saw, durations). The sink has by then
written the batch and knows what became of its records (accepted, rejected, late, groups,
generations); :class:`BatchAccounts` hands that from the sink to the listener, which joins the two::

    batch 12: read 5,000 (rebalance.membership 12, rebalance.heartbeats 4,988); accepted 4,998,
    rejected 2, late 0; 37 groups, 5 generations; 1.42 s; lag 0 records, 1.3 s of event time

Nothing else is printed while the job runs (Spark's own log stays at WARN): a job at rest prints
nothing at all.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Mapping

import pyarrow as pa
from pyspark.sql.streaming import StreamingQueryListener

from schemas import tables

from streaming.job.metrics import BatchProgress, JobMetrics

log = logging.getLogger("rebalance_monitor.progress")


class BatchAccounts:
    """What the sink wrote per batch, kept until the listener reports the batch."""

    def __init__(self) -> None:
        self._by_batch: dict[int, dict] = {}
        self._lock = threading.Lock()

    def record(self, batch_id: int, written: Mapping[str, pa.Table], metrics: JobMetrics | None = None) -> None:
        ingest = written.get(tables.INGEST_METRICS)
        row = ingest.to_pylist()[0] if ingest is not None and ingest.num_rows else {}
        balance = written.get(tables.BALANCE_METRICS)
        account = {
            "accepted": (row.get("membership_accepted") or 0) + (row.get("heartbeats_accepted") or 0),
            "rejected": row.get("rejected") or 0, "late": row.get("late") or 0, "groups": row.get("groups") or 0,
            "generations": balance.num_rows if balance is not None else 0,
            "event_time_lag_ms": row.get("event_time_lag_ms"),
        }
        with self._lock:
            self._by_batch[batch_id] = account
            while len(self._by_batch) > 1_000:  # batches the listener never reported (a failed query)
                del self._by_batch[min(self._by_batch)]
        if metrics is not None:
            alerts = written.get(tables.ALERTS)
            metrics.on_rows(balance.to_pylist() if balance is not None else [],
                            alerts.to_pylist() if alerts is not None else [])

    def take(self, batch_id: int) -> dict:
        with self._lock:
            return self._by_batch.pop(batch_id, {})


def batch_progress(progress: Mapping, account: Mapping) -> BatchProgress:
    """A query progress (Spark's JSON, as ``query.lastProgress``) joined with the sink's account."""
    read, lag = {}, {}
    for source in progress.get("sources", ()):
        end, latest = _offsets(source.get("endOffset")), _offsets(source.get("latestOffset"))
        topics = set(end) | set(latest) or {source.get("description", "?")}
        for topic in topics:
            read[topic] = read.get(topic, 0)
            lag[topic] = sum(max(0, int(n) - int(end.get(topic, {}).get(p, 0)))
                             for p, n in latest.get(topic, {}).items())
        if len(topics) == 1:
            read[next(iter(topics))] += int(source.get("numInputRows") or 0)
    return BatchProgress(
        batch_id=int(progress["batchId"]), read_by_topic=read, lag_by_topic=lag,
        duration_ms=int(progress.get("batchDuration") or 0),
        input_rate=float(progress.get("inputRowsPerSecond") or 0.0),
        processing_rate=float(progress.get("processedRowsPerSecond") or 0.0), **account)


def progress_line(p: BatchProgress) -> str:
    total = sum(p.read_by_topic.values())
    topics = ", ".join(f"{t} {n:,}" for t, n in sorted(p.read_by_topic.items()))
    line = (f"batch {p.batch_id}: read {total:,} ({topics}); accepted {p.accepted:,}, rejected {p.rejected:,}, "
            f"late {p.late:,}; {p.groups:,} groups, {p.generations:,} generations; {p.duration_ms / 1000:.2f} s; "
            f"lag {sum(p.lag_by_topic.values()):,} records")
    if p.event_time_lag_ms is not None:
        line += f", {p.event_time_lag_ms / 1000:.1f} s of event time"
    return line


def _offsets(value) -> dict:
    """A Kafka source's offsets (JSON text: topic -> partition -> offset), or {}."""
    if not value:
        return {}
    try:
        data = json.loads(value) if isinstance(value, str) else value
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


class ProgressReporter(StreamingQueryListener):
    """Logs :func:`progress_line` for every batch that read something, and updates the metrics."""

    def __init__(self, accounts: BatchAccounts, metrics: JobMetrics | None = None, query_name: str = "rebalance-monitor"):
        self.accounts = accounts
        self.metrics = metrics
        self.query_name = query_name
        self._terminated = threading.Event()

    def wait_terminated(self, timeout_s: float) -> bool:
        """Wait until Spark has told this listener that the query ended (its listener bus is
        asynchronous: called back after the process has gone, it logs the failure as an error)."""
        return self._terminated.wait(timeout_s)

    def onQueryStarted(self, event) -> None:
        self._terminated.clear()

    def onQueryProgress(self, event) -> None:
        progress = json.loads(event.progress.json)
        if progress.get("name") != self.query_name:
            return
        p = batch_progress(progress, self.accounts.take(int(progress["batchId"])))
        if self.metrics is not None:
            self.metrics.on_progress(p)
        if sum(p.read_by_topic.values()) or p.generations:
            log.info("%s", progress_line(p))

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        self._terminated.set()
