"""The per-group engine alone (no Spark): generations, triggers, expiry, cooperative rounds,
static members, and the same history whatever the micro-batch boundaries."""

from __future__ import annotations

import gc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.engine import GroupState, advance, next_deadline
from streaming.engine.state import SEEN_EVENT_IDS
from streaming.testing import engine_settings, feed

from tests.stories import (
    roundtrip_state,
    connect_bounce_story,
    cooperative_story,
    eager_range_story,
    heartbeats,
    join,
    leave,
    static_replacement_case,
    uniform_target,
    static_bounce_story,
    streams_scale_out_story,
    workload,
)

SETTINGS = engine_settings(coalesce_ms=1_000, allowed_lateness_ms=2_000, cooperative_followup_ms=500)


def run_batches(batches, state=None, roundtrip=True):
    """Feed batches of events (dicts = membership, tuples = heartbeats); the state goes through
    the byte codec between batches, as it does in the state store."""
    state = state or GroupState(group_id="g")
    outputs = []
    for batch in batches:
        out, _ = feed(state, batch, SETTINGS)
        outputs.extend(out)
        if roundtrip:
            state = roundtrip_state(state)
    return outputs, state


def generations(outputs):
    """generation -> {member: sorted partitions}"""
    gens = {}
    for o in outputs:
        if o.table == "assignments":
            gens.setdefault(o.as_dict()["generation"], {})[o.as_dict()["member_id"]] = sorted(
                p["partition"] for p in o.as_dict()["partitions"])
    return gens


def rows(outputs, table):
    return [o.as_dict() for o in outputs if o.table == table]


def test_eager_range_group_gets_one_generation_per_change_with_the_trigger_and_member():
    outputs, state = run_batches([eager_range_story()])
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
    events = eager_range_story()
    whole, _ = run_batches([events])

    @settings(max_examples=60, deadline=None)
    @given(st.lists(st.integers(min_value=0, max_value=len(events)), max_size=12))
    def check(cuts):
        bounds = sorted(set([0, len(events), *cuts]))
        batches = [events[a:b] for a, b in zip(bounds, bounds[1:])]
        split, _ = run_batches(batches)
        assert [(o.table, o.as_dict()) for o in split] == [(o.table, o.as_dict()) for o in whole]

    check()


def test_a_state_kept_in_memory_between_batches_gives_the_history_of_one_decoded_every_batch():
    # The job's workers keep a group's state object between batches when its bytes did not change
    # (streaming/job/state_bucket.py); a restart decodes it. Both must write the same rows.
    stories = [eager_range_story(), cooperative_story(), static_bounce_story()]

    @settings(max_examples=40, deadline=None)
    @given(st.sampled_from(range(len(stories))),
           st.lists(st.integers(min_value=0, max_value=60), max_size=10))
    def check(which, cuts):
        events = stories[which]
        bounds = sorted({0, len(events), *(c for c in cuts if c < len(events))})
        batches = [events[a:b] for a, b in zip(bounds, bounds[1:])]
        decoded, _ = run_batches(batches)
        kept, _ = run_batches(batches, roundtrip=False)
        assert [(o.table, o.as_dict()) for o in kept] == [(o.table, o.as_dict()) for o in decoded]

    check()


def test_cooperative_join_moves_partitions_in_two_generations():
    events = cooperative_story()
    outputs, _ = run_batches([events])
    assert generations(outputs) == {1: {"c1": [0, 1, 2]}, 2: {"c1": [0, 1], "c2": []}, 3: {"c1": [0, 1], "c2": [2]}}
    metrics = rows(outputs, "balance_metrics")
    assert [(m["generation"], m["trigger"], m["phase"], m["unassigned"]) for m in metrics] == [
        (1, "join", "complete", 0), (2, "join", "revocation", 1), (3, "cooperative_followup", "followup", 0)]
    assert [(r["generation"], r["member_id"], r["partition"], r["to_member"], r["reason"])
            for r in rows(outputs, "revocations")] == [(2, "c1", 2, "c2", "moved")]


def test_static_member_bounce_within_session_timeout_causes_no_generation():
    events = static_bounce_story()
    outputs, state = run_batches([events])
    assert list(generations(outputs)) == [1]
    assert [r["event"] for r in rows(outputs, "member_events") if r["member_id"] == "a2"] == ["static_rejoin"]
    assert state.assignment == {"a2": [("t0", 0), ("t0", 1), ("t0", 2)], "b": [("t0", 3), ("t0", 4), ("t0", 5)]}


def test_event_ids_are_remembered_up_to_the_bound_in_a_batch_and_across_batches():
    # The workload's id, then SEEN_EVENT_IDS joins: the workload's id is the one pushed out.
    joins = [join(1_000, f"m{i}", eid=f"e{i}") for i in range(SEEN_EVENT_IDS)]
    redelivered = [join(1_000, "m0", eid="e0"), workload(0, eid="w")]
    outputs, state = run_batches([[workload(0, eid="w"), *joins, *redelivered], [join(1_000, "m1", eid="e1")]])
    assert [r["reason"] for r in rows(outputs, "rejected_events")] == [
        "duplicate event_id 'e0' (already applied)", "duplicate event_id 'e1' (already applied)"]
    # The forgotten workload id came back as a new event; remembering it pushed e0 out.
    assert list(state.seen_event_ids)[-1] == "w" and "e0" not in state.seen_event_ids
    assert len(state.seen_event_ids) == SEEN_EVENT_IDS


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
    assert next_deadline(state, SETTINGS) == 0  # both wait for the group's time; the oldest first
    _, state = run_batches([heartbeats(["a"], 1_500, 4_000)], state=state)
    assert next_deadline(state, SETTINGS) == 2_000  # the rebalance window closes


def test_a_silent_group_is_moved_on_by_the_stream_watermark():
    story = [workload(0), join(1_000, "a", session=10_000)] + heartbeats(["a"], 1_500, 6_000)
    outputs, state = run_batches([story])
    assert list(generations(outputs)) == [1]
    # a's last heartbeat is at 5_500: it expires at 15_500, once the stream's watermark (which
    # trails the newest heartbeat by the grace) reaches that time.
    # The deadline counts the heartbeats applied so far (up to 3_500); the two still waiting for
    # the group's time push the expiry on once the watermark lets them in.
    assert next_deadline(state, SETTINGS) == 13_500
    nothing, _ = advance(state, [], [], [], SETTINGS, watermark_ms=13_500)
    assert nothing == []
    assert next_deadline(state, SETTINGS) == 15_500
    early, _ = advance(state, [], [], [], SETTINGS, watermark_ms=15_499)
    assert [o.as_dict()["event"] for o in early if o.table == "member_events"] == []
    late, _ = advance(state, [], [], [], SETTINGS, watermark_ms=15_500)
    assert [(o.as_dict()["event"], o.as_dict()["event_time"]) for o in late if o.table == "member_events"] == [("expired", 15_500)]


def test_server_side_uniform_group_revokes_before_it_assigns():
    events = [workload(0, partitions=4), join(1_000, "a", "uniform", "cooperative")]
    events += heartbeats(["a"], 1_500, 5_000)
    events += [join(5_000, "b", "uniform", "cooperative")] + heartbeats(["a", "b"], 5_500, 12_000)
    outputs, _ = run_batches([sorted(events, key=lambda e: e["event_time"] if isinstance(e, dict) else e[2])])
    gens = generations(outputs)
    assert gens[1] == {"a": [0, 1, 2, 3]}
    # Two partitions move from a to b: withheld in generation 2, given to b in the follow-up.
    assert len(gens[2]["a"]) == 2 and gens[2]["b"] == []
    assert len(gens[3]["b"]) == 2 and sorted(gens[3]["a"] + gens[3]["b"]) == [0, 1, 2, 3]
    assert [m["unassigned"] for m in rows(outputs, "balance_metrics")] == [0, 2, 0]


def test_a_kip848_group_is_assigned_in_its_coordinators_member_order_not_join_order():
    """Kafka's coordinator hands the uniform assignor its members in the order of its member map
    (assignors.timeline_order), then the one joining; where two ids share a bucket of the
    assignor's HashMap that order decides who gets the extra partition. Three members whose join
    order and coordinator order give different targets: the engine computes the coordinator's."""
    from assignors.timeline_order import MemberTable, coordinator_member_order

    import random

    rng = random.Random(848)
    partitions = 7  # three members: quota 2 and one extra, which the first of a and b keeps
    for _ in range(5000):
        a, b, c = (f"m-{rng.getrandbits(40):x}" for _ in range(3))
        first = uniform_target([a, b], uniform_target([a], {}, partitions), partitions)
        kafka_order = coordinator_member_order(MemberTable().changed(joined=[a, b]), [a, b, c])
        if uniform_target(kafka_order, first, partitions) != uniform_target([a, b, c], first, partitions):
            break
    else:
        raise AssertionError("no member ids found whose join order and coordinator order disagree")
    expected = uniform_target(kafka_order, first, partitions)

    events = [workload(0, partitions=partitions), join(1_000, a, "uniform", "cooperative")]
    events += [join(5_000, b, "uniform", "cooperative"), join(20_000, c, "uniform", "cooperative")]
    events += heartbeats([a], 1_500, 5_000) + heartbeats([a, b], 5_500, 20_000) + heartbeats([a, b, c], 20_500, 40_000)
    outputs, _ = run_batches([sorted(events, key=lambda e: e["event_time"] if isinstance(e, dict) else e[2])])
    gens = generations(outputs)
    assert gens[max(gens)] == expected, (a, b, c, kafka_order)


def test_a_kip848_static_replacement_takes_its_own_place_in_the_coordinators_member_map():
    """A static member restarting under a new id: the coordinator removes the old id from its
    member map and puts the new one in its own place, with no new target. When a member then
    leaves, uniform walks the members in that map's order (who keeps the extra partition); the
    engine must not walk the new id as a member joining last."""
    case = static_replacement_case()
    a, b, b2, c, partitions = case.a, case.b, case.b2, case.c, case.partitions

    def joined(t, member):
        return join(t, member, "uniform", "cooperative", instance=f"i-{member}" if member in (b, b2) else None)
    events = [workload(0, partitions=partitions), joined(1_000, a), joined(5_000, b), joined(20_000, c)]
    events += [{**joined(30_000, b2), "group_instance_id": f"i-{b}"}, leave(40_000, c)]
    events += heartbeats([a], 1_500, 60_000) + heartbeats([b], 5_500, 30_000) + heartbeats([c], 20_500, 40_000)
    events += heartbeats([b2], 30_500, 60_000)
    outputs, _ = run_batches([sorted(events, key=lambda e: e["event_time"] if isinstance(e, dict) else e[2])])
    assert [r["event"] for r in rows(outputs, "member_events") if r["member_id"] == b2] == ["static_rejoin"]
    gens = generations(outputs)
    assert gens[max(gens)] == case.expected, case


def _balance(outputs, *columns):
    return [tuple(m[c] for c in columns) for m in rows(outputs, "balance_metrics")]


def test_a_joiner_claiming_partitions_another_member_holds_revokes_them_as_duplicates():
    claim = join(5_000, "b")
    claim["owned_partitions"] = [{"topic": "t0", "partition": p} for p in (3, 4, 5)]
    events = [workload(0), join(1_000, "a")] + heartbeats(["a"], 1_500, 5_000)
    events += [claim] + heartbeats(["a", "b"], 5_500, 12_000)
    outputs, _ = run_batches([sorted(events, key=lambda e: e["event_time"] if isinstance(e, dict) else e[2])])
    assert generations(outputs)[2] == {"a": [0, 1, 2], "b": [3, 4, 5]}
    assert [(r["member_id"], r["partition"], r["to_member"], r["reason"]) for r in rows(outputs, "revocations")] == [
        ("a", 3, "b", "duplicate"), ("a", 4, "b", "duplicate"), ("a", 5, "b", "duplicate")]
    # a held all six first, so b's claim does not make it their previous owner: three moved.
    assert _balance(outputs, "generation", "moved", "stickiness") == [(1, 0, 1.0), (2, 3, 0.5)]


def test_a_cooperative_revocation_round_counts_the_withheld_partitions_as_moved():
    events = [workload(0), join(1_000, "a", "cooperative-sticky", "cooperative")] + heartbeats(["a"], 1_500, 5_000)
    events += [join(5_000, "b", "cooperative-sticky", "cooperative")] + heartbeats(["a", "b"], 5_500, 12_000)
    outputs, _ = run_batches([sorted(events, key=lambda e: e["event_time"] if isinstance(e, dict) else e[2])])
    assert [(r["partition"], r["to_member"], r["reason"]) for r in rows(outputs, "revocations")] == [
        (3, "b", "moved"), (4, "b", "moved"), (5, "b", "moved")]
    assert _balance(outputs, "generation", "phase", "moved", "unassigned") == [
        (1, "complete", 0, 0), (2, "revocation", 3, 3), (3, "followup", 0, 0)]


def test_the_eager_sticky_assignor_in_a_cooperative_group_has_its_moves_withheld_for_a_follow_up():
    # The group's protocol is cooperative, its assignor the eager sticky one, which withholds
    # nothing itself: the engine revokes before it assigns, as for KIP-848's server-side assignors.
    events = [workload(0), join(1_000, "a", "sticky", "cooperative")] + heartbeats(["a"], 1_500, 5_000)
    events += [join(5_000, "b", "sticky", "cooperative")] + heartbeats(["a", "b"], 5_500, 12_000)
    outputs, _ = run_batches([sorted(events, key=lambda e: e["event_time"] if isinstance(e, dict) else e[2])])
    assert generations(outputs) == {1: {"a": [0, 1, 2, 3, 4, 5]}, 2: {"a": [0, 1, 2], "b": []},
                                    3: {"a": [0, 1, 2], "b": [3, 4, 5]}}
    assert _balance(outputs, "generation", "phase", "moved", "unassigned") == [
        (1, "complete", 0, 0), (2, "revocation", 3, 3), (3, "followup", 0, 0)]


@pytest.mark.parametrize("story", [eager_range_story, cooperative_story, static_bounce_story, streams_scale_out_story,
                                   connect_bounce_story])
def test_a_batch_leaves_no_reference_cycles_behind(story):
    """The job pauses Python's cyclic collector while it works on a bucket (the processor's
    _collector_paused), so whatever a batch leaves in a reference cycle waits for the next
    collection, and that collection walks every object the batch allocated. Through one cycle
    (batch -> alert evaluator -> batch) a huge group's whole decoded state was such garbage: 600,000
    objects and a 0.3 s collection after each batch."""
    events = story()
    half = len(events) // 2
    run_batches([events[:half]])  # imports and caches first: they are not the batch's garbage
    gc.collect()
    gc.disable()
    try:
        outputs, state = run_batches([events[:half], events[half:]])
        assert outputs  # the story made generations
        del outputs, state
        assert gc.collect() == 0
    finally:
        gc.enable()
