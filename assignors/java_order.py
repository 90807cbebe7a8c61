"""Iteration order of Java's ``HashMap``/``HashSet``, where Kafka's answers depend on it.

Kafka's sticky assignor visits members in the order of a fresh ``HashMap`` keyed by member id, and
its tests assert results that follow from that order (spec section 0.3); Kafka 4.1's server-side
``UniformAssignor`` walks topic ids (``Uuid``) and partition numbers (``Integer``) out of hash sets.
To be Kafka-exact we reproduce those orders: keys fall into buckets by their spread hash, buckets
are visited in index order, and keys inside a bucket keep insertion order.

Two rarer rules of Java 17's ``HashMap`` are reproduced too (:func:`java_hash_order`), because a
crowded bucket changes the order: a bucket that reaches 9 keys in a table of fewer than 64 buckets
doubles the table, and in a larger table it turns into a red-black tree, whose root is moved to
the front of the bucket and whose later keys are linked in after their tree parent. A group of
random member or topic ids practically never crowds a bucket; a member's partitions can (nine
partitions of one topic 64 apart, as a round-robin over 64 subscribers hands them out).
"""

from __future__ import annotations

import uuid
from functools import lru_cache
from itertools import repeat
from typing import Any, Callable, Hashable, Iterable, Sequence, TypeVar

import numpy as np

from .java_tree_bin import balance_insertion, insert

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


def integer_hash(i: int) -> int:
    """``java.lang.Integer.hashCode`` (the value itself) as an unsigned 32-bit value."""
    return i & _MASK32


def uuid_compare_key(u: uuid.UUID) -> tuple[int, int]:
    """Sort key reproducing Kafka ``Uuid.compareTo`` / ``java.util.UUID.compareTo`` (signed halves)."""

    def signed64(v: int) -> int:
        return v - (1 << 64) if v >= (1 << 63) else v

    return (signed64(u.int >> 64), signed64(u.int & 0xFFFFFFFFFFFFFFFF))


def java_string_key(s: str) -> bytes:
    """Sort key reproducing ``java.lang.String.compareTo``: UTF-16 code units, not code points.

    Python orders strings by code point; the two differ once a string has a character beyond the
    Basic Multilingual Plane (Java sees its surrogate pair, 0xD800-0xDBFF, which sorts below
    0xE000-0xFFFF). Big-endian UTF-16 bytes compare exactly like the code units.
    """
    return s.encode("utf-16-be", "surrogatepass")


# --- hash tables ----------------------------------------------------------------------------------

#: ``java.util.HashMap``'s constants (Java 17).
DEFAULT_CAPACITY = 16
TREEIFY_THRESHOLD = 8
UNTREEIFY_THRESHOLD = 6
MIN_TREEIFY_CAPACITY = 64


def table_size_for(capacity: int) -> int:
    """``HashMap.tableSizeFor``: the table a ``new HashMap<>(capacity)`` allocates at its first put."""
    return 1 if capacity <= 1 else 1 << (capacity - 1).bit_length()


def table_capacity(n: int) -> int:
    """Capacity of a default ``HashMap`` after ``n`` puts (initial 16, load factor 0.75), no bucket
    crowded (see :func:`java_hash_order`)."""
    cap = DEFAULT_CAPACITY
    while n > 0.75 * cap:
        cap *= 2
    return cap


def copy_capacity(n: int) -> int:
    """The table of ``new HashSet<>(c)`` for a collection of ``n`` elements on Java 17:
    ``new HashMap<>(Math.max((int) (n / .75f) + 1, 16))``.

    (Java 19 changed this constructor to size the table for ``max(n, 12)`` elements, a smaller table
    for some sizes; the brokers this project targets run Java 17.)
    """
    return table_size_for(max(_int_over_load_factor(n) + 1, DEFAULT_CAPACITY))


def _int_over_load_factor(n: int) -> int:
    # (int) (n / .75f) in float arithmetic; 4n/3 is at least 1/3 away from the next integer, so the
    # float rounding never crosses one below 2**22.
    return int(n / 0.75) if n < 1 << 22 else int(np.float32(n) / np.float32(0.75))


def _spread(h: int) -> int:
    """``HashMap.hash``: the high 16 bits folded into the low ones (unsigned 32-bit)."""
    return (h ^ (h >> 16)) & _MASK32


def bucket_index(hash_code: int, capacity: int = DEFAULT_CAPACITY) -> int:
    """The bucket of a ``HashMap`` with ``capacity`` slots that a key of this ``hashCode`` lands in."""
    return _spread(hash_code & _MASK32) & (capacity - 1)


def java_hash_order(hashes: Sequence[int], *, capacity: int | None = None,
                    compare_keys: Sequence[Any] | Callable[[], Sequence[Any]] | None = None) -> list[int]:
    """The order in which a Java 17 ``HashMap``/``HashSet`` iterates distinct keys put in order.

    ``hashes``: each key's ``hashCode`` (unsigned 32-bit), in insertion order; the answer lists
    indices into it. ``capacity``: the table the map starts with (a power of two, e.g. from
    :func:`copy_capacity`); ``None`` for ``new HashMap<>()``, whose first put allocates 16.
    ``compare_keys``: sort keys reproducing the keys' ``compareTo`` (or a function making them),
    consulted only if a bucket turns into a tree (see the module doc); without them such a bucket
    orders equal hashes by insertion.

    Buckets are visited in index order, and a bucket lists its keys in insertion order, unless a
    bucket reached 9 keys on the way: then the table is rebuilt put by put (rare; a few us per key).
    """
    n = len(hashes)
    start = DEFAULT_CAPACITY if capacity is None else capacity
    final = _final_capacity(n, start)
    if n >= _VECTOR_MIN:
        spread = np.asarray(hashes, dtype=np.int64)
        spread ^= spread >> 16
        if _crowded_array(spread, start):
            return _JavaHashTable(start, spread.tolist(), compare_keys).order()
        # A stable sort keeps the insertion order of keys that share a bucket.
        return np.argsort(spread & (final - 1), kind="stable").tolist()
    spreads = [_spread(h) for h in hashes]
    if n > TREEIFY_THRESHOLD and _crowded(spreads, start):
        return _JavaHashTable(start, spreads, compare_keys).order()
    mask = final - 1
    buckets = [s & mask for s in spreads]
    # sorted() is stable, so keys that share a bucket keep their insertion order.
    return sorted(range(n), key=buckets.__getitem__)


def _final_capacity(n: int, capacity: int) -> int:
    while n > int(capacity * 0.75):
        capacity *= 2
    return capacity


def _crowded(spreads: list[int], capacity: int) -> bool:
    """Does some bucket reach 9 keys at some point while the keys are put in order? At each table
    size, the keys present at its end are a prefix, and a bucket's count only grows meanwhile."""
    n = len(spreads)
    while True:
        present = min(n, int(capacity * 0.75) + 1)
        mask = capacity - 1
        if present > TREEIFY_THRESHOLD:
            counts_by_bucket: dict[int, int] = {}
            for s in spreads[:present]:
                c = counts_by_bucket[s & mask] = counts_by_bucket.get(s & mask, 0) + 1
                if c > TREEIFY_THRESHOLD:
                    return True
        if present == n:
            return False
        capacity *= 2


def _crowded_array(spreads: np.ndarray, capacity: int) -> bool:
    """:func:`_crowded` for an array of spread hashes."""
    n = len(spreads)
    while True:
        present = min(n, int(capacity * 0.75) + 1)
        if present > TREEIFY_THRESHOLD and np.bincount(spreads[:present] & (capacity - 1)).max() > TREEIFY_THRESHOLD:
            return True
        if present == n:
            return False
        capacity *= 2


class _Node:
    """An entry of the simulated table: its key's position, spread hash, compare key, and the links
    of ``HashMap.TreeNode`` (used once its bucket is a tree)."""

    __slots__ = ("index", "spread", "signed", "key", "parent", "left", "right", "red")

    def __init__(self, index: int, spread: int, key: Any) -> None:
        self.index = index
        self.spread = spread
        self.signed = spread - (1 << 32) if spread >= 1 << 31 else spread  # Java compares ints signed
        self.key = key
        self.parent = self.left = self.right = None
        self.red = False


class _JavaHashTable:
    """Java 17's ``HashMap.putVal``, ``resize``, ``treeifyBin`` and ``TreeNode`` (insertions only),
    tracking only what the iteration order depends on: each bucket's linked order, and for tree
    buckets the red-black tree, whose root ``moveRootToFront`` puts first."""

    def __init__(self, capacity: int, spreads: list[int],
                 compare_keys: Sequence[Any] | Callable[[], Sequence[Any]] | None) -> None:
        self.capacity = capacity
        self.spreads = spreads
        self.compare_keys = compare_keys() if callable(compare_keys) else compare_keys
        self.bins: list[list[_Node]] = [[] for _ in range(capacity)]
        self.trees: set[int] = set()  # indices of buckets that are trees

    def order(self) -> list[int]:
        size = 0
        for i, spread in enumerate(self.spreads):
            node = _Node(i, spread, i if self.compare_keys is None else self.compare_keys[i])
            b = spread & (self.capacity - 1)
            bucket = self.bins[b]
            if b in self.trees:
                self._put_tree(b, node)
            else:
                bucket.append(node)
                if len(bucket) > TREEIFY_THRESHOLD:  # putVal: binCount >= TREEIFY_THRESHOLD - 1
                    if self.capacity < MIN_TREEIFY_CAPACITY:
                        self._resize()
                    else:
                        self._treeify(b)
            size += 1
            if size > int(self.capacity * 0.75):
                self._resize()
        return [node.index for bucket in self.bins for node in bucket]

    def _resize(self) -> None:
        old, old_trees, bit = self.bins, self.trees, self.capacity
        self.capacity *= 2
        self.bins = [[] for _ in range(self.capacity)]
        self.trees = set()
        for b, bucket in enumerate(old):
            # Each bucket splits into a low and a high half, each keeping the linked order.
            lo = [node for node in bucket if not node.spread & bit]
            hi = [node for node in bucket if node.spread & bit]
            for half, target in ((lo, b), (hi, b + bit)):
                self.bins[target] = half
                if b in old_trees and len(half) > UNTREEIFY_THRESHOLD:
                    self.trees.add(target)
                    if lo and hi:  # TreeNode.split re-treeifies a half only when the bucket split
                        self._treeify(target)

    def _treeify(self, b: int) -> None:
        bucket = self.bins[b]
        root = None
        for node in bucket:
            node.left = node.right = None
            if root is None:
                node.parent, node.red, root = None, False, node
                continue
            insert(root, node, lambda parent: self._goes_left(node, parent))
            root = balance_insertion(root, node)
        self.trees.add(b)
        _move_root_to_front(bucket, root)

    def _put_tree(self, b: int, node: _Node) -> None:
        bucket = self.bins[b]
        root = bucket[0]
        parent = insert(root, node, lambda parent: self._goes_left(node, parent))
        # putTreeVal links the new node in right after its tree parent.
        bucket.insert(bucket.index(parent) + 1, node)
        _move_root_to_front(bucket, balance_insertion(root, node))

    @staticmethod
    def _goes_left(node: _Node, parent: _Node) -> bool:
        # Hash first (signed), then compareTo; distinct keys never compare equal here.
        if parent.signed != node.signed:
            return parent.signed > node.signed
        return node.key <= parent.key


def _move_root_to_front(bucket: list[_Node], root: _Node) -> None:
    if bucket[0] is not root:
        bucket.remove(root)
        bucket.insert(0, root)


def hashmap_order(keys: Sequence[K], hash_of=None) -> list[K]:
    """The order in which a fresh Java ``HashMap`` filled with ``keys`` (in order) iterates them.

    ``hash_of`` gives the Java ``hashCode`` of a key; by default keys are strings.
    Duplicate keys keep their first position, as a second ``put`` does not move a key.
    """
    unique = list(dict.fromkeys(keys))
    hashes = string_hashes(unique) if hash_of is None else list(map(hash_of, unique))
    order = java_hash_order(hashes, compare_keys=lambda: [_compare_key(k) for k in unique])
    return [unique[i] for i in order]


def hashmap_order_of(items: Iterable[K], hash_of=None) -> list[K]:
    return hashmap_order(list(items), hash_of)


def _compare_key(key: Any) -> Any:
    if isinstance(key, str):
        return java_string_key(key)
    if isinstance(key, uuid.UUID):
        return uuid_compare_key(key)
    return key
