"""The per-group engine: one group's rebalance history as a pure function of its events.

No Spark, no I/O, no clock: typed, validated events in (:class:`MembershipEvent`, heartbeat
arrays, :class:`LagReport`), typed table rows out (:mod:`schemas.rows`). The Spark job
(:mod:`streaming.job.processor`) is a thin adapter around :func:`advance`.

How a membership event travels through the modules: :mod:`.timeline` orders it among the batch's
heartbeats, expiries and timers; :mod:`.membership` applies it and opens a rebalance; when the
coalescing window closes, :mod:`.consumer`, :mod:`.streams` or :mod:`.connect` computes the
generation with Kafka's assignor and :mod:`.generation` writes its rows. :mod:`.live_group` compares
a live cluster's group with the computed generation; :mod:`.codec` stores the state between batches.
"""

import importlib

#: The public names and the modules that define them; imported on first use (PEP 562), so that
#: importing one module of the engine (the configuration imports its settings) loads no more.
_EXPORTS = {
    "BatchStats": "batch", "Stopwatch": "batch",
    "LagReport": "events", "MembershipEvent": "events", "TaskWorkload": "events", "Workload": "events",
    "EngineSettings": "settings",
    "GroupState": "state", "Member": "state", "PendingRebalance": "state",
    "advance": "timeline", "next_deadline": "timeline",
}


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


__all__ = [
    "BatchStats",
    "EngineSettings",
    "GroupState",
    "LagReport",
    "Member",
    "MembershipEvent",
    "PendingRebalance",
    "Stopwatch",
    "TaskWorkload",
    "Workload",
    "advance",
    "next_deadline",
]
