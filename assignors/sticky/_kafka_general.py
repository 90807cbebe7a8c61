"""A port of Kafka's ``GeneralAssignmentBuilder`` (spec 3.4), used as the yardstick for ``_general``.

The general path promises an answer at least as balanced as Kafka's that moves no more previously
owned partitions. Our own builder reaches the best balance score, but a better balance can cost
moves Kafka does not make (Kafka stops at a local optimum), so ``_general`` runs this port as a
second candidate and compares. The port follows Kafka step by step, so that its balance score and
move count are Kafka's:

1. owned partitions as resolved by ``_ownership`` (the generation contest of ``allSubscriptionsEqual``)
   stay with their owner unless it no longer subscribes to the topic or its rack does not host the
   partition (both set ``revocationRequired``);
2. ``prevAssignment``: for members of an older generation, each claimed partition -> the claimant
   of the highest such generation (first in subscription-map order on ties);
3. unowned partitions, topics by (potential consumers, name), go one by one to the least-loaded
   subscriber (ties by member id), rack-matching subscribers first when rack-aware;
4. topics with one subscriber and members that hold all they could and nothing shared are fixed;
5. ``performReassignments`` over the newly placed partitions (unless a revocation is required
   anyway), then over all partitions: passes in sorted-partition order while unbalanced; a
   partition goes back to its previous owner when its owner is two above it, else to the
   least-loaded subscriber when its owner is two above that; ``PartitionMovements`` replaces the
   partition by one of the same topic that earlier moved the opposite way (Java ``HashSet`` order);
6. the result is reverted to the post-placement state when its balance score (over the members
   that took part) is not lower, as in Kafka.

Speed (Kafka's version is super-quadratic): ``isBalanced`` (KAFKA-15106 form) is equivalent to "no
topic has an owner two or more above its least-loaded subscriber", kept as a counter over per-topic
size histograms updated on each move; the scan for the next movable partition is vectorised over
blocks of the partition order; the initial placement is a water-filling per topic, not a
``TreeSet`` walk per partition.

Project fixes (spec section 8), deliberately not Kafka's behaviour: a stale claim only enters
``prevAssignment`` when the claimant still subscribes to the topic (so it can never be handed a
partition of another topic, nor be a fixed member), and claims beyond a topic's partition count are
already dropped by ``collect_claims``.
"""

from __future__ import annotations

import heapq
from typing import Sequence

import numpy as np

from .._common import subscription_classes
from ..java_order import string_hash
from ..model import MemberSpec
from ._dealing import deal_order, level_fill
from ._layout import Claims, Layout, member_id_ranks
from ._racks import RackInfo

_MASK32 = 0xFFFFFFFF


def balance_score(sizes: np.ndarray) -> int:
    """Kafka's ``getBalanceScore``: sum over member pairs of |size_i - size_j|, in O(n log n)."""
    s = np.sort(np.asarray(sizes, dtype=np.int64))
    k = len(s)
    if k < 2:
        return 0
    weights = 2 * np.arange(k, dtype=np.int64) - (k - 1)
    return int((s * weights).sum())


def claim_moves(claims: Claims, owner: np.ndarray) -> int:
    """Claims (member, partition) whose member does not end up with the partition.

    Every reported claim counts, including ones that lost the generation contest: that is how the
    differential test (and a user watching revocations) counts moves.
    """
    if len(claims.g) == 0:
        return 0
    return int((owner[claims.g] != claims.member).sum())


class _JavaTopicPartitionSet:
    """A ``HashSet<TopicPartition>`` of one topic, for the order its iterator yields elements.

    Java iterates buckets in index order and, inside a bucket, in insertion order; the table starts
    at 16 slots and doubles past 3/4 load, never shrinking while the set lives.
    """

    __slots__ = ("seq", "cap", "topic_hash")

    def __init__(self, topic_hash: int):
        self.seq: dict[int, tuple[int, int]] = {}  # partition -> (spread hash, insertion number)
        self.cap = 16
        self.topic_hash = topic_hash

    def add(self, g: int, partition: int, stamp: int) -> None:
        h = (31 * (31 + partition) + self.topic_hash) & _MASK32
        self.seq[g] = (h ^ (h >> 16), stamp)
        while len(self.seq) > 0.75 * self.cap:
            self.cap *= 2

    def first(self) -> int:
        mask = self.cap - 1
        return min(self.seq, key=lambda g: (self.seq[g][0] & mask, self.seq[g][1]))


def kafka_general(
    members: Sequence[MemberSpec],
    layout: Layout,
    claims: Claims,
    racks: RackInfo,
    visit: np.ndarray,
) -> np.ndarray:
    """Kafka's general-path answer as an owner (spec position) per global partition index."""
    return _KafkaGeneral(members, layout, claims, racks, visit).build()


class _KafkaGeneral:
    def __init__(self, members, layout: Layout, claims: Claims, racks: RackInfo, visit: np.ndarray):
        self.members = members
        self.layout = layout
        self.claims = claims
        self.racks = racks
        self.visit = visit
        n = len(members)
        self.n = n
        self.rank = member_id_ranks(members)
        n_topics = len(layout.topics)
        self.n_topics = n_topics
        index = layout.topic_index
        classes, member_class = subscription_classes(members)
        per_class = [sorted({index[t] for t in topics if t in index}) for topics in classes]
        self.member_topics: list[list[int]] = [per_class[c] for c in member_class]
        subscribed = np.zeros((len(classes), n_topics), dtype=bool)
        for c, ts in enumerate(per_class):
            subscribed[c, ts] = True
        self.class_of = np.array(member_class, dtype=np.int64)
        self.class_subscribed = subscribed
        subs_per_topic = subscribed[self.class_of].sum(axis=0) if n else np.zeros(n_topics, dtype=np.int64)
        self.subs_count = subs_per_topic.astype(np.int64)
        # members per topic, ascending spec position (order is irrelevant to Kafka's decisions here)
        self.subs: list[np.ndarray] = [
            np.flatnonzero(subscribed[self.class_of, t]) for t in range(n_topics)
        ]
        # TopicComparator: fewest potential consumers first, then name (topics are name-sorted).
        self.topic_order = np.lexsort((np.arange(n_topics), self.subs_count)).astype(np.int64)
        self.topic_of_g = np.repeat(np.arange(n_topics, dtype=np.int64), layout.counts)

    # ---------------------------------------------------------------------------------------------
    def build(self) -> np.ndarray:
        layout, claims = self.layout, self.claims
        n, total = self.n, layout.total
        owner = np.full(total, -1, dtype=np.int64)

        # assignOwnedPartitions
        held = np.flatnonzero(claims.held)
        hm, hg = claims.member[held], claims.g[held]
        ok = self.class_subscribed[self.class_of[hm], self.topic_of_g[hg]] if len(held) else np.zeros(0, bool)
        if self.racks.active and len(held):
            for i in np.flatnonzero(ok).tolist():
                if self.racks.mismatch(int(hm[i]), int(hg[i])):
                    ok[i] = False
        revocation_required = bool(len(held)) and not bool(ok.all())
        owner[hg[ok]] = hm[ok]
        size = np.bincount(hm[ok], minlength=n).astype(np.int64)
        initializing = n == 0 or int(size.max()) == 0

        # sortedAllPartitions and the unassigned ones, in that order
        offsets = layout.offsets
        sorted_all = np.concatenate(
            [np.arange(offsets[t], offsets[t + 1], dtype=np.int64) for t in self.topic_order.tolist()]
        ) if total else np.zeros(0, dtype=np.int64)
        unassigned = sorted_all[owner[sorted_all] < 0]

        self._place(owner, size, unassigned)

        # narrow the scope
        multi = self.subs_count >= 2
        movable = multi[self.topic_of_g]
        sorted_all = sorted_all[movable[sorted_all]]
        unassigned = unassigned[movable[unassigned]]
        capacity = np.array(
            [int(layout.counts[ts].sum()) for ts in self.member_topics], dtype=np.int64
        ) if n else np.zeros(0, dtype=np.int64)
        holds_shared = np.zeros(n, dtype=bool)
        assigned = owner >= 0
        holds_shared[owner[assigned & movable]] = True
        self.participating = (size < capacity) | holds_shared

        pre_owner = owner.copy()
        pre_size = size.copy()
        self._init_state(owner, size)
        if not revocation_required:
            self._perform(unassigned)
        performed = self._perform(sorted_all)
        part = self.participating
        if (
            not initializing
            and performed
            and balance_score(self.size[part]) >= balance_score(pre_size[part])
        ):
            return pre_owner
        return self.owner

    # ---------------------------------------------------------------------------------------------
    def _place(self, owner: np.ndarray, size: np.ndarray, unassigned: np.ndarray) -> None:
        """``maybeAssign``: each partition to the least-loaded subscriber (size, then member id)."""
        if len(unassigned) == 0:
            return
        topic = self.topic_of_g[unassigned]
        bounds = np.flatnonzero(np.diff(topic)) + 1
        runs = np.split(unassigned, bounds)
        if self.racks.active:
            runs = [self._place_rack_aligned(owner, size, run) for run in runs]
        for run in runs:
            if len(run) == 0:
                continue
            t = int(self.topic_of_g[run[0]])
            ms = self.subs[t]
            add = level_fill(size[ms], self.rank[ms], len(run))
            want = add > 0
            receivers = deal_order(size[ms][want], self.rank[ms][want], ms[want], add[want])
            owner[run] = receivers
            size[ms] += add

    def _place_rack_aligned(self, owner: np.ndarray, size: np.ndarray, run: np.ndarray) -> np.ndarray:
        """Kafka's first pass when rack-aware: only members whose rack hosts a replica (or that have
        no rack) may take a partition. Returns the partitions left for the ordinary pass."""
        racks = self.racks
        t = int(self.topic_of_g[run[0]])
        heaps: dict = {}
        rank = self.rank
        for m in self.subs[t].tolist():
            heaps.setdefault(racks.member_rack[m], []).append((int(size[m]), int(rank[m]), m))
        for h in heaps.values():
            heapq.heapify(h)
        left = []
        for g in run.tolist():
            best = None  # the heap holding the least-loaded eligible member (key None = no rack)
            for key in (None, *racks.partition_racks[g]):
                h = heaps.get(key)
                if h and (best is None or h[0] < best[0]):
                    best = h
            if best is None:
                left.append(g)
                continue
            s, r, m = best[0]
            heapq.heapreplace(best, (s + 1, r, m))
            owner[g] = m
            size[m] += 1
        return np.array(left, dtype=np.int64)

    # ---------------------------------------------------------------------------------------------
    def _init_state(self, owner: np.ndarray, size: np.ndarray) -> None:
        n_topics = self.n_topics
        self.owner = owner
        self.size = size
        self.multi = self.subs_count >= 2
        # prevAssignment (older generations), restricted to claimants still subscribing to the topic
        self.prev = self._prev_assignment()
        # partitions per (member, topic), only for topics that can move
        key = owner * n_topics + self.topic_of_g
        keys, counts = np.unique(key[self.multi[self.topic_of_g]], return_counts=True)
        self.cnt: dict[int, int] = dict(zip(keys.tolist(), counts.tolist()))
        self.shared_topics = [[t for t in ts if self.multi[t]] for ts in self.member_topics]
        sizes = size.tolist()
        self.sub_hist: list[dict[int, int]] = [dict() for _ in range(n_topics)]
        self.own_hist: list[dict[int, int]] = [dict() for _ in range(n_topics)]
        for t in np.flatnonzero(self.multi).tolist():
            h = self.sub_hist[t]
            for m in self.subs[t].tolist():
                h[sizes[m]] = h.get(sizes[m], 0) + 1
        for k in self.cnt:
            m, t = divmod(k, n_topics)
            h = self.own_hist[t]
            h[sizes[m]] = h.get(sizes[m], 0) + 1
        # Python lists drive the per-move bookkeeping (NumPy scalar access is slow); the NumPy
        # copies of sizes and least subscriber loads serve the vectorised scan and are kept in step.
        self.sz = sizes
        self.lo_sub = [0] * n_topics
        self.hi_own = [0] * n_topics
        self.bad = [False] * n_topics
        for t in np.flatnonzero(self.multi).tolist():
            self.lo_sub[t] = min(self.sub_hist[t])
            self.hi_own[t] = max(self.own_hist[t]) if self.own_hist[t] else 0
            self.bad[t] = self.hi_own[t] - self.lo_sub[t] >= 2
        self.min_sub = np.array(self.lo_sub, dtype=np.int64)
        self.unbalanced = sum(self.bad)
        # PartitionMovements
        self.src = np.full(self.layout.total, -1, dtype=np.int64)
        self.dst = np.full(self.layout.total, -1, dtype=np.int64)
        self.by_topic: dict[int, dict[tuple[int, int], _JavaTopicPartitionSet]] = {}
        self.stamp = 0
        self.topic_hash = [string_hash(name) for name in self.layout.topics]

    def _prev_assignment(self) -> np.ndarray:
        claims, members = self.claims, self.members
        prev = np.full(self.layout.total, -1, dtype=np.int64)
        if len(claims.g) == 0:
            return prev
        gen = np.fromiter((m.generation for m in members), dtype=np.int64, count=self.n)
        max_gen = int(gen.max())
        cm, cg = claims.member, claims.g
        older = gen[cm] < max_gen
        older &= self.class_subscribed[self.class_of[cm], self.topic_of_g[cg]]
        idx = np.flatnonzero(older)
        if len(idx) == 0:
            return prev
        visit_rank = np.empty(self.n, dtype=np.int64)
        visit_rank[self.visit] = np.arange(len(self.visit), dtype=np.int64)
        # per partition: highest generation wins, the first one seen (visit order, claim order) on ties
        order = idx[np.lexsort((idx, visit_rank[cm[idx]], -gen[cm[idx]], cg[idx]))]
        g_sorted = cg[order]
        first = np.concatenate(([True], g_sorted[1:] != g_sorted[:-1]))
        prev[g_sorted[first]] = cm[order[first]]
        return prev

    # ---------------------------------------------------------------------------------------------
    def _perform(self, partitions: np.ndarray) -> bool:
        """``performReassignments``: passes over ``partitions`` until one changes nothing."""
        performed = False
        if len(partitions) == 0:
            return False
        owner, size, prev, min_sub = self.owner, self.size, self.prev, self.min_sub
        topic_blk_all = self.topic_of_g[partitions]
        prev_all = prev[partitions]
        has_prev = prev_all >= 0
        prev_safe = np.where(has_prev, prev_all, 0)
        total = len(partitions)
        while True:
            modified = False
            i = 0
            block = 64
            while i < total and self.unbalanced:
                j = min(total, i + block)
                own = size[owner[partitions[i:j]]]
                hit = (own > min_sub[topic_blk_all[i:j]] + 1) | (
                    has_prev[i:j] & (own > size[prev_safe[i:j]] + 1)
                )
                where = np.flatnonzero(hit)
                if len(where) == 0:
                    i = j
                    block = min(block * 4, 1 << 16)
                    continue
                k = i + int(where[0])
                g = int(partitions[k])
                o = int(owner[g])
                p = int(prev_all[k])
                if p >= 0 and self.sz[o] > self.sz[p] + 1:
                    self._reassign(g, p)
                else:
                    self._reassign(g, self._least_loaded(int(topic_blk_all[k])))
                performed = modified = True
                i = k + 1
                block = 64
            if not modified:
                return performed

    def _least_loaded(self, t: int) -> int:
        ms = self.subs[t]
        s = self.size[ms]
        lowest = np.flatnonzero(s == s.min())
        return int(ms[lowest[np.argmin(self.rank[ms[lowest]])]])

    def _reassign(self, g: int, new: int) -> None:
        """``reassignPartition`` + ``getTheActualPartitionToBeMoved`` + ``processPartitionMovement``."""
        t = int(self.topic_of_g[g])
        moved = g
        pairs = self.by_topic.get(t)
        if pairs:
            old = int(self.owner[g])
            if self.src[g] >= 0:
                old = int(self.src[g])
            reverse = pairs.get((new, old))
            if reverse:
                moved = reverse.first()
        old = int(self.owner[moved])
        self._record(moved, t, old, new)
        self._move(moved, t, old, new)

    def _record(self, g: int, t: int, old: int, new: int) -> None:
        src = int(self.src[g])
        if src >= 0:
            self._unrecord(g, t, src, old)
            if src != new:
                self._add_record(g, t, src, new)
        else:
            self._add_record(g, t, old, new)

    def _unrecord(self, g: int, t: int, src: int, dst: int) -> None:
        pairs = self.by_topic[t]
        s = pairs[(src, dst)]
        del s.seq[g]
        if not s.seq:
            del pairs[(src, dst)]
            if not pairs:
                del self.by_topic[t]
        self.src[g] = -1
        self.dst[g] = -1

    def _add_record(self, g: int, t: int, src: int, dst: int) -> None:
        pairs = self.by_topic.setdefault(t, {})
        s = pairs.get((src, dst))
        if s is None:
            s = pairs[(src, dst)] = _JavaTopicPartitionSet(self.topic_hash[t])
        self.stamp += 1
        s.add(g, g - int(self.layout.offsets[t]), self.stamp)
        self.src[g] = src
        self.dst[g] = dst

    def _move(self, g: int, t: int, old: int, new: int) -> None:
        """Move partition ``g`` (topic ``t``) and keep each shared topic's least subscriber load,
        greatest owner load and "unbalanced" flag exact. Loads change by one, so each update is a
        couple of dictionary operations per topic of the two members."""
        n_topics = self.n_topics
        sz, cnt, lo_sub, hi_own, bad = self.sz, self.cnt, self.lo_sub, self.hi_own, self.bad
        sub_hist, own_hist, min_sub = self.sub_hist, self.own_hist, self.min_sub
        self.owner[g] = new
        k_old, k_new = old * n_topics + t, new * n_topics + t
        c = cnt[k_old] - 1
        if c:
            cnt[k_old] = c
        else:
            del cnt[k_old]
        joins = k_new not in cnt
        cnt[k_new] = cnt.get(k_new, 0) + 1
        changed = []

        # the giver: s -> s - 1
        s = sz[old]
        d = s - 1
        sz[old] = d
        self.size[old] = d
        base = old * n_topics
        for u in self.shared_topics[old]:
            h = sub_hist[u]
            _dec(h, s)
            h[d] = h.get(d, 0) + 1
            if d < lo_sub[u]:
                lo_sub[u] = d
                min_sub[u] = d
            h = own_hist[u]
            if base + u in cnt:
                _dec(h, s)
                h[d] = h.get(d, 0) + 1
                if hi_own[u] == s and s not in h:
                    hi_own[u] = d
            elif u == t:  # gave away its last partition of t
                _dec(h, s)
                if hi_own[u] == s and s not in h:
                    hi_own[u] = max(h) if h else 0  # the receiver, next, becomes an owner
            changed.append(u)

        # the receiver: s -> s + 1
        s = sz[new]
        d = s + 1
        sz[new] = d
        self.size[new] = d
        base = new * n_topics
        for u in self.shared_topics[new]:
            h = sub_hist[u]
            _dec(h, s)
            h[d] = h.get(d, 0) + 1
            if lo_sub[u] == s and s not in h:
                lo_sub[u] = d
                min_sub[u] = d
            if base + u in cnt:
                h = own_hist[u]
                if not (joins and u == t):
                    _dec(h, s)
                h[d] = h.get(d, 0) + 1
                if d > hi_own[u]:
                    hi_own[u] = d
            changed.append(u)

        for u in changed:
            now = hi_own[u] - lo_sub[u] >= 2
            if now != bad[u]:
                bad[u] = now
                self.unbalanced += 1 if now else -1


def _dec(h: dict[int, int], s: int) -> None:
    c = h[s] - 1
    if c:
        h[s] = c
    else:
        del h[s]
