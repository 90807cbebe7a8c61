"""Which of a member's heartbeats can change a decision, chosen before the shuffle.

Heartbeats are nearly all the input (99.5 % of the benchmark's), and within one micro-batch most
of them cannot change anything the engine decides. The job drops those in the stateless step
before the stateful operator (:func:`streaming.job.operator_input.compact_heartbeats`, one Kafka
partition's slice at a time: all heartbeats of a group are in one partition), so that Spark neither
shuffles them nor hands them to the Python worker, and the engine never indexes them.

The rule
--------
Cut event time into windows of ``job.min_session_timeout_ms`` (Kafka's
``group.min.session.timeout.ms``, 6 s by default), aligned to the epoch. Of a member's plain
heartbeats in one window, only the first and the last can matter; the ones in between are dropped.
A dropped heartbeat is still counted: the window's last heartbeat carries it in its *weight* (how
many heartbeat records it stands for), and the engine counts it as accepted, late or of an unknown
member with that one.

Why nothing the engine decides can change (what a heartbeat is to :mod:`streaming.engine`)
-------------------------------------------------------------------------------------------------
* **Session expiry** (``engine/heartbeats.py``, ``HeartbeatIndex.expiry_of``): a member expires at
  the first gap between its signs of life longer than its session timeout ``T``. Every member has
  ``T >= min_session_timeout_ms``: the engine refuses a join or update that declares less, as
  Kafka's coordinator does (INVALID_SESSION_TIMEOUT). So take the kept heartbeats in time order:
  two neighbours with dropped ones between them are the first and last of one window, less than
  ``min_session_timeout_ms <= T`` apart, so no gap between them could exceed ``T``; and two
  neighbours without dropped ones between them are neighbours among all the heartbeats, the same
  gap. The same holds from any starting point (a ``last_seen`` or a membership event's time, which
  resets it): the first kept heartbeat after a point inside a window is at most that window's last
  one, less than ``T`` later. Hence every first gap longer than ``T`` is the same gap, and the
  expiry falls at the same time.
* **The group's clock and safe time** (``engine/timeline.py``): the newest heartbeat of the group;
  a member's newest heartbeat is always kept (it is the last of its window). The watermark comes
  from the clock rows, built before anything is dropped.
* **Buffered heartbeats** (newer than the group's safe time, kept in the state for the next batch):
  the kept ones of both batches together still obey the rule above (the first and last of each
  window of each batch are kept, and windows are aligned the same way in every batch).
* **last_seen** at the end of a batch (the newest heartbeat at or before the safe time): if the
  safe time falls inside a window, it can be the window's first heartbeat instead of a dropped one,
  less than ``min_session_timeout_ms`` earlier. It only sets when the bucket's timer fires (a member's
  ``deadline()``): never later than before, and a timer that fires early is harmless
  (processor.py). It cannot expire the member: its next kept heartbeat, less than
  ``min_session_timeout_ms <= T`` after it, is newer than the safe time, waits in the state, and is
  applied before any expiry is decided at a later safe time.
* **Kafka Streams task lags** travel in their heartbeat's ``payload``: such a heartbeat carries data
  and is never dropped (nor packed). Refused records are never dropped either.
* Counts: ``heartbeats_accepted`` and ``records`` stay exact (weights); ``ingest_metrics``'
  ``heartbeats_reduced`` says how many were dropped. ``late`` and ``unknown_member_heartbeats``
  count a dropped heartbeat with its window's last one: exact unless the group's applied time falls
  between the two (a late member's straddling window).

A member's last heartbeat in a window may be newer than every heartbeat of its member in a later
Arrow batch of the same partition (records out of order): the engine sorts times itself, and the
rule holds for the union of the kept heartbeats of any slices (each slice keeps the first and last
of its windows).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc


def reduce_member_heartbeats(beats: pa.Table, window_ms: int | None) -> pa.Table:
    """Each member's heartbeats of ``beats`` (columns ``group_key``, ``member_id``, ``event_time``)
    packed into one row: ``beat_times``, ``beat_weights`` (records each time stands for, parallel to
    ``beat_times``; null when nothing was dropped) and ``event_time`` (the newest).

    ``window_ms`` None keeps every heartbeat; otherwise only the first and last of each member's
    window (see the module doc)."""
    keys = ["group_key", "member_id"]
    if window_ms is None:
        packed = beats.group_by(keys, use_threads=False).aggregate([("event_time", "list"), ("event_time", "max")])
        return pa.table({"group_key": packed["group_key"], "member_id": packed["member_id"],
                         "event_time": packed["event_time_max"], "beat_times": packed["event_time_list"],
                         "beat_weights": pa.nulls(packed.num_rows, pa.list_(pa.int64()))})
    # event_time is never negative (the parser refuses it), so integer division is the floor.
    window = pc.divide(beats["event_time"], pa.scalar(window_ms, pa.int64()))
    windows = (beats.select(keys + ["event_time"]).append_column("window", window)
               .group_by(keys + ["window"], use_threads=False)
               .aggregate([("event_time", "min"), ("event_time", "max"), ("event_time", "count")]))
    first, last, count = windows["event_time_min"], windows["event_time_max"], windows["event_time_count"]
    # The window's first heartbeat stands for itself; its last for itself and every dropped one.
    # A window with one distinct time keeps one heartbeat, standing for them all.
    two = pc.less(first, last)
    last_weight = pc.subtract(count, pa.scalar(1, pa.int64()))
    firsts = pa.table({"group_key": windows["group_key"], "member_id": windows["member_id"], "time": first,
                       "weight": pc.if_else(two, pa.scalar(1, pa.int64()), count)})
    lasts = pa.table({"group_key": windows["group_key"], "member_id": windows["member_id"], "time": last,
                      "weight": last_weight}).filter(two)
    kept = pa.concat_tables([firsts, lasts])
    packed = kept.group_by(keys, use_threads=False).aggregate(
        [("time", "list"), ("weight", "list"), ("time", "max")])
    return pa.table({"group_key": packed["group_key"], "member_id": packed["member_id"],
                     "event_time": packed["time_max"], "beat_times": packed["time_list"],
                     "beat_weights": packed["weight_list"]})
