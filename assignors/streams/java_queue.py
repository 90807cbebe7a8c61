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
"""

from __future__ import annotations

from typing import Callable, Hashable, Iterable

from .java_hash import hash_order


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


class ConstrainedPrioritySet:
    """Kafka's ``ConstrainedPrioritySet``: clients by (load, id) in a :class:`JavaPriorityQueue`,
    polled subject to a constraint; a client is in the queue at most once.

    ``key(client)`` is ``(load, rank)`` with the rank in ``ProcessId`` order; ``hash_of(client)`` is
    its ``ProcessId.hashCode`` (for the ``HashSet`` that rejected clients go back from).
    """

    __slots__ = ("_queue", "_members", "_hash_of")

    def __init__(self, key: Callable[[int], tuple], hash_of: Callable[[int], int]):
        self._queue = JavaPriorityQueue(key)
        self._members: set[int] = set()
        self._hash_of = hash_of

    def offer(self, client: int) -> None:
        if client in self._members:
            self._queue.remove(client)  # its load may have changed: out and back in
        else:
            self._members.add(client)
        self._queue.offer(client)

    def offer_all(self, clients: Iterable[int]) -> None:
        for c in clients:
            self.offer(c)

    def poll(self, constraint: Callable[[int], bool]) -> int | None:
        """The first client the queue yields that satisfies ``constraint``, or None."""
        rejected: list[int] = []
        queue, members = self._queue, self._members
        found = None
        while len(queue):
            client = queue.poll()
            members.discard(client)
            if constraint(client):
                found = client
                break
            rejected.append(client)
        if len(rejected) > 1:
            rejected = hash_order(rejected, self._hash_of, int)
        self.offer_all(rejected)
        return found


def java_priority_queue_order(items: list, key: Callable) -> list:
    """The order in which a ``PriorityQueue`` polls ``items`` offered in list order, for keys that
    do not change while queued. Elements with equal keys come out in the order Java's sifts leave
    them, which neither insertion order nor ``heapq`` reproduces."""
    slots = list(range(len(items)))
    queue = JavaPriorityQueue(lambda i: key(items[i]))
    for i in slots:
        queue.offer(i)
    return [items[queue.poll()] for _ in slots]
