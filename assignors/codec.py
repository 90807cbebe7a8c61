"""The JSON group-spec contract: one decoded JSON object in, a :class:`GroupSpec` out, and back.

This is the stable public contract of ``rebalance-monitor assign`` and of the Java reference in
``jvm/reference`` (one spec per JSON Lines line)::

    {"id": "s1", "assignor": "cooperative-sticky",
     "topics": {"t0": {"partitions": 3, "racks": [["ra", "rb"], ["rb"], ["rc"]],
                       "topic_id": "Y2Wm4ZT0SBOWqCR_pWkHOw"}},
     "members": [{"member_id": "c1", "group_instance_id": null, "rack": "ra", "topics": ["t0"],
                  "owned_partitions": [["t0", 0]], "generation": 4}]}

and the answer line::

    {"id": "s1", "assignor": "cooperative-sticky", "assignment": {"c1": [["t0", 0]]},
     "transferring": [["t0", 1, "c2"]], "elapsed_ms": 0.42}

``racks``, ``topic_id``, ``group_instance_id``, ``rack``, ``owned_partitions`` and ``generation``
are optional (``generation`` -1 or absent = unknown). The order of ``members`` is the order in
which Kafka's Java subscription ``HashMap`` was filled (spec section 0.3), so it is kept exactly.
``topic_id`` is Kafka's own spelling of the topic's ``Uuid`` (22 characters of URL-safe base64);
only the server-side ``uniform`` assignor reads it, and only when every topic it walks has one (see
``assignors/uniform.py``). For ``uniform`` and ``server-range``, ``owned_partitions`` is the member's
current target assignment, listed as the coordinator's target-assignment record lists it.

The fields are declared once below (:data:`CONSUMER_SPEC_FIELDS`); the parser accepts exactly them
and ``schemas/assign_consumer.schema.json`` is generated from them.

Everything here is pure: dicts in, dicts out. Reading and writing lines is the caller's business.
Each malformed field raises :class:`InvalidGroupSpecError` naming the field path and the value,
because a spec file is usually written by hand or by another program and the path is what lets
its author find the mistake.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, NamedTuple

from .errors import AssignmentError, InvalidGroupSpecError, UnknownAssignorError
from .spec_fields import ID_FIELD, SpecField, check_members_match, field_names, object_schema
from .spec_fields import MISSING as _MISSING
from .spec_fields import is_int as _is_int
from .spec_fields import show as _show
from .model import (
    UNKNOWN_GENERATION,
    GroupAssignment,
    GroupSpec,
    MemberSpec,
    TopicPartition,
    TopicSpec,
    topic_id_from_string,
    topic_id_string,
)
from .registry import CONSUMER_ASSIGNOR_NAMES, get_assignor

_NAME = {"type": "string", "minLength": 1}

TOPIC_FIELDS: tuple[SpecField, ...] = (
    SpecField("partitions", {"type": "integer", "minimum": 0}, "The topic's partition count.", required=True),
    SpecField("racks", {"type": "array", "items": {"type": "array", "items": _NAME}},
              "Per partition, the racks of all its replicas (KIP-881; one list per partition)."),
    SpecField("topic_id", {"type": "string", "pattern": "^[A-Za-z0-9_-]{22}$"},
              "The topic's id as Kafka spells it (base64 of its Uuid, as describeTopics and kafka-topics"
              " show it). The server-side uniform assignor walks topics in the hash order of their ids;"
              " without ids it uses topic-name order."),
)

MEMBER_FIELDS: tuple[SpecField, ...] = (
    SpecField("member_id", _NAME, "The member id (unique in the group).", required=True),
    SpecField("group_instance_id", {"anyOf": [_NAME, {"type": "null"}]},
              "group.instance.id of a static member (unique in the group)."),
    SpecField("rack", {"anyOf": [_NAME, {"type": "null"}]}, "client.rack of the member."),
    SpecField("topics", {"type": "array", "items": _NAME, "uniqueItems": True},
              "The member's subscription, in the order it lists it.", required=True),
    SpecField("owned_partitions", {"type": "array", "items": {
        "type": "array", "prefixItems": [_NAME, {"type": "integer", "minimum": 0}], "minItems": 2, "maxItems": 2}},
              "[topic, partition] pairs the member owns (client assignors) or its current target"
              " assignment (uniform, server-range), in the order the member or the coordinator lists them.",
              default=[]),
    SpecField("generation", {"type": "integer", "minimum": -1},
              "The generation the owned partitions are from (client sticky assignors); -1 = unknown.",
              default=UNKNOWN_GENERATION),
)

CONSUMER_SPEC_FIELDS: tuple[SpecField, ...] = (
    ID_FIELD,
    SpecField("assignor", {"enum": list(CONSUMER_ASSIGNOR_NAMES)},
              "The assignor; may be left out when --assignor is given."),
    SpecField("topics", {"type": "object", "additionalProperties": object_schema(TOPIC_FIELDS)},
              "The topic metadata: topic name -> its partitions (and optionally racks and topic id).",
              required=True),
    SpecField("members", {"type": "array", "minItems": 1, "items": object_schema(MEMBER_FIELDS)},
              "The members, in the order Kafka's subscription map was filled.", required=True),
)

_SPEC_KEYS = field_names(CONSUMER_SPEC_FIELDS)
_TOPIC_KEYS = field_names(TOPIC_FIELDS)
_MEMBER_KEYS = field_names(MEMBER_FIELDS)


def consumer_spec_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of one consumer-group spec line."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "rebalance-monitor assign: consumer group spec",
        **object_schema(CONSUMER_SPEC_FIELDS, "One JSON Lines input line of `rebalance-monitor assign` for a"
                        " consumer group (client or KIP-848 server-side assignors); see docs/assign.md."),
    }

SpecId = str | int | None


@dataclass(frozen=True, slots=True)
class ParsedSpec:
    """One input line: its id (echoed back), the assignor to run and the group spec."""

    spec_id: SpecId
    assignor: str
    spec: GroupSpec


def spec_id_of(obj: object) -> SpecId:
    """The ``id`` of a decoded line if it has a usable one, else ``None`` (for error lines)."""
    if isinstance(obj, Mapping):
        value = obj.get("id")
        if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
            return value
    return None


def parse_group_spec(obj: object, assignor_override: str | None = None) -> ParsedSpec:
    """Validate one decoded JSON spec and turn it into a :class:`ParsedSpec`.

    ``assignor_override`` (the CLI's ``--assignor``) replaces the line's ``assignor``; a line with
    neither is invalid. The assignor name is checked against the registry's names (without
    importing the assignor) so that a typo is reported as a spec error naming the field.
    """
    if not isinstance(obj, Mapping):
        raise InvalidGroupSpecError(f"a group spec must be a JSON object, got {_show(obj)}")
    _reject_unknown_keys(obj, _SPEC_KEYS, "")

    spec_id = _parse_id(obj)
    assignor = _parse_assignor(obj, assignor_override)
    topics = _parse_topics(obj.get("topics", _MISSING))
    members = _parse_members(obj.get("members", _MISSING), topics)
    group_id = "" if spec_id is None else str(spec_id)
    return ParsedSpec(spec_id, assignor, GroupSpec(members=members, topics=topics, group_id=group_id))


def format_group_assignment(
    spec_id: SpecId,
    assignor: str,
    spec: GroupSpec,
    result: GroupAssignment,
    elapsed_ms: float,
) -> dict[str, Any]:
    """The answer line for ``spec``: every member in spec order, transferring sorted by partition.

    An assignor that leaves a member out or invents one is broken; that is reported as an
    :class:`AssignmentError` instead of being papered over with an empty list, so that the
    differential tests against Kafka see it.
    """
    member_ids = [m.member_id for m in spec.members]
    check_members_match(assignor, "an assignment whose members", member_ids, result.assignment)
    assignment = {
        member_id: [[tp.topic, tp.partition] for tp in result.assignment[member_id]]
        for member_id in member_ids
    }
    transferring = [
        [tp.topic, tp.partition, owner]
        for tp, owner in sorted(result.transferring.items(), key=lambda item: item[0])
    ]
    return {
        "id": spec_id,
        "assignor": assignor,
        "assignment": assignment,
        "transferring": transferring,
        # Microsecond resolution is all perf_counter gives meaningfully for one call.
        "elapsed_ms": round(elapsed_ms, 4),
    }


def format_error(spec_id: SpecId, message: str) -> dict[str, Any]:
    return {"id": spec_id, "error": message}


def format_group_spec(spec: GroupSpec, spec_id: SpecId = None, assignor: str | None = None) -> dict[str, Any]:
    """The JSON form of ``spec`` (the inverse of :func:`parse_group_spec`); optional fields are
    written only when set, so generated spec files stay small."""
    topics: dict[str, Any] = {}
    for name, topic in spec.topics.items():
        entry: dict[str, Any] = {"partitions": topic.partitions}
        if topic.replica_racks is not None:
            entry["racks"] = [sorted(racks) for racks in topic.replica_racks]
        if topic.topic_id is not None:
            entry["topic_id"] = topic_id_string(topic.topic_id)
        topics[name] = entry
    members = []
    for m in spec.members:
        entry = {"member_id": m.member_id, "topics": list(m.topics)}
        if m.group_instance_id is not None:
            entry["group_instance_id"] = m.group_instance_id
        if m.rack is not None:
            entry["rack"] = m.rack
        if m.owned_partitions:
            entry["owned_partitions"] = [[tp.topic, tp.partition] for tp in m.owned_partitions]
        if m.generation != UNKNOWN_GENERATION:
            entry["generation"] = m.generation
        members.append(entry)
    out: dict[str, Any] = {}
    if spec_id is not None:
        out["id"] = spec_id
    if assignor is not None:
        out["assignor"] = assignor
    out["topics"] = topics
    out["members"] = members
    return out


@dataclass(frozen=True, slots=True)
class ParsedAnswer:
    """An answer line read back (from our CLI or the Java reference), for comparisons."""

    spec_id: SpecId
    assignor: str
    assignment: dict[str, list[TopicPartition]]
    #: Withheld partition -> intended owner; ``None`` where the producer cannot know it (Kafka).
    transferring: dict[TopicPartition, str | None]
    elapsed_ms: float


def parse_answer(obj: Mapping[str, Any]) -> ParsedAnswer:
    """Read an answer line back; an error line raises :class:`AssignmentError` with its message."""
    if "error" in obj:
        raise AssignmentError(f"spec {obj.get('id')!r}: {obj['error']}")
    assignment = {
        member_id: [TopicPartition(t, p) for t, p in tps] for member_id, tps in obj["assignment"].items()
    }
    transferring = {TopicPartition(t, p): owner for t, p, owner in obj.get("transferring", [])}
    return ParsedAnswer(obj.get("id"), obj["assignor"], assignment, transferring, float(obj["elapsed_ms"]))


# --- parsing helpers ------------------------------------------------------------------------------

def _reject_unknown_keys(obj: Mapping[str, Any], allowed: frozenset[str], path: str) -> None:
    # A misspelt optional field ("owned_partition") would otherwise be silently ignored and change
    # the answer, so unknown keys are errors.
    unknown = sorted(str(k) for k in obj if k not in allowed)
    if unknown:
        where = f"{path}: " if path else ""
        raise InvalidGroupSpecError(
            f"{where}unknown field(s) {', '.join(map(repr, unknown))}; allowed: {', '.join(sorted(allowed))}"
        )


def _parse_id(obj: Mapping[str, Any]) -> SpecId:
    value = obj.get("id")
    if value is None or isinstance(value, str) or _is_int(value):
        return value
    raise InvalidGroupSpecError(f"id: must be a string, an integer or null, got {_show(value)}")


def _parse_assignor(obj: Mapping[str, Any], override: str | None) -> str:
    name = override if override is not None else obj.get("assignor", _MISSING)
    if name is _MISSING or name is None:
        raise InvalidGroupSpecError("assignor: missing (give it on the line or with --assignor)")
    if not isinstance(name, str):
        raise InvalidGroupSpecError(f"assignor: must be a string, got {_show(name)}")
    if name not in CONSUMER_ASSIGNOR_NAMES:
        # The registry words the error (it lists the known names); asking it for an unknown name
        # raises before any assignor module is imported.
        try:
            get_assignor(name)
        except UnknownAssignorError as exc:
            raise InvalidGroupSpecError(f"assignor: {exc}") from None
    return name


def _parse_topics(value: object) -> dict[str, TopicSpec]:
    if not isinstance(value, Mapping):
        raise InvalidGroupSpecError(f"topics: must be an object of topic name -> {{\"partitions\": N}}, got {_show(value)}")
    topics: dict[str, TopicSpec] = {}
    topic_of_id: dict[Any, str] = {}
    for name, entry in value.items():
        path = f"topics[{name!r}]"
        if not name:
            raise InvalidGroupSpecError(f"{path}: a topic name must not be empty")
        if not isinstance(entry, Mapping):
            raise InvalidGroupSpecError(f"{path}: must be an object like {{\"partitions\": 3}}, got {_show(entry)}")
        _reject_unknown_keys(entry, _TOPIC_KEYS, path)
        partitions = entry.get("partitions", _MISSING)
        if not _is_int(partitions):
            raise InvalidGroupSpecError(f"{path}.partitions: must be an integer, got {_show(partitions)}")
        if partitions < 0:
            raise InvalidGroupSpecError(f"{path}.partitions: partition count {partitions} is negative")
        topic_id = _parse_topic_id(entry.get("topic_id"), path)
        if topic_id is not None:
            if topic_id in topic_of_id:
                raise InvalidGroupSpecError(
                    f"{path}.topic_id: {entry['topic_id']!r} is already the id of topic {topic_of_id[topic_id]!r}")
            topic_of_id[topic_id] = name
        topic = topics[name] = TopicSpec(name, partitions, _parse_racks(entry.get("racks"), partitions, path), topic_id)
        # Built here, with the rest of the metadata, rather than in the first assign call (the
        # Java reference likewise builds its Cluster metadata before timing the call).
        topic.partition_objects
    return topics


def _parse_topic_id(value: object, path: str):
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidGroupSpecError(f"{path}.topic_id: must be a string (Kafka's base64 topic id), got {_show(value)}")
    try:
        return topic_id_from_string(value)
    except ValueError as exc:
        raise InvalidGroupSpecError(f"{path}.topic_id: {exc}") from None


def _parse_racks(value: object, partitions: int, path: str) -> tuple[frozenset[str], ...] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise InvalidGroupSpecError(f"{path}.racks: must be a list (one list of racks per partition), got {_show(value)}")
    if len(value) != partitions:
        raise InvalidGroupSpecError(
            f"{path}.racks: has {len(value)} entries but the topic has {partitions} partitions"
            " (give one list of replica racks per partition)"
        )
    racks: list[frozenset[str]] = []
    for i, replica_racks in enumerate(value):
        if not isinstance(replica_racks, list):
            raise InvalidGroupSpecError(f"{path}.racks[{i}]: must be a list of rack names, got {_show(replica_racks)}")
        for j, rack in enumerate(replica_racks):
            if not isinstance(rack, str) or not rack:
                raise InvalidGroupSpecError(f"{path}.racks[{i}][{j}]: a rack must be a non-empty string, got {_show(rack)}")
        racks.append(frozenset(replica_racks))
    return tuple(racks)


def _parse_members(value: object, topics: Mapping[str, TopicSpec] | None = None) -> tuple[MemberSpec, ...]:
    if not isinstance(value, list):
        raise InvalidGroupSpecError(f"members: must be a list of member objects, got {_show(value)}")
    if not value:
        # Kafka never runs an assignor for an empty group (the leader is a member), and the sticky
        # assignors divide by the member count.
        raise InvalidGroupSpecError("members: a group needs at least one member")
    members: list[MemberSpec] = []
    index_of_member: dict[str, int] = {}
    index_of_instance: dict[str, int] = {}
    # Members with the same subscription share one tuple, and topic names are the metadata's own
    # strings: the assignors group members by subscription, and equal subscriptions that are one
    # object compare by identity instead of string by string (a large group usually has a few
    # distinct subscriptions, each listed by thousands of members).
    sharing = _Sharing({name: name for name in topics or ()}, {})
    for i, entry in enumerate(value):
        path = f"members[{i}]"
        member = _parse_member(entry, path, sharing)
        if member.member_id in index_of_member:
            raise InvalidGroupSpecError(
                f"{path}.member_id: {member.member_id!r} is already used by members[{index_of_member[member.member_id]}]"
            )
        index_of_member[member.member_id] = i
        if member.group_instance_id is not None:
            # The coordinator fences a second member with the same instance id; a spec with two is
            # not a state a real group can be in.
            if member.group_instance_id in index_of_instance:
                raise InvalidGroupSpecError(
                    f"{path}.group_instance_id: {member.group_instance_id!r} is already used by"
                    f" members[{index_of_instance[member.group_instance_id]}]"
                )
            index_of_instance[member.group_instance_id] = i
        members.append(member)
    return tuple(members)


def _parse_member(entry: object, path: str, sharing: _Sharing | None = None) -> MemberSpec:
    if not isinstance(entry, Mapping):
        raise InvalidGroupSpecError(f"{path}: must be an object with member_id and topics, got {_show(entry)}")
    _reject_unknown_keys(entry, _MEMBER_KEYS, path)

    member_id = entry.get("member_id", _MISSING)
    if not isinstance(member_id, str) or not member_id:
        raise InvalidGroupSpecError(f"{path}.member_id: must be a non-empty string, got {_show(member_id)}")

    instance_id = entry.get("group_instance_id")
    if instance_id is not None and (not isinstance(instance_id, str) or not instance_id):
        raise InvalidGroupSpecError(
            f"{path}.group_instance_id: must be a non-empty string or null, got {_show(instance_id)}"
        )

    rack = entry.get("rack")
    if rack is not None and (not isinstance(rack, str) or not rack):
        raise InvalidGroupSpecError(f"{path}.rack: must be a non-empty string or null, got {_show(rack)}")

    topics = _parse_subscription(entry.get("topics", _MISSING), path)
    if sharing is not None:
        topics = sharing.share(topics)
    owned = _parse_owned(entry.get("owned_partitions", []), path, sharing.names if sharing is not None else None)

    generation = entry.get("generation", UNKNOWN_GENERATION)
    if generation is None:
        generation = UNKNOWN_GENERATION
    if not _is_int(generation):
        raise InvalidGroupSpecError(f"{path}.generation: must be an integer, got {_show(generation)}")
    if generation < UNKNOWN_GENERATION:
        raise InvalidGroupSpecError(
            f"{path}.generation: {generation} is invalid (generations start at 0; -1 means unknown)"
        )

    return MemberSpec(
        member_id=member_id,
        topics=topics,
        owned_partitions=owned,
        generation=generation,
        group_instance_id=instance_id,
        rack=rack,
    )


class _Sharing(NamedTuple):
    """Canonical topic-name strings and subscription tuples of one spec being parsed."""

    names: dict[str, str]
    subscriptions: dict[tuple[str, ...], tuple[str, ...]]

    def share(self, topics: tuple[str, ...]) -> tuple[str, ...]:
        shared = self.subscriptions.get(topics)
        if shared is None:
            names = self.names
            shared = self.subscriptions[topics] = tuple(map(names.get, topics, topics))
        return shared


def _parse_subscription(value: object, path: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise InvalidGroupSpecError(f"{path}.topics: must be a list of topic names, got {_show(value)}")
    seen: set[str] = set()
    for j, topic in enumerate(value):
        if not isinstance(topic, str) or not topic:
            raise InvalidGroupSpecError(f"{path}.topics[{j}]: a topic must be a non-empty string, got {_show(topic)}")
        if topic in seen:
            # Kafka's subscription is a set; the sticky assignors compare subscription sizes, so a
            # repeated topic would change which algorithm runs.
            raise InvalidGroupSpecError(f"{path}.topics[{j}]: topic {topic!r} is listed twice")
        seen.add(topic)
    return tuple(value)


def _parse_owned(value: object, path: str, names: Mapping[str, str] | None = None) -> tuple[TopicPartition, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise InvalidGroupSpecError(
            f"{path}.owned_partitions: must be a list of [topic, partition] pairs, got {_show(value)}"
        )
    owned: list[TopicPartition] = []
    seen: set[TopicPartition] = set()
    for j, pair in enumerate(value):
        where = f"{path}.owned_partitions[{j}]"
        if not isinstance(pair, list) or len(pair) != 2:
            raise InvalidGroupSpecError(f"{where}: must be a [topic, partition] pair, got {_show(pair)}")
        topic, partition = pair
        if not isinstance(topic, str) or not topic:
            raise InvalidGroupSpecError(f"{where}: topic must be a non-empty string, got {_show(topic)}")
        if not _is_int(partition):
            raise InvalidGroupSpecError(f"{where}: partition of topic {topic!r} must be an integer, got {_show(partition)}")
        if partition < 0:
            raise InvalidGroupSpecError(f"{where}: partition {partition} of topic {topic!r} is negative")
        # The metadata's own topic-name string, so the assignors' topic lookups compare by
        # identity. (Reusing the topic's kept TopicPartition objects instead was measured slower:
        # claims read in claim order then jump around memory, while new objects lie in order.)
        tp = TopicPartition(names.get(topic, topic) if names is not None else topic, partition)
        if tp in seen:
            raise InvalidGroupSpecError(f"{where}: partition {partition} of topic {topic!r} is listed twice")
        seen.add(tp)
        # Claims on unknown topics or beyond the partition count are kept: a member can really
        # report a stale claim (deleted topic, shrunk metadata) and Kafka's assignors drop those.
        owned.append(tp)
    return tuple(owned)
