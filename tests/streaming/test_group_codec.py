"""The group state codec's format 6: the assignment packed apart and left packed until read."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assignors import TopicPartition as TP
from assignors.columns import AssignmentColumns
from streaming.engine import advance
from streaming.engine.codec import (
    decode_state,
    encode_state,
    pack_assignment,
    pack_columns,
    unpack_assignment,
    unpack_columns,
)
from streaming.engine.state import GroupState, Member, packed
from streaming.testing import engine_settings, run_story
from tests.stories import cooperative_story

FIXTURES = Path(__file__).parent / "fixtures"


def _story_state() -> GroupState:
    story = cooperative_story()
    return run_story([story[:20], story[20:]])[1]


def test_a_state_written_in_format_5_decodes_to_the_same_state():
    # group_state_v5.bin: this story's final state as the previous release's codec wrote it.
    old = decode_state((FIXTURES / "group_state_v5.bin").read_bytes())
    state = _story_state()
    assert old == state
    assert old.assignment == {"c1": [TP("t0", 0), TP("t0", 1)], "c2": [TP("t0", 2)]}
    assert decode_state(encode_state(old)) == state


def test_a_format_6_state_written_with_the_standard_librarys_json_decodes_to_the_same_state():
    # group_state_v6_stdlib_json.bin: this story's state with a non-ASCII client id, as the codec
    # wrote it before it encoded with orjson (json.dumps escapes every non-ASCII character).
    state = _story_state()
    state.members["c1"].client_id = "client-\u00fc-\u20ac-\U0001d11e"
    old = decode_state((FIXTURES / "group_state_v6_stdlib_json.bin").read_bytes())
    assert old == state
    assert decode_state(encode_state(old)) == state


def test_values_orjson_cannot_write_are_stored_and_read_back_exactly():
    # An integer beyond 64 bits (orjson refuses to write it, and would read it back as a float)
    # and a lone surrogate (not UTF-8): the codec leaves the state to json for these.
    state = _story_state()
    state.members["c1"].joined_at = 2**70 + 1
    state.members["c2"].client_id = "half-\ud800-pair"
    decoded = decode_state(encode_state(state))
    assert decoded == state
    assert decoded.members["c1"].joined_at == 2**70 + 1 and type(decoded.members["c1"].joined_at) is int


def test_a_batch_of_heartbeats_leaves_the_assignment_packed_and_its_bytes_as_they_were():
    state = _story_state()
    blob = encode_state(state)
    section = packed(decode_state(blob), "assignment").blob
    decoded = decode_state(blob)
    beats = ["c1", "c2"] * 3
    times = [13_000, 13_000, 14_000, 14_000, 15_000, 15_000]
    rows, stats = advance(decoded, [], beats, times, engine_settings())
    assert stats.heartbeats_accepted == 6 and rows == []
    assert packed(decoded, "assignment") is not None  # nobody read it
    again = encode_state(decoded)
    assert again.endswith(section) and again != blob  # the members' times moved on, not the assignment
    assert decode_state(again).assignment == state.assignment


def test_an_assignment_read_and_changed_is_stored_with_the_change():
    decoded = decode_state(encode_state(_story_state()))
    decoded.assignment["c2"].append(TP("t0", 9))  # a read unpacks it for good
    assert packed(decoded, "assignment") is None
    assert decode_state(encode_state(decoded)).assignment["c2"] == [TP("t0", 2), TP("t0", 9)]


def test_a_state_keeps_its_assignment_packed_after_encoding_and_a_read_still_sees_every_change():
    # The job keeps a worker's state objects between batches: the next save of a state whose
    # assignment nobody read reuses the bytes, and a read gets the same assignment back.
    state = _story_state()
    expected = {m: list(tps) for m, tps in state.assignment.items()}
    blob = encode_state(state)
    section = packed(state, "assignment").blob
    assert blob.endswith(section)
    assert encode_state(state) == blob  # nothing read, nothing changed: the same bytes
    assert state.assignment == expected and packed(state, "assignment") is None
    state.assignment["c1"].remove(TP("t0", 1))
    assert decode_state(encode_state(state)).assignment["c1"] == [TP("t0", 0)]


def test_members_with_the_same_subscription_share_one_stored_list():
    topics = tuple(f"topic-{i:03d}" for i in range(100))
    state = GroupState(group_id="g", members={f"m{i}": Member(f"m{i}", topics, 0, 0) for i in range(1_000)})
    state.members["odd"] = Member("odd", ("other",), 0, 0)
    blob = encode_state(state)
    decoded = decode_state(blob)
    assert decoded == state
    subscriptions = {id(m.topics) for m in decoded.members.values()}
    assert len(subscriptions) == 2
    # Uncompressed (the bucket compresses): a list per member would be 100,000 names, 1.2 MB.
    assert len(blob) < 1_000 * 100


_assignments = st.dictionaries(
    st.text(min_size=1, max_size=8),
    st.lists(st.tuples(st.sampled_from(["a", "b", "ü-topic", ""]), st.integers(0, 2**31 - 1)), max_size=12),
    max_size=8)


@settings(max_examples=200, deadline=None)
@given(_assignments)
def test_packing_keeps_every_member_and_every_list_in_its_order(raw):
    assignment = {m: [TP(t, p) for t, p in tps] for m, tps in raw.items()}
    unpacked = unpack_assignment(pack_assignment(assignment))
    assert list(unpacked) == list(assignment)
    assert unpacked == assignment
    assert all(type(tp) is TP for tps in unpacked.values() for tp in tps)


@settings(max_examples=200, deadline=None)
@given(_assignments, st.dictionaries(st.sampled_from(["a", "b", "ü-topic", "c"]), st.integers(0, 40), max_size=4))
def test_packing_with_the_groups_topics_gives_the_same_lists(raw, counts):
    # Whatever the topics now say (a topic deleted, shrunk, or never known), the lists come back
    # as they were stored; only partitions the topics hold are the specs' own objects.
    from assignors import TopicSpec

    topics = {name: TopicSpec(name, n) for name, n in counts.items()}
    assignment = {m: [TP(t, p) for t, p in tps] for m, tps in raw.items()}
    unpacked = unpack_assignment(pack_assignment(assignment), topics)
    assert list(unpacked) == list(assignment)
    assert unpacked == assignment
    for tps in unpacked.values():
        for tp in tps:
            assert type(tp) is TP
            spec = topics.get(tp.topic)
            if spec is not None and tp.partition < spec.partitions:
                assert tp is spec.partition_objects[tp.partition]


def test_a_decoded_assignment_shares_its_partitions_with_the_topics_the_assignor_reads():
    # One object per partition for a huge group, not one for the assignment and one for the
    # assignor's answer (the assignors answer with TopicSpec.partition_objects).
    state = decode_state(encode_state(_story_state()))
    spec = state.topics["t0"]
    assert [tp is spec.partition_objects[tp.partition] for tps in state.assignment.values() for tp in tps] == \
        [True, True, True]


def test_packed_columns_unpack_to_the_same_map():
    columns = AssignmentColumns.from_lists({"a": [TP("t", 3), TP("u", 0)], "b": [],
                                            "c": [TP("t", 2**31 - 1)]})
    assert unpack_columns(pack_columns(columns)).same_as(columns)
    assert unpack_assignment(pack_columns(columns)) == columns.to_lists()


@pytest.mark.parametrize("partition", [2**31, -2**31 - 1])
def test_the_codec_refuses_a_partition_number_beyond_32_bits(partition):
    with pytest.raises(ValueError, match="partition number does not fit in 32 bits"):
        pack_columns(AssignmentColumns.from_lists({"a": [TP("t", partition)]}))
