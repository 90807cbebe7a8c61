"""Java 17's ``HashMap``/``HashSet`` iteration order (``java_order.java_hash_order``), crowded
buckets included, against orders Java itself printed.

``java_hash_orders.json`` holds insertions and the order in which Java 17 (OpenJDK 17.0.15) iterated
the result: ``Integer`` and Kafka ``Uuid`` sets built with ``new HashSet<>(list)`` ("copy") or one
``add`` per key ("default"), and ``String``-keyed ``HashMap``s filled with ``put``. Most cases crowd a
bucket on purpose (partitions 16, 32, 64 or 128 apart; strings made of "Aa"/"BB" blocks, which share
a ``hashCode``; ids whose two halves XOR to one value), so the table doubles early or a bucket turns
into a red-black tree; the rest are ordinary.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections import Counter
from pathlib import Path

import pytest

from assignors.java_order import (
    copy_capacity,
    hashmap_order,
    integer_hash,
    java_hash_order,
    java_string_key,
    string_hashes,
    table_size_for,
    uuid_compare_key,
    uuid_hash,
)

CASES = json.loads((Path(__file__).parent / "java_hash_orders.json").read_text())


def _kafka_uuid(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))


def _ids(kind: str) -> list[str]:
    return [f"{kind}-{len(case['keys'])}-keys-{case['set']}-{i}" for i, case in enumerate(CASES[kind])]


@pytest.mark.parametrize("case", CASES["integer"], ids=_ids("integer"))
def test_integer_sets_iterate_like_java(case):
    keys = case["keys"]
    capacity = copy_capacity(len(keys)) if case["set"] == "copy" else None
    order = java_hash_order([integer_hash(p) for p in keys], capacity=capacity, compare_keys=keys)
    assert [keys[i] for i in order] == case["java_order"]


@pytest.mark.parametrize("case", CASES["uuid"], ids=_ids("uuid"))
def test_uuid_sets_iterate_like_java(case):
    keys = [_kafka_uuid(k) for k in case["keys"]]
    capacity = copy_capacity(len(keys)) if case["set"] == "copy" else None
    order = java_hash_order([uuid_hash(u) for u in keys], capacity=capacity,
                            compare_keys=[uuid_compare_key(u) for u in keys])
    assert [case["keys"][i] for i in order] == case["java_order"]


@pytest.mark.parametrize("case", CASES["string"], ids=_ids("string"))
def test_string_maps_iterate_like_java(case):
    assert hashmap_order(case["keys"]) == case["java_order"]


def test_the_fixture_crowds_buckets_into_trees():
    # Guards the fixture: 11 keys sharing a hashCode in a default map make the table grow from 16 to
    # 64 (the 9th and 10th) and then a tree (the 11th).
    for kind, hash_of in (("string", lambda k: string_hashes([k])[0]), ("integer", integer_hash),
                          ("uuid", lambda k: uuid_hash(_kafka_uuid(k)))):
        most_shared = [Counter(hash_of(k) & 63 for k in case["keys"]).most_common(1)[0][1] for case in CASES[kind]]
        assert sum(n >= 11 for n in most_shared) >= 5, kind


def test_copy_constructor_capacity_is_java_17s():
    # new HashSet<>(c): new HashMap<>(max((int) (n / .75f) + 1, 16)), rounded up to a power of two.
    assert [copy_capacity(n) for n in (0, 1, 11, 12, 13, 24, 25, 48, 49)] == [16, 16, 16, 32, 32, 64, 64, 128, 128]
    assert [table_size_for(c) for c in (0, 1, 2, 3, 16, 17)] == [1, 1, 2, 4, 16, 32]


def test_java_string_order_compares_utf16_code_units():
    # U+1F600 is the surrogate pair D83D DE00 in UTF-16: Java sorts it below U+FF01, Python above.
    assert sorted(["\uff01", "\U0001f600"]) == ["\uff01", "\U0001f600"]
    assert sorted(["\uff01", "\U0001f600"], key=java_string_key) == ["\U0001f600", "\uff01"]
