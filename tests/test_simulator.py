"""The simulator: deterministic, in event-time order, true to the event contract, and it does what
its config says (static bounces, crashes, churn rate, labelled bad records). Pure: no broker."""

from __future__ import annotations

import json
import re
import time
from collections import Counter, defaultdict

import pytest

from assignors.errors import RebalanceMonitorError
from schemas.events import (
    ASSIGNOR_NAMES,
    HEARTBEAT_FIELDS,
    MEMBER_EVENT_TYPES,
    MEMBERSHIP_FIELDS,
    Array,
    Map,
    Struct,
)
from streaming.feeds.simulator import (
    BAD_KINDS,
    HEARTBEAT,
    MEMBERSHIP,
    REASON_NEW_MEMBER,
    REASON_START,
    REASON_STATIC_RESTART,
    Simulation,
    SimulationConfig,
    SimulationError,
    simulate,
)

MINUTE = 60_000
INT32 = (-(2**31), 2**31 - 1)

CONFIG = SimulationConfig(groups=8, members=(2, 5), topics=2, partitions=(1, 8), churn_per_minute=6,
                          static_share=0.4, cooperative_share=0.5, crash_share=0.25, bad_share=0.03,
                          racks=("az1", "az2", "az3"), seed=11)
END = CONFIG.start_time_ms + 10 * MINUTE


@pytest.fixture(scope="module")
def run():
    simulation = Simulation(CONFIG)
    records = list(simulation.records(end_time_ms=END))
    return simulation, records


# --- a checker of schemas/events.py written independently of the simulator ---------------------

def _type_problems(name: str, ftype, value) -> list[str]:
    if value is None:
        return []
    if ftype == "string":
        ok = isinstance(value, str)
    elif ftype in ("int", "long"):
        ok = isinstance(value, int) and not isinstance(value, bool)
        if ok and ftype == "int":
            ok = INT32[0] <= value <= INT32[1]
    elif ftype == "double":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif ftype == "boolean":
        ok = isinstance(value, bool)
    elif isinstance(ftype, Array):
        if not isinstance(value, list):
            return [f"{name}: not an array"]
        return [p for v in value for p in _type_problems(f"{name}[]", ftype.element, v)]
    elif isinstance(ftype, Struct):
        if not isinstance(value, dict):
            return [f"{name}: not an object"]
        known = dict(ftype.fields)
        problems = [f"{name}.{k}: unknown field" for k in value if k not in known]
        return problems + [p for k, t in ftype.fields for p in _type_problems(f"{name}.{k}", t, value.get(k))]
    elif isinstance(ftype, Map):
        if not isinstance(value, dict):
            return [f"{name}: not an object"]
        return [p for k, v in value.items() for p in _type_problems(f"{name}.{k}", ftype.value, v)]
    else:
        raise AssertionError(f"unknown field type {ftype!r}")
    return [] if ok else [f"{name}: wrong type {type(value).__name__}"]


def contract_problems(kind: str, value: bytes, max_bytes: int = 1_048_576) -> list[str]:
    """Why a record breaks the event contract (empty = valid); mirrors what the job must check."""
    if len(value) > max_bytes:
        return ["oversized"]
    try:
        event = json.loads(value)
    except ValueError:
        return ["not JSON"]
    if not isinstance(event, dict):
        return ["not an object"]
    fields = MEMBERSHIP_FIELDS if kind == MEMBERSHIP else HEARTBEAT_FIELDS
    by_name = {f.name: f for f in fields}
    problems = [f"{k}: unknown field" for k in event if k not in by_name]
    for f in fields:
        value_ = event.get(f.name)
        if value_ is None:
            if f.required:
                problems.append(f"missing {f.name}")
            continue
        typed = _type_problems(f.name, f.type, value_)
        problems += typed
        if typed:
            continue
        if f.enum and value_ not in f.enum:
            problems.append(f"{f.name}: unknown value {value_!r}")
        if f.minimum is not None and value_ < f.minimum:
            problems.append(f"{f.name}: below minimum")
        if f.non_empty and not value_.strip():
            problems.append(f"{f.name}: empty")
    if kind == MEMBERSHIP and not problems:
        if event["type"] in MEMBER_EVENT_TYPES and not event.get("member_id"):
            problems.append("missing member_id")
        if event["type"] == "workload" and event.get("group_type") == "streams":
            tasks = (event.get("workload") or {}).get("tasks") or {}
            if not tasks.get("stateful"):
                problems.append("missing workload.tasks")
            ids = (tasks.get("stateful") or []) + (tasks.get("stateless") or [])
            problems += [f"task id {t}" for t in ids if not re.fullmatch(r"[0-9]+_[0-9]+", t)]
        elif event["type"] == "workload" and event.get("group_type") == "connect":
            connectors = (event.get("workload") or {}).get("connectors")
            if not connectors:
                problems.append("missing workload.connectors")
            problems += ["connector tasks" for c in connectors or [] if c["tasks"] < 0]
        elif event["type"] == "workload":
            topics = (event.get("workload") or {}).get("topics")
            if topics is None:
                problems.append("missing workload.topics")
            for t in topics or []:
                if t.get("partitions") is None or t["partitions"] < 0:
                    problems.append("negative partitions")
                elif t.get("racks") is not None and len(t["racks"]) != t["partitions"]:
                    problems.append("racks per partition")
        for p in event.get("owned_partitions") or []:
            if p.get("partition") is None or p["partition"] < 0:
                problems.append("owned partition negative")
    return problems


def good_events(records):
    return [(r.topic_kind, r.key, json.loads(r.value)) for r in records if r.bad is None]


def timelines(records):
    """Per member: its join, its leave (if any) and its heartbeat times."""
    joins, leaves, beats = {}, {}, defaultdict(list)
    for kind, _, e in good_events(records):
        if kind == HEARTBEAT:
            beats[e["member_id"]].append(e["event_time"])
        elif e["type"] == "join":
            assert e["member_id"] not in joins, "a member id joined twice"
            joins[e["member_id"]] = e
        elif e["type"] == "leave":
            leaves[e["member_id"]] = e
    return joins, leaves, beats


def silent_members(joins, leaves, beats, before: int) -> list[str]:
    """Dynamic members whose last sign of life (join or heartbeat) is before ``before``, with no leave."""
    return [m for m, e in joins.items() if m not in leaves and "group_instance_id" not in e
            and max(beats[m], default=e["event_time"]) < before]


# --- determinism and order ----------------------------------------------------------------------

def test_the_same_config_gives_byte_identical_records_and_another_seed_does_not(run):
    _, records = run
    assert list(simulate(CONFIG, end_time_ms=END)) == records
    other = list(simulate(SimulationConfig(**{**CONFIG.__dict__, "seed": 12}), end_time_ms=END))
    assert other != records


def test_equal_configs_written_differently_give_the_same_records():
    a = SimulationConfig(groups=2, members=[2, 3], churn_per_minute=6, static_share=1, bad_share=0)
    b = SimulationConfig(groups=2, members=(2, 3), churn_per_minute=6.0, static_share=1.0, bad_share=0.0)
    assert a == b
    assert list(simulate(a, max_records=300)) == list(simulate(b, max_records=300))


def test_event_ids_are_unique_and_differ_between_runs_with_other_settings(run):
    _, records = run
    ids = [json.loads(r.value)["event_id"] for r in records if r.bad not in ("malformed_json", "oversized")
           and "event_id" in json.loads(r.value)]
    assert len(ids) == len(set(ids)) > 1000
    later = SimulationConfig(**{**CONFIG.__dict__, "start_time_ms": CONFIG.start_time_ms + 1})
    later_ids = {json.loads(r.value)["event_id"] for r in simulate(later, max_records=500) if r.bad is None}
    assert not later_ids & set(ids)


def test_records_come_in_event_time_order_keyed_by_group(run):
    _, records = run
    events = good_events(records)
    times = [e["event_time"] for _, _, e in events]
    assert times == sorted(times)
    assert CONFIG.start_time_ms <= times[0] and times[-1] < END
    assert all(key == e["group_id"] for _, key, e in events)
    groups = {e["group_id"] for _, _, e in events}
    assert len(groups) == CONFIG.groups
    # Bad records ride along in the same groups, at the simulated time they were injected.
    assert {r.key for r in records if r.bad} <= groups


def test_each_group_starts_with_its_workload_then_joins_then_heartbeats(run):
    _, records = run
    per_group = defaultdict(list)
    for kind, _, e in good_events(records):
        per_group[e["group_id"]].append((kind, e))
    for group, events in per_group.items():
        kind, first = events[0]
        assert kind == MEMBERSHIP and first["type"] == "workload", group
        assert [t["name"] for t in first["workload"]["topics"]] == [f"{group}.topic-{i}" for i in range(CONFIG.topics)]
        first_heartbeat = next(i for i, (k, _) in enumerate(events) if k == HEARTBEAT)
        initial_joins = [e for k, e in events[1:first_heartbeat]]
        assert initial_joins and all(e["type"] == "join" and e["reason"] == REASON_START for e in initial_joins)
        assert CONFIG.member_range[0] <= len(initial_joins) <= CONFIG.member_range[1]


def test_every_member_heartbeats_every_interval_from_its_join_until_it_goes(run):
    _, records = run
    joins, leaves, beats = timelines(records)
    interval = CONFIG.heartbeat_interval_ms
    assert set(beats) <= set(joins), "a heartbeat from a member that never joined"
    for member, join in joins.items():
        times = beats[member]
        if not times:  # joined within the last interval, or went before its first heartbeat
            continue
        assert join["event_time"] < times[0] <= join["event_time"] + interval, member
        assert all(b - a == interval for a, b in zip(times, times[1:])), member
        if member in leaves:
            assert times[-1] <= leaves[member]["event_time"] < times[-1] + interval


# --- the contract -------------------------------------------------------------------------------

def test_every_good_record_meets_the_event_contract(run):
    _, records = run
    good = [r for r in records if r.bad is None]
    assert len(good) > 1000
    broken = [(r.value[:120], p) for r in good if (p := contract_problems(r.topic_kind, r.value))]
    assert broken == []
    joins = [e for k, _, e in good_events(records) if k == MEMBERSHIP and e["type"] == "join"]
    assert {e["generation"] for e in joins} == {-1}
    assert {e["owned_partitions"] == [] for e in joins} == {True}
    assert {e["rack"] for e in joins} <= set(CONFIG.racks)


@pytest.mark.parametrize("kind, symptom", [
    ("malformed_json", "not JSON"),
    ("missing_field", "missing"),
    ("unknown_assignor", "assignor: unknown value"),
    ("negative_partitions", "negative partitions"),
    ("oversized", "oversized"),
    ("wrong_type", "wrong type"),
])
def test_each_bad_record_breaks_the_contract_the_way_its_label_says(run, kind, symptom):
    _, records = run
    labelled = [r for r in records if r.bad == kind]
    assert labelled, f"no {kind} records in the run"
    for r in labelled:
        problems = contract_problems(r.topic_kind, r.value, CONFIG.oversized_bytes - 1)
        assert any(symptom in p for p in problems), (r.value[:200], problems)
    if kind == "oversized":
        assert {len(r.value) for r in labelled} == {CONFIG.oversized_bytes}
        assert all(json.loads(r.value)["group_id"] == r.key for r in labelled)  # big, not broken


def test_bad_records_are_the_configured_share_spread_over_the_kinds_and_counted(run):
    simulation, records = run
    bad = Counter(r.bad for r in records if r.bad)
    assert abs(sum(bad.values()) - CONFIG.bad_share * len(records)) <= 1
    assert set(bad) == set(BAD_KINDS)
    assert simulation.stats.bad == bad
    assert simulation.stats.records == Counter(r.topic_kind for r in records)


def test_bad_records_do_not_change_a_single_good_record(run):
    _, records = run
    clean = SimulationConfig(**{**CONFIG.__dict__, "bad_share": 0.0})
    assert list(simulate(clean, end_time_ms=END)) == [r for r in records if r.bad is None]


def test_only_the_chosen_bad_kinds_appear():
    config = SimulationConfig(groups=2, bad_share=0.2, bad_kinds=("wrong_type", "malformed_json"))
    kinds = {r.bad for r in simulate(config, max_records=2_000) if r.bad}
    assert kinds == {"wrong_type", "malformed_json"}


# --- behaviour the config asks for ------------------------------------------------------------

def test_static_members_bounce_with_a_new_member_id_within_the_session_timeout(run):
    _, records = run
    joins, leaves, beats = timelines(records)
    by_instance = defaultdict(list)
    for member, e in joins.items():
        if "group_instance_id" in e:
            by_instance[(e["group_id"], e["group_instance_id"])].append(e)
    bounces = 0
    for (group, instance), history in by_instance.items():
        history.sort(key=lambda e: e["event_time"])
        assert history[0]["reason"] != REASON_STATIC_RESTART
        for old, new in zip(history, history[1:]):
            bounces += 1
            assert new["member_id"] != old["member_id"]
            assert new["reason"] == REASON_STATIC_RESTART
            assert new["client_id"] == old["client_id"]
            assert old["member_id"] not in leaves, "static members do not send a leave"
            last_sign = max(beats[old["member_id"]], default=old["event_time"])
            assert last_sign < new["event_time"] < last_sign + CONFIG.session_timeout_ms
    assert bounces >= 5
    assert not any("group_instance_id" in joins[m] for m in leaves)


def test_members_of_crashing_groups_go_silent_and_others_leave():
    config = SimulationConfig(groups=6, members=(3, 6), churn_per_minute=10, crash_share=0.5, seed=3)
    end = config.start_time_ms + 10 * MINUTE
    simulation = Simulation(config)
    records = list(simulation.records(end_time_ms=end))
    joins, leaves, beats = timelines(records)
    last_time = max(json.loads(r.value)["event_time"] for r in records)
    silent = silent_members(joins, leaves, beats, last_time - config.heartbeat_interval_ms)
    silent_groups = {joins[m]["group_id"] for m in silent}
    leaving_groups = {e["group_id"] for e in leaves.values()}
    # A crash within the last heartbeat interval cannot be told from a live member yet.
    assert simulation.stats.crashes - 3 <= len(silent) <= simulation.stats.crashes
    assert len(silent) > 20
    assert len(silent_groups) == len(leaving_groups) == 3
    assert not silent_groups & leaving_groups


def test_no_member_goes_silent_when_nothing_crashes():
    config = SimulationConfig(groups=6, members=(3, 6), churn_per_minute=10, crash_share=0.0, seed=3)
    records = list(simulate(config, end_time_ms=config.start_time_ms + 10 * MINUTE))
    joins, leaves, beats = timelines(records)
    last_time = max(json.loads(r.value)["event_time"] for r in records)
    assert leaves
    assert silent_members(joins, leaves, beats, last_time - config.heartbeat_interval_ms) == []


def test_churn_happens_at_about_the_configured_rate():
    config = SimulationConfig(groups=20, members=(3, 8), churn_per_minute=6, static_share=0.3, crash_share=0.3,
                              seed=5)
    minutes = 10
    records = list(simulate(config, end_time_ms=config.start_time_ms + minutes * MINUTE))
    joins, leaves, beats = timelines(records)
    last_time = max(json.loads(r.value)["event_time"] for r in records)
    arrivals = sum(1 for e in joins.values() if e["reason"] == REASON_NEW_MEMBER)
    bounces = sum(1 for e in joins.values() if e["reason"] == REASON_STATIC_RESTART)
    crashes = len(silent_members(joins, leaves, beats, last_time - config.heartbeat_interval_ms))
    observed = arrivals + len(leaves) + bounces + crashes
    expected = config.groups * config.churn_per_minute * minutes
    # Poisson: the standard deviation is ~sqrt(1200) = 35; bounces still under way at the end are
    # not visible yet, so allow 12 %.
    assert abs(observed - expected) <= 0.12 * expected, (observed, expected)
    assert arrivals and leaves and bounces and crashes


def test_cooperative_share_and_assignors():
    config = SimulationConfig(groups=40, cooperative_share=0.25, churn_per_minute=0)
    joins = [json.loads(r.value) for r in simulate(config, max_records=2_000) if r.topic_kind == MEMBERSHIP]
    protocol = {e["group_id"]: (e["protocol"], e["assignor"]) for e in joins if e["type"] == "join"}
    assert len(protocol) == 40
    cooperative = [g for g, (p, _) in protocol.items() if p == "cooperative"]
    assert len(cooperative) == 10
    assert {protocol[g][1] for g in cooperative} == {"cooperative-sticky"}
    eager = {a for p, a in protocol.values() if p == "eager"}
    assert eager == {"range", "roundrobin", "sticky"} and eager <= set(ASSIGNOR_NAMES)


def test_max_records_gives_exactly_that_many_and_stats_agree():
    config = SimulationConfig(groups=50, bad_share=0.3, bad_kinds=("wrong_type",))
    simulation = Simulation(config)
    records = [r for batch in simulation.batches(batch_size=7, max_records=1_001) for r in batch]
    assert len(records) == 1_001 == simulation.stats.total
    assert simulation.stats.records == Counter(r.topic_kind for r in records)
    assert simulation.stats.bad == Counter(r.bad for r in records if r.bad)


def test_a_fleet_of_1000_groups_is_generated_much_faster_than_simulated_time():
    # 1,000 groups x 10 members heartbeating every second = 10,000 heartbeats per simulated second.
    config = SimulationConfig(groups=1_000, members=10, heartbeat_interval_ms=1_000, churn_per_minute=1)
    simulation = Simulation(config)
    started = time.process_time()  # CPU time: other processes on the machine must not matter
    count = sum(len(b) for b in simulation.batches(end_time_ms=config.start_time_ms + 10_000))
    cpu = time.process_time() - started
    # Steady state is 10,000/s; the first second is the fleet starting up.
    assert 85_000 <= simulation.stats.records[HEARTBEAT] <= 100_000
    assert count / cpu >= 50_000, f"{count / cpu:,.0f} records per CPU second"


# --- config errors ------------------------------------------------------------------------------

@pytest.mark.parametrize("override, named", [
    ({"groups": 0}, "--groups"),
    ({"members": (5, 2)}, "--members"),
    ({"partitions": 0}, "--partitions"),
    ({"churn_per_minute": -1}, "--churn-per-minute"),
    ({"heartbeat_interval_ms": 50_000}, "--heartbeat-interval-ms"),
    ({"static_share": 1.5}, "--static-share"),
    ({"crash_share": -0.1}, "--crash-share"),
    ({"bad_share": 1.0}, "--bad-share"),
    ({"bad_kinds": ("gibberish",)}, "bad_kinds"),
    ({"seed": "x"}, "--seed"),
])
def test_a_bad_option_is_refused_by_name(override, named):
    with pytest.raises(SimulationError, match=named) as info:
        SimulationConfig(**override)
    assert isinstance(info.value, RebalanceMonitorError)


def test_the_cli_refuses_a_bad_option_before_touching_kafka(capsys):
    from streaming.cli.main import main

    # A closed port: if validation came after connecting, this would fail differently and slowly.
    assert main(["simulate", "--bootstrap-servers", "127.0.0.1:1", "--static-share", "1.5"]) == 2
    assert "--static-share" in capsys.readouterr().err
    assert main(["simulate", "--bootstrap-servers", "127.0.0.1:1", "--rate", "-5"]) == 2
    assert "--rate" in capsys.readouterr().err


# --- Kafka Streams and Kafka Connect groups --------------------------------------------------------

TASK_CONFIG = SimulationConfig(groups=8, members=(2, 4), topics=2, partitions=(2, 6), churn_per_minute=2,
                               static_share=0.3, streams_share=0.25, connect_share=0.25, seed=5)


def test_streams_and_connect_groups_meet_the_contract_and_consumer_only_runs_are_unchanged():
    records = list(simulate(TASK_CONFIG, end_time_ms=TASK_CONFIG.start_time_ms + 5 * MINUTE))
    assert [(r.value[:120], p) for r in records if (p := contract_problems(r.topic_kind, r.value))] == []
    kinds = Counter(e["group_type"] for k, _, e in good_events(records) if k == MEMBERSHIP and e["type"] == "workload")
    assert kinds == {"consumer": 4, "streams": 2, "connect": 2}
    joins = [e for k, _, e in good_events(records) if k == MEMBERSHIP and e["type"] == "join"]
    assert all(e["process_id"] and e["threads"] == 1 for e in joins if e["group_type"] == "streams")
    assert all(e["worker_url"].startswith("http://") and "group_instance_id" not in e
               for e in joins if e["group_type"] == "connect")
    assert {e["assignor"] for e in joins if e["group_type"] == "connect"} <= {"connect-eager", "connect-incremental"}
    lags = [e for k, _, e in good_events(records) if k == HEARTBEAT and "task_lags" in e]
    assert lags and min(min(e["task_lags"].values()) for e in lags) == 0
    # The new options at their defaults leave the run tag, and so every event id, as before.
    plain = SimulationConfig(groups=8, seed=5)
    assert plain.run_tag() != TASK_CONFIG.run_tag()
    assert {e["group_type"] for _, _, e in good_events(simulate(plain, max_records=2_000))
            if "group_type" in e} == {"consumer"}


def test_simulated_streams_and_connect_groups_run_through_the_engine_without_a_refusal():
    from streaming.engine import GroupState, LagReport, MembershipEvent, advance
    from streaming.testing import engine_settings

    by_group: dict[str, list] = defaultdict(list)
    for kind, key, e in good_events(simulate(TASK_CONFIG, end_time_ms=TASK_CONFIG.start_time_ms + 5 * MINUTE)):
        by_group[key].append((kind, e))
    checked = Counter()
    for group_id, events in by_group.items():
        membership = [e for k, e in events if k == MEMBERSHIP]
        group_type = membership[0]["group_type"]
        if group_type == "consumer":
            continue
        beats = [e for k, e in events if k == HEARTBEAT]
        state = GroupState(group_id=group_id)
        out, _ = advance(state, [MembershipEvent.from_json(e) for e in membership],
                         [b["member_id"] for b in beats], [b["event_time"] for b in beats], engine_settings(),
                         lag_reports=[LagReport(b["member_id"], b["event_time"], b["task_lags"])
                                      for b in beats if "task_lags" in b])
        assert [o.as_dict() for o in out if o.table == "rejected_events"] == []
        workload = membership[0]["workload"]
        gens = defaultdict(list)
        for o in out:
            if o.table == "assignments":
                gens[o.as_dict()["generation"]].append(o.as_dict())
        assert len(gens) >= 2
        for generation, rows in gens.items():
            if group_type == "streams":
                actives = sorted(t for r in rows for t in r["active_tasks"])
                tasks = workload["tasks"]
                assert actives == sorted(tasks["stateful"] + tasks["stateless"]), generation
            else:
                held = [t for r in rows for t in r["tasks"]]
                assert len(held) == len(set(held))  # never two workers on one task
        checked[group_type] += 1
    assert checked == {"streams": 2, "connect": 2}
