"""Small pieces several client-side assignors share (spec sections 0.1 and 0.2)."""

from __future__ import annotations

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
