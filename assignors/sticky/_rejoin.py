"""Kafka's constrained sticky builder (spec 3.2) for the usual rejoin, answered on Python lists.

The usual rebalance of a group whose members all subscribe to the same topics: members come back
owning what they had, nobody claims another's partition, racks play no part (the benchmark's
INCREMENTAL rounds are this). Then the ownership walk, the outsider, rack and double-claim filters
of :mod:`._constrained` have nothing to do, and what is left is:

1. each member's owned partitions sorted by (partition, topic), members in Java ``HashMap`` order;
2. the quota walk over the members (kept partitions, the under-min and exactly-min queues);
3. the round-robin deal of the few partitions nobody kept.

The array builder does these with about sixty NumPy calls and builds the answer lists with one
more sort; each NumPy call costs a microsecond or more whatever its size, which on groups of a
few hundred members is most of the time. Here step 1 is one sort of packed keys, step 2 cuts each
member's list straight out of the sorted partitions during the walk, and step 3 runs on lists:
about ten NumPy calls in all. Same answer as :func:`._constrained.build_constrained` followed by
the facade's answer building, list order and ``transferring`` included (tests compare them).
"""

from __future__ import annotations

from itertools import accumulate
from typing import Sequence

import numpy as np

from ..model import GroupAssignment, MemberSpec, TopicPartition
from ._constrained import visit_partition_topic_order
from ._layout import Claims, Layout, partition_objects
from ._round_robin import round_robin_receiver_list


def is_plain_rejoin(claims: Claims) -> bool:
    """Every claim names an assignable partition nobody else claims (after ownership resolution):
    the claims are the owners, as they are."""
    return len(claims.g) > 0 and bool(claims.held.all())


def assign_rejoin(
    members: Sequence[MemberSpec],
    visit: np.ndarray,
    layout: Layout,
    claims: Claims,
    cooperative: bool,
    group_id: str,
) -> GroupAssignment:
    """The constrained builder's answer when every member subscribes to the same non-empty topic
    set, racks play no part and :func:`is_plain_rejoin` holds. ``visit``: every member's position
    in Java ``HashMap`` order."""
    n = len(members)
    total = layout.total
    min_q = total // n
    max_q = -(-total // n)
    expected = total % n

    sorted_g = _owned_in_kafka_order(claims, layout)
    objects = partition_objects(layout)  # global index -> TopicPartition
    # Indexing the object array beats mapping a list over the indices (about 3x on 50,000).
    sorted_objects = objects[sorted_g].tolist()
    owned = np.bincount(claims.member, minlength=n).tolist()
    starts = [0, *accumulate(owned)]  # each member's run in sorted_g (members in spec order)

    # Every member is visited below and gets its list there.
    lists: list[list[TopicPartition]] = [None] * n  # type: ignore[list-item]
    revoked_from: dict[int, int] = {}  # maybeRevokedPartitions: trimmed partition -> its owner
    under: list[int] = []
    exactly: list[int] = []
    kept = [0] * n
    over = 0
    for m in visit.tolist():
        c = owned[m]
        if c < min_q:
            k = c
            under.append(m)
        elif c >= max_q and over < expected:
            over += 1
            if over == expected:
                exactly.clear()
            k = max_q
        else:
            k = min_q
            if over < expected:
                exactly.append(m)
        kept[m] = k
        start = starts[m]
        lists[m] = sorted_objects[start:start + k]
        if k < c:
            for g in sorted_g[start + k:start + c].tolist():
                revoked_from[g] = m

    free = np.ones(total, dtype=bool)
    free[claims.g] = False
    if revoked_from:
        free[list(revoked_from)] = True
    unassigned_g = np.flatnonzero(free)  # ascending: Kafka's (topic, partition) order
    unassigned = unassigned_g.tolist()

    ids = [m.member_id for m in members]
    under.sort(key=ids.__getitem__)
    exactly.sort(key=ids.__getitem__)
    receivers = round_robin_receiver_list(len(unassigned), under, [min_q - kept[m] for m in under],
                                       exactly, group_id, ids)
    transferring: dict[TopicPartition, str] = {}
    for g, tp, m in zip(unassigned, objects[unassigned_g].tolist(), receivers):
        previous = revoked_from.get(g)
        if cooperative and previous is not None and previous != m:
            # Its owner must revoke it first; the follow-up round gives it to m.
            transferring[tp] = ids[m]
        else:
            lists[m].append(tp)
    return GroupAssignment(assignment=dict(zip(ids, lists)), transferring=transferring)


def _owned_in_kafka_order(claims: Claims, layout: Layout) -> np.ndarray:
    """The claimed global indices, each member's sorted by (partition, topic), members in spec order.

    For one partition number the global index grows with the topic (topics are numbered by name),
    so (member, partition, global index) packed into one int64 sorts right, and sorting the keys
    themselves (``np.sort``, then decoding) costs less than ``argsort``.
    """
    total = layout.total
    g = claims.g
    partition = g - layout.offsets[layout.topic_of(g)]
    span = (int(layout.counts.max()) + 1) * total  # > every (partition * total + g)
    if (int(claims.member[-1]) + 1) * span >= 2**62:  # would not fit in int64
        return g[visit_partition_topic_order(claims.member, g, layout)]
    return np.sort(claims.member * span + partition * total + g) % total
