"""What the decoder says about records it cannot decode, and that it says nothing else.

Every refusal is a :class:`CoordinatorRecordError` whose message names the record type, the
version and what is wrong, so that the job can put it in ``rejected_events`` with that reason.
Property tests (hypothesis) damage real fixture records: truncations, bit flips, inserted and
random bytes never raise anything else. Each read either consumes bytes or checks an element count
against the bytes left, so no input makes the decoder loop for long.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streaming.coordinator_log import CoordinatorRecordError, RecordType, decode, is_offset_commit, \
    peek_record_type
from streaming.coordinator_log.connect_protocol import decode_assignment as connect_assignment
from streaming.coordinator_log.consumer_protocol import decode_assignment, decode_subscription
from streaming.coordinator_log.streams_protocol import decode_assignment_info, decode_subscription_info
from streaming.errors import MonitorError
from tests.coordinator_log.fixture import load

ROWS = load()
WITH_VALUES = [r for r in ROWS if r["value"] is not None]


def _string(s: str) -> bytes:
    raw = s.encode()
    return struct.pack(">h", len(raw)) + raw


def _group_key(record_type: int, group: str = "g") -> bytes:
    return struct.pack(">h", record_type) + _string(group)


def _refusal(key, value) -> str:
    with pytest.raises(CoordinatorRecordError) as caught:
        decode(key, value)
    return str(caught.value)


def test_the_error_is_a_monitor_error():
    assert issubclass(CoordinatorRecordError, MonitorError)


def test_an_unknown_record_type_is_named():
    for record_type in (9, 18, 24, -1):
        assert f"unknown record type {record_type}" in _refusal(_group_key(record_type), None)


def test_an_unknown_version_is_named_with_the_type():
    message = _refusal(_group_key(2), struct.pack(">h", 5) + b"\0" * 20)
    assert message.startswith("GroupMetadata (type 2) value v5: unknown version (Kafka 4.1 reads v0-v4)")
    message = _refusal(_group_key(3), struct.pack(">h", 1) + b"\0" * 5)
    assert "ConsumerGroupMetadata (type 3) value v1: unknown version" in message


def test_a_truncated_value_says_where():
    value = struct.pack(">h", 3) + _string("consumer") + struct.pack(">i", 4)  # protocol missing
    message = _refusal(_group_key(2), value)
    assert message == ("GroupMetadata (type 2) value v3: truncated at byte 16 reading protocol: "
                       "needs 2 bytes, 0 left")


def test_trailing_bytes_are_refused():
    value = struct.pack(">hi", 0, 7) + b"\0" + b"\xff"  # epoch, no tagged fields, one byte too many
    message = _refusal(_group_key(3), value)
    assert message == "ConsumerGroupMetadata (type 3) value v0: 1 trailing byte after the value (at byte 7)"
    assert "1 trailing byte after the key" in _refusal(_group_key(2) + b"x", None)
    assert "2 trailing bytes after the key" in _refusal(_group_key(2) + b"xy", None)


def test_bad_utf8_is_refused():
    key = struct.pack(">h", 2) + struct.pack(">h", 2) + b"\xc3\x28"
    assert _refusal(key, None) == "GroupMetadata (type 2) key: bad UTF-8 in group id at byte 4"


def test_a_short_key_or_value_has_no_type_or_version():
    assert "has no record type" in _refusal(b"\x00", None)
    assert "has no version" in _refusal(_group_key(2), b"\x00")
    with pytest.raises(CoordinatorRecordError):
        peek_record_type(b"")


def test_a_lying_array_length_fails_at_once():
    # protocol type, generation, protocol, leader, timestamp, then 2^31-1 members in 4 bytes
    message = _refusal(_group_key(2), struct.pack(">h", 3) + _string("consumer") + struct.pack(">i", 1)
                       + _string("range") + _string("m") + struct.pack(">q", 0) + struct.pack(">i", 0x7FFFFFFF))
    assert "array members claims 2147483647 elements, only 0 bytes left" in message


def test_a_bad_embedded_subscription_names_the_member():
    value = bytearray(next(r["value"] for r in ROWS
                           if r["kafka"].get("type") == 2 and r["kafka"]["value"]["protocolType"] == "consumer"
                           and r["kafka"]["value"]["members"]))
    row = next(r for r in ROWS if r["value"] == bytes(value))
    member = row["kafka"]["value"]["members"][0]["memberId"]
    subscription = decode(row["key"], row["value"]).value.members[0].subscription
    damaged = bytes(value).replace(subscription, b"\xff\xff" + subscription[2:], 1)  # version -1
    message = _refusal(row["key"], damaged)
    assert f"member {member!r}, consumer subscription: unsupported version -1" in message


def test_bytearray_and_memoryview_decode_as_bytes():
    row = next(r for r in ROWS if r["kafka"].get("type") == 2 and r["value"] is not None
               and r["kafka"]["value"]["members"])
    expected = decode(row["key"], row["value"])
    assert decode(bytearray(row["key"]), memoryview(row["value"])) == expected
    assert isinstance(decode(bytearray(row["key"]), bytearray(row["value"])).value.members[0].subscription, bytes)


def test_offset_commits_are_recognised_from_two_bytes():
    assert is_offset_commit(b"\x00\x01rest") and is_offset_commit(b"\x00\x00")
    assert not is_offset_commit(b"\x00\x02") and not is_offset_commit(b"\x01\x01") and not is_offset_commit(b"\x00")
    assert peek_record_type(b"\x00\x13...") == RecordType.STREAMS_GROUP_MEMBER_METADATA


# -- nothing but CoordinatorRecordError, whatever the bytes -------------------------------------------

_PROPERTY = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _decodes_or_refuses(key, value) -> None:
    try:
        decode(key, value)
    except CoordinatorRecordError:
        pass


@_PROPERTY
@given(row=st.sampled_from(WITH_VALUES), cut=st.integers(min_value=0, max_value=10_000))
def test_a_truncated_value_is_refused_cleanly(row, cut):
    value = row["value"][:cut % len(row["value"])]
    with pytest.raises(CoordinatorRecordError):
        decode(row["key"], value)


@_PROPERTY
@given(row=st.sampled_from(ROWS), cut=st.integers(min_value=0, max_value=10_000))
def test_a_truncated_key_is_refused_cleanly(row, cut):
    with pytest.raises(CoordinatorRecordError):
        decode(row["key"][:cut % len(row["key"])], row["value"])


@_PROPERTY
@given(row=st.sampled_from(WITH_VALUES), data=st.data())
def test_flipped_bits_give_a_record_or_a_refusal(row, data):
    value = bytearray(row["value"])
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(value) - 1))
        value[at] ^= 1 << data.draw(st.integers(0, 7))
    _decodes_or_refuses(row["key"], bytes(value))


@_PROPERTY
@given(row=st.sampled_from(WITH_VALUES), data=st.data())
def test_inserted_bytes_give_a_record_or_a_refusal(row, data):
    at = data.draw(st.integers(0, len(row["value"])))
    extra = data.draw(st.binary(min_size=1, max_size=8))
    _decodes_or_refuses(row["key"], row["value"][:at] + extra + row["value"][at:])


@_PROPERTY
@given(record_type=st.sampled_from([int(t) for t in RecordType] + [9, 18, 99]), key=st.binary(max_size=40),
       value=st.none() | st.binary(max_size=200))
def test_random_bytes_give_a_record_or_a_refusal(record_type, key, value):
    _decodes_or_refuses(struct.pack(">h", record_type) + key, value)


@_PROPERTY
@given(data=st.binary(max_size=200), protocol=st.sampled_from(["range", "sticky", "stream", None]))
def test_random_embedded_bytes_give_a_value_or_a_refusal(data, protocol):
    for decoder in (decode_subscription, decode_assignment):
        try:
            decoder(data, protocol, "fuzz")
        except CoordinatorRecordError:
            pass
    for decoder in (decode_subscription_info, decode_assignment_info):
        try:
            decoder(data, "fuzz")
        except CoordinatorRecordError:
            pass
    for protocol in ("default", "sessioned"):
        try:
            connect_assignment(data, protocol, "fuzz")
        except CoordinatorRecordError:
            pass
