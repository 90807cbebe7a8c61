"""Alert rules in the engine, alone: each rule fires on the history that should fire it, once per
episode, stays quiet otherwise, and resolves at the exact event time the condition clears."""

from __future__ import annotations

import tomllib

import pytest

from streaming.alerting.rules import AlertConfigError, AlertRules, parse_alert_rules
from streaming.config import ConfigError, parse_config
from streaming.engine import GroupState, next_deadline
from streaming.testing import engine_settings, feed
from tests.stories import roundtrip_state, collector_observation, eager_range_story, heartbeats, in_time_order, join, leave, workload


def rules(toml: str) -> AlertRules:
    return parse_alert_rules(tomllib.loads(toml))


def run(events, alert_rules: AlertRules = AlertRules(), batches=1, group_id="g"):
    """The alerts rows of a story, fed in ``batches`` slices with the state store round trip."""
    settings = engine_settings(alert_rules)
    state = GroupState(group_id=group_id)
    out = []
    events = in_time_order(events)
    size = -(-len(events) // batches)
    for i in range(0, len(events), size):
        chunk = events[i:i + size]
        rows, _ = feed(state, chunk, settings)
        out += [o.as_dict() for o in rows if o.table == "alerts"]
        state = roundtrip_state(state)
    return out, state


def transitions(rows):
    return [(r["rule"], r["status"], r["fired_at"], r["resolved_at"]) for r in rows]


def churn(n, every=2_000, start=1_000, member="x"):
    """A member joining and leaving n times: 2n generations, one every ``every`` ms."""
    events = []
    for i in range(n):
        t = start + 2 * i * every
        events += [join(t, f"{member}{i}"), leave(t + every, f"{member}{i}")]
    return events


def test_a_calm_group_raises_no_alert():
    events = [workload(0, partitions=6), join(1_000, "a"), join(1_000, "b")] + heartbeats(["a", "b"], 1_000, 60_000)
    out, _ = run(events)
    assert out == []


def test_a_rebalance_storm_fires_once_and_resolves_when_the_window_holds_few_enough_generations():
    r = rules("[rebalance_storm]\ngenerations = 3\nwindow_ms = 20000")
    events = [workload(0), join(0, "a")] + churn(3, every=2_000) + heartbeats(["a"], 0, 60_000)
    out, _ = run(events, r)
    # Generations at 1 s (a, coalesced), 2 s (x0 joins at 1 s), then one per leave/join: 4, 6, 8,
    # 10 and 12 s; the 4th within 20 s fires.
    assert transitions(out)[0][:3] == ("rebalance_storm", "firing", 6_000)
    fired = out[0]
    assert fired["value"] == 4.0 and fired["threshold"] == 3.0 and fired["severity"] == "critical"
    # The last generation is at 12 s; the window (20 s) holds 3 once the 4th newest (6 s) has left
    # it: 6 s + 20 s.
    resolved = [r for r in out if r["status"] == "resolved"]
    assert [(r["rule"], r["fired_at"], r["resolved_at"]) for r in resolved] == [("rebalance_storm", 6_000, 26_000)]
    assert resolved[0]["alert_id"] == fired["alert_id"]


def test_alerts_do_not_depend_on_micro_batch_boundaries():
    r = rules("[rebalance_storm]\ngenerations = 3\nwindow_ms = 20000\n[member_flapping]\nchanges = 2")
    events = [workload(0), join(0, "a")] + churn(4, every=1_500, member="x") + heartbeats(["a"], 0, 60_000)
    one, _ = run(events, r)
    many, _ = run(events, r, batches=9)
    assert one == many and len(one) >= 2


def test_imbalance_fires_on_a_settled_generation_only_and_resolves_when_balanced():
    # Two topics of 3 partitions with range: a and b subscribe to both, c only to t1.
    events = [{"event_id": "w", "event_time": 0, "type": "workload", "workload": {"topics": [
        {"name": "t0", "partitions": 6, "racks": None}, {"name": "t1", "partitions": 1, "racks": None}]}}]
    events += [join(1_000, "a", topics=("t0", "t1")), join(1_000, "b", topics=("t1",))]
    events += [leave(10_000, "b")]
    events += heartbeats(["a", "b"], 1_000, 10_000) + heartbeats(["a"], 10_000, 20_000)
    out, _ = run(events, rules("[imbalance]\nmax_minus_min = 4"))
    # a: 6 of t0 + t1-0 = 7 partitions, b: 0 -> max-min 7 > 4 at generation 1; a alone resolves it.
    assert transitions(out) == [("imbalance", "firing", 2_000, None), ("imbalance", "resolved", 2_000, 11_000)]
    assert out[0]["value"] == 7.0 and out[0]["threshold"] == 4.0


def test_cooperative_revocation_rounds_do_not_count_as_imbalance_or_unassigned():
    events = [workload(0, partitions=3), join(1_000, "c1", "cooperative-sticky", "cooperative")]
    events += [join(5_000, "c2", "cooperative-sticky", "cooperative")]
    events += heartbeats(["c1", "c2"], 1_000, 60_000)
    out, _ = run(events, rules("[imbalance]\nmax_minus_min = 0\nmin_members = 2"))
    # The revocation round (c1: 2, c2: 0) is skipped; the follow-up (2 vs 1) exceeds 0: one alert.
    assert transitions(out) == [("imbalance", "firing", 6_500, None)]


def test_partitions_unassigned_too_long_fire_at_the_exact_deadline():
    # A cooperative revocation round withholds a partition until its follow-up; a threshold shorter
    # than the follow-up delay makes that round "too long".
    settings_toml = "[unassigned_partitions]\nduration_ms = 300"
    events = [workload(0, partitions=3), join(1_000, "c1", "cooperative-sticky", "cooperative"),
              join(5_000, "c2", "cooperative-sticky", "cooperative")] + heartbeats(["c1", "c2"], 1_000, 20_000)
    out, _ = run(events, rules(settings_toml))
    # Revocation round at 6 s withholds one partition; the follow-up comes 500 ms later: longer
    # than 300 ms, so it fires at 6.3 s and resolves at 6.5 s.
    assert transitions(out) == [("unassigned_partitions", "firing", 6_300, None),
                                ("unassigned_partitions", "resolved", 6_300, 6_500)]


def test_expiries_fire_and_resolve_after_the_window():
    story = eager_range_story() + heartbeats(["a"], 32_000, 40_000)
    out, _ = run(story, rules("[member_expired]\nwindow_ms = 4000"))
    # c's session (10 s) ends at 26.5 s; the window of 4 s closes at 30.5 s.
    assert transitions(out) == [("member_expired", "firing", 26_500, None),
                                ("member_expired", "resolved", 26_500, 30_500)]


@pytest.mark.parametrize("batches", [1, 7])
def test_member_changes_keep_only_members_with_a_change_inside_the_window(batches):
    # One join a second for 39 s: at the last one (39 s) only the joins after 29 s are in the
    # 10 s window, and f0, which flapped at 0.5-0.7 s and again at 38.5-38.7 s (its alert open).
    r = rules("[member_flapping]\nchanges = 2\nwindow_ms = 10000\n[rebalance_storm]\nenabled = false")
    flapping = [join(500, "f0"), leave(600, "f0"), join(700, "f0"),
                leave(38_500, "f0"), join(38_600, "f0"), leave(38_700, "f0"), join(38_800, "f0")]
    events = [workload(0)] + flapping + [join(1_000 * i, f"m{i}") for i in range(1, 40)]
    events += heartbeats(["f0"] + [f"m{i}" for i in range(1, 40)], 0, 45_000)
    out, state = run(events, r, batches=batches)
    assert [(x["subject"], x["status"]) for x in out] == [("f0", "firing"), ("f0", "resolved"), ("f0", "firing")]
    assert sorted(state.alerts.member_changes) == sorted(["f0"] + [f"m{i}" for i in range(30, 40)])


def test_a_flapping_member_is_named_and_a_steady_one_is_not():
    r = rules("[member_flapping]\nchanges = 3\nwindow_ms = 60000\n[rebalance_storm]\nenabled = false")
    flapping = []
    for i in range(3):  # same client.id, new member id each time, as a restarting consumer
        t = 1_000 + 4_000 * i
        flapping += [dict(join(t, f"f{i}"), client_id="flaky", host="/10.0.0.9"), leave(t + 2_000, f"f{i}")]
    events = [workload(0), join(0, "steady")] + flapping + heartbeats(["steady"], 0, 100_000)
    out, _ = run(events, r)
    assert [(x["rule"], x["subject"], x["status"]) for x in out] == [
        ("member_flapping", "flaky@/10.0.0.9", "firing"), ("member_flapping", "flaky@/10.0.0.9", "resolved")]
    # Changes at 1, 3, 5, 7, 9, 11 s: the fourth (7 s) fires; the window holds 3 once the change at
    # 5 s has left it: 65 s.
    assert (out[0]["fired_at"], out[1]["resolved_at"]) == (7_000, 65_000)


def test_disagreement_with_the_live_group_fires_and_resolves():
    obs = collector_observation
    events = [workload(0), obs(1_000, "join", "a", range(6)), obs(5_000, "join", "b", (), state="PREPARING_REBALANCE"),
              obs(5_500, "update", "a", (0, 1, 2, 3)), obs(5_500, "update", "b", (4, 5)),
              obs(9_000, "update", "a", (0, 1, 2)), obs(9_000, "update", "b", (3, 4, 5))]
    events += heartbeats(["a", "b"], 1_000, 12_000, every=500)
    out, _ = run(events)
    assert transitions(out) == [("assignment_disagreement", "firing", 6_000, None),
                                ("assignment_disagreement", "resolved", 6_000, 9_000)]
    assert out[0]["value"] == 2.0  # both members hold another number of partitions than computed


def test_disagreement_at_equal_counts_fires_only_at_the_partition_level():
    """librdkafka's cooperative-sticky picks other partitions than Java's at equal counts: the
    default (count) level stays quiet, the partition level flags it."""
    obs = collector_observation
    events = [workload(0), obs(1_000, "join", "a", range(6)), obs(5_000, "join", "b", (), state="PREPARING_REBALANCE"),
              obs(5_500, "update", "a", (0, 1, 3)), obs(5_500, "update", "b", (2, 4, 5))]
    events += heartbeats(["a", "b"], 1_000, 12_000, every=500)
    quiet, _ = run(events)
    assert quiet == []
    strict, _ = run(events, rules("[assignment_disagreement]\nlevel = 'partition'"))
    assert transitions(strict) == [("assignment_disagreement", "firing", 6_000, None)]
    assert strict[0]["value"] == 2.0


def test_per_group_overrides_apply_by_pattern_in_order():
    r = rules("""
[imbalance]
max_minus_min = 2
[[overrides]]
groups = ["batch-*", "etl"]
imbalance = { max_minus_min = 10, severity = "info" }
[[overrides]]
groups = "batch-critical"
imbalance = { severity = "critical" }
""")
    assert r.for_group("orders").imbalance.max_minus_min == 2
    assert (r.for_group("batch-1").imbalance.max_minus_min, r.for_group("batch-1").imbalance.severity) == (10, "info")
    assert r.for_group("etl").imbalance.max_minus_min == 10
    assert (r.for_group("batch-critical").imbalance.max_minus_min,
            r.for_group("batch-critical").imbalance.severity) == (10, "critical")


def test_a_group_with_an_open_windowed_alert_asks_for_a_timer_at_its_resolution():
    r = rules("[member_expired]\nwindow_ms = 4000")
    story = [e for e in eager_range_story() if (e["event_time"] if isinstance(e, dict) else e[2]) <= 31_000]
    _, state = run(story, r)
    # c expired at 26.5 s (applied up to 29 s: the newest heartbeat minus the allowed lateness);
    # a's session deadline (41 s) is later than the alert's resolution at 30.5 s.
    assert next_deadline(state, engine_settings(r)) == 30_500


@pytest.mark.parametrize("toml, message", [
    ("[imbalanse]\nmax_minus_min = 1", "unknown alert rule [imbalanse]"),
    ("[imbalance]\nmax_minus = 1", "imbalance.max_minus: unknown key"),
    ("[imbalance]\nmax_minus_min = -1", "imbalance.max_minus_min: expected a non-negative integer"),
    ("[imbalance]\nmax_over_mean = nan", "imbalance.max_over_mean: expected a finite non-negative number, got nan"),
    ("[imbalance]\nmax_over_mean = inf", "imbalance.max_over_mean: expected a finite non-negative number, got inf"),
    ("[imbalance]\nseverity = 'loud'", "imbalance.severity: expected one of info, warning, critical"),
    ("[rebalance_storm]\nenabled = 1", "rebalance_storm.enabled: expected true or false"),
    ("[assignment_disagreement]\nlevel = 'exact'", "assignment_disagreement.level: expected one of count, partition"),
    ("[[overrides]]\nimbalance = { max_minus_min = 3 }", "overrides[0].groups: expected a group id pattern"),
])
def test_bad_alert_configuration_names_the_key(toml, message):
    with pytest.raises(AlertConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        rules(toml)


def test_the_job_config_reads_alerts_and_the_webhook_and_names_bad_keys():
    config = parse_config(tomllib.loads("""
[alerts.rebalance_storm]
generations = 5
[alerts.webhook]
url = "http://127.0.0.1:9093/hook"
"""))
    assert config.engine_settings().alert_rules.for_group("g").rebalance_storm.generations == 5
    assert config.alerts.webhook.url == "http://127.0.0.1:9093/hook"
    with pytest.raises(ConfigError, match=r"alerts\.webhook\.urll: unknown key"):
        parse_config(tomllib.loads("[alerts.webhook]\nurll = 'x'"))
    with pytest.raises(ConfigError, match=r"alerts\.imbalance\.max_minus_min"):
        parse_config(tomllib.loads("[alerts.imbalance]\nmax_minus_min = 'x'"))


def test_the_streams_and_connect_rules_are_configured_like_the_others():
    r = rules("[streams_not_caught_up]\nduration_ms = 5000\n[connect_lost_work]\ngrace_ms = 0\nseverity = \"warning\"\n"
              "[[overrides]]\ngroups = \"etl-*\"\nstreams_not_caught_up = { enabled = false }")
    assert r.for_group("app").streams_not_caught_up.duration_ms == 5_000
    assert r.for_group("app").connect_lost_work.severity == "warning" and r.for_group("app").connect_lost_work.grace_ms == 0
    assert not r.for_group("etl-1").streams_not_caught_up.enabled
    with pytest.raises(AlertConfigError, match=r"alerts.connect_lost_work.delay_ms: unknown key"):
        rules("[connect_lost_work]\ndelay_ms = 1")
    with pytest.raises(AlertConfigError, match=r"alerts.streams_not_caught_up.duration_ms: expected a non-negative"):
        rules("[streams_not_caught_up]\nduration_ms = -1")
