"""Kafka Streams and Kafka Connect groups in the engine alone (no Spark): warm-ups and probing
rebalances, lost work held for the delay, eager Connect, their alerts, and the same history
whatever the micro-batch boundaries."""

from __future__ import annotations

import tomllib

from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.alerting.rules import parse_alert_rules
from streaming.engine import GroupState, MembershipEvent, advance, next_deadline
from streaming.engine.codec import decode_state, encode_state
from streaming.testing import engine_settings, feed as feed_engine
from tests.stories import (
    roundtrip_state,
    connect_bounce_story,
    connect_join,
    connect_workload,
    hb_lags,
    heartbeats,
    in_time_order,
    leave,
    streams_join,
    streams_scale_out_story,
    streams_workload,
    task_group_records,
)

SETTINGS = engine_settings(coalesce_ms=1_000, allowed_lateness_ms=2_000, cooperative_followup_ms=500)


def feed(state, batch, settings=SETTINGS, collapsed=False):
    """One advance() call: dicts are membership events, tuples heartbeats (with lags if 4 long).

    ``collapsed``: pass the lags as the processor's per-batch ``heartbeat_progress`` (latest per
    member) instead of every report."""
    out, _ = feed_engine(state, batch, settings, collapsed_lags=collapsed)
    return out


def run_batches(batches, settings=SETTINGS, collapsed=False):
    state = GroupState(group_id="g")
    outputs = []
    for batch in batches:
        outputs += feed(state, batch, settings, collapsed)
        state = roundtrip_state(state)  # as in the state store
    return outputs, state


def rows(outputs, table):
    return [o.as_dict() for o in outputs if o.table == table]


def generations(outputs, *fields):
    """generation -> {member: (field values...)} from the assignments rows."""
    gens = {}
    for r in rows(outputs, "assignments"):
        gens.setdefault(r["generation"], {})[r["member_id"]] = tuple(r[f] for f in fields)
    return gens


def metrics(outputs, *fields):
    return [tuple(r[f] for f in fields) for r in rows(outputs, "balance_metrics")]


# -- Kafka Streams ---------------------------------------------------------------------------------


def test_streams_scale_out_warms_up_then_the_probing_rebalance_moves_actives_once_caught_up():
    outputs, state = run_batches([streams_scale_out_story()])
    assert generations(outputs, "active_tasks", "warmup_tasks") == {
        1: {"s1": (["0_0", "0_1", "0_2", "0_3", "1_0", "1_1"], [])},
        # p2 has no state: it gets the stateless tasks and warm-ups of the two tasks it should end with.
        2: {"s1": (["0_0", "0_1", "0_2", "0_3"], []), "s2": (["1_0", "1_1"], ["0_1", "0_3"])},
        # p2's heartbeats reported the warm-ups caught up by 40 s: the probing rebalance moves them.
        3: {"s1": (["0_0", "0_2", "1_0"], []), "s2": (["0_1", "0_3", "1_1"], [])},
    }
    assert metrics(outputs, "generation", "event_time", "trigger", "warmup_tasks", "probing_rebalance_at",
                   "imbalance", "unit") == [
        (1, 2_000, "join", 0, None, 0, "active_task"),
        (2, 6_000, "join", 2, 66_000, 2, "active_task"),
        (3, 66_000, "probing_rebalance", 0, None, 0, "active_task")]
    assert {(r["member_id"], r["unit_id"], r["to_member"], r["reason"]) for r in rows(outputs, "revocations")
            if r["generation"] == 3} == {("s1", "0_1", "s2", "moved"), ("s1", "0_3", "s2", "moved"),
                                         ("s2", "1_0", "s1", "moved")}
    assert all(r["unit"] == "task" and r["topic"] is None for r in rows(outputs, "revocations"))
    assert state.scheduled is None and rows(outputs, "alerts") == []


def test_streams_warm_ups_that_never_report_keep_the_actives_where_they_are_and_probe_again():
    story = [e for e in streams_scale_out_story() if not (isinstance(e, tuple) and len(e) > 3)]
    outputs, state = run_batches([story])
    gens = generations(outputs, "active_tasks", "warmup_tasks")
    assert gens[3] == gens[2]  # nothing caught up: no move
    assert metrics(outputs, "trigger", "probing_rebalance_at")[-1] == ("probing_rebalance", 126_000)
    assert state.scheduled.deadline == 126_000 and state.scheduled.trigger == "probing_rebalance"


def test_the_probing_rebalance_is_a_timer_that_fires_for_a_silent_group():
    story = [e for e in streams_scale_out_story() if (e["event_time"] if isinstance(e, dict) else e[2]) < 30_000]
    story = [streams_join(5_000, "s2", "p2", session=200_000) if isinstance(e, dict) and e.get("member_id") == "s2"
             else streams_join(1_000, "s1", "p1", session=200_000) if isinstance(e, dict) and e.get("member_id") == "s1"
             else e for e in story]
    state = GroupState(group_id="g")
    feed(state, story)
    assert next_deadline(state, SETTINGS) == 66_000
    assert feed(state, []) == []
    early, _ = advance(state, [], [], [], SETTINGS, watermark_ms=65_999)
    assert rows(early, "balance_metrics") == []
    due, _ = advance(state, [], [], [], SETTINGS, watermark_ms=66_000)
    assert metrics(due, "generation", "event_time", "trigger") == [(3, 66_000, "probing_rebalance")]


def test_a_streams_client_that_leaves_hands_its_actives_to_the_caught_up_standby():
    tasks = ("0_0", "0_1", "0_2", "0_3")
    # Both clients restarted with complete local state: offset sums at the changelogs' end.
    events = [streams_workload(0, num_standby_replicas=1, end_offsets={t: 5_000 for t in tasks}),
              streams_join(1_000, "s1", "p1", offset_sums={t: 5_000 for t in tasks}),
              streams_join(1_000, "s2", "p2", offset_sums={t: 5_000 for t in tasks})]
    events += heartbeats(["s1", "s2"], 1_500, 10_000) + heartbeats(["s1"], 10_000, 20_000)
    # Each client's standbys are current (lag 0), so the survivor is caught up on everything.
    events += [hb_lags(4_000, "s1", {"0_1": 0, "0_3": 0}), hb_lags(4_000, "s2", {"0_0": 0, "0_2": 0})]
    events += [leave(10_000, "s2", reason="shutdown")]
    outputs, _ = run_batches([in_time_order(events)])
    gens = generations(outputs, "active_tasks", "standby_tasks")
    assert gens[1] == {"s1": (["0_0", "0_2", "1_0"], ["0_1", "0_3"]), "s2": (["0_1", "0_3", "1_1"], ["0_0", "0_2"])}
    assert gens[2] == {"s1": (["0_0", "0_1", "0_2", "0_3", "1_0", "1_1"], [])}
    assert sorted((r["unit_id"], r["to_member"], r["reason"]) for r in rows(outputs, "revocations")) == [
        ("0_1", "s1", "member_left"), ("0_3", "s1", "member_left"), ("1_1", "s1", "member_left")]
    assert metrics(outputs, "trigger", "trigger_member", "not_caught_up_actives", "probing_rebalance_at") == [
        ("join", "s1", 0, None), ("leave", "s2", 0, None)]
    assert rows(outputs, "alerts") == []


def test_a_client_with_several_threads_deals_its_tasks_over_its_members_and_keeps_them_there():
    events = [streams_workload(0), streams_join(1_000, "a1", "p1"), streams_join(1_000, "a2", "p1")]
    events += heartbeats(["a1", "a2"], 1_500, 12_000)
    events += [streams_join(6_000, "b1", "p2", threads=2)] + heartbeats(["b1"], 6_500, 12_000)
    outputs, _ = run_batches([in_time_order(events)])
    gens = generations(outputs, "process_id", "active_tasks")
    assert gens[1] == {"a1": ("p1", ["0_0", "0_2", "1_0"]), "a2": ("p1", ["0_1", "0_3", "1_1"])}
    # p2 (2 threads, no state) gets the stateless tasks; p1's members keep theirs.
    assert gens[2]["a1"] == ("p1", ["0_0", "0_2"]) and gens[2]["a2"] == ("p1", ["0_1", "0_3"])
    assert gens[2]["b1"] == ("p2", ["1_0", "1_1"])
    assert metrics(outputs, "clients", "threads", "max_actives_per_thread", "min_actives_per_thread") == [
        (1, 2, 3.0, 3.0), (2, 4, 2.0, 1.0)]


def test_a_workload_the_assignor_refuses_is_a_failed_rebalance_with_the_codec_message():
    events = [streams_workload(0, stateful=["0_0", "zero"]), streams_join(1_000, "s1", "p1")]
    events += heartbeats(["s1"], 1_500, 6_000)
    outputs, state = run_batches([events])
    assert [r["reason"] for r in rows(outputs, "rejected_events")] == [
        "rebalance at 2000 failed: stateful_tasks[1]: task id 'zero' is not of the form '<subtopology>_<partition>'"
        " (for example '0_1')"]
    assert state.generation == 0 and state.failed_rebalances == 1


# -- Kafka Connect ---------------------------------------------------------------------------------


def connect_view(outputs):
    return generations(outputs, "connectors", "tasks")


def test_a_connect_worker_that_bounces_within_the_delay_gets_its_work_back_without_a_reshuffle():
    outputs, state = run_batches([connect_bounce_story()])
    gens = connect_view(outputs)
    w1 = (["s3"], ["s3-0", "s3-1"])
    # w2 joins: the incremental assignor revokes first, the follow-up hands the work over.
    assert gens[2] == {"w1": w1, "w2": ([], [])} and gens[3] == {"w1": w1, "w2": (["jdbc"], ["jdbc-0", "jdbc-1"])}
    # w2 leaves at 20 s: its work is held for the 60 s delay; w2b comes back at 30 s and waits.
    assert gens[4] == {"w1": w1} and gens[5] == {"w1": w1, "w2b": ([], [])}
    # When the delay expires (21 s + 60 s), w2b gets exactly w2's work; w1 never lost anything.
    assert gens[6] == {"w1": w1, "w2b": (["jdbc"], ["jdbc-0", "jdbc-1"])}
    assert metrics(outputs, "generation", "event_time", "trigger", "phase", "lost_pending", "delay_ms",
                   "scheduled_rebalance_at", "unassigned") == [
        (1, 2_000, "join", "complete", 0, 0, None, 0),
        (2, 6_000, "join", "revocation", 0, 0, None, 2),
        (3, 6_500, "cooperative_followup", "followup", 0, 0, None, 0),
        (4, 21_000, "leave", "complete", 3, 60_000, 81_000, 0),
        (5, 31_000, "join", "complete", 3, 50_000, 81_000, 0),
        (6, 81_000, "scheduled_rebalance", "complete", 0, 0, None, 0)]
    assert sorted((r["generation"], r["member_id"], r["unit"], r["unit_id"], r["reason"])
                  for r in rows(outputs, "revocations")) == [
        (2, "w1", "connector", "jdbc", "balance"), (2, "w1", "task", "jdbc-0", "balance"),
        (2, "w1", "task", "jdbc-1", "balance"),
        (4, "w2", "connector", "jdbc", "member_left"), (4, "w2", "task", "jdbc-0", "member_left"),
        (4, "w2", "task", "jdbc-1", "member_left")]
    assert {r["assignor"] for r in rows(outputs, "assignments")} == {"connect-incremental"}
    assert state.connect_leader == "w1" and state.connect_leader_state.previous_generation_id == 6
    assert rows(outputs, "alerts") == []


def test_a_connect_worker_lost_beyond_the_delay_has_its_work_reassigned_at_exactly_the_deadline():
    outputs, state = run_batches([connect_bounce_story(return_at=None)])
    last = rows(outputs, "balance_metrics")[-1]
    assert (last["generation"], last["event_time"], last["trigger"], last["lost_pending"]) == (
        5, 81_000, "scheduled_rebalance", 0)
    assert connect_view(outputs)[5] == {"w1": (["s3", "jdbc"], ["s3-0", "s3-1", "jdbc-0", "jdbc-1"])}
    assert state.scheduled is None


def test_the_connect_delay_is_a_timer_that_fires_for_a_silent_group():
    events = [connect_workload(0), connect_join(1_000, "w1", session=300_000), connect_join(1_000, "w2")]
    events += heartbeats(["w1", "w2"], 1_500, 10_000) + [leave(10_000, "w2")] + heartbeats(["w1"], 10_000, 14_000)
    state = GroupState(group_id="g")
    feed(state, in_time_order(events))
    assert next_deadline(state, SETTINGS) == 71_000  # the 60 s delay from the generation at 11 s
    due, _ = advance(state, [], [], [], SETTINGS, watermark_ms=71_000)
    assert metrics(due, "event_time", "trigger", "lost_pending") == [(71_000, "scheduled_rebalance", 0)]
    assert sorted(connect_view(due)[state.generation]["w1"][1]) == ["jdbc-0", "jdbc-1", "s3-0", "s3-1"]


def test_eager_connect_reassigns_from_scratch_in_one_generation():
    events = [connect_workload(0), connect_join(1_000, "w1", "connect-eager")] + heartbeats(["w1"], 1_500, 5_000)
    events += [connect_join(5_000, "w2", "connect-eager"), connect_join(5_000, "w3", "connect-eager")]
    events += heartbeats(["w1", "w2", "w3"], 5_500, 12_000)
    outputs, state = run_batches([in_time_order(events)])
    assert connect_view(outputs) == {
        1: {"w1": (["jdbc", "s3"], ["jdbc-0", "jdbc-1", "s3-0", "s3-1"])},
        # Connectors round-robin over the workers by id; the tasks continue the same iterator.
        2: {"w1": (["jdbc"], ["jdbc-1"]), "w2": (["s3"], ["s3-0"]), "w3": ([], ["jdbc-0", "s3-1"])}}
    assert metrics(outputs, "protocol", "phase", "delay_ms", "max_tasks_per_worker", "min_tasks_per_worker",
                   "moved") == [("eager", "complete", 0, 4, 4, 0), ("eager", "complete", 0, 2, 1, 3)]
    assert {r["reason"] for r in rows(outputs, "revocations")} == {"moved"}
    assert state.connect_leader_state is None and state.scheduled is None and state.pending is None


# -- alerts ----------------------------------------------------------------------------------------


def test_streams_not_caught_up_fires_after_its_duration_and_resolves_when_the_lags_report_caught_up():
    rules = parse_alert_rules(tomllib.loads("[streams_not_caught_up]\nduration_ms = 10000\n"))
    settings = engine_settings(rules)
    # p1 starts with no local state and 5000 records of changelog per task to restore.
    events = [streams_workload(0, end_offsets={t: 5_000 for t in ("0_0", "0_1", "0_2", "0_3")}),
              streams_join(1_000, "s1", "p1")] + heartbeats(["s1"], 1_500, 30_000)
    events += [hb_lags(8_000, "s1", {t: 3_000 for t in ("0_0", "0_1", "0_2", "0_3")}),
               hb_lags(15_000, "s1", {"0_0": 50, "0_1": 50, "0_2": 50}),
               hb_lags(18_000, "s1", {"0_3": 100})]
    outputs, _ = run_batches([in_time_order(events)], settings)
    alerts = rows(outputs, "alerts")
    assert [(a["rule"], a["status"], a["fired_at"], a["resolved_at"], a["value"]) for a in alerts] == [
        ("streams_not_caught_up", "firing", 12_000, None, 4.0),
        ("streams_not_caught_up", "resolved", 12_000, 18_000, 0.0)]
    assert "0_3 on p1 (lag 3000)" in alerts[0]["description"]
    assert metrics(outputs, "not_caught_up_actives") == [(4,)]


def test_connect_lost_work_fires_when_every_worker_is_gone_past_the_delay_and_resolves_when_work_is_assigned():
    events = [connect_workload(0), connect_join(1_000, "w1"), leave(10_000, "w1")] + heartbeats(["w1"], 1_500, 10_000)
    state = GroupState(group_id="g")
    outputs = feed(state, in_time_order(events))
    # Nobody is left to heartbeat: the stream's watermark moves the group on.
    outputs += advance(state, [], [], [], SETTINGS, watermark_ms=50_000)[0]
    assert metrics(outputs, "members", "lost_pending") == [(1, 0), (0, 6)]
    assert next_deadline(state, SETTINGS) == 101_000  # the delay ends at 11 s + 60 s; then the 30 s grace
    fired, _ = advance(state, [], [], [], SETTINGS, watermark_ms=150_000)
    back = [connect_join(200_000, "w3")] + heartbeats(["w3"], 200_500, 210_000)
    resolved = feed(state, back)
    assert [(a["rule"], a["status"], a["fired_at"], a["resolved_at"], a["value"])
            for a in rows(fired + resolved, "alerts")] == [
        ("connect_lost_work", "firing", 101_000, None, 6.0), ("connect_lost_work", "resolved", 101_000, 201_000, 0.0)]
    assert connect_view(resolved)[3] == {"w3": (["jdbc", "s3"], ["jdbc-0", "jdbc-1", "s3-0", "s3-1"])}


# -- time and state --------------------------------------------------------------------------------


def _check_batch_independence(events, collapsed=False):
    whole, _ = run_batches([events], collapsed=collapsed)

    @settings(max_examples=40, deadline=None)
    @given(st.lists(st.integers(min_value=0, max_value=len(events)), max_size=10))
    def check(cuts):
        bounds = sorted({0, len(events), *cuts})
        split, _ = run_batches([events[a:b] for a, b in zip(bounds, bounds[1:])], collapsed=collapsed)
        assert [(o.table, o.as_dict()) for o in split] == [(o.table, o.as_dict()) for o in whole]

    check()
    return whole


def test_streams_history_does_not_depend_on_micro_batch_boundaries():
    assert len(rows(_check_batch_independence(streams_scale_out_story()), "balance_metrics")) == 3


def test_connect_history_does_not_depend_on_micro_batch_boundaries():
    assert len(rows(_check_batch_independence(connect_bounce_story()), "balance_metrics")) == 6


def test_per_batch_latest_lags_give_the_same_history_when_a_batch_holds_one_report_per_member():
    story = streams_scale_out_story()
    exact, _ = run_batches([story])
    # Batches cut every 5 s of event time: each holds at most one lag report of s2.
    batches = [[e for e in story if start <= (e["event_time"] if isinstance(e, dict) else e[2]) < start + 5_000]
               for start in range(0, 80_000, 5_000)]
    collapsed, _ = run_batches(batches, collapsed=True)
    assert [(o.table, o.as_dict()) for o in collapsed] == [(o.table, o.as_dict()) for o in exact]


def test_the_state_survives_the_codec_mid_story_with_every_task_group_field():
    for story in (streams_scale_out_story(), connect_bounce_story()):
        state = GroupState(group_id="g")
        cut = len(story) // 2
        feed(state, story[:cut])
        blob = encode_state(state)
        decoded = decode_state(blob)
        assert decoded == state and encode_state(decoded) == blob
    assert decoded.task_assignment and decoded.connect_leader_state is not None and decoded.scheduled is not None


def test_task_group_records_carry_the_group_type_and_the_heartbeat_lags():
    membership, beats = task_group_records(streams_scale_out_story(), "app", 1_000_000, "streams")
    assert {v["group_type"] for _, v in membership} == {"streams"}
    with_lags = [v for _, v in beats if "task_lags" in v]
    assert [(v["member_id"], v["event_time"], v["task_lags"]) for v in with_lags][0] == (
        "s2", 1_010_000, {"0_1": 4_000, "0_3": 4_000})
    assert len({v["event_id"] for _, v in beats}) == len(beats)


# -- the documented examples -----------------------------------------------------------------------


def _doc_examples():
    import json
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "streams-connect-groups.md").read_text()
    return [json.loads(block) for block in re.findall(r"```json\n(.*?)```", text, flags=re.S)]


def test_the_documented_events_use_defined_fields_and_give_a_generation():
    from schemas.events import HEARTBEAT_FIELDS, MEMBERSHIP_FIELDS, WORKLOAD

    examples = _doc_examples()
    assert len(examples) == 5
    membership = {f.name for f in MEMBERSHIP_FIELDS}
    workload_fields = {name for name, _ in WORKLOAD.fields}
    for e in examples:
        assert set(e) <= (membership if "type" in e else {f.name for f in HEARTBEAT_FIELDS}), e
        assert set(e.get("workload", {})) <= workload_fields
    for group_id in ("orders-app", "connect-cluster"):
        events = [e for e in examples if e["group_id"] == group_id and "type" in e]
        state = GroupState(group_id=group_id)
        member = next(e["member_id"] for e in events if e["type"] == "join")
        t0 = events[0]["event_time"]
        out, _ = advance(state, [MembershipEvent.from_json(e) for e in events], [member] * 10,
                         [t0 + 5_000 + 1_000 * i for i in range(10)], SETTINGS)
        (row,) = rows(out, "assignments")
        assert row["member_id"] == member and row["group_type"] == events[0]["group_type"]
        assert len(row["active_tasks"] or row["tasks"]) == (6 if group_id == "orders-app" else 4)


def test_a_new_streams_workload_forgets_the_lags_of_tasks_the_application_no_longer_has():
    events = [streams_workload(0), streams_join(1_000, "s1", "p1")] + heartbeats(["s1"], 1_500, 12_000)
    events += [hb_lags(3_000, "s1", {"0_0": 7, "0_3": 9}),
               streams_workload(6_000, stateful=["0_0", "0_1"], stateless=[], eid="sw2")]
    _, state = run_batches([in_time_order(events)])
    assert state.task_lags == {"s1": {"0_0": 7}}
    assert state.task_assignment == {"s1": {"active": ["0_0", "0_1"], "standby": [], "warmup": []}}
