"""Small pieces several assignors share (spec sections 0.1 and 0.2)."""

from __future__ import annotations

import gc
from itertools import repeat
from operator import attrgetter
from typing import Callable, Iterable, Sequence

import numpy as np

from .errors import InvalidGroupSpecError
from .java_order import java_string_key
from .model import GroupSpec, MemberSpec, TopicPartition


def member_info_key(member: MemberSpec) -> tuple[int, bytes]:
    """Kafka's ``MemberInfo`` order: static members first by group instance id, then the rest by
    member id, ids compared as Java strings (UTF-16 code units)."""
    if member.group_instance_id is not None:
        return (0, java_string_key(member.group_instance_id))
    return (1, java_string_key(member.member_id))


def partitions_per_topic(spec: GroupSpec, distinct: Iterable[tuple[str, ...]] | None = None) -> dict[str, int]:
    """Partition counts of the topics any member subscribes to that exist with at least one partition.

    Keys are in first-subscription order (members in spec order, topics in subscription order);
    assignors that need another order sort the keys themselves. ``distinct``: the members'
    :func:`distinct_subscriptions`, when the caller has them already.
    """
    counts: dict[str, int] = {}
    checked: set[str] = set()
    # A later member with an already seen subscription adds no topic, so only the distinct
    # subscriptions are walked (100 members x 1,000 topics would otherwise be 100,000 steps).
    for subscription in distinct_subscriptions(spec.members) if distinct is None else distinct:
        for topic in subscription:
            if topic in checked:
                continue
            checked.add(topic)
            topic_spec = spec.topics.get(topic)
            if topic_spec is not None and topic_spec.partitions > 0:
                counts[topic] = topic_spec.partitions
    return counts


def distinct_subscriptions(members: Sequence[MemberSpec]) -> dict[tuple[str, ...], int]:
    """Each distinct subscription list, numbered in first-seen order.

    Large groups mostly share a handful of subscriptions, so everything that looks at topics
    works per distinct list instead of per member (10,000 members x 1,000 topics would otherwise
    be ten million Python steps).
    """
    seen: dict[tuple[str, ...], int] = {}
    previous = None
    for member in members:
        # A tuple's hash is not cached: skip hashing a subscription that is the very object the
        # previous member had (the codec shares equal subscriptions between members).
        if member.topics is not previous:
            previous = member.topics
            seen.setdefault(previous, len(seen))
    return seen


def subscription_classes(members: Sequence[MemberSpec]) -> tuple[dict[tuple[str, ...], int], list[int]]:
    """:func:`distinct_subscriptions`, and each member's number in it, in one pass.

    Hashing a subscription costs a step per topic, so callers that need both compute them once.
    """
    seen: dict[tuple[str, ...], int] = {}
    number: list[int] = []
    previous = None
    current = -1
    for member in members:
        if member.topics is not previous:  # see distinct_subscriptions
            previous = member.topics
            current = seen.setdefault(previous, len(seen))
        number.append(current)
    return seen, number


def topic_partitions(topic: str, numbers: Iterable[int]) -> list[TopicPartition]:
    """``[TopicPartition(topic, p) for p in numbers]``, built in C.

    ``TopicPartition(...)`` runs the NamedTuple's Python-level ``__new__``; ``tuple.__new__`` over
    ``zip`` makes the same objects (same class, same fields) about three times faster, which is
    most of an assignor's time on small groups.
    """
    return list(map(tuple.__new__, repeat(TopicPartition), zip(repeat(topic), numbers)))


def partitions_of(spec: GroupSpec, topic: str) -> Sequence[TopicPartition]:
    """Every partition of ``topic`` (which must be in ``spec.topics``) as ``TopicPartition`` objects, in
    partition order: the topic spec's kept objects (:attr:`TopicSpec.partition_objects`), so an
    answer is slices of existing objects rather than new ones."""
    topic_spec = spec.topics[topic]
    if topic_spec.name == topic:
        return topic_spec.partition_objects
    # A spec keyed by another name than the topic spec's own: the answer must carry the key.
    return topic_partitions(topic, range(topic_spec.partitions))


def check_unique_member_ids(spec: GroupSpec) -> list[str]:
    """Kafka keys members by id, so a spec listing one id twice has no Kafka meaning.

    Returns the member ids in spec order, for callers that need them next.
    """
    ids = [m.member_id for m in spec.members]  # a comprehension reads slots faster than attrgetter
    if len(set(ids)) == len(ids):
        return ids
    seen: set[str] = set()
    for member in spec.members:
        if member.member_id in seen:
            raise InvalidGroupSpecError(
                f"group {spec.group_id!r}: member id {member.member_id!r} appears more than once; "
                "each member must be listed once"
            )
        seen.add(member.member_id)


def member_info_order(spec: GroupSpec) -> list[int]:
    """Indices into ``spec.members`` in Kafka's ``MemberInfo`` order (stable for equal keys)."""
    members = spec.members
    ids = list(map(_member_id, members))
    instances = list(map(_instance_id, members))
    if instances.count(None) == len(members) and "".join(ids).isascii():
        # No static members and ASCII ids (where Python's string order is Java's): plain member-id
        # order, compared as strings rather than as tuples.
        return sorted(range(len(ids)), key=ids.__getitem__)
    keys = [member_info_key(m) for m in members]
    return sorted(range(len(keys)), key=keys.__getitem__)


_member_id = attrgetter("member_id")
_instance_id = attrgetter("group_instance_id")


def subscribers_per_topic(
    spec: GroupSpec,
    member_order: Sequence[int],
    classes: tuple[dict[tuple[str, ...], int], list[int]] | None = None,
) -> dict[str, np.ndarray]:
    """For every topic any member subscribes to, its subscribers as indices into ``spec.members``,
    listed in ``member_order``. ``classes``: :func:`subscription_classes` of the members, when the
    caller has them already.

    Members are first grouped by subscription, and topics by the set of subscriptions that include
    them, so a group where everyone subscribes to the same topics costs one pass over the members,
    not one per topic. Topics with the same subscribers share one read-only array. Keys follow the
    first-subscription order of the members in spec order (deterministic, not hash-seeded).
    """
    distinct, member_class = subscription_classes(spec.members) if classes is None else classes
    # Subscriptions listing the same topics in another order are one group.
    group_of_set: dict[frozenset[str], int] = {}
    group_topics: list[tuple[str, ...]] = []
    group_of_class: list[int] = []
    for topics in distinct:
        g = group_of_set.setdefault(frozenset(topics), len(group_topics))
        if g == len(group_topics):
            group_topics.append(tuple(dict.fromkeys(topics)))
        group_of_class.append(g)
    member_group = [group_of_class[c] for c in member_class]

    groups_of_topic: dict[str, list[int]] = {}
    for g, topics in enumerate(group_topics):
        for topic in topics:
            groups_of_topic.setdefault(topic, []).append(g)

    if len(member_order) <= SMALL_GROUP:
        return _share_per_subscription(groups_of_topic, _small_group_subscribers(member_order, member_group,
                                                                                 len(group_topics)))
    order = np.asarray(member_order, dtype=np.int64)
    ordered_groups = np.array(member_group, dtype=np.int64)[order]

    def subscribers_of(groups: list[int]) -> np.ndarray:
        if len(groups) == len(group_topics):
            return order.copy()
        # A lookup table over the few subscription groups; np.isin costs far more on them.
        selected = np.zeros(len(group_topics), dtype=bool)
        selected[groups] = True
        return order[selected[ordered_groups]]

    return _share_per_subscription(groups_of_topic, subscribers_of)


def _share_per_subscription(groups_of_topic: dict[str, list[int]],
                            subscribers_of: Callable[[list[int]], np.ndarray]) -> dict[str, np.ndarray]:
    """Each topic's subscribers, computed once per distinct set of subscription groups and shared
    (read-only) by the topics with that set."""
    shared: dict[tuple[int, ...], np.ndarray] = {}
    result: dict[str, np.ndarray] = {}
    for topic, groups in groups_of_topic.items():
        key = tuple(groups)
        subscribers = shared.get(key)
        if subscribers is None:
            subscribers = subscribers_of(groups)
            subscribers.flags.writeable = False
            shared[key] = subscribers
        result[topic] = subscribers
    return result


#: Up to this many members :func:`subscribers_per_topic` sorts members into their subscription
#: groups with one pass over a list: NumPy's per-call cost outweighs the work on small groups.
#: Both ways give the same arrays (tests check it).
SMALL_GROUP = 256


def _small_group_subscribers(member_order: Sequence[int], member_group: list[int],
                             n_groups: int) -> Callable[[list[int]], np.ndarray]:
    """:func:`subscribers_per_topic`'s way for small groups, on lists."""
    in_group: list[list[int]] = [[] for _ in range(n_groups)]
    for index in member_order:
        in_group[member_group[index]].append(index)

    def subscribers_of(groups: list[int]) -> np.ndarray:
        if len(groups) == n_groups:
            members = member_order
        elif len(groups) == 1:
            members = in_group[groups[0]]
        else:
            selected = set(groups)
            members = [i for i in member_order if member_group[i] in selected]
        return np.array(members, dtype=np.int64)

    return subscribers_of


class paused_gc:  # noqa: N801 - named and used like a function: ``with paused_gc():``
    """Keep the cyclic garbage collector out of an assignor's hot path.

    An answer for a large group is hundreds of thousands of small tuples and lists, none of them in
    a cycle; left on, the collector rescans the growing heap every few hundred allocations, which
    roughly doubles the time. Pausing it changes no result.

    On the way out the new objects are handed straight to the oldest generation (``freeze`` then
    ``unfreeze`` is two list splices); otherwise the first allocation after ``enable`` would
    traverse all of them at once, typically at the start of the next assignment. Skipped when the
    process froze objects itself (a pre-fork server), because ``unfreeze`` would release those too.

    A class rather than a ``contextlib.contextmanager`` generator: about half the fixed cost
    (0.5 against 1.1 us), which shows on the smallest groups' 0.1 ms calls.
    """

    __slots__ = ("_was_enabled",)

    def __enter__(self) -> None:
        self._was_enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc_info: object) -> None:
        if self._was_enabled:
            if gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def split_by_owner(n_members: int, owners: np.ndarray, items: list | np.ndarray) -> list[list]:
    """``items`` (a list, or an object array) dealt to their ``owners`` (indices below
    ``n_members``), keeping their order within each member.

    Assignors list each member's partitions in the order they were dealt; when that order is the
    order of ``items`` (e.g. topic by topic, partitions ascending), one stable sort of the owners
    builds every member's list at once in C, instead of one ``extend`` per member and topic.
    """
    if len(items) == 0:
        return [[] for _ in range(n_members)]
    if not isinstance(items, np.ndarray):
        # fromiter keeps each tuple whole; np.array would read a list of pairs as a 2-D array
        items = np.fromiter(items, dtype=object, count=len(items))
    # A stable sort of 16-bit keys is a radix sort: linear, and what a group of any real size uses.
    keys = owners.astype(np.int16) if n_members < 2**15 else owners
    ordered = items[np.argsort(keys, kind="stable")].tolist()
    ends = np.cumsum(np.bincount(owners, minlength=n_members)).tolist()
    return [ordered[start:end] for start, end in zip([0] + ends, ends)]
