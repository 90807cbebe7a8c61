"""The per-group engine alone (no Spark): generations, triggers, expiry, cooperative rounds,
static members, and the same history whatever the micro-batch boundaries."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.group_state import EngineSettings, GroupState, advance, next_deadline
from streaming.state_codec import decode_state, encode_state

SETTINGS = EngineSettings(coalesce_ms=1_000, allowed_lateness_ms=2_000, cooperative_followup_ms=500)


def workload(t, partitions=6, topic="t0", eid="w"):
    return {"event_id": eid, "event_time": t, "type": "workload",
            "workload": {"topics": [{"name": topic, "partitions": partitions, "racks": None}]}}


def join(t, member, assignor="range", protocol="eager", instance=None, topics=("t0",), session=10_000, eid=None):
    return {"event_id": eid or f"j-{member}-{t}", "event_time": t, "type": "join", "member_id": member,
            "group_instance_id": instance, "topics": list(topics), "assignor": assignor, "protocol": protocol,
            "session_timeout_ms": session}


def leave(t, member):
    return {"event_id": f"l-{member}-{t}", "event_time": t, "type": "leave", "member_id": member}


def hb(t, member):
    return ("hb", member, t)


def run_batches(batches, state=None, roundtrip=True):
    """Feed batches of events (dicts = membership, tuples = heartbeats); the state goes through
    the byte codec between batches, as it does in the state store."""
    state = state or GroupState(group_id="g")
    outputs = []
    for batch in batches:
        members = [e for e in batch if isinstance(e, dict)]
        hbs = [e for e in batch if isinstance(e, tuple)]
        out, _ = advance(state, members, [m for _, m, _ in hbs], [t for _, _, t in hbs], SETTINGS,
                         clock=lambda: 0.0)
        outputs.extend(out)
        if roundtrip:
            state = decode_state(encode_state(state))
    return outputs, state


def heartbeats(members, start, end, every=1_000):
    return [hb(t, m) for t in range(start, end, every) for m in members]


def generations(outputs):
    """generation -> {member: sorted partitions}"""
    gens = {}
    for o in outputs:
        if o.table == "assignments":
            gens.setdefault(o.row["generation"], {})[o.row["member_id"]] = sorted(
                p["partition"] for p in o.row["partitions"])
    return gens


def rows(outputs, table):
    return [o.row for o in outputs if o.table == table]


def eager_story():
    events = [workload(0), join(1_000, "a")]
    events += heartbeats(["a"], 1_500, 5_000)
    events += [join(5_000, "b")] + heartbeats(["a", "b"], 5_500, 9_000)
    events += [join(9_000, "c")] + heartbeats(["a", "b", "c"], 9_500, 13_000)
    events += [leave(13_000, "b")] + heartbeats(["a", "c"], 13_500, 17_000)
    # c stops heartbeating at 16_500; with a 10 s session it expires at 26_500.
    events += heartbeats(["a"], 17_000, 32_000)
    return sorted(events, key=lambda e: e["event_time"] if isinstance(e, dict) else e[2])


def test_eager_range_group_gets_one_generation_per_change_with_the_trigger_and_member():
    outputs, state = run_batches([eager_story()])
    assert generations(outputs) == {
        1: {"a": [0, 1, 2, 3, 4, 5]},
        2: {"a": [0, 1, 2], "b": [3, 4, 5]},
        3: {"a": [0, 1], "b": [2, 3], "c": [4, 5]},
        4: {"a": [0, 1, 2], "c": [3, 4, 5]},
        5: {"a": [0, 1, 2, 3, 4, 5]},
    }
    metrics = rows(outputs, "balance_metrics")
    assert [(m["generation"], m["trigger"], m["trigger_member"], m["event_time"]) for m in metrics] == [
        (1, "join", "a", 2_000), (2, "join", "b", 6_000), (3, "join", "c", 10_000),
        (4, "leave", "b", 14_000), (5, "expiry", "c", 27_500)]
    assert [m["imbalance"] for m in metrics] == [0, 0, 0, 0, 0]
    assert [m["moved"] for m in metrics] == [0, 3, 3, 2, 3]
    expired = [r for r in rows(outputs, "member_events") if r["event"] == "expired"]
    assert [(r["member_id"], r["event_time"]) for r in expired] == [("c", 26_500)]
    revocations = rows(outputs, "revocations")
    assert {(r["member_id"], r["partition"], r["to_member"], r["reason"]) for r in revocations
            if r["generation"] == 4} == {("b", 2, "a", "member_left"), ("b", 3, "c", "member_left")}
    assert {(r["member_id"], r["partition"], r["to_member"], r["reason"]) for r in revocations
            if r["generation"] == 5} == {("c", 3, "a", "member_left"), ("c", 4, "a", "member_left"),
                                         ("c", 5, "a", "member_left")}
    assert state.generation == 5


def test_history_does_not_depend_on_micro_batch_boundaries():
    events = eager_story()
    whole, _ = run_batches([events])

    @settings(max_examples=60, deadline=None)
    @given(st.lists(st.integers(min_value=0, max_value=len(events)), max_size=12))
    def check(cuts):
        bounds = sorted(set([0, len(events), *cuts]))
        batches = [events[a:b] for a, b in zip(bounds, bounds[1:])]
        split, _ = run_batches(batches)
        assert [(o.table, o.row) for o in split] == [(o.table, o.row) for o in whole]

    check()


def test_cooperative_join_moves_partitions_in_two_generations():
    events = [workload(0, partitions=3), join(1_000, "c1", "cooperative-sticky", "cooperative")]
    events += heartbeats(["c1"], 1_500, 5_000)
    events += [join(5_000, "c2", "cooperative-sticky", "cooperative")] + heartbeats(["c1", "c2"], 5_500, 12_000)
    events.sort(key=lambda e: e["event_time"] if isinstance(e, dict) else e[2])
    outputs, _ = run_batches([events])
    assert generations(outputs) == {1: {"c1": [0, 1, 2]}, 2: {"c1": [0, 1], "c2": []}, 3: {"c1": [0, 1], "c2": [2]}}
    metrics = rows(outputs, "balance_metrics")
    assert [(m["generation"], m["trigger"], m["phase"], m["unassigned"]) for m in metrics] == [
        (1, "join", "complete", 0), (2, "join", "revocation", 1), (3, "cooperative_followup", "followup", 0)]
    assert [(r["generation"], r["member_id"], r["partition"], r["to_member"], r["reason"])
            for r in rows(outputs, "revocations")] == [(2, "c1", 2, "c2", "moved")]


def test_static_member_bounce_within_session_timeout_causes_no_generation():
    events = [workload(0), join(1_000, "a", instance="i-a"), join(1_000, "b", instance="i-b")]
    events += heartbeats(["a", "b"], 1_500, 5_000)
    # a restarts: no leave, a new member id with the same group.instance.id 3 s later.
    events += heartbeats(["b"], 5_000, 8_000)
    events += [join(8_000, "a2", instance="i-a")] + heartbeats(["a2", "b"], 8_500, 14_000)
    events.sort(key=lambda e: e["event_time"] if isinstance(e, dict) else e[2])
    outputs, state = run_batches([events])
    assert list(generations(outputs)) == [1]
    assert [r["event"] for r in rows(outputs, "member_events") if r["member_id"] == "a2"] == ["static_rejoin"]
    assert state.assignment == {"a2": [("t0", 0), ("t0", 1), ("t0", 2)], "b": [("t0", 3), ("t0", 4), ("t0", 5)]}


def test_redelivered_event_is_rejected_with_a_reason_and_applied_once():
    events = [workload(0), join(1_000, "a", eid="dup")] + heartbeats(["a"], 1_500, 6_000)
    outputs, _ = run_batches([events, [join(1_000, "a", eid="dup")]])
    assert [r["reason"] for r in rows(outputs, "rejected_events")] == ["duplicate event_id 'dup' (already applied)"]
    assert list(generations(outputs)) == [1]


def test_late_membership_event_is_applied_and_flagged():
    first = [workload(0), join(1_000, "a")] + heartbeats(["a"], 1_500, 10_000)
    outputs, state = run_batches([first, [join(2_000, "b")], heartbeats(["a", "b"], 10_000, 14_000)])
    late = [r for r in rows(outputs, "member_events") if r["late"]]
    assert [(r["member_id"], r["event"], r["event_time"]) for r in late] == [("b", "joined", 7_500)]
    assert generations(outputs)[2] == {"a": [0, 1, 2], "b": [3, 4, 5]}


def test_next_deadline_is_the_earliest_of_pending_rebalance_and_expiry():
    _, state = run_batches([[workload(0), join(1_000, "a", session=10_000)]])
    assert next_deadline(state) == 0  # both events wait within the lateness; the oldest is due first
    _, state = run_batches([heartbeats(["a"], 1_500, 4_000)], state=state)
    assert next_deadline(state) == 2_000  # the rebalance window closes
