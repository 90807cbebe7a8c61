"""The collector's diffing core: snapshots of a live cluster in, the monitor's events out (no broker)."""

from __future__ import annotations

import argparse
import logging
from types import SimpleNamespace

import pytest

from schemas.events import HEARTBEAT_FIELDS, MEMBERSHIP_FIELDS
from streaming.cli.collect import group_snapshot, options_from, read_properties, topic_snapshot
from streaming.errors import CollectorError
from streaming.feeds.collector import (
    HEARTBEAT, LEAVE_REASON, MEMBERSHIP, ClusterSnapshot, Collector, CollectorSettings, GroupSnapshot,
    MemberSnapshot, TopicSnapshot, contract_assignor, diff, views_from_events,
)
from streaming.redaction import MASK, mask_secrets, redact

T0 = 1_767_225_600_000
ORDERS = TopicSnapshot("orders", 6)


def member(mid: str, *partitions: int, topic: str = "orders", **kw) -> MemberSnapshot:
    return MemberSnapshot(member_id=mid, client_id=f"client-{mid}", host="/10.0.0.7",
                          assignment=tuple((topic, p) for p in partitions), **kw)


def snapshot(t: int, *groups: GroupSnapshot, topics=(ORDERS,), unobserved=()) -> ClusterSnapshot:
    return ClusterSnapshot(time_ms=t, groups={g.group_id: g for g in groups}, topics={x.name: x for x in topics},
                           unobserved=frozenset(unobserved))


def orders(*members: MemberSnapshot, assignor: str = "range", state: str = "STABLE", type: str = "classic"):
    return GroupSnapshot("orders-service", state=state, type=type, partition_assignor=assignor, members=members)


def membership(events, kind=None):
    return [e.value for e in events if e.kind == MEMBERSHIP and (kind is None or e.value["type"] == kind)]


def heartbeats(events):
    return [e.value for e in events if e.kind == HEARTBEAT]


def owned(value):
    return [(p["topic"], p["partition"]) for p in value["owned_partitions"]]


def test_first_sight_of_a_group_gives_its_workload_then_a_join_per_member_and_a_heartbeat_each():
    events = Collector().observe(snapshot(T0, orders(member("c1", 0, 1, 2), member("c2", 3, 4, 5))))
    values = membership(events)
    assert [v["type"] for v in values] == ["workload", "join", "join"]
    assert values[0]["workload"] == {"topics": [{"name": "orders", "partitions": 6, "racks": None}]}
    c1 = values[1]
    assert (c1["member_id"], c1["client_id"], c1["host"]) == ("c1", "client-c1", "/10.0.0.7")
    assert c1["topics"] == ["orders"] and owned(c1) == [("orders", 0), ("orders", 1), ("orders", 2)]
    assert (c1["assignor"], c1["protocol"], c1["group_type"]) == ("range", "eager", "consumer")
    assert c1["session_timeout_ms"] >= 45_000 and c1["generation"] == -1
    assert all(e.group_id == "orders-service" and e.value["event_time"] == T0 for e in events)
    assert sorted(h["member_id"] for h in heartbeats(events)) == ["c1", "c2"]
    # The job orders one poll's events by event id: workload first, then the joins.
    ids = [v["event_id"] for v in values]
    assert ids == sorted(ids)


def test_events_use_only_contract_fields_with_valid_values_plus_the_listed_collector_fields():
    events = Collector().observe(snapshot(T0, orders(member("c1", 0, 1, 2, group_instance_id="orders-0"))))
    extra = {"target_partitions", "group_protocol", "group_state", "partition_assignor", "source"}
    allowed_m = {f.name for f in MEMBERSHIP_FIELDS} | extra
    allowed_h = {f.name for f in HEARTBEAT_FIELDS}
    enums = {f.name: f.enum for f in MEMBERSHIP_FIELDS if f.enum}
    for e in events:
        assert set(e.value) <= (allowed_m if e.kind == MEMBERSHIP else allowed_h)
        for name, values in enums.items():
            if name in e.value:
                assert e.value[name] in values, (name, e.value[name])


def test_a_member_that_vanishes_leaves_and_the_survivor_is_updated_with_its_new_assignment():
    c = Collector()
    c.observe(snapshot(T0, orders(member("c1", 0, 1, 2), member("c2", 3, 4, 5))))
    events = c.observe(snapshot(T0 + 10_000, orders(member("c2", 0, 1, 2, 3, 4, 5))))
    [leave] = membership(events, "leave")
    assert leave["member_id"] == "c1" and leave["reason"] == LEAVE_REASON
    [update] = membership(events, "update")
    assert update["member_id"] == "c2" and owned(update) == [("orders", p) for p in range(6)]
    assert update["reason"] == "assignment changed"
    assert not membership(events, "join") and not membership(events, "workload")
    assert [h["member_id"] for h in heartbeats(events)] == ["c2"]


def test_reassignment_between_polls_updates_exactly_the_members_whose_partitions_moved():
    c = Collector()
    c.observe(snapshot(T0, orders(member("a", 0, 1), member("b", 2, 3), member("c", 4, 5))))
    events = c.observe(snapshot(T0 + 5_000, orders(member("a", 0, 1), member("b", 2, 4), member("c", 3, 5))))
    assert sorted(v["member_id"] for v in membership(events)) == ["b", "c"]
    assert all(v["type"] == "update" for v in membership(events))


def test_an_unchanged_cluster_gives_only_heartbeats():
    c = Collector()
    group = orders(member("c1", 0, 1, 2), member("c2", 3, 4, 5))
    c.observe(snapshot(T0, group))
    events = c.observe(snapshot(T0 + 5_000, group))
    assert not membership(events)
    assert [(h["member_id"], h["event_time"]) for h in heartbeats(events)] == [("c1", T0 + 5_000), ("c2", T0 + 5_000)]


def test_partition_count_or_rack_changes_give_a_new_workload_event():
    c = Collector()
    group = orders(member("c1", 0, 1, 2, 3, 4, 5))
    c.observe(snapshot(T0, group))
    grown = c.observe(snapshot(T0 + 1_000, group, topics=(TopicSnapshot("orders", 8),)))
    [w] = membership(grown, "workload")
    assert w["workload"]["topics"] == [{"name": "orders", "partitions": 8, "racks": None}]
    racked = TopicSnapshot("orders", 8, racks=tuple(("az1", "az2") for _ in range(8)))
    [w] = membership(c.observe(snapshot(T0 + 2_000, group, topics=(racked,))), "workload")
    assert w["workload"]["topics"][0]["racks"] == [["az1", "az2"]] * 8
    assert not membership(c.observe(snapshot(T0 + 3_000, group, topics=(racked,))))


def test_a_new_topic_in_the_assignment_changes_the_workload_and_every_members_topics():
    c = Collector()
    c.observe(snapshot(T0, orders(member("c1", 0, 1, 2), member("c2", 3, 4, 5))))
    payments = TopicSnapshot("payments", 2)
    both = orders(member("c1", 0, 1, 2), MemberSnapshot("c2", "client-c2", "/10.0.0.7", None,
                                                          (("orders", 3), ("orders", 4), ("orders", 5),
                                                           ("payments", 0), ("payments", 1))))
    events = c.observe(snapshot(T0 + 1_000, both, topics=(ORDERS, payments)))
    [w] = membership(events, "workload")
    assert [t["name"] for t in w["workload"]["topics"]] == ["orders", "payments"]
    updates = {v["member_id"]: v for v in membership(events, "update")}
    assert set(updates) == {"c1", "c2"} and all(v["topics"] == ["orders", "payments"] for v in updates.values())
    assert updates["c1"]["reason"] == "topics changed"


def test_event_ids_are_a_function_of_group_member_poll_time_and_kind():
    def run():
        c = Collector()
        first = c.observe(snapshot(T0, orders(member("c1", 0, 1, 2), member("c2", 3, 4, 5))))
        second = c.observe(snapshot(T0 + 5_000, orders(member("c2", 0, 1, 2, 3, 4, 5))))
        return [e.value for e in first + second]

    a, b = run(), run()
    assert a == b
    ids = [v["event_id"] for v in a]
    assert len(ids) == len(set(ids))
    # The same member's join and heartbeat at the same poll differ by kind.
    assert len({v["event_id"] for v in a if v.get("member_id") == "c1" and v["event_time"] == T0}) == 2


def test_a_failed_poll_emits_nothing_and_the_next_good_poll_resynchronises(caplog):
    c = Collector()
    c.observe(snapshot(T0, orders(member("c1", 0, 1, 2), member("c2", 3, 4, 5))))
    with caplog.at_level(logging.WARNING, logger="rebalance_monitor.collector"):
        assert c.observe(None, "ListGroups failed: Local: Timed out") == []
        assert c.observe(None, "ListGroups failed: Local: Timed out") == []
    assert "poll failed (ListGroups failed: Local: Timed out)" in caplog.text
    assert "NOT considered gone" in caplog.text and "2 failed in a row" in caplog.text
    # c1 really left while the cluster was unreachable: it leaves now, once.
    events = c.observe(snapshot(T0 + 30_000, orders(member("c2", 0, 1, 2, 3, 4, 5))))
    assert [(v["type"], v["member_id"]) for v in membership(events)] == [("leave", "c1"), ("update", "c2")]
    assert [h["member_id"] for h in heartbeats(events)] == ["c2"]
    assert c.failed_polls == 0


def test_a_failed_poll_after_which_nothing_changed_gives_only_heartbeats():
    c = Collector()
    group = orders(member("c1", 0, 1, 2), member("c2", 3, 4, 5))
    c.observe(snapshot(T0, group))
    c.observe(None, "timeout")
    assert not membership(c.observe(snapshot(T0 + 20_000, group)))


def test_a_planned_but_undelivered_poll_is_diffed_again():
    c = Collector()
    views, events = c.plan(snapshot(T0, orders(member("c1", 0, 1, 2))))
    assert membership(events, "join")  # ... and producing them failed: no commit
    _, again = c.plan(snapshot(T0 + 1_000, orders(member("c1", 0, 1, 2))))
    assert [v["member_id"] for v in membership(again, "join")] == ["c1"]


def test_an_unobserved_group_is_carried_silently_and_a_deleted_group_leaves():
    c = Collector()
    other = GroupSnapshot("billing", partition_assignor="roundrobin", members=(member("b1", 0),))
    c.observe(snapshot(T0, orders(member("c1", 0, 1, 2)), other))
    events = c.observe(snapshot(T0 + 1_000, other, unobserved={"orders-service"}))
    assert not membership(events) and [h["group_id"] for h in heartbeats(events)] == ["billing"]
    events = c.observe(snapshot(T0 + 2_000, other))  # orders-service is gone for real now
    assert [(v["type"], v["member_id"]) for v in membership(events)] == [("leave", "c1")]


def test_a_classic_group_mid_rebalance_keeps_the_last_known_assignment():
    c = Collector()
    c.observe(snapshot(T0, orders(member("c1", 0, 1, 2), member("c2", 3, 4, 5))))
    # Classic coordinators report no assignments outside Stable (and no assignor while preparing).
    rebalancing = orders(member("c1"), member("c2"), member("c3"), assignor=None, state="PREPARING_REBALANCING")
    events = c.observe(snapshot(T0 + 1_000, rebalancing))
    [join] = membership(events, "join")
    assert join["member_id"] == "c3" and join["group_state"] == "PREPARING_REBALANCING"
    assert "owned_partitions" not in join and join["topics"] == ["orders"] and join["assignor"] == "range"
    # The others are told the group is rebalancing, with the assignment last seen.
    assert {v["member_id"]: (v["reason"], v["group_state"], owned(v)) for v in membership(events, "update")} == {
        "c1": ("group state changed", "PREPARING_REBALANCING", [("orders", 0), ("orders", 1), ("orders", 2)]),
        "c2": ("group state changed", "PREPARING_REBALANCING", [("orders", 3), ("orders", 4), ("orders", 5)])}
    assert len(heartbeats(events)) == 3
    events = c.observe(snapshot(T0 + 2_000, orders(member("c1", 0, 1), member("c2", 2, 3), member("c3", 4, 5))))
    assert {v["member_id"]: (owned(v), v["reason"]) for v in membership(events, "update")} == {
        "c1": ([("orders", 0), ("orders", 1)], "assignment and group state changed"),
        "c2": ([("orders", 2), ("orders", 3)], "assignment and group state changed"),
        "c3": ([("orders", 4), ("orders", 5)], "assignment and group state changed")}
    assert {v["group_state"] for v in membership(events)} == {"STABLE"}


def test_a_leave_carries_the_group_state_after_it_and_a_state_change_alone_is_an_update():
    c = Collector()
    c.observe(snapshot(T0, orders(member("c1", 0, 1, 2), member("c2", 3, 4, 5))))
    # c2 left; the coordinator is rebalancing and still reports c1's old assignment.
    events = c.observe(snapshot(T0 + 1_000, orders(member("c1"), assignor=None, state="PREPARING_REBALANCING")))
    assert [(v["type"], v["member_id"], v["group_state"]) for v in membership(events)] == [
        ("leave", "c2", "PREPARING_REBALANCING"), ("update", "c1", "PREPARING_REBALANCING")]
    # Stable again with the same assignment (c2 held nothing c1 needed): still an update, so the
    # job knows the assignment it holds is settled.
    events = c.observe(snapshot(T0 + 2_000, orders(member("c1", 0, 1, 2))))
    [update] = membership(events)
    assert (update["reason"], update["group_state"], owned(update)) == (
        "group state changed", "STABLE", [("orders", 0), ("orders", 1), ("orders", 2)])
    assert membership(c.observe(snapshot(T0 + 3_000, orders(member("c1", 0, 1, 2))))) == []


def test_a_reconciling_kip848_group_keeps_the_topics_its_members_do_not_hold_yet():
    both = (ORDERS, TopicSnapshot("refunds", 2))
    c = Collector()
    c.observe(snapshot(T0, orders(member("m1", 0, 1, 2), member("m2", 0, 1, topic="refunds"), type="consumer",
                                  assignor="uniform"), topics=both))
    # m2 left; m1's target is not recomputed yet, so nobody holds refunds for a moment.
    reconciling = orders(MemberSnapshot("m1", assignment=(("orders", 0),), target_assignment=(("orders", 0),)),
                         type="consumer", assignor="uniform", state="UNKNOWN")
    events = c.observe(snapshot(T0 + 1_000, reconciling, topics=(ORDERS,)))
    assert membership(events, "workload") == []
    assert [v["topics"] for v in membership(events, "update")] == [["orders", "refunds"]]


def test_mid_rebalance_the_topics_nobody_described_keep_their_workload():
    c = Collector()
    c.observe(snapshot(T0, orders(member("c1", 0, 1, 2), member("c2", 3, 4, 5))))
    # Nobody holds anything while the group rebalances, so the poll described no topic.
    events = c.observe(snapshot(T0 + 1_000, orders(member("c1"), state="PREPARING_REBALANCING"), topics=()))
    assert membership(events, "workload") == []
    # Described again, with more partitions: that is a workload change.
    events = c.observe(snapshot(T0 + 2_000, orders(member("c1", *range(8))), topics=(TopicSnapshot("orders", 8),)))
    [workload] = membership(events, "workload")
    assert workload["workload"]["topics"] == [{"name": "orders", "partitions": 8, "racks": None}]


def test_a_static_member_under_a_new_member_id_is_a_join_without_a_leave():
    c = Collector()
    c.observe(snapshot(T0, orders(member("c1-old", 0, 1, 2, group_instance_id="orders-0"), member("c2", 3, 4, 5))))
    events = c.observe(snapshot(T0 + 1_000, orders(member("c1-new", 0, 1, 2, group_instance_id="orders-0"),
                                                   member("c2", 3, 4, 5))))
    [join] = membership(events)
    assert (join["type"], join["member_id"], join["group_instance_id"]) == ("join", "c1-new", "orders-0")


def test_kip848_groups_are_cooperative_with_server_assignor_names_and_target_assignments():
    kip848 = orders(MemberSnapshot("m1", assignment=(("orders", 0),), target_assignment=(("orders", 0), ("orders", 1))),
                    assignor="range", type="consumer", state="RECONCILING")
    c = Collector()
    [_, join] = membership(c.observe(snapshot(T0, kip848)))
    assert (join["assignor"], join["protocol"], join["group_protocol"]) == ("server-range", "cooperative", "consumer")
    assert owned(join) == [("orders", 0)]
    assert join["target_partitions"] == [{"topic": "orders", "partition": 0}, {"topic": "orders", "partition": 1}]
    reconciled = orders(MemberSnapshot("m1", assignment=(("orders", 0), ("orders", 1)),
                                       target_assignment=(("orders", 0), ("orders", 1))),
                        assignor="range", type="consumer")
    [update] = membership(c.observe(snapshot(T0 + 1_000, reconciled)))
    assert update["reason"] == "assignment and group state changed" and len(owned(update)) == 2
    assert update["group_state"] == "STABLE"


def test_a_kip848_target_keeps_the_order_the_coordinator_listed_it_in():
    """The coordinator lists a target in its HashMap's order, which Kafka's uniform assignor walks
    next time (tests/streaming/test_collector_fed.py): the events and a restarted collector's views
    keep it; only duplicates go."""
    listed = (("c", 1), ("c", 0), ("b", 0), ("a", 2), ("a", 0), ("c", 1))
    group = orders(MemberSnapshot("m1", assignment=(), target_assignment=listed), assignor="uniform",
                   type="consumer", state="RECONCILING")
    c = Collector()
    events = c.observe(snapshot(T0, group, topics=(TopicSnapshot("a", 3), TopicSnapshot("b", 1), TopicSnapshot("c", 2))))
    [join] = membership(events, "join")
    assert [(p["topic"], p["partition"]) for p in join["target_partitions"]] == list(listed[:5])
    assert views_from_events([e.value for e in events]) == c.views


@pytest.mark.parametrize("raw,group_protocol,expected", [
    ("range", "classic", "range"), ("cooperative-sticky", "classic", "cooperative-sticky"),
    ("roundrobin", "classic", "roundrobin"), ("uniform", "consumer", "uniform"),
    ("range", "consumer", "server-range"), ("stream", "classic", None), ("my-custom", "classic", None),
    ("", "classic", None), (None, "consumer", None),
])
def test_assignor_names_map_to_the_contract_or_are_left_out(raw, group_protocol, expected):
    assert contract_assignor(raw, group_protocol) == expected


def test_cooperative_sticky_groups_are_cooperative_and_a_custom_assignor_is_reported_raw():
    c = Collector()
    coop = orders(member("c1", 0), assignor="cooperative-sticky")
    custom = GroupSnapshot("custom", partition_assignor="my-custom", members=(member("x", 1),))
    values = {v["group_id"]: v for v in membership(c.observe(snapshot(T0, coop, custom)), "join")}
    assert values["orders-service"]["protocol"] == "cooperative"
    assert "assignor" not in values["custom"] and values["custom"]["partition_assignor"] == "my-custom"
    assert values["custom"]["protocol"] == "eager"


def test_poll_time_settles_the_session_timeout_declared_in_joins():
    assert CollectorSettings.for_interval(5).session_timeout_ms == 45_000
    assert CollectorSettings.for_interval(60).session_timeout_ms == 180_000


# -- the admin-side conversions and the credentials ------------------------------------------------

def test_confluent_descriptions_convert_to_snapshots():
    tp = lambda t, p: SimpleNamespace(topic=t, partition=p)  # noqa: E731
    d = SimpleNamespace(
        group_id="g", state=SimpleNamespace(name="STABLE"), type=SimpleNamespace(name="CLASSIC"),
        partition_assignor="range",
        members=[SimpleNamespace(member_id="m", client_id="c", host="/h", group_instance_id=None,
                                 assignment=SimpleNamespace(topic_partitions=[tp("t", 1), tp("t", 0)]),
                                 target_assignment=None)])
    g = group_snapshot(d)
    assert (g.type, g.state, g.partition_assignor) == ("classic", "STABLE", "range")
    assert g.members[0].assignment == (("t", 1), ("t", 0)) and g.members[0].target_assignment is None
    node = lambda rack: SimpleNamespace(rack=rack)  # noqa: E731
    t = SimpleNamespace(name="t", partitions=[SimpleNamespace(id=1, replicas=[node("b"), node("a")]),
                                              SimpleNamespace(id=0, replicas=[node("a")])])
    assert topic_snapshot(t) == TopicSnapshot("t", 2, (("a",), ("a", "b")))
    no_racks = SimpleNamespace(name="t", partitions=[SimpleNamespace(id=0, replicas=[node(None)])])
    assert topic_snapshot(no_racks).racks is None


def test_a_topic_id_is_spelled_as_kafka_spells_it_not_as_librdkafka_does():
    from confluent_kafka import Uuid
    # Bytes whose base64 holds both characters where the two alphabets differ ('+'/'-' and '/'/'_').
    client_uuid = Uuid(0x1234567890ABCDEF, -0x1234567890ABCDF)
    assert str(client_uuid) == "EjRWeJCrze/+3LqYdvVDIQ"  # librdkafka: standard base64
    t = SimpleNamespace(name="t", partitions=[], topic_id=client_uuid)
    assert topic_snapshot(t).topic_id == "EjRWeJCrze_-3LqYdvVDIQ"  # Kafka's Uuid.toString


SECRET_PROPERTIES = """\
# the observed cluster
security.protocol=SASL_SSL
sasl.mechanism: PLAIN
sasl.username=monitor
sasl.password=hunter2-very-secret
ssl.key.password=keypass-123
ssl.ca.location=/etc/ca.pem
sasl.oauthbearer.client.secret=\\
  oauth-secret-xyz
"""


def test_command_config_is_read_and_its_secrets_never_printed(tmp_path):
    path = tmp_path / "client.properties"
    path.write_text(SECRET_PROPERTIES)
    props = read_properties(path)
    assert props["sasl.mechanism"] == "PLAIN" and props["sasl.password"] == "hunter2-very-secret"
    assert props["sasl.oauthbearer.client.secret"] == "oauth-secret-xyz"
    masked = mask_secrets(props)
    assert masked["sasl.password"] == masked["ssl.key.password"] == masked["sasl.oauthbearer.client.secret"] == MASK
    assert masked["sasl.username"] == "monitor" and masked["ssl.ca.location"] == "/etc/ca.pem"
    shown = str(masked) + redact('Invalid value "hunter2-very-secret" for "sasl.password"', props)
    for secret in ("hunter2-very-secret", "keypass-123", "oauth-secret-xyz"):
        assert secret not in shown
    args = argparse.Namespace(bootstrap_servers="b:9093", groups="orders-.*", interval=5.0,
                              monitor_bootstrap_servers=None, membership_topic="m", heartbeat_topic="h",
                              command_config=path, monitor_command_config=None, timeout=None)
    options = options_from(args)
    assert options.source["sasl.password"] == "hunter2-very-secret"  # used, just never shown
    assert options.monitor_options == {k: v for k, v in props.items()}  # same cluster, same credentials
    # ... and never in events: the core never sees the client configuration.
    events = Collector().observe(snapshot(T0, orders(member("c1", 0))))
    assert all(s not in str(e.value) for e in events for s in ("hunter2", "keypass", "oauth-secret"))


def test_a_bad_properties_line_is_refused_without_echoing_it(tmp_path):
    path = tmp_path / "bad.properties"
    path.write_text("sasl.password hunter2\n")
    with pytest.raises(CollectorError) as info:
        read_properties(path)
    assert "hunter2" not in str(info.value) and "bad.properties:1" in str(info.value)


def test_diff_is_pure_and_leaves_the_previous_views_untouched():
    views, _ = diff({}, snapshot(T0, orders(member("c1", 0))))
    frozen = dict(views)
    diff(views, snapshot(T0 + 1, orders()))
    assert views == frozen


# -- read_snapshot's verdicts on partial answers (a fake AdminClient; the real one is in integration) --

class _Future:
    def __init__(self, value=None, error=None):
        self.value, self.error = value, error

    def result(self, timeout=None):
        if self.error is not None:
            raise self.error
        return self.value


class _FakeAdmin:
    def __init__(self, listed, described, listing_errors=()):
        self.listed, self.described, self.listing_errors = listed, described, list(listing_errors)

    def list_consumer_groups(self, request_timeout=None):
        valid = [SimpleNamespace(group_id=g, state=SimpleNamespace(name="STABLE")) for g in self.listed]
        return _Future(SimpleNamespace(valid=valid, errors=self.listing_errors))

    def describe_consumer_groups(self, group_ids, request_timeout=None):
        return {g: self.described[g] for g in group_ids}

    def describe_topics(self, topics, request_timeout=None):
        return {n: _Future(SimpleNamespace(name=n, partitions=[SimpleNamespace(id=0, replicas=[])]))
                for n in topics.topic_names}


def _description(group_id):
    tp = SimpleNamespace(topic="orders", partition=0)
    return SimpleNamespace(group_id=group_id, state=SimpleNamespace(name="STABLE"),
                           type=SimpleNamespace(name="CLASSIC"), partition_assignor="range",
                           members=[SimpleNamespace(member_id="m", client_id="c", host="/h", group_instance_id=None,
                                                    assignment=SimpleNamespace(topic_partitions=[tp]))])


def _kafka_error(code):
    from confluent_kafka import KafkaError, KafkaException
    return KafkaException(KafkaError(code))


def test_read_snapshot_voids_the_poll_for_cluster_errors_and_sets_aside_group_errors():
    from confluent_kafka import KafkaError

    from streaming.cli.collect import PollFailed, read_snapshot

    ok = _Future(_description("ok"))
    with pytest.raises(PollFailed, match="ListGroups incomplete"):
        read_snapshot(_FakeAdmin(["ok"], {"ok": ok}, listing_errors=["broker 2 timed out"]), T0, None, 1)
    with pytest.raises(PollFailed, match="DescribeGroups of 'slow'"):
        read_snapshot(_FakeAdmin(["ok", "slow"], {"ok": ok, "slow": _Future(error=_kafka_error(
            KafkaError._TIMED_OUT))}), T0, None, 1)
    s = read_snapshot(_FakeAdmin(["ok", "secret", "deleted", "other"], {
        "ok": ok, "secret": _Future(error=_kafka_error(KafkaError.GROUP_AUTHORIZATION_FAILED)),
        "deleted": _Future(error=_kafka_error(KafkaError.GROUP_ID_NOT_FOUND)), "other": ok}),
        T0, __import__("re").compile("ok|secret|deleted"), 1)
    assert set(s.groups) == {"ok"} and s.unobserved == {"secret"} and s.topics["orders"].partitions == 1


# -- a restarted collector rebuilds what it told the job ------------------------------------------

def _history() -> tuple[Collector, list[dict]]:
    """A collector's life: a range group that grows, rebalances and loses a member, a static member
    under a new id, a KIP-848 group with targets, and a topic whose racks show up."""
    racked = TopicSnapshot("orders", 6, racks=tuple(("r1", "r2") for _ in range(6)))
    kip848 = GroupSnapshot("payments", type="consumer", partition_assignor="uniform", members=(
        MemberSnapshot("p1", assignment=(("orders", 0),), target_assignment=(("orders", 0), ("orders", 1))),))
    polls = [
        snapshot(T0, orders(member("c1", 0, 1, 2), member("c2", 3, 4, 5, group_instance_id="orders-1")), kip848),
        snapshot(T0 + 1_000, orders(member("c1"), member("c2", group_instance_id="orders-1"), member("c3"),
                                    state="PREPARING_REBALANCING", assignor=None), kip848, topics=()),
        snapshot(T0 + 2_000, orders(member("c1", 0, 1), member("c2", 2, 3, group_instance_id="orders-1"),
                                    member("c3", 4, 5)), kip848, topics=(racked,)),
        snapshot(T0 + 3_000, orders(member("c2b", 0, 1, 2, group_instance_id="orders-1"), member("c3", 3, 4, 5)),
                 kip848, topics=(racked,)),
    ]
    c = Collector()
    events = [e.value for p in polls for e in c.observe(p) if e.kind == MEMBERSHIP]
    return c, events


def test_the_views_rebuilt_from_the_events_are_the_views_the_collector_had():
    c, events = _history()
    assert views_from_events(events) == c.views
    # Read back in any order (several partitions), and mixed with events that are not the collector's.
    foreign = {"event_id": "sim-1", "event_time": T0 + 5, "group_id": "orders-service", "type": "join",
               "member_id": "simulated", "topics": ["orders"]}
    assert views_from_events(list(reversed(events)) + [foreign]) == c.views
    assert set(views_from_events(events, group_ids=["payments"])) == {"payments"}


def test_a_restarted_collector_leaves_the_members_that_went_while_it_was_down_and_joins_nobody_twice():
    before, events = _history()
    restarted = Collector()
    restarted.restore(views_from_events(events))
    now = snapshot(T0 + 60_000, orders(member("c3", 0, 1, 2, 3, 4, 5)),
                   topics=(TopicSnapshot("orders", 6, racks=tuple(("r1", "r2") for _ in range(6))),))
    got = restarted.observe(now)
    assert [(v["type"], v["member_id"]) for v in membership(got)] == [
        ("leave", "c2b"), ("update", "c3"), ("leave", "p1")]
    assert diff(before.views, now)[1] == got  # exactly what the collector would have said had it not restarted
