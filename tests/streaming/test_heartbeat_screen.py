"""The heartbeat screen's Arrow side alone (its exactness against Spark's parse is in
tests/integration/test_heartbeat_screen.py)."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from schemas.events import Field
from streaming.job.heartbeat_screen import (
    SCREENED_EVENT_TIME,
    SCREENED_GROUP_ID,
    SCREENED_MEMBER_ID,
    canonical_heartbeat_pattern,
    screen_batch,
)

GOOD = b'{"schema_version":1,"event_id":"e","event_time":42,"group_id":"g","member_id":"m"}'


def _batch(values, keys=None, topic="hb"):
    n = len(values)
    return pa.record_batch({
        "key": pa.array(keys or [b"g"] * n, pa.binary()), "value": pa.array(values, pa.binary()),
        "topic": pa.array([topic] * n), "partition": pa.array([0] * n, pa.int32()),
        "offset": pa.array(range(n), pa.int64()),
        "timestamp": pa.array([dt.datetime(2026, 1, 1)] * n, pa.timestamp("us"))})


def test_recognised_heartbeats_are_cut_out_and_their_value_cleared():
    other = b'{"event_id":"e","schema_version":1,"event_time":42,"group_id":"g","member_id":"m"}'
    out = screen_batch(_batch([GOOD, other, None]), "hb", 1_000).to_pydict()
    assert out[SCREENED_GROUP_ID] == ["g", None, None]
    assert out[SCREENED_MEMBER_ID] == ["m", None, None]
    assert out[SCREENED_EVENT_TIME] == [42, None, None]
    # The parse after the screen sees no value for the recognised one, the others' untouched.
    assert out["value"] == [None, other, None]
    assert out["offset"] == [0, 1, 2]


def test_a_batch_with_invalid_utf8_still_screens_its_valid_records():
    bad = GOOD.replace(b'"m"', b'"m\xff"')
    out = screen_batch(_batch([bad, GOOD]), "hb", 1_000).to_pydict()
    assert out[SCREENED_MEMBER_ID] == [None, "m"]
    assert out["value"] == [bad, None]


def test_size_limit_topic_and_key_are_the_parse_s_rules_too():
    assert screen_batch(_batch([GOOD]), "hb", len(GOOD) - 1).to_pydict()[SCREENED_GROUP_ID] == [None]
    assert screen_batch(_batch([GOOD], topic="other"), "hb", 1_000).to_pydict()[SCREENED_GROUP_ID] == [None]
    assert screen_batch(_batch([GOOD], keys=[b"h"]), "hb", 1_000).to_pydict()[SCREENED_GROUP_ID] == [None]


@pytest.mark.parametrize("field, message", [
    (Field("state", "string", "", enum=("a", "b")), "no rule for enums"),
    (Field("ratio", "double", ""), "no rule for type double"),
    (Field("offset", "long", "", minimum=-5), "not -5"),
    (Field("tags", "string", "", required=True, non_empty=True), None),
])
def test_a_contract_the_screen_cannot_read_exactly_is_refused_when_the_pattern_is_built(field, message):
    base = (Field("schema_version", "int", "", required=True, minimum=1),)
    if message is None:
        assert canonical_heartbeat_pattern(base + (field,)).endswith(r'"tags":"[^"\\\x00-\x1f]*"\}\z')
        return
    with pytest.raises(ValueError, match=message):
        canonical_heartbeat_pattern(base + (field,))


def _recognised(values: list[bytes]) -> list[bool]:
    import pyarrow.compute as pc

    from streaming.job.heartbeat_screen import PATTERN

    return pc.match_substring_regex(pa.array(values, pa.binary()).cast(pa.string()), PATTERN).to_pylist()


def test_the_project_s_own_producers_write_the_canonical_shape():
    # A field added to either producer's heartbeats would silently send them all through the full
    # parse (a third of the job's speed): this fails first.
    import json

    from streaming.feeds.collector import CollectorSettings, _Emitter
    from streaming.feeds.simulator import HEARTBEAT, Simulation, SimulationConfig

    emitter = _Emitter(CollectorSettings(), 1_767_225_600_000)
    emitter.heartbeat("orders", "consumer-1-7f3a")
    collected = [json.dumps(e.value, separators=(",", ":")).encode() for e in emitter.heartbeats]
    sim = Simulation(SimulationConfig(groups=3, members=2, topics=1, partitions=2, seed=1,
                                      start_time_ms=1_767_225_600_000))
    simulated = []
    for batch in sim.batches(500):
        simulated += [value for kind, _key, value, bad in batch if kind == HEARTBEAT and not bad]
        if len(simulated) >= 200:
            break
    simulated = simulated[:200]
    assert len(collected) == 1 and len(simulated) == 200
    assert all(_recognised(collected + simulated))
