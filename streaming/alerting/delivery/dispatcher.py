"""Hands alert transitions from the stream to the webhook without ever making the stream wait on it.

``submit`` (on the stream's thread, inside foreachBatch) only validates the rows and commits them to
the on-disk outbox; one sender thread does all HTTP. Between them sits a bounded in-memory queue of
outbox rows. When the queue is full, new rows stay on disk only and the sender reads them back in
``seq`` order once it has emptied the queue; the same path sends, at start, whatever a previous run
left undelivered. Nothing is lost while the queue is full and memory stays bounded while the
receiver is down for days.

Delivery is at-least-once: a row is marked delivered after the receiver answered 2xx, so a crash
between the answer and the mark resends it at the next start. Receivers built for Alertmanager
dedup by ``fingerprint`` and status. A transition submitted twice (a replayed micro-batch) is stored
and sent once, because the outbox ignores a second insert of the same (alert_id, fired_at, status).

The sender retries a failed POST forever with exponential back-off: an alert must not be dropped
because the receiver was down for a while. Only a status that retrying cannot fix (4xx other than
408/429, or a redirect) sets the POST's alerts aside for this run; they stay undelivered in the
outbox, are counted as ``rejected`` and are sent again at the next start, after the operator fixed
the URL or the token (except a firing whose resolution got through meanwhile: it is over).
"""

from __future__ import annotations

import collections
import json
import logging
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable

from streaming.alerting.delivery.config import WebhookConfig
from streaming.alerting.delivery.outbox import Outbox, lock_outbox, open_outbox
from streaming.alerting.delivery.payload import AlertTransition, webhook_message
from streaming.alerting.delivery.webhook_client import Backoff, PostResult, WebhookClient
from streaming.errors import OutboxError

log = logging.getLogger("rebalance_monitor.alerts")


@dataclass(frozen=True)
class DeliveryStats:
    """Counters since this dispatcher started, for logs and metrics."""

    #: Transitions accepted by ``submit`` (new to the outbox).
    submitted: int
    #: Transitions ``submit`` ignored because the outbox already had them (replays).
    duplicates_ignored: int
    #: Transitions the receiver acknowledged with 2xx.
    delivered: int
    #: POSTs that did not get a 2xx (each retry counts).
    failed_attempts: int
    #: Transitions set aside in this run after a non-retryable answer; resent at the next start.
    rejected: int
    #: Transitions waiting for delivery in this run (in the queue, on disk, or being sent).
    pending: int
    #: Of ``pending``, how many are in the in-memory queue.
    queued: int
    #: False once the sender thread ended (closed, or failed: see the log); alerts then wait on disk.
    sender_running: bool

    def as_dict(self) -> dict[str, int | bool]:
        return asdict(self)


_Item = tuple[int, AlertTransition]  # (outbox seq, transition)


class AlertDispatcher:
    """Durable, non-blocking delivery of alert transitions to one webhook in Alertmanager's format.

    Usage on the driver, once per query::

        dispatcher = AlertDispatcher(config, checkpoint_dir / "alerts-outbox")
        ... in foreachBatch: dispatcher.submit(alert_rows)
        ... at shutdown:     dispatcher.close(timeout_s=10)

    The sender thread starts in the constructor and first sends what the outbox still holds.
    One dispatcher per outbox directory at a time.
    """

    def __init__(self, config: WebhookConfig, outbox_dir: str | Path, *, backoff: Backoff | None = None,
                 storage=None, credentials=None):
        """``outbox_dir`` is a local directory or an ``s3a://`` URI, reached with ``storage`` (a
        :class:`~streaming.storage.StorageConfig`) and ``credentials``."""
        self._config = config
        self._outbox_dir = outbox_dir
        self._storage = (storage, credentials)
        self._outbox_lock = lock_outbox(outbox_dir)
        try:
            self._stream_outbox = open_outbox(outbox_dir, storage, credentials)
            pruned = self._stream_outbox.prune_delivered(config.outbox_retention_hours * 3_600_000)
            superseded = self._stream_outbox.supersede_delivered_resolutions()
            undelivered = self._stream_outbox.count_undelivered()
        except BaseException:
            self._outbox_lock.release()
            raise
        self._client = WebhookClient(config.url, config.headers, config.timeout_s)
        self._backoff = backoff or Backoff(config.backoff_initial_ms / 1000, config.backoff_max_ms / 1000)

        # One lock for the queue and the counters; submit holds it across its outbox insert so the
        # sender's "read back from disk" and submit's "queue or leave on disk" never interleave.
        self._lock = threading.Condition()
        self._queue: collections.deque[_Item] = collections.deque()
        # True while the outbox may hold undelivered rows newer than _last_seq that are not queued;
        # starts True so the first thing the sender does is resend what a previous run left.
        self._on_disk_only = True
        self._last_seq = 0  # the highest seq ever queued: rows above it not queued are on disk only
        self._stopping = threading.Event()
        self._closed = False
        self._submitted = self._duplicates = self._delivered = self._failed = self._rejected = 0
        self._pending = undelivered

        log.info("alert delivery to %s: outbox %s holds %d undelivered transitions (%d old delivered pruned, "
                 "%d refused firings not resent because their resolution was delivered)",
                 config.endpoint, self._stream_outbox.path, self._pending, pruned, superseded)
        self._sender = threading.Thread(target=self._run_sender, name="alert-webhook-sender", daemon=True)
        self._sender.start()

    # ---------------------------------------------------------------- stream side

    def submit(self, rows: Iterable[Any]) -> int:
        """Make the alert transitions durable and queue them for delivery; never waits for HTTP.

        ``rows`` are dicts (or Spark Rows) with the ``alerts`` table's columns. Returns how many were
        new; transitions already submitted (a replayed batch) are ignored. Raises
        :class:`InvalidAlertError` naming the field of a bad row before storing any of them.
        """
        transitions = [AlertTransition.from_row(r) for r in rows]
        if not transitions:
            return 0
        with self._lock:
            if self._closed:
                raise OutboxError("alert dispatcher: submit after close(); open a new dispatcher")
            added = self._stream_outbox.add(transitions)
            self._submitted += len(added)
            self._duplicates += len(transitions) - len(added)
            self._pending += len(added)
            for seq, transition in added:
                if self._on_disk_only or len(self._queue) >= self._config.queue_capacity:
                    # The rest waits on disk; the sender reads it back in order when the queue is empty.
                    self._on_disk_only = True
                    break
                self._queue.append((seq, transition))
                self._last_seq = seq
            if added:
                self._lock.notify_all()
        return len(added)

    def stats(self) -> DeliveryStats:
        with self._lock:
            return DeliveryStats(submitted=self._submitted, duplicates_ignored=self._duplicates,
                                 delivered=self._delivered, failed_attempts=self._failed,
                                 rejected=self._rejected, pending=self._pending, queued=len(self._queue),
                                 sender_running=self._sender.is_alive())

    def wait_until_delivered(self, timeout_s: float | None = None) -> bool:
        """Block until nothing is pending in this run (or the timeout); for shutdown and tests."""
        with self._lock:
            return self._lock.wait_for(lambda: self._pending == 0 or not self._sender.is_alive(), timeout_s) \
                and self._pending == 0

    def close(self, timeout_s: float = 10.0) -> bool:
        """Stop the sender; undelivered transitions stay in the outbox for the next start.

        Returns False if the sender was still inside a request when the timeout ran out (it is a
        daemon thread and records that request's outcome when it ends).
        """
        with self._lock:
            if not self._closed:
                self._closed = True
                self._stopping.set()
                self._lock.notify_all()
                self._stream_outbox.close()
        self._sender.join(timeout_s)
        stopped = not self._sender.is_alive()
        self._outbox_lock.release()
        log.info("alert delivery to %s stopped%s: %s", self._config.endpoint,
                 "" if stopped else " (a request was still running)", self.stats().as_dict())
        return stopped

    def __enter__(self) -> "AlertDispatcher":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # ---------------------------------------------------------------- sender side

    def _run_sender(self) -> None:
        outbox = None
        try:
            outbox = open_outbox(self._outbox_dir, *self._storage)
            while (post := self._next_post(outbox)) is not None:
                if not self._deliver(outbox, post):
                    return
        except Exception:  # noqa: BLE001 - a dead sender must be loud; the outbox keeps the alerts
            log.exception("alert delivery to %s: sender failed; undelivered alerts stay in the outbox in %s "
                          "and are sent at the next start", self._config.endpoint, self._outbox_dir)
        finally:
            if outbox is not None:
                outbox.close()
            with self._lock:
                self._lock.notify_all()  # wake wait_until_delivered

    def _next_post(self, outbox: Outbox) -> list[_Item] | None:
        with self._lock:
            while True:
                if self._stopping.is_set():
                    return None
                if not self._queue and self._on_disk_only:
                    read_back = outbox.undelivered_after(self._last_seq, self._config.queue_capacity)
                    self._queue.extend(read_back)
                    if read_back:
                        self._last_seq = read_back[-1][0]
                    if len(read_back) < self._config.queue_capacity:
                        self._on_disk_only = False  # caught up: submit may queue again
                if self._queue:
                    return take_post(self._queue, self._config.max_batch)
                self._lock.wait()

    def _deliver(self, outbox: Outbox, items: list[_Item]) -> bool:
        """POST until delivered or set aside; False if the dispatcher is stopping meanwhile."""
        seqs = [seq for seq, _ in items]
        transitions = [t for _, t in items]
        body = json.dumps(webhook_message(
            transitions[0].group_id, transitions, receiver=self._config.receiver,
            static_labels=self._config.static_labels, external_url=self._config.external_url)).encode()
        attempt = 0
        while not self._stopping.is_set():
            result = self._client.post(body)
            if result.delivered:
                outbox.mark_delivered(seqs)
                self._count(delivered=len(items))
                return True
            attempt += 1
            outbox.record_failure(seqs, result.error)
            if not result.retryable:
                self._count(failed=1, rejected=len(items))
                log.error("alert delivery to %s: %d alerts of group %r rejected (%s); not retried in this "
                          "run, resent at the next start", self._config.endpoint, len(items),
                          transitions[0].group_id, result.error)
                return True
            self._count(failed=1)
            delay = self._backoff.delay(attempt, result.retry_after_s)
            _log_retry(self._config.endpoint, len(items), attempt, delay, result)
            if self._stopping.wait(delay):
                break
        return False

    def _count(self, *, delivered: int = 0, failed: int = 0, rejected: int = 0) -> None:
        with self._lock:
            self._delivered += delivered
            self._failed += failed
            self._rejected += rejected
            self._pending -= delivered + rejected
            self._lock.notify_all()


def take_post(queue: collections.deque[_Item], max_batch: int) -> list[_Item]:
    """Remove and return the next POST's alerts: the head's consumer group, in order, up to ``max_batch``.

    Alerts of one group that are pending together share a POST (one notification for the group, as
    Alertmanager groups them); other groups keep their place in the queue. A second transition of an
    alert already in the POST (its resolution) ends the group's share: it goes in the next POST,
    after the first, as Alertmanager would send it, and so do the group's alerts behind it.
    """
    group = queue[0][1].group_id
    post: list[_Item] = []
    rest: list[_Item] = []
    alert_ids: set[str] = set()
    group_closed = False
    for item in queue:
        transition = item[1]
        if transition.group_id == group and not group_closed:
            if len(post) < max_batch and transition.alert_id not in alert_ids:
                post.append(item)
                alert_ids.add(transition.alert_id)
                continue
            group_closed = True
        rest.append(item)
    queue.clear()
    queue.extend(rest)
    return post


def _log_retry(endpoint: str, alerts: int, attempt: int, delay_s: float, result: PostResult) -> None:
    # The first failures are the interesting ones; after that one line per ten keeps a long outage
    # visible without flooding the driver log.
    if attempt <= 3 or attempt % 10 == 0:
        log.warning("alert delivery to %s: %d alerts, attempt %d failed (%s); retrying in %.2fs",
                    endpoint, alerts, attempt, result.error, delay_s)
