"""Kafka's ``assignRoundRobin`` step of the constrained sticky builder: which member receives each
partition still unassigned once every member has kept what it may.

One rule, two encodings: on lists for the usual small rejoin (:mod:`._rejoin`), where NumPy's set-up
would cost more than the work, and on arrays for everything else (:mod:`._constrained`).
tests/assignors/test_sticky_rejoin.py checks that the two ways give the same answers.
"""

from __future__ import annotations

import numpy as np

from ..errors import AssignmentError


def _out_of_partitions(group_id: str, member_id: str) -> AssignmentError:
    return AssignmentError(
        f"group {group_id!r}: member {member_id!r} cannot reach its minimum quota; "
        "the constrained sticky builder ran out of partitions (this is a bug, please report it)"
    )


def _partitions_left_over(group_id: str, count: int) -> AssignmentError:
    return AssignmentError(
        f"group {group_id!r}: {count} partitions left over with every member at "
        "its maximum quota in the constrained sticky builder (this is a bug, please report it)"
    )


def round_robin_receiver_array(
    n_parts: int,
    under: list[int],
    deficits: list[int],
    exactly: list[int],
    group_id: str,
    ids: list[str],
) -> np.ndarray:
    """Receiver of each remaining partition under Kafka's ``assignRoundRobin``."""
    under_arr = np.array(under, dtype=np.int64)
    d = np.array(deficits, dtype=np.int64)
    needed = int(d.sum())
    if n_parts < needed:
        short = under[int(np.argmax(d))]
        raise _out_of_partitions(group_id, ids[short])
    if len(under) == 0:
        seq = np.zeros(0, dtype=np.int64)
    elif (d == d[0]).all():
        seq = np.tile(under_arr, int(d[0]))
    else:
        slot = np.repeat(np.arange(len(under), dtype=np.int64), d)
        starts = np.repeat(np.cumsum(d) - d, d)
        rnd = np.arange(needed, dtype=np.int64) - starts
        seq = under_arr[slot[np.argsort(rnd * len(under) + slot, kind="stable")]]
    extra = n_parts - needed
    if extra:
        # Members join the exactly-min queue in the order they reach minQuota: by deficit, then
        # by their place in the under-min queue.
        reached = under_arr[np.lexsort((np.arange(len(under)), d))] if len(under) else under_arr
        queue = np.concatenate([np.array(exactly, dtype=np.int64), reached])
        if extra > len(queue):
            raise _partitions_left_over(group_id, extra - len(queue))
        seq = np.concatenate([seq, queue[:extra]])
    return seq


def round_robin_receiver_list(
    n_parts: int,
    under: list[int],
    deficits: list[int],
    exactly: list[int],
    group_id: str,
    ids: list[str],
) -> list[int]:
    """Receiver of each remaining partition under Kafka's ``assignRoundRobin``, on lists: pass ``r``
    deals one partition to each under-min member (in id order) still more than ``r`` short of
    ``minQuota``; the leftovers go one each down the exactly-min queue, which under-min members
    join as they reach ``minQuota`` (smallest deficit first, then id order). Same receivers as
    :func:`round_robin_receiver_array`."""
    needed = sum(deficits)
    if n_parts < needed:
        short = under[deficits.index(max(deficits))]
        raise _out_of_partitions(group_id, ids[short])
    receivers: list[int] = []
    if under:
        if deficits.count(deficits[0]) == len(deficits):
            receivers = under * deficits[0]
        else:
            for r in range(max(deficits)):
                receivers += [m for m, d in zip(under, deficits) if d > r]
    extra = n_parts - needed
    if extra:
        # sorted() is stable: equal deficits keep their under-min queue order.
        queue = exactly + [under[i] for i in sorted(range(len(under)), key=deficits.__getitem__)]
        if extra > len(queue):
            raise _partitions_left_over(group_id, extra - len(queue))
        receivers += queue[:extra]
    return receivers
