"""Kafka's ``sticky`` and ``cooperative-sticky`` consumer assignors (spec section 3).

Guarantees, in priority order (as in Kafka's ``AbstractStickyAssignor``):

1. **Valid**: a member gets only partitions of topics it subscribes to; every partition of every
   subscribed, existing topic goes to exactly one member (the cooperative variant may withhold a
   partition for one round, see below); every member of the spec appears in the answer.
2. **Balanced**: with identical subscriptions partition counts differ by at most one; otherwise no
   member could take a partition from one holding two or more partitions more than it.
3. **Sticky**: as few previously owned partitions as possible change owner.

Two members, topic ``t`` with partitions 0-2: c1 owned all three, c2 joins. Balance wins over
stickiness, so c1 keeps t-0 and t-1 and t-2 moves to c2. The eager assignor answers c1=[t-0, t-1],
c2=[t-2]. The cooperative assignor answers c1=[t-0, t-1], c2=[] with ``transferring`` {t-2: c2}:
c1 must revoke t-2 first, and the follow-up rebalance (where nobody owns t-2) gives it to c2.

Dispatch (spec 3.1): when every member with a non-empty subscription subscribes to the same topics,
the constrained builder runs and the answer is Kafka-exact, list order included; otherwise the
general path runs: our own builder (optimal balance score) and a port of Kafka's general builder,
and the answer is ours only when it is at least as balanced as Kafka's and revokes no more owned
partitions, otherwise Kafka's (see ``_general``).

Model notes and deliberate departures from Kafka (spec section 8):

* Owned partitions and generation come from :class:`MemberSpec` for both variants. In Kafka the
  eager ``StickyAssignor`` decodes them from its user data and the cooperative one from
  ``Subscription.ownedPartitions``/``generationId``; the model abstracts that encoding away, so a
  caller feeding eager-sticky groups must put the user-data contents into the spec.
* A member with an empty subscription gets nothing, wherever it sits in the visit order (Kafka
  hands it partitions when it happens to be visited first); partitions it still owns count as
  owned by it, so in the cooperative variant their new owner waits one round.
* A claim of a partition number a topic does not have is ignored (Kafka would keep it).
* No state survives a call (Kafka keeps ``maxGeneration`` in an instance field).
* On the general path an older-generation claim never hands a partition to a member that does not
  subscribe to its topic (Kafka can; scenario 31b).
"""

from __future__ import annotations

import numpy as np

from .._common import check_unique_member_ids, paused_gc, split_by_owner
from ..columns import AssignmentColumns, ColumnsAnswer
from ..model import GroupAssignment, GroupSpec, TopicPartition
from ._constrained import build_constrained
from ._draft import Draft
from ._general import build_general
from ._layout import (
    build_layout,
    claims_of_columns,
    collect_claims,
    hashmap_visit_order,
    partition_objects,
)
from ._ownership import resolve_ownership, subscriptions_equal
from ._racks import rack_info
from ._rejoin import assign_rejoin, is_plain_rejoin, rejoin_draft

__all__ = ["assign_sticky", "assign_cooperative_sticky", "assign_sticky_columns"]


def assign_sticky(spec: GroupSpec) -> GroupAssignment:
    """Kafka's eager ``sticky`` assignor: the full sticky assignment, nothing withheld."""
    with paused_gc():
        return _assign(spec, cooperative=False)


def assign_cooperative_sticky(spec: GroupSpec) -> GroupAssignment:
    """Kafka's ``cooperative-sticky`` assignor.

    A partition that changes owner while a live member still owns it is withheld from its new
    owner this round and listed in ``transferring`` (partition -> intended owner).
    """
    with paused_gc():
        return _assign(spec, cooperative=True)


def assign_sticky_columns(spec: GroupSpec, owned: AssignmentColumns, cooperative: bool) -> ColumnsAnswer:
    """:func:`assign_cooperative_sticky` (or, not ``cooperative``, :func:`assign_sticky`) of a group
    whose members' owned partitions are ``owned`` (their ``owned_partitions`` are not read; a
    member ``owned`` does not list owns nothing, and ``owned`` may list others, who are not
    members), answered as columns: the same lists, without an object per partition, for groups
    of hundreds of thousands of partitions."""
    with paused_gc():
        check_unique_member_ids(spec)
        answer = _assign(spec, cooperative, owned)
    if isinstance(answer, GroupAssignment):  # a quick answer nobody owns anything in
        return ColumnsAnswer(AssignmentColumns.from_lists(answer.assignment), answer.transferring)
    return answer


def _assign(spec: GroupSpec, cooperative: bool, owned: AssignmentColumns | None = None
            ) -> GroupAssignment | ColumnsAnswer:
    """The answer as lists, or with ``owned`` (claims as columns) as columns, except where nobody
    can own anything (no member or no partition), which is answered as lists either way."""
    members = spec.members
    ids = [m.member_id for m in members]
    layout = build_layout(spec)
    # The three quick answers below work member by member, whatever the ids, and are keyed by
    # member id: a repeated id shows as an answer with fewer members than the spec, which is
    # cheaper to check than a set of the ids up front.
    if not members or layout.total == 0:
        return _unique_ids(spec, GroupAssignment(assignment={member_id: [] for member_id in ids}))
    claims = collect_claims(members, layout) if owned is None else claims_of_columns(members, layout, owned)
    racks = rack_info(spec, members, layout)
    equal = subscriptions_equal(layout.subscriptions)
    if equal and len(claims.g) == 0 and not racks.active:
        if owned is not None:
            return _first_constrained_columns(members, layout)
        return _unique_ids(spec, _first_constrained_answer(members, layout))
    if equal and all(layout.subscriptions) and not racks.active and is_plain_rejoin(claims):
        # The usual rejoin: nothing for the ownership, rack or outsider rules to change.
        if owned is not None:
            return _answer_columns(ids, layout, rejoin_draft(members, ids, layout, claims, spec.group_id), cooperative)
        return _unique_ids(spec, assign_rejoin(members, ids, layout, claims, cooperative, spec.group_id))
    check_unique_member_ids(spec)
    visit = hashmap_visit_order(ids)
    resolve_ownership(members, visit, claims)
    if equal:
        if all(layout.subscriptions):  # no member has an empty subscription: all take part
            participants, visit_subscribed = np.arange(len(members), dtype=np.int64), visit
        else:
            subscribed = np.array([bool(m.topics) for m in members], dtype=bool)
            participants, visit_subscribed = np.flatnonzero(subscribed), visit[subscribed[visit]]
        draft = build_constrained(
            members, participants, visit_subscribed, layout, claims, racks, spec.group_id
        )
    else:
        draft = build_general(members, layout, claims, racks, cooperative, visit)
    if owned is not None:
        return _answer_columns(ids, layout, draft, cooperative)
    return _answer(spec, layout, claims, draft, cooperative)


def _unique_ids(spec: GroupSpec, answer: GroupAssignment) -> GroupAssignment:
    """``answer``, unless the spec lists a member id twice (Kafka keys members by id, so such a
    spec has no Kafka meaning): then the error :func:`check_unique_member_ids` raises."""
    if len(answer.assignment) != len(spec.members):
        check_unique_member_ids(spec)
    return answer


def _first_constrained_answer(members, layout) -> GroupAssignment:
    """The constrained builder's answer when nobody owns anything and racks play no part.

    Then every participant starts under ``minQuota`` (or, when there are fewer partitions than
    participants, in the exactly-min queue), both queues are sorted by member id, and Kafka's
    round robin deals partition ``k`` (in (topic, partition) order) to the ``k % n``-th participant
    by member id; the leftovers past ``n * minQuota`` continue the same cycle. So each list is one
    strided slice of the partitions, already in Kafka's order; the visit order, the claim
    bookkeeping and the per-partition owner arrays are not needed (tests compare this path with
    the full builder).
    """
    ids, participants = _participants_by_id(members)
    objs: list[TopicPartition] = []
    for topic_objects in layout.objects:
        objs += topic_objects
    n = len(participants)
    lists: list[list[TopicPartition]] = [[] for _ in members] if n < len(members) else [None] * n
    for rank, position in enumerate(participants):
        lists[position] = objs[rank::n]
    return GroupAssignment(assignment=dict(zip(ids, lists)))


def _first_constrained_columns(members, layout) -> ColumnsAnswer:
    """:func:`_first_constrained_answer` as columns: partition ``k`` goes to the ``k % n``-th
    participant by member id."""
    ids, participants = _participants_by_id(members)
    g = np.arange(layout.total, dtype=np.int64)
    return ColumnsAnswer(_columns(ids, layout, np.array(participants, dtype=np.int64)[g % len(participants)], g), {})


def _participants_by_id(members) -> tuple[list[str], list[int]]:
    """The members' ids, and the positions of those with a subscription in member-id order."""
    ids = [m.member_id for m in members]
    return ids, sorted((i for i, m in enumerate(members) if m.topics), key=ids.__getitem__)


def _answer(spec: GroupSpec, layout, claims, draft: Draft, cooperative: bool) -> GroupAssignment:
    objs = partition_objects(layout, claims)
    ids = [m.member_id for m in spec.members]
    owners, given, transfer_g, transfer_to = _given(layout, draft, cooperative)
    transferring = {objs[g]: ids[m] for g, m in zip(transfer_g.tolist(), transfer_to.tolist())}
    # Kept partitions come before fresh ones in each list; split_by_owner keeps that order.
    return GroupAssignment(assignment=dict(zip(ids, split_by_owner(len(ids), owners, objs[given]))),
                           transferring=transferring)


def _answer_columns(ids: list[str], layout, draft: Draft, cooperative: bool) -> ColumnsAnswer:
    owners, given, transfer_g, transfer_to = _given(layout, draft, cooperative)
    # Built for the few partitions in transit: layout.objects would build all of them.
    topic = layout.topic_of(transfer_g)
    transferring = {TopicPartition(layout.topics[t], p): ids[m] for t, p, m in zip(
        topic.tolist(), (transfer_g - layout.offsets[topic]).tolist(), transfer_to.tolist())}
    return ColumnsAnswer(_columns(ids, layout, owners, given), transferring)


def _given(layout, draft: Draft, cooperative: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The draft's (member, global index) pairs given this round, kept ones first, and the
    partitions withheld (cooperative only) with the members they go to next."""
    fresh_m, fresh_g = draft.fresh_m, draft.fresh_g
    none = np.zeros(0, dtype=np.int64)
    transfer_g, transfer_to = none, none
    if cooperative and len(draft.transfer_g):
        withheld = np.zeros(layout.total, dtype=bool)
        withheld[draft.transfer_g] = True
        given = ~withheld[fresh_g]
        fresh_m, fresh_g = fresh_m[given], fresh_g[given]
        transfer_g, transfer_to = draft.transfer_g, draft.transfer_to
    return np.concatenate([draft.kept_m, fresh_m]), np.concatenate([draft.kept_g, fresh_g]), transfer_g, transfer_to


def _columns(ids: list[str], layout, owners: np.ndarray, g: np.ndarray) -> AssignmentColumns:
    """Member ``ids[owners[k]]`` holds global index ``g[k]``, in array order within each member."""
    topic = layout.topic_of(g)
    return AssignmentColumns.from_runs(ids, owners, layout.topics, topic, g - layout.offsets[topic])
