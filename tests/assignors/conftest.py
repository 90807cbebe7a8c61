"""Small spec-building helpers for the assignor tests (plain functions, imported by the test modules)."""

from __future__ import annotations

from typing import Iterable, Mapping

from assignors.model import GroupAssignment, GroupSpec, MemberSpec, TopicPartition, TopicSpec


def member(
    member_id: str,
    topics: Iterable[str],
    owned: Iterable[TopicPartition] = (),
    *,
    instance: str | None = None,
    rack: str | None = None,
) -> MemberSpec:
    return MemberSpec(member_id, tuple(topics), tuple(owned), group_instance_id=instance, rack=rack)


def group(*members: MemberSpec, topics: Mapping[str, int | TopicSpec], group_id: str = "g") -> GroupSpec:
    """``topics`` maps a name to its partition count, or to a full TopicSpec (for racks)."""
    specs = {
        name: value if isinstance(value, TopicSpec) else TopicSpec(name, value) for name, value in topics.items()
    }
    return GroupSpec(tuple(members), specs, group_id)


def tps(topic: str, *partitions: int) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in partitions]


def listed(answer: GroupAssignment) -> dict[str, list[str]]:
    """Each member's partitions as "topic-partition" strings, in the assignor's order."""
    return {m: [f"{t}-{p}" for t, p in parts] for m, parts in answer.assignment.items()}


def as_sets(answer: GroupAssignment) -> dict[str, set[str]]:
    return {m: set(parts) for m, parts in listed(answer).items()}
