"""A KIP-848 consumer group's records folded into generations, one per target-assignment epoch.

The coordinator of a group on the new protocol (``group.protocol=consumer``) writes each change as
a batch of records: the changed members' metadata (type 5: subscription, rack, server assignor),
the new group epoch (3), the target of each member whose target changed (7: partitions by topic
id), then the target assignment's epoch (6); a member that leaves gets tombstones (8, 7, 5) and the
epoch moves on. So the group's current members and targets are a fold over its records, and each
type-6 record closes one generation: the target every member is to reconcile to, under the epoch's
number. (Members then reach it through their own epochs, type 8, as they revoke and are given
partitions; those steps are not generations.) A group whose last member left is Empty at its new
group epoch: a generation with no members.

Topic ids become names through the topic catalog (the observed cluster's descriptions).
"""

from __future__ import annotations

from assignors import TopicPartition
from assignors.timeline_order import MemberTable, next_target

from streaming.engine.batch import Batch
from streaming.engine.coordinator_events import ConsumerGroupRecord, CoordinatorGeneration, CoordinatorMember
from streaming.engine.topic_catalog import TopicCatalog

GROUP_EPOCH, MEMBER_METADATA, TARGET_EPOCH, MEMBER_TARGET = 3, 5, 6, 7
#: The broker's names of its assignors -> this project's (KIP-848 "range" is server-range here).
ASSIGNOR_NAMES = {"range": "server-range", "uniform": "uniform"}
#: The broker's default (group.consumer.assignors' first).
DEFAULT_ASSIGNOR = "uniform"


def fold(batch: Batch, r: ConsumerGroupRecord, catalog: TopicCatalog) -> CoordinatorGeneration | None:
    """Apply one record to the group's fold; the generation it closes, if any."""
    s = batch.state
    fold_state = s.kip848 if s.kip848 else {"members": {}, "targets": {}}
    s.kip848 = fold_state
    members, targets = fold_state["members"], fold_state["targets"]
    if r.record_type == MEMBER_METADATA:
        if r.tombstone:
            gone = members.pop(r.member_id, None)
            if gone and gone["group_instance_id"]:  # its instance id may come back under a new id
                fold_state.setdefault("released", {})[gone["group_instance_id"]] = r.member_id
        else:  # a known member keeps its place: the subscription map's order is join order
            _maybe_static_replacement(fold_state, r)
            members[r.member_id] = {"topics": list(r.topics or ()), "assignor": r.server_assignor,
                                    "group_instance_id": r.group_instance_id, "client_id": r.client_id,
                                    "host": r.host, "rack": r.rack}
    elif r.record_type == MEMBER_TARGET:
        if r.tombstone:
            targets.pop(r.member_id, None)
        else:
            targets[r.member_id] = {topic_id: list(ps) for topic_id, ps in (r.target or {}).items()}
    elif r.record_type == TARGET_EPOCH and not r.tombstone:
        return _generation(batch, r, catalog)
    elif r.record_type == GROUP_EPOCH and not r.tombstone and not members and s.generation > 0:
        return _generation(batch, r, catalog)  # the last member left: Empty at the new epoch
    return None


def _maybe_static_replacement(fold_state: dict, r: ConsumerGroupRecord) -> None:
    """A new member id with the instance id of a member removed since the last target: the static
    member replaced (the old id's tombstones, then the new id's records, no new target;
    :meth:`~assignors.timeline_order.MemberTable.replaced`)."""
    released = fold_state.get("released") or {}
    old_id = released.pop(r.group_instance_id, None) if r.group_instance_id else None
    if old_id is not None and r.member_id not in fold_state["members"] and fold_state.get("table"):
        fold_state["table"] = MemberTable.from_json(fold_state["table"]).replaced(old_id, r.member_id).to_json()


def _generation(batch: Batch, r: ConsumerGroupRecord, catalog: TopicCatalog) -> CoordinatorGeneration:
    s = batch.state
    s.kip848.pop("released", None)  # a target computed since: a later join is a join
    members, targets = s.kip848["members"], s.kip848["targets"]
    named = next((m["assignor"] for m in members.values() if m["assignor"]), None)
    # An Empty group keeps the assignor it had; a member that names none gets the broker's default.
    chosen = ASSIGNOR_NAMES.get(named, named) if named else (s.assignor or DEFAULT_ASSIGNOR)
    # The coordinator handed its assignor the members in its member map's order, the ones that
    # joined in this epoch last (assignors.timeline_order); the check gives ours the same order.
    table = MemberTable.from_json(s.kip848["table"]) if s.kip848.get("table") else MemberTable()
    order, table = next_target(table, list(members))
    s.kip848["table"] = table.to_json()
    out = []
    for member_id in order:
        m = members[member_id]
        # In the record's order: that of the coordinator's HashMap of topic ids, which the next
        # epoch's uniform assignor walks (ids sharing a bucket keep it; assignors/server_group.py).
        target = tuple(TopicPartition(catalog.name_of(topic_id) or topic_id, p)
                       for topic_id, ps in targets.get(member_id, {}).items() for p in ps)
        out.append(CoordinatorMember(
            member_id=member_id, topics=tuple(m["topics"]),
            # The server-side assignor starts from the previous target assignment.
            owned_partitions=tuple(s.assignment.get(member_id, ())), assignment=target,
            group_instance_id=m["group_instance_id"], client_id=m["client_id"], host=m["host"], rack=m["rack"]))
    return CoordinatorGeneration(group_id=s.group_id, event_time=r.event_time, partition=r.partition,
                                 offset=r.offset, generation=r.epoch, protocol_type="consumer",
                                 protocol=chosen, leader=None, members=tuple(out))
