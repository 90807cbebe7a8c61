"""``java.util.PriorityQueue`` as Kafka Streams 4.1 uses it, heap array and all.

Kafka's ``ConstrainedPrioritySet`` keeps clients in a ``PriorityQueue`` whose comparator reads the
clients' *current* load. When a client's load changes while it sits in the queue (a task movement
takes a task away from the destination client once the warm-up budget is spent, or gives one to a
client that was not polled), the heap array is no longer a heap for the new loads, and Java does
not notice: ``offer``, ``poll`` and ``remove`` sift with whatever the comparator says now. The next
poll can then return a client that is not the least loaded. To give Kafka's answer we keep the
same array and sift it with the same rules (``siftUp`` stops at a parent that is not greater,
``siftDown`` takes the right child only when the left one is greater and stops when the moving
element is not greater than the child), never assuming the heap is in order.

A poll that skips clients the constraint rejects puts them back from a ``HashSet``, so in that
set's walk (:mod:`.java_hash`); that order shapes the array too.

Replaying every sift is slow in Python for big groups, and needless while the array is in heap
order (then a poll yields the least loaded admitted client whatever the layout), so
:class:`ConstrainedPrioritySet` logs its operations instead and builds the array only when a sift
could meet a client whose load changed while queued.
"""

from __future__ import annotations

from typing import Callable, Hashable, Iterable, Sequence

from .java_hash import hash_order_of_spread, spread_hash


class JavaPriorityQueue:
    """``java.util.PriorityQueue`` with a comparator given as a key read at every comparison."""

    __slots__ = ("_heap", "_key")

    def __init__(self, key: Callable[[Hashable], tuple]):
        self._heap: list = []
        self._key = key

    def __len__(self) -> int:
        return len(self._heap)

    def offer(self, x) -> None:
        self._heap.append(x)
        self._sift_up(len(self._heap) - 1, x)

    def poll(self):
        heap = self._heap
        result = heap[0]
        last = heap.pop()
        if heap:
            self._sift_down(0, last)
        return result

    def remove(self, x) -> None:
        """``remove(Object)``: the first slot holding ``x``, refilled by ``removeAt``'s sifts."""
        heap = self._heap
        i = heap.index(x)
        moved = heap.pop()
        if i == len(heap):
            return  # x was the last slot
        self._sift_down(i, moved)
        if heap[i] == moved:
            self._sift_up(i, moved)

    def _sift_up(self, k: int, x) -> None:
        heap, key = self._heap, self._key
        kx = key(x)
        while k > 0:
            parent = (k - 1) >> 1
            e = heap[parent]
            if kx >= key(e):
                break
            heap[k] = e
            k = parent
        heap[k] = x

    def _sift_down(self, k: int, x) -> None:
        heap, key = self._heap, self._key
        n = len(heap)
        kx = key(x)
        half = n >> 1
        while k < half:
            child = 2 * k + 1
            c = heap[child]
            kc = key(c)
            right = child + 1
            if right < n:
                kr = key(heap[right])
                if kc > kr:
                    child, c, kc = right, heap[right], kr
            if kx <= kc:
                break
            heap[k] = c
            k = child
        heap[k] = x


# --- PriorityQueue<ProcessId> by (key, id): the array and Java's sift rules, keys given per call -------
#
# Clients are indices in ProcessId order, so comparing (keys[c], c) is Java's comparator
# Comparator.comparing(load).thenComparing(id). The comparison is written out inline: these loops
# run once per client a poll passes over.

def _sift_up(heap: list[int], keys: Sequence[float], k: int, x: int) -> None:
    lx = keys[x]
    while k > 0:
        parent = (k - 1) >> 1
        e = heap[parent]
        le = keys[e]
        if lx > le or (lx == le and x > e):  # compare(x, e) >= 0: stop
            break
        heap[k] = e
        k = parent
    heap[k] = x


def _sift_down(heap: list[int], keys: Sequence[float], k: int, x: int) -> None:
    n = len(heap)
    lx = keys[x]
    half = n >> 1
    while k < half:
        child = 2 * k + 1
        c = heap[child]
        lc = keys[c]
        right = child + 1
        if right < n:
            r = heap[right]
            lr = keys[r]
            if lc > lr or (lc == lr and c > r):  # compare(c, right) > 0: take the right child
                child, c, lc = right, r, lr
        if lx < lc or (lx == lc and x < c):  # compare(x, c) <= 0: stop
            break
        heap[k] = c
        k = child
    heap[k] = x


def _push(heap: list[int], keys: Sequence[float], x: int) -> None:
    heap.append(x)
    _sift_up(heap, keys, len(heap) - 1, x)


def _pop(heap: list[int], keys: Sequence[float]) -> int:
    result = heap[0]
    last = heap.pop()
    if heap:
        _sift_down(heap, keys, 0, last)
    return result


def _remove(heap: list[int], keys: Sequence[float], x: int) -> None:
    """``PriorityQueue.remove(Object)``: the slot holding ``x``, refilled by ``removeAt``'s sifts."""
    i = heap.index(x)
    moved = heap.pop()
    if i == len(heap):
        return
    _sift_down(heap, keys, i, moved)
    if heap[i] == moved:
        _sift_up(heap, keys, i, moved)


def _in_heap_order(heap: list[int], keys: Sequence[float]) -> bool:
    for i in range(1, len(heap)):
        c, p = heap[i], heap[(i - 1) >> 1]
        if keys[c] < keys[p] or (keys[c] == keys[p] and c < p):
            return False
    return True


class ConstrainedPrioritySet:
    """Kafka's ``ConstrainedPrioritySet`` of clients ``0..n-1`` by ``(load[c], c)``, polled subject
    to a constraint; a client is in the queue at most once.

    ``load`` is a list the caller keeps current: Java's comparator reads the loads at every
    comparison. Contract: the caller changes the load only of clients it then passes to
    :meth:`offer_all`, before any other call (Kafka's movement code does exactly that). Client
    indices are in ``ProcessId`` order, so the index breaks ties as ``ProcessId.compareTo`` does.
    ``hashes`` are the clients' ``ProcessId.hashCode`` values, for the ``HashSet`` that rejected
    clients go back from.

    Answers are Kafka's, heap array and all, but the array is not always kept up to date. While
    it is in heap order (for the current loads) a poll yields the least loaded admitted client,
    whatever the layout, and the clients it passes over come out in load order; so the queue then
    only *logs* what it does. The layout matters once a queued client's load has changed: an
    ``offer_all`` whose Java sifts could compare such a client differently than before its change
    replays the log onto the last known array, runs the offers on it, and stays on the array
    until it is in heap order again. A poll that admits nobody makes Java rebuild the heap from the
    walk of the polled clients alone, which starts a fresh log.
    """

    __slots__ = ("_load", "_known", "_members", "_hashes", "_spread",
                 "_heap", "_keys", "_canonical", "_log", "_in_order")

    def __init__(self, load: Sequence[float], hashes: Sequence[int], clients: Iterable[int] = ()):
        self._load = load
        #: The loads as of the latest call: what Java's comparator reads now.
        self._known = list(load)
        self._members: set[int] = set()
        self._hashes = hashes
        self._spread = [spread_hash(h) for h in hashes]
        #: The last array built exactly, with the loads of its time; or, when ``_canonical`` is set
        #: (members, loads), the array a full poll left: the walk of the members in load order.
        self._heap: list[int] | None = []
        self._keys: list[float] = []
        self._canonical: tuple[tuple[int, ...], list[float]] | None = None
        #: Since then: ("keys", client, load), ("poll", client yielded), ("offer", client).
        self._log: list[tuple] = []
        self._in_order = True
        for c in clients:
            self._members.add(c)
            _push(self._heap, self._known, c)
        self._keys = list(self._known)

    def __len__(self) -> int:
        return len(self._members)

    # --- offers ---

    def offer_all(self, clients: Iterable[int]) -> None:
        """``offerAll``: each client goes in, or out and back in if it is queued (its load may have
        changed)."""
        clients = list(clients)
        load, known, members = self._load, self._known, self._members
        changed = [c for c in clients if load[c] != known[c]]
        if self._in_order and self._sifts_may_differ(clients, [c for c in changed if c in members]):
            self._build_array()
            self._in_order = False
        for c in changed:
            known[c] = load[c]
        if self._in_order:
            log = self._log
            log.extend(("keys", c, known[c]) for c in changed)
            log.extend(("offer", c) for c in clients)
            members.update(clients)
            return
        heap = self._heap
        for c in clients:
            if c in members:
                _remove(heap, known, c)
            else:
                members.add(c)
            _push(heap, known, c)
        self._back_in_order_check()

    def offer(self, client: int) -> None:
        self.offer_all((client,))

    def _sifts_may_differ(self, clients: list[int], stale: list[int]) -> bool:
        """Whether Java's sifts during ``offer_all(clients)`` could compare a queued client whose load
        changed (``stale``) differently than before the change, which could leave the heap out of
        order. A push compares the pushed client with its ancestors: the outcome against a stale
        client differs only if the pushed key lies between the stale client's old and new key. A
        removal compares clients the layout decides: a stale client still queued makes it unsafe."""
        if not stale:
            return False
        known, load = self._known, self._load
        pending = {m: (min((known[m], m), (load[m], m)), max((known[m], m), (load[m], m))) for m in stale}
        members = set(self._members)
        for c in clients:
            if c in members:
                pending.pop(c, None)
                if pending:
                    return True  # removeAt's sifts may meet a stale client
            members.add(c)
            x = (load[c], c)
            for low, high in pending.values():
                if low <= x < high:
                    return True
        return False

    # --- polls ---

    def poll(self, constraint: Callable[[int], bool], candidates: Iterable[int] | None = None) -> int | None:
        """The first client the queue yields that satisfies ``constraint``, or None.

        ``candidates``, if given, holds every client the constraint can admit: with the heap in
        order the answer is the least loaded of them, found without touching the array.
        """
        members = self._members
        if self._in_order and candidates is not None:
            known = self._known
            best, best_key = None, None
            for c in candidates:
                if c in members and constraint(c):
                    key = (known[c], c)
                    if best is None or key < best_key:
                        best, best_key = c, key
            if best is None:
                # Java polls every client and offers them all again: the array is the walk of the
                # members in load order, pushed into an empty heap, whatever it was before.
                self._heap, self._log = None, []
                self._canonical = (tuple(members), list(known))
                return None
            members.discard(best)
            self._log.append(("poll", best))
            return best
        if self._in_order:
            self._build_array()
            self._in_order = False
        heap, known = self._heap, self._known
        rejected: list[int] = []
        found = None
        while heap:
            client = _pop(heap, known)
            members.discard(client)
            if constraint(client):
                found = client
                break
            rejected.append(client)
        if rejected:
            members.update(rejected)
            for c in self._walk(rejected):
                _push(heap, known, c)
        self._back_in_order_check()
        return found

    # --- the array ---

    def _back_in_order_check(self) -> None:
        if _in_heap_order(self._heap, self._known):
            self._in_order = True
            self._keys = list(self._known)
            self._log = []

    def _build_array(self) -> None:
        """Replay the log onto the last array built (or the one a full poll left)."""
        if self._canonical is not None:
            members, keys = self._canonical
            self._canonical = None
            keys = list(keys)
            heap: list[int] = []
            for c in self._walk(sorted(members, key=lambda c: (keys[c], c))):
                _push(heap, keys, c)
        else:
            heap, keys = self._heap, self._keys
        for op in self._log:
            kind, c = op[0], op[1]
            if kind == "keys":
                keys[c] = op[2]
            elif kind == "poll":
                rejected = []
                while True:
                    x = _pop(heap, keys)
                    if x == c:
                        break
                    rejected.append(x)
                for x in self._walk(rejected):
                    _push(heap, keys, x)
            else:  # offer
                if c in heap:
                    _remove(heap, keys, c)
                _push(heap, keys, c)
        self._heap, self._log = heap, []
        self._keys = keys

    def _walk(self, clients: list[int]) -> list[int]:
        """The walk of a ``HashSet<ProcessId>`` filled with ``clients`` in this order."""
        if len(clients) <= 1:
            return clients
        spread = self._spread
        return hash_order_of_spread(clients, [spread[c] for c in clients], self._hashes.__getitem__, int)

    def heap_array(self) -> list[int]:
        """Java's array as it is now (for tests)."""
        if self._in_order:
            self._build_array()
            self._in_order = _in_heap_order(self._heap, self._known)
            if self._in_order:
                self._keys = list(self._known)
        return list(self._heap)


def java_priority_queue_order(items: list, key: Callable) -> list:
    """The order in which a ``PriorityQueue`` polls ``items`` offered in list order, for keys that
    do not change while queued. Elements with equal keys come out in the order Java's sifts leave
    them, which neither insertion order nor ``heapq`` reproduces."""
    slots = list(range(len(items)))
    queue = JavaPriorityQueue(lambda i: key(items[i]))
    for i in slots:
        queue.offer(i)
    return [items[queue.poll()] for _ in slots]
