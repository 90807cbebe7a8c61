"""Owned-partition resolution and path selection (spec 3.1).

Kafka resolves conflicting ownership claims partition by partition while visiting members in
subscription-map (Java ``HashMap``) order:

* an unclaimed partition goes to its claimant;
* a partition already claimed by X goes to the new claimant if its generation is higher, stays
  with X if lower, and when both generations are equal it is taken from X, given to neither and
  remembered as claimed by several owners ("doubly claimed"); the newest claimant becomes the one
  the next claim is compared with.

Only partitions claimed more than once need that walk; the common case (every partition claimed at
most once) is settled with one ``bincount``.

Our model carries a single generation per member, so Kafka's quirk of comparing against X's
``Subscription.generationId`` rather than X's user-data generation cannot arise. The highest
generation is never stored between calls (Kafka keeps ``maxGeneration`` in an assignor instance
field across rebalances); nothing here outlives a call.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..model import MemberSpec
from ._layout import Claims


def resolve_ownership(members: Sequence[MemberSpec], visit: np.ndarray, claims: Claims) -> None:
    """Fill ``claims.held`` and ``claims.doubly`` in place."""
    n = len(claims.g)
    if n == 0:
        return
    total = len(claims.doubly)
    times = np.bincount(claims.g, minlength=total)
    contested = times[claims.g] > 1
    claims.held[:] = ~contested
    if not contested.any():
        return
    visit_rank = np.empty(len(members), dtype=np.int64)
    visit_rank[visit] = np.arange(len(visit), dtype=np.int64)
    idx = np.flatnonzero(contested)
    # Kafka walks members in visit order and each member's claims in its own order.
    order = idx[np.lexsort((idx, visit_rank[claims.member[idx]]))]
    generation = [m.generation for m in members]
    holder_claim: dict[int, int] = {}  # g -> index of the claim currently holding it (absent: none)
    compared_with: dict[int, int] = {}  # g -> member the next claimant is compared with
    doubly = claims.doubly
    for c, g, m in zip(order.tolist(), claims.g[order].tolist(), claims.member[order].tolist()):
        other = compared_with.get(g)
        if other is None:
            holder_claim[g] = c
            compared_with[g] = m
            continue
        mine, theirs = generation[m], generation[other]
        if mine == theirs:
            doubly[g] = True
            held = holder_claim.get(g)
            if held is not None and int(claims.member[held]) == other:
                del holder_claim[g]
            compared_with[g] = m
        elif mine > theirs:
            holder_claim[g] = c
            compared_with[g] = m
    if holder_claim:
        claims.held[list(holder_claim.values())] = True


def subscriptions_equal(subscriptions: Sequence[tuple[str, ...]]) -> bool:
    """Kafka's ``allSubscriptionsEqual`` over the members with a non-empty subscription, given the
    members' distinct subscription lists.

    Kafka initialises its reference topic set from the first visited member and re-initialises it
    while it is empty, so an empty-subscription member visited first is ignored and then handed
    partitions by the constrained builder (spec 3.1 quirk, scenario 31). We ignore
    empty-subscription members wherever they are visited and give them nothing instead. Which
    member is visited first then does not matter: the answer is whether all non-empty
    subscriptions name the same topics.
    """
    reference: set[str] | None = None
    for topics in subscriptions:
        if not topics:
            continue
        if reference is None:
            reference = set(topics)
        elif len(topics) != len(reference) or not reference.issuperset(topics):
            return False
    return True
