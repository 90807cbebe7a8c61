"""The JSON group-spec contract (assignors/codec.py): parsing, every rejection, and formatting."""

from __future__ import annotations

import copy
import json

import pytest

from assignors import (
    AssignmentError,
    GroupAssignment,
    InvalidGroupSpecError,
    TopicPartition,
    UNKNOWN_GENERATION,
)
from assignors.codec import (
    format_error,
    format_group_assignment,
    format_group_spec,
    parse_answer,
    parse_group_spec,
    spec_id_of,
)

TP = TopicPartition


def example_spec() -> dict:
    """The contract's own example, plus a second and third member."""
    return {
        "id": "s1",
        "assignor": "cooperative-sticky",
        "topics": {
            "t0": {"partitions": 3, "racks": [["ra", "rb"], ["rb"], ["rc"]]},
            "t1": {"partitions": 2},
        },
        "members": [
            {
                "member_id": "c1",
                "group_instance_id": None,
                "rack": "ra",
                "topics": ["t0"],
                "owned_partitions": [["t0", 0]],
                "generation": 4,
            },
            {"member_id": "c3", "group_instance_id": "i-3", "topics": ["t1", "t0"]},
            {"member_id": "c2", "topics": ["t0"], "generation": -1},
        ],
    }


class TestParsing:
    def test_the_contract_example_parses_into_the_model(self):
        parsed = parse_group_spec(example_spec())
        assert parsed.spec_id == "s1"
        assert parsed.assignor == "cooperative-sticky"
        spec = parsed.spec
        assert spec.topics["t0"].partitions == 3
        assert spec.topics["t0"].replica_racks == (frozenset({"ra", "rb"}), frozenset({"rb"}), frozenset({"rc"}))
        assert spec.topics["t1"].replica_racks is None
        c1, c3, c2 = spec.members
        assert (c1.member_id, c1.rack, c1.group_instance_id, c1.generation) == ("c1", "ra", None, 4)
        assert c1.owned_partitions == (TP("t0", 0),)
        assert c3.group_instance_id == "i-3" and c3.topics == ("t1", "t0")
        assert c3.generation == UNKNOWN_GENERATION and c3.owned_partitions == () and c3.rack is None
        assert c2.generation == UNKNOWN_GENERATION

    def test_members_keep_their_json_order_which_is_the_java_hashmap_insertion_order(self):
        obj = example_spec()
        obj["members"] = [{"member_id": f"m{i}", "topics": ["t0"]} for i in (5, 1, 9, 3, 7)]
        assert [m.member_id for m in parse_group_spec(obj).spec.members] == ["m5", "m1", "m9", "m3", "m7"]

    def test_the_assignor_flag_overrides_the_line_and_stands_in_for_a_missing_one(self):
        obj = example_spec()
        assert parse_group_spec(obj, "range").assignor == "range"
        del obj["assignor"]
        assert parse_group_spec(obj, "roundrobin").assignor == "roundrobin"

    def test_stale_claims_on_unknown_topics_and_beyond_the_partition_count_are_kept_for_the_assignor(self):
        obj = example_spec()
        obj["members"][0]["owned_partitions"] = [["gone", 0], ["t0", 99]]
        assert parse_group_spec(obj).spec.members[0].owned_partitions == (TP("gone", 0), TP("t0", 99))

    def test_a_subscription_to_a_topic_missing_from_metadata_is_allowed(self):
        obj = example_spec()
        obj["members"][0]["topics"] = ["t0", "not-in-metadata"]
        assert parse_group_spec(obj).spec.members[0].topics == ("t0", "not-in-metadata")

    def test_integer_ids_and_missing_ids_are_accepted(self):
        obj = example_spec()
        obj["id"] = 17
        assert parse_group_spec(obj).spec_id == 17
        del obj["id"]
        assert parse_group_spec(obj).spec_id is None

    def test_zero_partition_topics_are_valid(self):
        obj = example_spec()
        obj["topics"]["empty"] = {"partitions": 0, "racks": []}
        assert parse_group_spec(obj).spec.topics["empty"].partitions == 0


def _set(path):
    """A mutation that sets the value at ``path`` (keys and indexes) in a spec."""

    def mutate(value):
        def apply(obj):
            target = obj
            for key in path[:-1]:
                target = target[key]
            target[path[-1]] = value

        return apply

    return mutate


def _delete(*path):
    def apply(obj):
        target = obj
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]

    return apply


# (scenario, mutation, words the message must contain). Every message starts with the field path.
REJECTIONS = [
    ("not an object", None, ["a group spec must be a JSON object"]),
    ("missing member_id", _delete("members", 1, "member_id"), ["members[1].member_id", "missing"]),
    ("empty member_id", _set(["members", 1, "member_id"])(""), ["members[1].member_id", "''"]),
    ("numeric member_id", _set(["members", 0, "member_id"])(5), ["members[0].member_id", "5"]),
    ("duplicate member ids", _set(["members", 2, "member_id"])("c1"), ["members[2].member_id", "'c1'", "members[0]"]),
    ("duplicate instance ids", _set(["members", 0, "group_instance_id"])("i-3"), ["members[1].group_instance_id", "'i-3'", "members[0]"]),
    ("empty instance id", _set(["members", 0, "group_instance_id"])(""), ["members[0].group_instance_id"]),
    ("negative partition count", _set(["topics", "t1", "partitions"])(-2), ["topics['t1'].partitions", "-2", "negative"]),
    ("boolean partition count", _set(["topics", "t1", "partitions"])(True), ["topics['t1'].partitions", "true"]),
    ("fractional partition count", _set(["topics", "t1", "partitions"])(2.5), ["topics['t1'].partitions", "2.5"]),
    ("missing partition count", _delete("topics", "t1", "partitions"), ["topics['t1'].partitions", "missing"]),
    ("racks list too short", _set(["topics", "t0", "racks"])([["ra"]]), ["topics['t0'].racks", "1 entries", "3 partitions"]),
    ("racks not lists", _set(["topics", "t0", "racks"])(["ra", "rb", "rc"]), ["topics['t0'].racks[0]", "'ra'"]),
    ("rack not a string", _set(["topics", "t0", "racks"])([["ra"], [7], ["rc"]]), ["topics['t0'].racks[1][0]", "7"]),
    ("topics not an object", _set(["topics"])(["t0"]), ["topics:", "['t0']"]),
    ("topic entry not an object", _set(["topics", "t1"])(2), ["topics['t1']", "2"]),
    ("non-string subscribed topic", _set(["members", 1, "topics", 1])(3), ["members[1].topics[1]", "3"]),
    ("subscription not a list", _set(["members", 1, "topics"])("t0"), ["members[1].topics", "'t0'"]),
    ("topic listed twice", _set(["members", 1, "topics"])(["t0", "t0"]), ["members[1].topics[1]", "'t0'", "twice"]),
    ("missing subscription", _delete("members", 2, "topics"), ["members[2].topics", "missing"]),
    ("owned partition not a pair", _set(["members", 0, "owned_partitions"])([["t0", 0, 1]]), ["members[0].owned_partitions[0]", "pair"]),
    ("owned partition as an object", _set(["members", 0, "owned_partitions"])([{"topic": "t0", "partition": 0}]), ["members[0].owned_partitions[0]", "pair"]),
    ("owned partition negative", _set(["members", 0, "owned_partitions"])([["t0", 1], ["t0", -1]]), ["members[0].owned_partitions[1]: partition -1 of topic 't0' is negative"]),
    ("owned partition topic not a string", _set(["members", 0, "owned_partitions"])([[0, 0]]), ["members[0].owned_partitions[0]", "topic"]),
    ("owned partition number a string", _set(["members", 0, "owned_partitions"])([["t0", "0"]]), ["members[0].owned_partitions[0]", "'0'"]),
    ("owned partition twice", _set(["members", 0, "owned_partitions"])([["t0", 1], ["t0", 1]]), ["members[0].owned_partitions[1]", "twice"]),
    ("generation below -1", _set(["members", 0, "generation"])(-5), ["members[0].generation", "-5"]),
    ("generation not an integer", _set(["members", 0, "generation"])("4"), ["members[0].generation", "'4'"]),
    ("rack not a string", _set(["members", 0, "rack"])(["ra"]), ["members[0].rack", "['ra']"]),
    ("unknown assignor", _set(["assignor"])("stiky"), ["assignor:", "'stiky'", "cooperative-sticky"]),
    ("assignor not a string", _set(["assignor"])(3), ["assignor:", "3"]),
    ("missing assignor", _delete("assignor"), ["assignor:", "--assignor"]),
    ("no members", _set(["members"])([]), ["members:", "at least one member"]),
    ("members not a list", _set(["members"])({"c1": {}}), ["members:"]),
    ("member not an object", _set(["members", 1])("c3"), ["members[1]", "'c3'"]),
    ("misspelt member field", _set(["members", 0, "owned_partition"])([]), ["members[0]", "'owned_partition'"]),
    ("misspelt top-level field", _set(["member"])([]), ["'member'"]),
    ("misspelt topic field", _set(["topics", "t0", "partition"])(3), ["topics['t0']", "'partition'"]),
    ("id of the wrong type", _set(["id"])(["s1"]), ["id:", "['s1']"]),
]


@pytest.mark.parametrize("scenario, mutate, words", REJECTIONS, ids=[r[0] for r in REJECTIONS])
def test_each_malformed_field_is_rejected_with_a_message_naming_the_field_and_value(scenario, mutate, words):
    obj = "not a spec" if mutate is None else example_spec()
    if mutate is not None:
        mutate(obj)
    with pytest.raises(InvalidGroupSpecError) as err:
        parse_group_spec(obj)
    for word in words:
        assert word in str(err.value), f"{scenario}: {word!r} not in {str(err.value)!r}"


def test_the_override_does_not_rescue_an_unknown_assignor_name():
    with pytest.raises(InvalidGroupSpecError, match="'nope'"):
        parse_group_spec(example_spec(), "nope")


class TestFormatting:
    def test_answer_lists_every_member_in_spec_order_and_transferring_sorted(self):
        parsed = parse_group_spec(example_spec())
        result = GroupAssignment(
            assignment={"c2": [], "c1": [TP("t0", 2), TP("t0", 0)], "c3": [TP("t1", 0), TP("t1", 1)]},
            transferring={TP("t0", 1): "c2", TP("t0", 0): "c3"},
        )
        out = format_group_assignment("s1", "cooperative-sticky", parsed.spec, result, 0.123456)
        assert list(out["assignment"]) == ["c1", "c3", "c2"]
        assert out["assignment"]["c1"] == [["t0", 2], ["t0", 0]]  # the assignor's list order is kept
        assert out["transferring"] == [["t0", 0, "c3"], ["t0", 1, "c2"]]
        assert out["elapsed_ms"] == 0.1235
        assert list(out) == ["id", "assignor", "assignment", "transferring", "elapsed_ms"]
        json.dumps(out)  # plain JSON types only

    def test_an_assignor_that_drops_or_invents_a_member_is_reported_not_papered_over(self):
        spec = parse_group_spec(example_spec()).spec
        with pytest.raises(AssignmentError, match="missing \\['c2'\\]"):
            format_group_assignment("s1", "range", spec, GroupAssignment({"c1": [], "c3": []}), 0.0)
        with pytest.raises(AssignmentError, match="unknown \\['zz'\\]"):
            format_group_assignment("s1", "range", spec, GroupAssignment({"c1": [], "c3": [], "c2": [], "zz": []}), 0.0)

    def test_a_spec_survives_format_and_parse_unchanged(self):
        obj = example_spec()
        parsed = parse_group_spec(obj)
        again = parse_group_spec(format_group_spec(parsed.spec, parsed.spec_id, parsed.assignor))
        assert again == parsed

    def test_format_writes_only_the_optional_fields_that_are_set(self):
        spec = parse_group_spec(example_spec()).spec
        members = format_group_spec(spec)["members"]
        assert members[2] == {"member_id": "c2", "topics": ["t0"]}
        assert members[0]["generation"] == 4 and "group_instance_id" not in members[0]

    def test_answers_read_back_including_javas_unknown_transfer_owner(self):
        answer = parse_answer(
            {"id": "s1", "assignor": "cooperative-sticky", "assignment": {"c1": [["t0", 0]], "c2": []},
             "transferring": [["t0", 1, None]], "elapsed_ms": 0.5}
        )
        assert answer.assignment == {"c1": [TP("t0", 0)], "c2": []}
        assert answer.transferring == {TP("t0", 1): None}
        with pytest.raises(AssignmentError, match="boom"):
            parse_answer(format_error("s2", "boom"))


def test_spec_id_of_finds_usable_ids_only():
    assert spec_id_of({"id": "a"}) == "a"
    assert spec_id_of({"id": 3}) == 3
    assert spec_id_of({"id": True}) is None
    assert spec_id_of({"id": ["a"]}) is None
    assert spec_id_of([1, 2]) is None


def test_parsing_does_not_mutate_its_input():
    obj = example_spec()
    before = copy.deepcopy(obj)
    parse_group_spec(obj)
    assert obj == before
