"""The narrow, read-only inputs and the plain outputs every consumer-group assignor works with.

A :class:`GroupSpec` holds the members in the order in which Kafka's Java subscription map was
filled (a ``HashMap`` built with one ``put`` per member, in that order): several Kafka assignors
iterate that map, so the order decides ties and Kafka-exact answers are defined relative to it.
(For the server-side assignors that map is the group coordinator's member specs, filled by
``TargetAssignmentBuilder``.)

A topic may carry its topic id (a Kafka ``Uuid``): Kafka's server-side ``UniformAssignor`` walks
topics in the iteration order of hash sets of topic ids, so only with the ids can that order be
reproduced. :func:`topic_id_from_string` and :func:`topic_id_string` convert between
``uuid.UUID`` and Kafka's own string form.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from dataclasses import dataclass, field
from itertools import repeat
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
    #: The topic's id, as Kafka's metadata has it; ``None`` when unknown.
    topic_id: uuid.UUID | None = None
    # Filled by ``partition_objects`` on first use; not part of the topic's value.
    _partition_objects: tuple[TopicPartition, ...] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    @property
    def partition_objects(self) -> tuple[TopicPartition, ...]:
        """``TopicPartition(name, p)`` for every partition ``p``, built once per topic spec and kept.

        The assignors answer with these very objects (they are immutable), so a caller that reuses
        its ``TopicSpec`` objects from one assignment to the next, as the JSON codec's parsed specs
        do, pays for creating them once, much as a Kafka client's ``Cluster`` metadata is built
        once and handed to every ``assign`` call. A fresh ``TopicSpec`` builds them on the first
        call that needs them.
        """
        objects = self._partition_objects
        if objects is None:
            # tuple.__new__ over zip makes the NamedTuples in C, about three times faster than
            # calling TopicPartition(...) per partition.
            objects = tuple(map(tuple.__new__, repeat(TopicPartition), zip(repeat(self.name), range(self.partitions))))
            object.__setattr__(self, "_partition_objects", objects)
        return objects


#: Ids Kafka reserves (``Uuid.RESERVED``: the zero id and the metadata topic's id); never a topic's.
RESERVED_TOPIC_IDS = frozenset({uuid.UUID(int=0), uuid.UUID(int=1)})


def topic_id_from_string(text: str) -> uuid.UUID:
    """Kafka's ``Uuid.toString`` form (22 characters of URL-safe base64, as ``kafka-topics --describe``
    and ``describeTopics`` show it) as a ``uuid.UUID``.

    Raises :class:`ValueError` saying what is wrong: not base64 of 16 bytes, not the canonical
    spelling of those bytes, or one of Kafka's reserved ids.
    """
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)) if len(text) <= 24 else b""
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 16:
        raise ValueError(f"{text!r} is not a Kafka topic id (22 characters of URL-safe base64)")
    topic_id = uuid.UUID(bytes=raw)
    if topic_id_string(topic_id) != text:
        raise ValueError(f"{text!r} is not a Kafka topic id in canonical form (expected {topic_id_string(topic_id)!r})")
    if topic_id in RESERVED_TOPIC_IDS:
        raise ValueError(f"{text!r} is a reserved id, never a topic's")
    return topic_id


def topic_id_string(topic_id: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode("ascii").rstrip("=")


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
    """Everything an assignor may look at: the members (in subscription-map order) and the topics.

    A spec is a value: neither it nor its ``topics`` mapping may change once built.
    """

    members: tuple[MemberSpec, ...]
    topics: Mapping[str, TopicSpec]
    group_id: str = ""
    #: Views of this spec an assignor derives once and keeps, by name (e.g. the group as Kafka's
    #: coordinator hands it to the server-side assignors, :func:`assignors.server_group.server_group`);
    #: not part of the spec's value.
    views: dict = field(default_factory=dict, init=False, repr=False, compare=False)


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
