"""Kafka's constrained sticky builder (spec 3.2) for the usual rejoin, in a few NumPy steps.

The usual rebalance of a group whose members all subscribe to the same topics: members come back
owning what they had, nobody claims another's partition, racks play no part (the benchmark's
INCREMENTAL rounds are this). Then the ownership walk, the outsider, rack and double-claim filters
of :mod:`._constrained` have nothing to do, and what is left is:

1. each member's owned partitions sorted by (partition, topic);
2. the quota walk over the members in Java ``HashMap`` order (kept partitions, the under-min and
   exactly-min queues), which has a closed form: only who keeps ``maxQuota`` depends on the
   visit order, and only when more members could keep it than there are places, so the member
   ids are hashed only then;
3. the round-robin deal of the few partitions nobody kept.

The array builder does these with about sixty NumPy calls and builds the answer lists with one
more sort; each NumPy call costs a microsecond or more whatever its size, which on groups of a
few hundred members is most of the time. Here step 1 is one sort of packed keys, step 2 a few
whole-array operations, each member's list is cut straight out of the sorted partitions, and step
3 runs on lists. Same answer as :func:`._constrained.build_constrained` followed by the facade's
answer building, list order and ``transferring`` included (tests compare them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..model import GroupAssignment, MemberSpec, TopicPartition
from ._constrained import visit_partition_topic_order
from ._draft import Draft
from ._layout import Claims, Layout, hashmap_visit_order, partition_objects
from ._round_robin import round_robin_receiver_list


def is_plain_rejoin(claims: Claims) -> bool:
    """Some member owns something and no partition is claimed twice: ownership resolution has
    nothing to decide, the claims are the owners as they are."""
    return len(claims.g) > 0 and int(np.bincount(claims.g).max()) == 1


@dataclass(slots=True)
class _Rejoin:
    """The quota walk's outcome: each member keeps the first ``ends - starts`` partitions of its run
    of ``sorted_g`` (its owned partitions in Kafka's order), and ``unassigned_g[k]`` is dealt to
    member ``receivers[k]``; ``trimmed``: the places of ``sorted_g`` beyond their owner's quota."""

    sorted_g: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    trimmed: np.ndarray
    unassigned_g: np.ndarray
    receivers: list[int]


def assign_rejoin(
    members: Sequence[MemberSpec],
    ids: list[str],
    layout: Layout,
    claims: Claims,
    cooperative: bool,
    group_id: str,
) -> GroupAssignment:
    """The constrained builder's answer when every member subscribes to the same non-empty topic
    set, racks play no part and :func:`is_plain_rejoin` holds. ``ids``: the members' ids in spec
    order."""
    plan = _walk_quotas(members, ids, layout, claims, group_id)
    sorted_g = plan.sorted_g
    objects = partition_objects(layout)  # global index -> TopicPartition
    # Indexing the object array beats mapping a list over the indices (about 3x on 50,000).
    sorted_objects = objects[sorted_g].tolist()
    lists = [sorted_objects[start:end] for start, end in zip(plan.starts.tolist(), plan.ends.tolist())]
    transferring: dict[TopicPartition, str] = {}
    fresh = objects[plan.unassigned_g].tolist()
    if cooperative and len(plan.trimmed):
        revoked_from = dict(zip(sorted_g[plan.trimmed].tolist(), claims.member[plan.trimmed].tolist()))
        for g, tp, m in zip(plan.unassigned_g.tolist(), fresh, plan.receivers):
            previous = revoked_from.get(g)
            if previous is not None and previous != m:
                # Its owner must revoke it first; the follow-up round gives it to m.
                transferring[tp] = ids[m]
            else:
                lists[m].append(tp)
    else:
        for tp, m in zip(fresh, plan.receivers):
            lists[m].append(tp)
    return GroupAssignment(assignment=dict(zip(ids, lists)), transferring=transferring)


def rejoin_draft(members: Sequence[MemberSpec], ids: list[str], layout: Layout, claims: Claims,
                 group_id: str) -> Draft:
    """:func:`assign_rejoin`'s answer as a :class:`Draft` (for answers built as columns): the same
    lists, as the facade builds them from a draft. A trimmed partition dealt to another member is
    listed in ``transfer_g``, for the cooperative assignor to withhold."""
    plan = _walk_quotas(members, ids, layout, claims, group_id)
    kept = np.arange(len(plan.sorted_g)) < plan.ends[claims.member]
    receivers = np.array(plan.receivers, dtype=np.int64)
    revoked_from = np.full(layout.total, -1, dtype=np.int64)
    revoked_from[plan.sorted_g[plan.trimmed]] = claims.member[plan.trimmed]
    previous = revoked_from[plan.unassigned_g]
    moving = (previous >= 0) & (previous != receivers)
    return Draft(kept_m=claims.member[kept], kept_g=plan.sorted_g[kept], fresh_m=receivers,
                 fresh_g=plan.unassigned_g, transfer_g=plan.unassigned_g[moving], transfer_to=receivers[moving])


def _walk_quotas(members: Sequence[MemberSpec], ids: list[str], layout: Layout, claims: Claims,
                 group_id: str) -> _Rejoin:
    n = len(members)
    total = layout.total
    min_q, expected = divmod(total, n)
    max_q = min_q + (expected > 0)

    sorted_g = _owned_in_kafka_order(claims, layout)
    owned = np.bincount(claims.member, minlength=n)
    starts = owned.cumsum() - owned  # each member's run in sorted_g (members in spec order)

    # The quota walk in closed form. Kafka visits members in Java HashMap order: one under
    # minQuota keeps all it owns and waits in the under-min queue; of those owning maxQuota or
    # more, the first `expected` visited keep maxQuota; every other member keeps minQuota. Members
    # at minQuota wait in the exactly-min queue unless all `expected` places are taken (Kafka
    # clears the queue when the last one is). Both queues are then sorted by member id, so the
    # visit order only matters when more members could keep maxQuota than there are places.
    keep = np.minimum(owned, min_q)
    exactly: list[int] = []
    if expected:
        could_keep_max = owned >= max_q
        candidates = int(np.count_nonzero(could_keep_max))
        if candidates > expected:
            visit = hashmap_visit_order(ids)
            keep[visit[could_keep_max[visit]][:expected]] = max_q
        else:
            keep[could_keep_max] = max_q
            if candidates < expected:
                exactly = (owned == min_q).nonzero()[0].tolist()
    under = (owned < min_q).nonzero()[0].tolist()
    ends = starts + keep

    # maybeRevokedPartitions: the partitions each member gave up past its quota. claims.member is
    # ascending, so it is also the owner of each place of sorted_g.
    trimmed = (ends[claims.member] <= np.arange(len(sorted_g))).nonzero()[0]
    # Unassigned: the trimmed partitions and those nobody claims, ascending (Kafka's (topic,
    # partition) order). Claims are unique here, so when there are as many as partitions, every
    # partition is claimed (the usual rejoin) and only the trimmed ones are left.
    if len(claims.g) == total:
        unassigned_g = sorted_g[trimmed]
        unassigned_g.sort()
    else:
        free = np.ones(total, dtype=bool)
        free[claims.g] = False
        free[sorted_g[trimmed]] = True
        unassigned_g = free.nonzero()[0]

    owned_list = owned.tolist()
    under.sort(key=ids.__getitem__)
    exactly.sort(key=ids.__getitem__)
    receivers = round_robin_receiver_list(len(unassigned_g), under, [min_q - owned_list[m] for m in under],
                                          exactly, group_id, ids)
    return _Rejoin(sorted_g, starts, ends, trimmed, unassigned_g, receivers)


def _owned_in_kafka_order(claims: Claims, layout: Layout) -> np.ndarray:
    """The claimed global indices, each member's sorted by (partition, topic), members in spec order.

    For one partition number the global index grows with the topic (topics are numbered by name),
    so (member, partition, global index) packed into one int64 sorts right, and sorting the keys
    themselves, then decoding, costs less than ``argsort``. The global index takes the low bits,
    so decoding is a mask (an integer ``%`` costs more than the sort on small arrays).
    """
    g = claims.g
    partition = claims.partition
    if partition is None:
        partition = g - layout.offsets[layout.topic_of(g)]
    shift = max(layout.total - 1, 1).bit_length()  # bits that hold any global index
    per_member = int(layout.counts.max())  # > every partition number
    if ((int(claims.member[-1]) + 1) * per_member) << shift >= 2**62:  # would not fit in int64
        return g[visit_partition_topic_order(claims.member, g, layout)]
    keys = ((claims.member * per_member + partition) << shift) | g
    keys.sort()
    return keys & ((1 << shift) - 1)
