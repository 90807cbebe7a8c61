"""MembershipEvent.from_json: the engine's own check of a membership event names what is wrong."""

from __future__ import annotations

import pytest

from streaming.engine import MembershipEvent
from streaming.errors import InvalidEventError


def _join(**fields):
    return {"schema_version": 1, "event_id": "e1", "event_time": 1_000, "group_id": "g", "group_type": "consumer",
            "type": "join", "member_id": "m1", **fields}


@pytest.mark.parametrize("topics, message", [
    (["a", 7, "c"], r"field topics\[1\]: expected string, got 7"),
    (["a", ["b"]], r"field topics\[1\]: expected string, got \['b'\]"),
    (["a", True], r"field topics\[1\]: expected string, got True"),
    ("a", r"field topics: expected an array, got 'a'"),
    (["a", " "], r"field topics: a topic name is empty"),
])
def test_a_bad_topic_list_is_refused_naming_the_element(topics, message):
    with pytest.raises(InvalidEventError, match=message):
        MembershipEvent.from_json(_join(topics=topics))


@pytest.mark.parametrize("partition", [2**31, -2**31 - 1, 2**40])
def test_a_partition_number_beyond_32_bits_is_refused(partition):
    with pytest.raises(InvalidEventError, match=rf"field owned_partitions\[0\]\.partition: expected int, got {partition}"):
        MembershipEvent.from_json(_join(topics=["t"], owned_partitions=[{"topic": "t", "partition": partition}]))
    assert MembershipEvent.from_json(_join(topics=["t"], owned_partitions=[{"topic": "t", "partition": 2**31 - 1}]))


def test_a_good_topic_list_keeps_its_order_and_a_subclass_of_str_passes():
    class Name(str):
        pass

    event = MembershipEvent.from_json(_join(topics=["b", Name("a"), "c"]))
    assert event.topics == ("b", "a", "c")


@pytest.mark.parametrize("racks, bad", [([["r1", "r2"], ["r3"]], None), ([["r1"], ["r2", 5]], r"racks\[1\]\[1\]"),
                                        ([["r1", None], ["r2"]], None), ([[1.5]], r"racks\[0\]\[0\]")])
def test_a_nested_array_of_strings_names_the_bad_element(racks, bad):
    data = {"schema_version": 1, "event_id": "w", "event_time": 1_000, "group_id": "g", "group_type": "consumer",
            "type": "workload", "workload": {"topics": [{"name": "t", "partitions": 2, "racks": racks}]}}
    if bad is None:
        assert MembershipEvent.from_json(data).workload is not None
    else:
        with pytest.raises(InvalidEventError, match=r"field workload\.topics\[0\]\." + bad + ": expected string"):
            MembershipEvent.from_json(data)
