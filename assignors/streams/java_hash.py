"""Iteration order of ``java.util.HashMap``/``HashSet`` (JDK 17) over Kafka Streams' keys.

Where Kafka Streams 4.1 walks a ``HashMap`` or ``HashSet`` and the walk decides an assignment (the
fallback assignor, tag-aware standbys that could not be spread, the clients a ``PriorityQueue``
put back), we need the order Java walks it in. That order is a function of the keys' ``hashCode``,
the table size, and the order the keys went in, so it can be reproduced exactly:

* keys fall into buckets by their *spread* hash ``h ^ (h >>> 16)`` masked to the table size, and
  buckets are walked in index order;
* a bucket is a linked list in insertion order; a resize splits each list in two, keeping order;
* a bucket that reaches 9 keys in a table of 64 or more becomes a red-black tree (in a smaller
  table the table doubles instead), ordered by hash and then ``compareTo``; its walk follows the
  nodes' ``next`` links, which the tree code reorders (a new node goes right after its tree parent,
  the root is moved to the front). Task ids make such buckets easy: ``TaskId.hashCode`` is
  ``29791 + 31 * (31 * subtopology + partition)``, so ``0_31`` and ``1_0`` have the same hash.

:func:`hash_order` answers the common case (keys only put, no bucket ever crowded) by one sort;
anything else runs :class:`JavaHashMap`, a node-for-node replay of ``HashMap``'s ``putVal``,
``resize``, ``treeifyBin``/``TreeNode`` and ``removeNode``. Table sizes follow JDK 17: a copy
(``new HashSet<>(collection)``) and a ``putAll`` into an empty map are sized from ``size / 0.75f``
in ``float`` arithmetic; JDK 19 and later size them with ``Math.ceil`` instead, which can give a
smaller table and so another walk. The Java reference (jvm/streams-reference) checks this module
against the JDK's own classes.
"""

from __future__ import annotations

import uuid
from typing import Callable, Hashable, Iterable, Iterator, Sequence

import numpy as np

from ..java_order import copy_capacity as copy_sized  # ``new HashSet<>(collection)``, JDK 17
from ..java_order import string_hash, table_size_for, uuid_hash
from ..java_tree_bin import balance_deletion, balance_insertion, insert

_MASK32 = 0xFFFFFFFF
#: ``HashMap.TREEIFY_THRESHOLD``, ``UNTREEIFY_THRESHOLD``, ``MIN_TREEIFY_CAPACITY``.
_TREEIFY, _UNTREEIFY, _MIN_TREEIFY_CAPACITY = 8, 6, 64
_MAX_CAPACITY = 1 << 30
_DEFAULT_CAPACITY = 16


# --- hash codes of Kafka's keys ---------------------------------------------------------------------

def _int32(v: int) -> int:
    v &= _MASK32
    return v - (1 << 32) if v & 0x80000000 else v


def objects_hash(*values: int) -> int:
    """``java.util.Objects.hash`` of ``int`` values (``None`` hashes to 0), unsigned 32-bit."""
    h = 1
    for v in values:
        h = (31 * h + (v or 0)) & _MASK32
    return h


def task_id_hash(subtopology: int, partition: int) -> int:
    """``TaskId.hashCode``: ``Objects.hash(subtopology, partition, topologyName=null)``."""
    return objects_hash(subtopology, partition, None)


def subtopology_hash(subtopology: int) -> int:
    """``TopologyMetadata.Subtopology.hashCode``: ``Objects.hash(nodeGroupId, namedTopology=null)``."""
    return objects_hash(subtopology, None)


def process_id_hash(process_id: str) -> int:
    """``ProcessId.hashCode`` (its ``UUID``'s). An id that is no UUID exists only on our side: its
    ``String.hashCode`` stands in, so that such specs still get a fixed order."""
    try:
        return uuid_hash(uuid.UUID(process_id))
    except ValueError:
        return string_hash(process_id)


# --- table sizes ----------------------------------------------------------------------------------

def presized(initial_capacity: int) -> int:
    """The table a ``new HashMap<>(initialCapacity)`` (or ``HashSet``) creates at its first put."""
    if initial_capacity < 0:
        raise ValueError(f"Illegal initial capacity: {initial_capacity}")
    return table_size_for(min(initial_capacity, _MAX_CAPACITY))


def put_all_sized(size: int) -> int:
    """The table of an empty ``new HashMap<>()`` after ``putAll`` of ``size`` entries (JDK 17
    ``putMapEntries``: ``tableSizeFor((int) (size / 0.75f + 1.0f))``). 0 = no table (default)."""
    if size <= 0:
        return 0
    return table_size_for(int(np.float32(size) / np.float32(0.75) + np.float32(1.0)))


def _next_threshold(old_cap: int, old_thr: int, new_cap: int) -> int:
    """``resize``'s new threshold: doubled from a table of 16 or more, else ``(int)(cap * 0.75f)``."""
    if old_cap >= _DEFAULT_CAPACITY and new_cap < _MAX_CAPACITY:
        return old_thr << 1
    return int(np.float32(new_cap) * np.float32(0.75))


def spread_hash(h: int) -> int:
    """``HashMap.hash``: the high half folded into the low one, as a signed ``int``."""
    h &= _MASK32
    return _int32(h ^ (h >> 16))


# --- the common case in one sort -------------------------------------------------------------------

#: Below this many keys the per-capacity bucket count is cheaper in plain Python than in NumPy.
_VECTOR_MIN = 64


def hash_order(keys: Sequence[Hashable], hash_of: Callable[[Hashable], int],
               rank_of: Callable[[Hashable], object], table: int = 0) -> list:
    """The walk of a ``HashMap``/``HashSet`` that got ``keys`` (distinct) put in this order.

    ``hash_of`` is the key's Java ``hashCode``; ``rank_of`` orders keys as their ``compareTo``
    does (used only inside a tree bucket). ``table`` is the table size the map starts with
    (:func:`presized`, :func:`copy_sized`, :func:`put_all_sized`); 0 = ``new HashMap<>()``.
    """
    return hash_order_of_spread(keys, [spread_hash(hash_of(k)) for k in keys], hash_of, rank_of, table)


def hash_order_of_spread(keys: Sequence[Hashable], spread: Sequence[int], hash_of, rank_of, table: int = 0) -> list:
    """:func:`hash_order` for callers that keep each key's :func:`spread_hash` at hand."""
    n = len(keys)
    if n == 0:
        return []
    capacity = _final_capacity_if_never_crowded(spread, table)
    if capacity is None:
        m = JavaHashMap(hash_of, rank_of, table)
        for k in keys:
            m.put(k)
        return list(m)
    mask = capacity - 1
    # sorted() is stable: keys sharing a bucket keep insertion order.
    return [keys[i] for i in sorted(range(n), key=lambda i: spread[i] & mask)]


def hash_order_after_removals(keys: Sequence[Hashable], removed: Sequence[Hashable], hash_of, rank_of,
                              table: int = 0) -> list:
    """The walk after ``keys`` were put and then ``removed`` taken out one by one with
    ``HashMap.remove`` (which, unlike an iterator's ``remove``, may reorder a tree bucket)."""
    gone = set(removed)
    if _final_capacity_if_never_crowded([spread_hash(hash_of(k)) for k in keys], table) is not None:
        return [k for k in hash_order(keys, hash_of, rank_of, table) if k not in gone]
    m = hash_set_of(keys, hash_of, rank_of, table)
    for k in removed:
        m.remove(k, movable=True)
    return list(m)


def _final_capacity_if_never_crowded(spread: Sequence[int], table: int) -> int | None:
    """The table size after all puts, or None when some bucket may reach 9 keys on the way (then
    ``treeifyBin`` runs, which reorders the bucket or doubles the table early)."""
    n = len(spread)
    # (capacity, keys in the table when it is left) for each table size the puts go through.
    stages = []
    cap = table if table > 0 else _DEFAULT_CAPACITY
    thr = int(np.float32(cap) * np.float32(0.75)) if table > 0 else 12
    while True:
        stop = min(n, thr + 1)  # the put that takes the size past the threshold resizes after going in
        stages.append((cap, stop))
        if n <= thr:
            break
        new_cap = cap << 1
        thr, cap = _next_threshold(cap, thr, new_cap), new_cap
        if stop == n:
            break
    if n > _TREEIFY:
        array = np.asarray(spread, dtype=np.int64) if n >= _VECTOR_MIN else None
        for stage_cap, stop in stages:
            if stop <= _TREEIFY:
                continue
            mask = stage_cap - 1
            if array is not None:
                crowded = np.bincount(array[:stop] & mask).max() > _TREEIFY
            else:
                counts: dict[int, int] = {}
                crowded = False
                for h in spread[:stop]:
                    b = h & mask
                    counts[b] = c = counts.get(b, 0) + 1
                    if c > _TREEIFY:
                        crowded = True
                        break
            if crowded:
                return None
    return cap


# --- the full replay --------------------------------------------------------------------------------

class _Node:
    """``HashMap.Node`` and, with ``tree`` set, ``HashMap.TreeNode``."""

    __slots__ = ("key", "hash", "rank", "next", "prev", "parent", "left", "right", "red", "tree")

    def __init__(self, key, h: int, rank, nxt=None):
        self.key, self.hash, self.rank, self.next = key, h, rank, nxt
        self.prev = self.parent = self.left = self.right = None
        self.red = False
        self.tree = False

    def root(self) -> "_Node":
        r = self
        while r.parent is not None:
            r = r.parent
        return r


def _direction(h: int, rank, p: _Node) -> int:
    """Where a key goes relative to tree node ``p``: by hash, then by ``compareTo``."""
    if p.hash > h:
        return -1
    if p.hash < h:
        return 1
    if rank < p.rank:
        return -1
    if rank > p.rank:
        return 1
    # Distinct task or process ids never compare equal; Java would fall back to identity hashes.
    raise ValueError(f"two distinct keys compare equal: {rank!r}")


class JavaHashMap:
    """A replay of ``java.util.HashMap`` (JDK 17) that keeps only what decides its walk.

    ``table`` is the size of the table the first put creates (see :func:`hash_order`).
    """

    def __init__(self, hash_of: Callable[[Hashable], int], rank_of: Callable[[Hashable], object], table: int = 0):
        self._hash_of, self._rank_of = hash_of, rank_of
        self._tab: list[_Node | None] | None = None
        self._threshold = table
        self._size = 0
        self._nodes: dict[Hashable, _Node] = {}

    def __len__(self) -> int:
        return self._size

    def __contains__(self, key) -> bool:
        return key in self._nodes

    def __iter__(self) -> Iterator:
        if self._tab is None:
            return
        for e in self._tab:
            while e is not None:
                yield e.key
                e = e.next

    # --- putVal ---

    def put(self, key) -> None:
        if key in self._nodes:
            return  # an existing mapping: only its value would change
        h = spread_hash(self._hash_of(key))
        rank = self._rank_of(key)
        if self._tab is None:
            self._resize()
        tab = self._tab
        n = len(tab)
        i = h & (n - 1)
        p = tab[i]
        if p is None:
            node = tab[i] = _Node(key, h, rank)
        elif p.tree:
            node = self._put_tree_val(p, h, key, rank)
        else:
            bin_count = 0
            while p.next is not None:
                p = p.next
                bin_count += 1
            node = p.next = _Node(key, h, rank)
            if bin_count >= _TREEIFY - 1:
                self._treeify_bin(h)
        self._nodes[key] = node
        self._size += 1
        if self._size > self._threshold:
            self._resize()

    def _resize(self) -> None:
        old = self._tab
        old_cap = 0 if old is None else len(old)
        old_thr = self._threshold
        new_thr = 0
        if old_cap > 0:
            if old_cap >= _MAX_CAPACITY:
                self._threshold = (1 << 31) - 1
                return
            new_cap = old_cap << 1
            if new_cap < _MAX_CAPACITY and old_cap >= _DEFAULT_CAPACITY:
                new_thr = old_thr << 1
        elif old_thr > 0:
            new_cap = old_thr
        else:
            new_cap, new_thr = _DEFAULT_CAPACITY, 12
        if new_thr == 0:
            new_thr = int(np.float32(new_cap) * np.float32(0.75)) if new_cap < _MAX_CAPACITY else (1 << 31) - 1
        self._threshold = new_thr
        tab: list[_Node | None] = [None] * new_cap
        self._tab = tab
        if old is None:
            return
        for j, e in enumerate(old):
            if e is None:
                continue
            if e.next is None:
                tab[e.hash & (new_cap - 1)] = e
            elif e.tree:
                self._split(e, j, old_cap)
            else:
                lo_head = lo_tail = hi_head = hi_tail = None
                while e is not None:
                    nxt = e.next
                    if e.hash & old_cap == 0:
                        if lo_tail is None:
                            lo_head = e
                        else:
                            lo_tail.next = e
                        lo_tail = e
                    else:
                        if hi_tail is None:
                            hi_head = e
                        else:
                            hi_tail.next = e
                        hi_tail = e
                    e = nxt
                if lo_tail is not None:
                    lo_tail.next = None
                    tab[j] = lo_head
                if hi_tail is not None:
                    hi_tail.next = None
                    tab[j + old_cap] = hi_head

    def _treeify_bin(self, h: int) -> None:
        tab = self._tab
        if len(tab) < _MIN_TREEIFY_CAPACITY:
            self._resize()
            return
        index = h & (len(tab) - 1)
        e = tab[index]
        prev = None
        while e is not None:  # replacementTreeNode keeps the list order
            e.tree = True
            e.prev = prev
            prev = e
            e = e.next
        if tab[index] is not None:
            self._treeify(tab[index])

    # --- TreeNode ---

    def _move_root_to_front(self, root: _Node | None) -> None:
        tab = self._tab
        if root is None or not tab:
            return
        index = root.hash & (len(tab) - 1)
        first = tab[index]
        if root is not first:
            tab[index] = root
            rp, rn = root.prev, root.next
            if rn is not None:
                rn.prev = rp
            if rp is not None:
                rp.next = rn
            if first is not None:
                first.prev = root
            root.next = first
            root.prev = None

    def _treeify(self, head: _Node) -> None:
        root = None
        x = head
        while x is not None:
            nxt = x.next
            x.left = x.right = None
            if root is None:
                x.parent = None
                x.red = False
                root = x
            else:
                insert(root, x, lambda p: _direction(x.hash, x.rank, p) <= 0)
                root = balance_insertion(root, x)
            x = nxt
        self._move_root_to_front(root)

    def _untreeify(self, head: _Node) -> _Node:
        q = head
        while q is not None:  # replacementNode: a plain node, same list order
            q.tree = False
            q.prev = q.parent = q.left = q.right = None
            q.red = False
            q = q.next
        return head

    def _put_tree_val(self, first: _Node, h: int, key, rank) -> _Node:
        root = first.root() if first.parent is not None else first
        x = _Node(key, h, rank)
        x.tree = True
        xp = insert(root, x, lambda p: _direction(h, rank, p) <= 0)
        # Threaded into the bucket's list right after its tree parent, as putTreeVal does.
        xpn = x.next = xp.next
        xp.next = x
        x.prev = xp
        if xpn is not None:
            xpn.prev = x
        self._move_root_to_front(balance_insertion(root, x))
        return x

    def _split(self, b: _Node, index: int, bit: int) -> None:
        tab = self._tab
        lo_head = lo_tail = hi_head = hi_tail = None
        lc = hc = 0
        e = b
        while e is not None:
            nxt = e.next
            e.next = None
            if e.hash & bit == 0:
                e.prev = lo_tail
                if lo_tail is None:
                    lo_head = e
                else:
                    lo_tail.next = e
                lo_tail = e
                lc += 1
            else:
                e.prev = hi_tail
                if hi_tail is None:
                    hi_head = e
                else:
                    hi_tail.next = e
                hi_tail = e
                hc += 1
            e = nxt
        if lo_head is not None:
            if lc <= _UNTREEIFY:
                tab[index] = self._untreeify(lo_head)
            else:
                tab[index] = lo_head
                if hi_head is not None:  # else the tree is already whole
                    self._treeify(lo_head)
        if hi_head is not None:
            if hc <= _UNTREEIFY:
                tab[index + bit] = self._untreeify(hi_head)
            else:
                tab[index + bit] = hi_head
                if lo_head is not None:
                    self._treeify(hi_head)

    # --- removeNode ---

    def remove(self, key, *, movable: bool = True) -> bool:
        """``HashMap.remove(key)`` (``movable``), or an iterator's ``remove()`` (not ``movable``:
        a tree bucket is neither reordered nor turned back into a list)."""
        node = self._nodes.pop(key, None)
        if node is None:
            return False
        tab = self._tab
        index = node.hash & (len(tab) - 1)
        if node.tree:
            self._remove_tree_node(node, movable)
        elif tab[index] is node:
            tab[index] = node.next
        else:
            p = tab[index]
            while p.next is not node:
                p = p.next
            p.next = node.next
        self._size -= 1
        return True

    def _remove_tree_node(self, node: _Node, movable: bool) -> None:
        tab = self._tab
        index = node.hash & (len(tab) - 1)
        first = root = tab[index]
        succ, pred = node.next, node.prev
        if pred is None:
            tab[index] = first = succ
        else:
            pred.next = succ
        if succ is not None:
            succ.prev = pred
        if first is None:
            return
        if root.parent is not None:
            root = root.root()
        if root is None or (movable and (root.right is None or root.left is None or root.left.left is None)):
            tab[index] = self._untreeify(first)  # too small
            return
        p, pl, pr = node, node.left, node.right
        if pl is not None and pr is not None:
            s = pr
            while s.left is not None:  # the successor
                s = s.left
            s.red, p.red = p.red, s.red
            sr = s.right
            pp = p.parent
            if s is pr:
                p.parent = s
                s.right = p
            else:
                sp = s.parent
                p.parent = sp
                if sp is not None:
                    if s is sp.left:
                        sp.left = p
                    else:
                        sp.right = p
                s.right = pr
                if pr is not None:
                    pr.parent = s
            p.left = None
            p.right = sr
            if sr is not None:
                sr.parent = p
            s.left = pl
            if pl is not None:
                pl.parent = s
            s.parent = pp
            if pp is None:
                root = s
            elif p is pp.left:
                pp.left = s
            else:
                pp.right = s
            replacement = sr if sr is not None else p
        elif pl is not None:
            replacement = pl
        elif pr is not None:
            replacement = pr
        else:
            replacement = p
        if replacement is not p:
            pp = replacement.parent = p.parent
            if pp is None:
                root = replacement
                root.red = False
            elif p is pp.left:
                pp.left = replacement
            else:
                pp.right = replacement
            p.left = p.right = p.parent = None
        r = root if p.red else balance_deletion(root, replacement)
        if replacement is p:  # detach
            pp = p.parent
            p.parent = None
            if pp is not None:
                if p is pp.left:
                    pp.left = None
                elif p is pp.right:
                    pp.right = None
        if movable:
            self._move_root_to_front(r)


def hash_set_of(keys: Iterable[Hashable], hash_of, rank_of, table: int = 0) -> JavaHashMap:
    """A :class:`JavaHashMap` with ``keys`` put in order (for callers that go on to remove)."""
    m = JavaHashMap(hash_of, rank_of, table)
    for k in keys:
        m.put(k)
    return m
