"""The narrow, read-only inputs and the plain outputs every consumer-group assignor works with.

A :class:`GroupSpec` holds the members in the order in which Kafka's Java subscription map was
filled (a ``HashMap`` built with one ``put`` per member, in that order): several Kafka assignors
iterate that map, so the order decides ties and Kafka-exact answers are defined relative to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, NamedTuple

#: "No generation known": a member that never completed a join, or one that lost its generation.
UNKNOWN_GENERATION = -1


class TopicPartition(NamedTuple):
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """A topic as the group sees it in metadata."""

    name: str
    partitions: int
    #: Per partition, the racks of all its replicas (KIP-881); ``None`` when racks are unknown.
    replica_racks: tuple[frozenset[str], ...] | None = None


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """One member's JoinGroup subscription."""

    member_id: str
    topics: tuple[str, ...]
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation: int = UNKNOWN_GENERATION
    group_instance_id: str | None = None
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class GroupSpec:
    """Everything an assignor may look at: the members (in subscription-map order) and the topics."""

    members: tuple[MemberSpec, ...]
    topics: Mapping[str, TopicSpec]
    group_id: str = ""


@dataclass(frozen=True, slots=True)
class GroupAssignment:
    """An assignor's answer.

    ``assignment`` has every member of the spec, in spec order, each with its partitions in the order
    Kafka's assignor lists them. ``transferring`` (cooperative assignors only) maps each partition
    that changes owner to the member that will get it: such a partition is withheld this round and
    assigned in the follow-up rebalance.
    """

    assignment: dict[str, list[TopicPartition]]
    transferring: dict[TopicPartition, str] = field(default_factory=dict)
