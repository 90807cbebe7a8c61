"""The observed cluster's topics over event time: partition counts and topic ids, as an input.

The engine does no I/O, so what the coordinator's records do not say (how many partitions a
subscribed topic has, which name a KIP-848 topic id stands for) reaches it as data: the job's
topic-metadata publisher describes the cluster's topics every few seconds and writes each
description into a monitor topic (:mod:`streaming.feeds.topic_metadata`); the job hands every
description to every state bucket, which keeps this catalog. A replay reads the same descriptions,
so a generation is measured against the same partition counts every time.

A description is a full snapshot (``topics``) when something changed, else a marker that nothing
did (``unchanged``); both say "the cluster was described at ``event_time``". A generation at time T
is measured against the newest description at or before T. It waits until the cluster has been
described at or after T (:meth:`covers`): until then a topic created just before T may be missing.
A generation older than the first description (a log replayed from before the publisher started)
uses the first description of each topic: the best knowledge there is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from assignors import TopicSpec
from assignors.model import topic_id_from_string

#: Descriptions kept per topic: enough for the generations waiting in any group, bounded.
HISTORY_PER_TOPIC = 4


@dataclass
class TopicCatalog:
    #: topic -> [[event time, partitions (0: deleted), topic id or None], ...], oldest first.
    history: dict[str, list[list]] = field(default_factory=dict)
    #: Time of the newest description (full or unchanged); -1: never described.
    described_until: int = -1
    #: Time of the first full description; -1: none yet.
    first_described: int = -1

    def apply(self, description: Mapping[str, Any]) -> bool:
        """Add one description (the publisher's record); False if it is older than what is known."""
        at = int(description["event_time"])
        if at < self.described_until:
            return False
        self.described_until = at
        topics = description.get("topics")
        if topics is None:  # "unchanged": only time moves on
            return True
        if self.first_described < 0:
            self.first_described = at
        now = {t["name"]: (int(t["partitions"]), t.get("topic_id")) for t in topics}
        for name in sorted(set(self.history) | set(now)):
            partitions, topic_id = now.get(name, (0, None))
            entries = self.history.setdefault(name, [])
            if entries and entries[-1][1:] == [partitions, topic_id]:
                continue
            entries.append([at, partitions, topic_id])
            del entries[:-HISTORY_PER_TOPIC]
        return True

    def covers(self, at: int) -> bool:
        """The cluster has been described at or after ``at``: what it had then is known."""
        return self.described_until >= at

    def as_of(self, at: int, names: Iterable[str]) -> dict[str, TopicSpec]:
        """The topics among ``names`` that existed at ``at``, with their partition counts and ids."""
        out = {}
        for name in sorted(set(names)):
            entries = self.history.get(name)
            if not entries:
                continue
            before = [e for e in entries if e[0] <= at]
            if before:
                entry = before[-1]
            elif at < self.first_described:
                entry = entries[0]  # older than every description: the first is the best knowledge
            else:
                continue  # created after ``at``
            _, partitions, topic_id = entry
            if partitions > 0:
                out[name] = TopicSpec(name, partitions,
                                      topic_id=topic_id_from_string(topic_id) if topic_id else None)
        return out

    def name_of(self, topic_id: str) -> str | None:
        """The topic a (KIP-848) topic id names, from the newest description that has it."""
        for name, entries in self.history.items():
            if any(e[2] == topic_id for e in entries):
                return name
        return None

    def to_json(self) -> dict:
        return {"history": self.history, "described_until": self.described_until,
                "first_described": self.first_described}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> "TopicCatalog":
        if not data:
            return cls()
        return cls({k: [list(e) for e in v] for k, v in data["history"].items()}, int(data["described_until"]),
                   int(data["first_described"]))
