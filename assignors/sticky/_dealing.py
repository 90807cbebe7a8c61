"""Dealing partitions to the least-loaded members, shared by the sticky assignors' general builders
(``_general`` and ``_kafka_general``, spec 3.4).

Both place unowned partitions one at a time on the least-loaded subscriber, ties to the lowest rank
(member-id order). Dealt as a whole, that is a water level: :func:`level_fill` says how many units
each member ends up with, and :func:`deal_order` (or :func:`deal_levels` on lists) in which order
the members are served, which decides who gets which partition. Each routine has a plain-Python
form for the few subscribers a topic usually has and a NumPy form for the rest; both give the same
answer (tests check it).
"""

from __future__ import annotations

import numpy as np

__all__ = ["SMALL", "deal_levels", "deal_order", "level_fill", "level_fill_small"]


#: Below this many members (or units to deal) the per-topic routines run in plain Python: NumPy's
#: fixed cost per call (about a microsecond, a dozen calls per routine) outweighs the work on
#: the few subscribers a topic usually has. Both versions give identical answers (tests check it).
SMALL = 48


def level_fill(loads: np.ndarray, ranks: np.ndarray, units: int) -> np.ndarray:
    """Units per member when each unit goes to the least-loaded member, ties to the lowest rank."""
    if len(loads) <= SMALL:
        return np.array(level_fill_small(loads.tolist(), ranks.tolist(), units), dtype=np.int64)
    order = np.lexsort((ranks, loads))
    s = loads[order]
    prefix = np.cumsum(s)
    k_range = np.arange(1, len(s) + 1, dtype=np.int64)
    cost = k_range * s - prefix  # units needed to lift the k lightest to the k-th load
    k = int(np.searchsorted(cost, units, side="right"))  # cost is non-decreasing
    spare = units - int(cost[k - 1])
    level = int(s[k - 1]) + spare // k
    rest = spare % k
    add_sorted = np.zeros(len(s), dtype=np.int64)
    add_sorted[:k] = level - s[:k]
    if rest:
        head = order[:k]
        lucky = np.argsort(ranks[head], kind="stable")[:rest]
        add_sorted[lucky] += 1
    add = np.empty_like(add_sorted)
    add[order] = add_sorted
    return add


def level_fill_small(loads: list[int], ranks: list[int], units: int) -> list[int]:
    """:func:`level_fill` on lists: the same water level, computed in one pass."""
    n = len(loads)
    order = sorted(range(n), key=list(zip(loads, ranks)).__getitem__)
    s = [loads[i] for i in order]
    # k: how many of the lightest are lifted (lifting the j+1 lightest to s[j] costs (j+1)*s[j] - prefix)
    k = 0
    prefix = lifted = 0
    for j, value in enumerate(s):
        prefix += value
        if (j + 1) * value - prefix > units:
            break
        k, lifted = j + 1, prefix
    spare = units - (k * s[k - 1] - lifted)
    level = s[k - 1] + spare // k
    rest = spare % k
    add = [0] * n
    for i in order[:k]:
        add[i] = level - loads[i]
    if rest:
        for i in sorted(order[:k], key=ranks.__getitem__)[:rest]:
            add[i] += 1
    return add


def deal_levels(receivers: list[tuple[int, int, int]], units: int | None = None) -> list[int]:
    """:func:`deal_order` on lists. ``receivers``: (running count, count after the deal, member),
    in rank order; a member appears once per unit it receives, in the order of the units' (level,
    rank), where its units have levels ``running .. after - 1``.

    Sweeping the levels and listing, at each, the receivers whose range covers it gives that order
    without building and sorting one tuple per unit; when the levels are spread too thinly over the
    receivers for a sweep to pay, the units are sorted after all.
    """
    starts, ends, _ = zip(*receivers)
    low, high = min(starts), max(ends)
    if units is None:  # the caller may pass the total it already has
        units = sum(ends) - sum(starts)
    if (high - low) * len(receivers) <= 4 * units + 64:
        order: list[int] = []
        for level in range(low, high):
            order += [m for start, end, m in receivers if start <= level < end]
        return order
    return [
        m
        for _, _, m in sorted(
            (level, position, m)
            for position, (start, end, m) in enumerate(receivers)
            for level in range(start, end)
        )
    ]


def deal_order(running: np.ndarray, ranks: np.ndarray, ms: np.ndarray, deficit: np.ndarray) -> np.ndarray:
    """Receivers in the order a least-loaded-first deal (ties by rank) would serve them."""
    if len(ms) <= SMALL:
        # (level, rank, member) for each unit; ranks differ between members, so the sort is total.
        units = [
            (level, rank, m)
            for start, rank, m, d in zip(running.tolist(), ranks.tolist(), ms.tolist(), deficit.tolist())
            for level in range(start, start + d)
        ]
        units.sort()
        return np.array([m for _, _, m in units], dtype=np.int64)
    slot = np.repeat(np.arange(len(ms), dtype=np.int64), deficit)
    starts = np.repeat(np.cumsum(deficit) - deficit, deficit)
    level = running[slot] + (np.arange(len(slot), dtype=np.int64) - starts)
    order = np.lexsort((ranks[slot], level))
    return ms[slot[order]]
