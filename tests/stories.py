"""Event stories shared by the engine tests and the end-to-end job tests.

Times are milliseconds from the story's start; ``to_records`` turns a story into Kafka records of
the event contract (schemas/events.py) for a group and an absolute start time.
"""

from __future__ import annotations


def workload(t, partitions=6, topic="t0", eid="w"):
    return {"event_id": eid, "event_time": t, "type": "workload",
            "workload": {"topics": [{"name": topic, "partitions": partitions, "racks": None}]}}


def join(t, member, assignor="range", protocol="eager", instance=None, topics=("t0",), session=10_000, eid=None):
    return {"event_id": eid or f"j-{member}-{t}", "event_time": t, "type": "join", "member_id": member,
            "group_instance_id": instance, "topics": list(topics), "assignor": assignor, "protocol": protocol,
            "session_timeout_ms": session}


def leave(t, member, reason="the consumer is being closed"):
    return {"event_id": f"l-{member}-{t}", "event_time": t, "type": "leave", "member_id": member, "reason": reason}


def hb(t, member):
    return ("hb", member, t)


def heartbeats(members, start, end, every=1_000):
    return [hb(t, m) for t in range(start, end, every) for m in members]


def _time(e):
    return e["event_time"] if isinstance(e, dict) else e[2]


def in_time_order(events):
    return sorted(events, key=_time)


def eager_range_story():
    """Three members join one by one, one leaves, one stops heartbeating and expires."""
    events = [workload(0), join(1_000, "a")]
    events += heartbeats(["a"], 1_500, 5_000)
    events += [join(5_000, "b")] + heartbeats(["a", "b"], 5_500, 9_000)
    events += [join(9_000, "c")] + heartbeats(["a", "b", "c"], 9_500, 13_000)
    events += [leave(13_000, "b")] + heartbeats(["a", "c"], 13_500, 17_000)
    # c stops heartbeating at 16_500; with a 10 s session it expires at 26_500.
    events += heartbeats(["a"], 17_000, 32_000)
    return in_time_order(events)


def cooperative_story():
    """c1 owns all three partitions; c2 joins: one partition moves, in two generations."""
    events = [workload(0, partitions=3), join(1_000, "c1", "cooperative-sticky", "cooperative")]
    events += heartbeats(["c1"], 1_500, 5_000)
    events += [join(5_000, "c2", "cooperative-sticky", "cooperative")] + heartbeats(["c1", "c2"], 5_500, 12_000)
    return in_time_order(events)


def static_bounce_story():
    """A static member restarts under a new member id within its session timeout."""
    events = [workload(0), join(1_000, "a", instance="i-a"), join(1_000, "b", instance="i-b")]
    events += heartbeats(["a", "b"], 1_500, 5_000)
    events += heartbeats(["b"], 5_000, 8_000)
    events += [join(8_000, "a2", instance="i-a")] + heartbeats(["a2", "b"], 8_500, 14_000)
    return in_time_order(events)


def collector_observation(t, kind, member, owned=(), state="STABLE", assignor="range", topic="t0"):
    """A collector event: the member as DescribeGroups showed it at poll time t."""
    e = {"event_id": f"{t:08d}-{kind}-{member}", "event_time": t, "type": kind, "member_id": member,
         "source": "collector", "group_state": state, "partition_assignor": assignor, "group_protocol": "classic"}
    if kind != "leave":
        e.update(topics=[topic], assignor=assignor, protocol="eager", session_timeout_ms=10_000,
                 owned_partitions=[{"topic": topic, "partition": p} for p in owned])
    return e


def real_range_group():
    """a alone holds 0-5; b joins (coordinator rebalancing); then both settle as range gives."""
    events = [workload(0), collector_observation(1_000, "join", "a", range(6))]
    events += heartbeats(["a"], 1_000, 5_000, every=500)
    events += [collector_observation(5_000, "join", "b", (), state="PREPARING_REBALANCE")]
    events += [collector_observation(5_500, "update", "a", (0, 1, 2)),
               collector_observation(5_500, "update", "b", (3, 4, 5))]
    events += heartbeats(["a", "b"], 5_000, 12_000, every=500)
    return in_time_order(events)


def to_records(story, group_id, start_ms):
    """(membership records, heartbeat records) as (key, value) pairs for the Kafka topics."""
    membership, beats = [], []
    for e in story:
        if isinstance(e, dict):
            event = {"schema_version": 1, "group_id": group_id, "group_type": "consumer",
                     **{k: v for k, v in e.items() if v is not None}}
            event["event_id"] = f"{group_id}-{e['event_id']}"
            event["event_time"] = start_ms + e["event_time"]
            membership.append((group_id, event))
        else:
            _, member, t = e
            beats.append((group_id, {"schema_version": 1, "event_id": f"{group_id}-hb-{member}-{t}",
                                     "event_time": start_ms + t, "group_id": group_id, "member_id": member}))
    return membership, beats
