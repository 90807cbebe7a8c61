"""Iteration order of Java's ``HashMap``/``HashSet``, where Kafka's answers depend on it.

Kafka's sticky assignor visits members in the order of a fresh ``HashMap`` keyed by member id, and
its tests assert results that follow from that order (spec section 0.3). To be Kafka-exact we
reproduce it: keys fall into buckets by their spread hash, buckets are visited in index order, and
keys inside a bucket keep insertion order. (Java turns a crowded bucket into a tree only past 8
entries and a table of 64, where colliding ``String`` keys are ordered by ``compareTo``; with the
spread hash that needs 9 keys sharing one bucket, so insertion order is what real groups see.)
"""

from __future__ import annotations

import uuid
from functools import lru_cache
from itertools import repeat
from typing import Hashable, Iterable, Sequence, TypeVar

import numpy as np

K = TypeVar("K", bound=Hashable)

_MASK32 = 0xFFFFFFFF


def string_hash(s: str) -> int:
    """``java.lang.String.hashCode`` as an unsigned 32-bit value (over UTF-16 code units)."""
    h = 0
    if s.isascii():
        for ch in s.encode("ascii"):
            h = (31 * h + ch) & _MASK32
        return h
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & _MASK32
    return h


#: Below this many strings the per-character Python loop beats NumPy's fixed costs.
_VECTOR_MIN = 32

#: Java keeps a ``String``'s ``hashCode`` inside the ``String`` object once computed, so a Kafka
#: client hashing the same member ids and topic names at every rebalance computes each hash once.
#: A Python ``str`` cannot carry it, so the hashes of strings seen before are kept here, keyed by
#: the string (equal strings have equal hashes: no call can see a stale value). Bounded: emptied
#: when a batch would take it past this many entries, so a long-lived process with ever-new ids
#: does not grow without end.
HASH_CACHE_LIMIT = 1 << 17
_hash_cache: dict[str, int] = {}


def string_hashes(strings: Sequence[str]) -> list[int]:
    """:func:`string_hash` of each string; cached between calls (see :data:`HASH_CACHE_LIMIT`),
    and computed with NumPy when many ASCII strings are new.

    Java's hash is the polynomial ``sum(c[i] * 31**(L-1-i))`` wrapped to 32 bits. Left-padding
    every string with NULs to the longest one adds only zero terms, so all strings become rows of
    one character matrix and all hashes one matrix-vector product with the powers of 31 (taken
    mod 2**32; the sums stay far inside 64 bits).
    """
    hashes = list(map(_hash_cache.get, strings))
    if None in hashes:
        _fill_missing(strings, hashes)
    return hashes


def string_hash_array(strings: Sequence[str]) -> np.ndarray:
    """:func:`string_hashes` as a ``uint64`` array, for callers that go on in NumPy."""
    try:
        return np.fromiter(map(_hash_cache.__getitem__, strings), dtype=np.uint64, count=len(strings))
    except KeyError:  # some string not seen before
        return np.array(string_hashes(strings), dtype=np.uint64)


def _fill_missing(strings: Sequence[str], hashes: list) -> None:
    """Compute the hashes that are ``None`` in ``hashes`` (not cached) and cache them."""
    missing = [i for i, h in enumerate(hashes) if h is None]
    new = [strings[i] for i in missing]
    if len(new) < _VECTOR_MIN or not "".join(new).isascii():
        computed = [string_hash(s) for s in new]
    else:
        computed = _ascii_hash_array(new).tolist()
    for i, h in zip(missing, computed):
        hashes[i] = h
    if len(_hash_cache) + len(new) > HASH_CACHE_LIMIT:
        _hash_cache.clear()
    if len(new) <= HASH_CACHE_LIMIT:
        _hash_cache.update(zip(new, computed))


def _ascii_hash_array(strings: Sequence[str]) -> np.ndarray:
    width = max(map(len, strings))
    raw = "".join(map(str.rjust, strings, repeat(width), repeat("\0"))).encode("ascii")
    chars = np.frombuffer(raw, dtype=np.uint8).reshape(len(strings), width).astype(np.uint64)
    return (chars @ _powers_of_31(width)) & np.uint64(_MASK32)


@lru_cache(maxsize=64)
def _powers_of_31(width: int) -> np.ndarray:
    """``31**(width-1-i) mod 2**32`` for each position ``i``: a constant per width, kept read-only."""
    powers = np.array([pow(31, width - 1 - i, 1 << 32) for i in range(width)], dtype=np.uint64)
    powers.flags.writeable = False
    return powers


def uuid_hash(u: uuid.UUID) -> int:
    """Kafka ``Uuid.hashCode``: ``(int)(x >> 32) ^ (int)x`` with ``x = msb ^ lsb``, unsigned 32-bit."""
    msb = u.int >> 64
    lsb = u.int & 0xFFFFFFFFFFFFFFFF
    x = msb ^ lsb
    return ((x >> 32) ^ x) & _MASK32


def table_capacity(n: int) -> int:
    """Capacity of a default ``HashMap`` after ``n`` puts (initial 16, load factor 0.75)."""
    cap = 16
    while n > 0.75 * cap:
        cap *= 2
    return cap


def hashmap_order(keys: Sequence[K], hash_of=None) -> list[K]:
    """The order in which a fresh Java ``HashMap`` filled with ``keys`` (in order) iterates them.

    ``hash_of`` gives the Java ``hashCode`` of a key; by default keys are strings.
    Duplicate keys keep their first position, as a second ``put`` does not move a key.
    """
    unique = list(dict.fromkeys(keys))
    hashes = string_hashes(unique) if hash_of is None else list(map(hash_of, unique))
    mask = table_capacity(len(unique)) - 1
    buckets = [(h ^ (h >> 16)) & mask for h in hashes]  # HashMap.hash() spreads the high bits
    # sorted() is stable, so keys that share a bucket keep their insertion order.
    return [unique[i] for i in sorted(range(len(unique)), key=buckets.__getitem__)]


def hashmap_order_of(items: Iterable[K], hash_of=None) -> list[K]:
    return hashmap_order(list(items), hash_of)


def uuid_compare_key(u: uuid.UUID) -> tuple[int, int]:
    """Sort key reproducing Kafka ``Uuid.compareTo`` / ``java.util.UUID.compareTo`` (signed halves)."""

    def signed64(v: int) -> int:
        return v - (1 << 64) if v >= (1 << 63) else v

    return (signed64(u.int >> 64), signed64(u.int & 0xFFFFFFFFFFFFFFFF))
