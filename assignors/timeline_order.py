"""The order of the coordinator's member map, which decides the order a KIP-848 assignor sees.

Kafka 4.1's ``TargetAssignmentBuilder.build`` fills a fresh ``HashMap`` with the group's members in
the order its ``members`` map iterates them, then puts the member whose heartbeat triggered the
computation (a joining member, a static member replacing its predecessor). The assignors then walk
that ``HashMap`` (:func:`~assignors.java_order.hashmap_order`); where two member ids share one of
its buckets, the insertion order decides which comes first, and ``uniform`` gives the extra
partition of a homogeneous group to the first members it visits. So a port that inserts members in
join order disagrees with the coordinator on some epochs of some groups, at random.

The ``members`` map is a ``TimelineHashMap`` (kafka-server-common 4.1.1, ``BaseHashTable``), whose
layout depends on the whole history of puts and removals. Its rules, reproduced by
:class:`MemberTable`:

- the table starts with 2 slots (expected size 0) and doubles when a put (a replacing one too)
  finds ``(size + 1) * 0.75 > slots``;
- a key's slot is the top ``log2(slots)`` bits of ``hashCode * -7046029254386353131`` (64-bit
  Fibonacci hashing of Java's ``String.hashCode``);
- keys that share a slot form an array, a new one appended; a removal keeps the others in order;
  a rehash walks the old slots in order and appends each key to its new slot;
- iteration walks the slots in order and each slot's array from its end.

The coordinator puts a member twice when it joins (its metadata record, then its current
assignment record, in the same batch), so a growth check runs after the new key is in; a member
that leaves is removed (its earlier put of the leave epoch finds the same size: no growth).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from .java_order import string_hashes

_MASK64 = (1 << 64) - 1
#: ``BaseHashTable.findSlot``'s multiplier (Knuth's multiplicative hashing, as a signed long).
_FIBONACCI = -7046029254386353131
_MIN_SLOTS = 2
_MAX_SLOTS = 1 << 30


def _slot(hash_code: int, slots: int) -> int:
    signed = hash_code - (1 << 32) if hash_code >= 1 << 31 else hash_code
    return ((signed * _FIBONACCI) & _MASK64) >> (64 - (slots.bit_length() - 1))


def _must_grow(size: int, slots: int) -> bool:
    return (size + 1) * 0.75 > slots and slots < _MAX_SLOTS


@dataclass(frozen=True)
class MemberTable:
    """A snapshot of the coordinator's member map: its slot count and its keys in layout order
    (slot by slot, each slot's array in order)."""

    slots: int = _MIN_SLOTS
    layout: tuple[str, ...] = ()

    def iteration_order(self) -> list[str]:
        """The order ``members.forEach`` visits the keys (each slot's array from its end)."""
        by_slot = self._by_slot(self.slots)
        return [key for slot in sorted(by_slot) for key in reversed(by_slot[slot])]

    def replaced(self, old_id: str, new_id: str) -> MemberTable:
        """A static member replaced under a new member id: Kafka's coordinator removes the old id and
        puts the new one at once (``GroupMetadataManager.replaceMember``), with no new target, so
        the next target finds the new id in its own place, not as a member joining last."""
        return self.changed(removed=[old_id], joined=[new_id])

    def changed(self, removed: Iterable[str] = (), joined: Sequence[str] = ()) -> MemberTable:
        """The table after ``removed`` leave (in any order: a removal keeps the rest in place) and
        then ``joined`` join, in order, each put twice (see the module doc)."""
        gone = set(removed)
        slots = self.slots
        by_slot = self._by_slot(slots, [k for k in self.layout if k not in gone])
        size = sum(map(len, by_slot.values()))
        present = {k for keys in by_slot.values() for k in keys}
        new = [k for k in dict.fromkeys(joined) if k not in present]
        for key, hash_code in zip(new, string_hashes(new)):
            if _must_grow(size, slots):
                by_slot, slots = self._rehashed(by_slot, slots), slots * 2
            by_slot.setdefault(_slot(hash_code, slots), []).append(key)
            size += 1
            if _must_grow(size, slots):  # the second put of the joining member
                by_slot, slots = self._rehashed(by_slot, slots), slots * 2
        return MemberTable(slots, tuple(k for slot in sorted(by_slot) for k in by_slot[slot]))

    def _by_slot(self, slots: int, keys: Sequence[str] | None = None) -> dict[int, list[str]]:
        keys = self.layout if keys is None else keys
        out: dict[int, list[str]] = {}
        for key, hash_code in zip(keys, string_hashes(list(keys))):
            out.setdefault(_slot(hash_code, slots), []).append(key)
        return out

    @staticmethod
    def _rehashed(by_slot: dict[int, list[str]], slots: int) -> dict[int, list[str]]:
        keys = [k for slot in sorted(by_slot) for k in by_slot[slot]]
        out: dict[int, list[str]] = {}
        for key, hash_code in zip(keys, string_hashes(keys)):
            out.setdefault(_slot(hash_code, slots * 2), []).append(key)
        return out

    def to_json(self) -> list:
        return [self.slots, list(self.layout)]

    @classmethod
    def from_json(cls, data: list) -> MemberTable:
        slots, layout = data
        return cls(int(slots), tuple(layout))


def next_target(table: MemberTable, members: Sequence[str]) -> tuple[list[str], MemberTable]:
    """A new target computed for ``members`` (in join order): the order the assignor sees them in
    (:func:`coordinator_member_order`) and the member map once the departed are removed and the
    newcomers put."""
    order = coordinator_member_order(table, members)
    current, in_table = set(members), set(table.layout)
    return order, table.changed(removed=[m for m in table.layout if m not in current],
                                joined=[m for m in members if m not in in_table])


def coordinator_member_order(table: MemberTable, members: Sequence[str]) -> list[str]:
    """The order in which the coordinator inserts ``members`` (the group's members at this epoch,
    in join order) into the assignor's ``HashMap``: those already in ``table`` in its iteration
    order, then the ones that joined since, in join order."""
    current = set(members)
    known = [m for m in table.iteration_order() if m in current]
    seen = set(known)
    return known + [m for m in members if m not in seen]
