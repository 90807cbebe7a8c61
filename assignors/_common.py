"""Small pieces several client-side assignors share (spec sections 0.1 and 0.2)."""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator, Sequence

import numpy as np

from .errors import InvalidGroupSpecError
from .model import GroupSpec, MemberSpec


def member_info_key(member: MemberSpec) -> tuple[int, str]:
    """Kafka's ``MemberInfo`` order: static members first by group instance id, then the rest by member id."""
    if member.group_instance_id is not None:
        return (0, member.group_instance_id)
    return (1, member.member_id)


def partitions_per_topic(spec: GroupSpec) -> dict[str, int]:
    """Partition counts of the topics any member subscribes to that exist with at least one partition.

    Keys are in first-subscription order (members in spec order, topics in subscription order);
    assignors that need another order sort the keys themselves.
    """
    counts: dict[str, int] = {}
    for member in spec.members:
        for topic in member.topics:
            if topic in counts:
                continue
            topic_spec = spec.topics.get(topic)
            if topic_spec is not None and topic_spec.partitions > 0:
                counts[topic] = topic_spec.partitions
    return counts


def check_unique_member_ids(spec: GroupSpec) -> None:
    """Kafka keys members by id, so a spec listing one id twice has no Kafka meaning."""
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
    return sorted(range(len(members)), key=lambda i: member_info_key(members[i]))


def subscribers_per_topic(spec: GroupSpec, member_order: Sequence[int]) -> dict[str, np.ndarray]:
    """For every topic any member subscribes to, its subscribers as indices into ``spec.members``,
    listed in ``member_order``.

    Members are first grouped by subscription, and topics by the set of subscriptions that include
    them, so a group where everyone subscribes to the same topics costs one pass over the members,
    not one per topic. Topics with the same subscribers share one read-only array. Keys follow the
    first-subscription order of the members in spec order (deterministic, not hash-seeded).
    """
    group_of_tuple: dict[tuple[str, ...], int] = {}
    group_of_set: dict[frozenset[str], int] = {}
    group_topics: list[tuple[str, ...]] = []
    member_group = np.empty(len(spec.members), dtype=np.int64)
    for i, member in enumerate(spec.members):
        g = group_of_tuple.get(member.topics)
        if g is None:
            as_set = frozenset(member.topics)
            g = group_of_set.get(as_set)
            if g is None:
                g = len(group_topics)
                group_of_set[as_set] = g
                group_topics.append(tuple(dict.fromkeys(member.topics)))
            group_of_tuple[member.topics] = g
        member_group[i] = g

    groups_of_topic: dict[str, list[int]] = {}
    for g, topics in enumerate(group_topics):
        for topic in topics:
            groups_of_topic.setdefault(topic, []).append(g)

    order = np.asarray(member_order, dtype=np.int64)
    ordered_groups = member_group[order]
    shared: dict[tuple[int, ...], np.ndarray] = {}
    result: dict[str, np.ndarray] = {}
    for topic, groups in groups_of_topic.items():
        key = tuple(groups)
        subscribers = shared.get(key)
        if subscribers is None:
            if len(groups) == len(group_topics):
                subscribers = order.copy()
            else:
                subscribers = order[np.isin(ordered_groups, np.asarray(groups, dtype=np.int64))]
            subscribers.flags.writeable = False
            shared[key] = subscribers
        result[topic] = subscribers
    return result


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while an assignor builds its answer.

    An answer for a large group is hundreds of thousands of small tuples and lists, none of them in
    a cycle; left on, the collector rescans the growing heap every few hundred allocations, which
    roughly doubles the time. The previous state is restored, and nothing observable changes.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
