"""Event stories shared by the engine tests and the end-to-end job tests.

Times are milliseconds from the story's start; ``to_records`` turns a story into Kafka records of
the event contract (schemas/events.py) for a group and an absolute start time.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass


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


def collector_observation(t, kind, member, owned=(), state="STABLE", assignor="range", topic="t0", instance=None):
    """A collector event: the member as DescribeGroups showed it at poll time t."""
    e = {"event_id": f"{t:08d}-{kind}-{member}", "event_time": t, "type": kind, "member_id": member,
         "source": "collector", "group_state": state, "partition_assignor": assignor, "group_protocol": "classic"}
    if instance is not None:
        e["group_instance_id"] = instance
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


# -- Kafka Streams and Kafka Connect groups (streaming/engine/task_groups.py) --------------------------------

STREAMS_STATEFUL = ["0_0", "0_1", "0_2", "0_3"]
STREAMS_STATELESS = ["1_0", "1_1"]


def streams_workload(t, stateful=STREAMS_STATEFUL, stateless=STREAMS_STATELESS, end_offsets=None,
                     acceptable_recovery_lag=100, num_standby_replicas=0, max_warmup_replicas=2,
                     probing_rebalance_interval_ms=60_000, eid="sw"):
    return {"event_id": eid, "event_time": t, "type": "workload", "group_type": "streams",
            "workload": {"tasks": {"stateful": list(stateful), "stateless": list(stateless)},
                         "task_end_offset_sums": end_offsets,
                         "config": {"acceptable_recovery_lag": acceptable_recovery_lag,
                                    "num_standby_replicas": num_standby_replicas,
                                    "max_warmup_replicas": max_warmup_replicas,
                                    "probing_rebalance_interval_ms": probing_rebalance_interval_ms}}}


def streams_join(t, member, process_id, threads=1, offset_sums=None, session=10_000):
    return {"event_id": f"j-{member}-{t}", "event_time": t, "type": "join", "group_type": "streams",
            "member_id": member, "process_id": process_id, "threads": threads, "task_offset_sums": offset_sums,
            "assignor": "streams-ha", "protocol": "cooperative", "session_timeout_ms": session}


def hb_lags(t, member, lags):
    """A heartbeat carrying Kafka Streams task lags."""
    return ("hb", member, t, dict(lags))


def streams_scale_out_story():
    """One client (p1) runs every task; p2 joins with no state: warm-ups first, a probing rebalance
    60 s later, and once p2's heartbeats report the warm-ups caught up, the actives move to it."""
    events = [streams_workload(0), streams_join(1_000, "s1", "p1")]
    events += heartbeats(["s1"], 1_500, 5_000)
    events += [streams_join(5_000, "s2", "p2")] + heartbeats(["s1", "s2"], 5_500, 75_000)
    # p2 restores its warm-ups (0_1 and 0_3): lags fall from 4000 to 0 by 40 s.
    events += [hb_lags(t, "s2", {"0_1": lag, "0_3": lag})
               for t, lag in ((10_000, 4_000), (20_000, 2_000), (30_000, 500), (40_000, 0))]
    return in_time_order(events)


def connect_workload(t, connectors=(("jdbc", 2), ("s3", 2)), config_offset=5, max_delay_ms=60_000, eid="cw"):
    return {"event_id": eid, "event_time": t, "type": "workload", "group_type": "connect",
            "workload": {"connectors": [{"name": n, "tasks": k} for n, k in connectors],
                         "config_offset": config_offset, "scheduled_rebalance_max_delay_ms": max_delay_ms}}


def connect_join(t, member, assignor="connect-incremental", url=None, config_offset=5, session=10_000):
    return {"event_id": f"j-{member}-{t}", "event_time": t, "type": "join", "group_type": "connect",
            "member_id": member, "worker_url": url or f"http://{member}:8083", "config_offset": config_offset,
            "assignor": assignor, "protocol": "eager" if assignor == "connect-eager" else "cooperative",
            "session_timeout_ms": session}


def connect_bounce_story(return_at=30_000):
    """Two workers share two connectors and four tasks; w2 restarts (leaves at 20 s, comes back as
    w2b at ``return_at``, same URL). Within the 60 s delay, w2b gets w2's work back when the delay
    expires at 81 s; w1 keeps its work throughout. ``return_at=None``: w2 never comes back, and its
    work goes to w1 at exactly 81 s."""
    events = [connect_workload(0), connect_join(1_000, "w1")] + heartbeats(["w1"], 1_500, 5_000)
    events += [connect_join(5_000, "w2")] + heartbeats(["w1", "w2"], 5_500, 20_000)
    events += [leave(20_000, "w2", reason="worker restarting")]
    events += heartbeats(["w1"], 20_000, 90_000)
    if return_at is not None:
        events += [connect_join(return_at, "w2b", url="http://w2:8083")]
        events += heartbeats(["w2b"], return_at + 500, 90_000)
    return in_time_order(events)


def task_group_records(story, group_id, start_ms, group_type):
    """Like ``to_records`` for Streams and Connect stories: heartbeats keep their ``task_lags``."""
    membership, beats = [], []
    for e in story:
        if isinstance(e, dict):
            event = {"schema_version": 1, "group_id": group_id, "group_type": group_type,
                     **{k: v for k, v in e.items() if v is not None}}
            event["event_id"] = f"{group_id}-{e['event_id']}"
            event["event_time"] = start_ms + e["event_time"]
            membership.append((group_id, event))
        else:
            member, t = e[1], e[2]
            beat = {"schema_version": 1, "event_id": f"{group_id}-hb-{member}-{t}" + ("-lags" if len(e) > 3 else ""),
                    "event_time": start_ms + t, "group_id": group_id, "member_id": member}
            if len(e) > 3:
                beat["task_lags"] = e[3]
            beats.append((group_id, beat))
    return membership, beats


def roundtrip_state(state):
    """The state as the state store gives it back: to bytes and back.

    The bytes must decode to a state equal to the one they came from: a job's Python worker reuses
    a group's state object from its previous batch instead of decoding the same bytes again
    (streaming/job/state_bucket.py), so anything the codec changed would make the history depend on
    which worker ran a batch, or on a restart."""
    from streaming.engine.codec import decode_state, encode_state

    decoded = decode_state(encode_state(state))
    assert decoded == state
    return decoded


# -- KIP-848: topic ids sharing a bucket of the coordinator's HashMap ------------------------------

#: Three topics whose ids Kafka's HashMap<Uuid> (16 buckets) walks as b and c (one bucket, in the
#: order they were put), then a: only a target's listed order says whether b or c comes first.
COLLIDING_IDS = {"a": uuid.UUID("e655ab21-2736-cce1-6486-f459c3f01ee5"),
                 "b": uuid.UUID("3d59619a-4166-d668-b184-d009a36b094e"),
                 "c": uuid.UUID("3d29c780-02da-11fe-9505-41192d9b06df")}
COLLIDING_COUNTS = {"a": 3, "b": 5, "c": 7}


def uniform_after_second_join(owned_by_m1, topics=None) -> dict[str, list[tuple[str, int]]]:
    """Kafka 4.1's uniform target when m2 joins m1, which holds ``owned_by_m1`` (in that order); both
    subscribe to every topic of ``topics`` (``TopicSpec`` by name; default the colliding ones)."""
    from assignors import GroupSpec, MemberSpec, TopicPartition, assign
    from assignors.model import TopicSpec

    if topics is None:
        topics = {n: TopicSpec(n, k, topic_id=COLLIDING_IDS[n]) for n, k in COLLIDING_COUNTS.items()}
    owned = tuple(TopicPartition(*tp) for tp in owned_by_m1)
    spec = GroupSpec(members=(MemberSpec("m1", tuple(topics), owned), MemberSpec("m2", tuple(topics), ())),
                     topics=topics)
    return {m: sorted(tuple(tp) for tp in tps) for m, tps in assign(spec, "uniform").assignment.items()}


def uniform_target(members: list[str], previous: dict[str, list[int]], partitions: int) -> dict[str, list[int]]:
    """Kafka 4.1's uniform target over one topic ``t0``, for ``members`` in the coordinator's order."""
    from assignors import GroupSpec, MemberSpec, TopicPartition, TopicSpec, assign

    spec = GroupSpec(members=tuple(MemberSpec(m, ("t0",), tuple(TopicPartition("t0", p) for p in previous.get(m, ())))
                                   for m in members), topics={"t0": TopicSpec("t0", partitions)})
    return {m: sorted(tp.partition for tp in tps) for m, tps in assign(spec, "uniform").assignment.items()}


@dataclass(frozen=True)
class StaticReplacementCase:
    """a, b and c join one at a time (a target each); b restarts as b2 (same instance id); c leaves."""

    a: str
    b: str
    b2: str
    c: str
    partitions: int
    targets: tuple[dict[str, list[int]], ...]  # after each join
    kafka_order: list[str]  # the members of the last target, in the coordinator's order
    expected: dict[str, list[int]]  # the last target


def static_replacement_case(seed: int = 345, partitions: int = 7) -> StaticReplacementCase:
    """Member ids for which the coordinator's member map after the static replacement (the old id
    removed, the new one put in its own place) gives another uniform target, once c leaves, than
    walking b2 as a member joining last."""
    import random

    from assignors.timeline_order import MemberTable, coordinator_member_order

    rng = random.Random(seed)
    for _ in range(5000):
        a, b, b2, c = (f"m-{rng.getrandbits(40):x}" for _ in range(4))
        table, target, targets = MemberTable(), {}, []
        for members in ([a], [a, b], [a, b, c]):
            target = uniform_target(coordinator_member_order(table, members), target, partitions)
            targets.append(target)
            table = table.changed(joined=[members[-1]])
        previous = {(b2 if m == b else m): ps for m, ps in target.items() if m != c}
        kafka_order = coordinator_member_order(table.changed(removed=[b], joined=[b2]), [a, b2])
        expected = uniform_target(kafka_order, previous, partitions)
        if expected != uniform_target([a, b2], previous, partitions):
            return StaticReplacementCase(a, b, b2, c, partitions, tuple(targets), kafka_order, expected)
    raise AssertionError("no member ids found whose replaced place changes the uniform target")
