"""Java ``String.hashCode`` values kept between calls (``java_order``): a cached hash is the hash,
for new and known strings, ASCII or not, and the cache stays within its bound."""

from __future__ import annotations

import pytest

from assignors import java_order
from assignors.java_order import string_hash, string_hash_array, string_hashes


def _java_hash(s: str) -> int:
    """The textbook definition, over UTF-16 code units, as an unsigned 32-bit value."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i:i + 2], "big")) % 2**32
    return h


@pytest.fixture
def empty_cache(monkeypatch):
    monkeypatch.setattr(java_order, "_hash_cache", {})
    return java_order


def test_known_java_values():
    # "".hashCode() is 0, "hello".hashCode() 99162322, and "Aa" and "BB" collide at 2112.
    assert string_hashes(["", "hello", "Aa", "BB"]) == [0, 99162322, 2112, 2112]
    assert string_hash("hello") == 99162322


@pytest.mark.parametrize("count", [1, 5, 31, 32, 200], ids=lambda n: f"{n}-strings")
def test_first_and_cached_calls_give_the_definition(empty_cache, count):
    strings = [f"member-{i}-{'x' * (i % 7)}" for i in range(count)] + ["ü-member", "日本"]
    expected = [_java_hash(s) for s in strings]
    assert string_hashes(strings) == expected  # computed (vectorised above 32 new ASCII strings)
    assert set(strings) <= set(empty_cache._hash_cache)
    assert string_hashes(strings) == expected  # from the cache
    assert string_hash_array(strings).tolist() == expected


def test_known_and_new_strings_mixed_keep_their_places(empty_cache):
    string_hashes(["a", "c"])
    strings = ["c", "b", "a", "b", "d" * 40]
    assert string_hashes(strings) == [_java_hash(s) for s in strings]
    assert string_hash_array(["z", "a"]).tolist() == [_java_hash("z"), _java_hash("a")]


def test_the_cache_is_emptied_rather_than_growing_past_its_limit(empty_cache, monkeypatch):
    monkeypatch.setattr(empty_cache, "HASH_CACHE_LIMIT", 50)
    for start in range(0, 400, 40):
        batch = [f"id-{i}" for i in range(start, start + 40)]
        assert string_hashes(batch) == [_java_hash(s) for s in batch]
        assert len(empty_cache._hash_cache) <= 50
    too_many = [f"other-{i}" for i in range(60)]  # a batch larger than the bound is not kept
    assert string_hashes(too_many) == [_java_hash(s) for s in too_many]
    assert len(empty_cache._hash_cache) <= 50
