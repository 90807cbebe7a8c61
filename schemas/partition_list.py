"""An ``assignments`` row's partitions held as integer columns, and as an Arrow column.

An ``assignments`` row lists what its member holds as (topic, partition) structs. A huge group's
generation is 10,000 rows holding 500,000 partitions: as dicts they took 0.15-0.24 s to build.
:class:`PartitionList` keeps a member's partitions as slices of the generation's columns: it reads
like the list of ``{"topic", "partition"}`` dicts (whoever looks at a row sees the same value), and
:func:`partitions_array` turns a run of rows' lists into the table's column with Arrow, without a
Python object per partition (the rows cross to the sink as an Arrow block: streaming.job.row_blocks).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import pyarrow as pa


class PartitionList(Sequence):
    """A member's partitions: ``{"topic": topics[topic[k]], "partition": partition[k]}`` for each k."""

    __slots__ = ("topics", "topic", "partition")

    def __init__(self, topics: list[str], topic: np.ndarray, partition: np.ndarray):
        self.topics, self.topic, self.partition = topics, topic, partition

    def __len__(self) -> int:
        return len(self.partition)

    def __getitem__(self, k):
        if isinstance(k, slice):
            return list(self)[k]
        return {"topic": self.topics[int(self.topic[k])], "partition": int(self.partition[k])}

    def __iter__(self):
        names = self.topics
        for t, p in zip(self.topic.tolist(), self.partition.tolist()):
            yield {"topic": names[t], "partition": p}

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple, PartitionList)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # a list's value: not hashable

    def __repr__(self) -> str:
        return repr(list(self))


def partitions_array(lists: Sequence[Sequence[dict] | None], list_type: pa.ListType) -> pa.ListArray:
    """The column of ``list_type`` (the table's ``partitions`` type) holding ``lists``: a
    :class:`PartitionList` without a dict per partition, a plain list of dicts (Streams and Connect
    rows) as it is, None as null."""
    if not lists or not all(isinstance(held, PartitionList) for held in lists):
        return pa.array([None if held is None else list(held) for held in lists], list_type)
    lengths = np.fromiter((len(held) for held in lists), np.int64, count=len(lists))
    empty = np.zeros(0, dtype=np.int64)
    topic = np.concatenate([held.topic for held in lists] or [empty]).astype(np.int64)
    shared = lists[0].topics
    if all(held.topics is shared for held in lists):  # one generation's lists: its names once
        names = pa.array(shared, pa.string())
    else:  # each list numbers its own topics: shift its numbers by where its names start in all names
        name_counts = np.fromiter((len(held.topics) for held in lists), np.int64, count=len(lists))
        name_starts = np.concatenate(([0], np.cumsum(name_counts)[:-1])).astype(np.int64)
        names = pa.array(list(itertools.chain.from_iterable(held.topics for held in lists)), pa.string())
        topic += np.repeat(name_starts, lengths)
    partition = np.concatenate([held.partition for held in lists] or [empty])
    struct_type = list_type.value_type
    values = pa.StructArray.from_arrays(
        [names.take(pa.array(topic)).cast(struct_type.field(0).type),
         pa.array(partition, struct_type.field(1).type)], fields=list(struct_type))
    offsets = pa.array(np.concatenate(([0], np.cumsum(lengths))).astype(np.int32))
    return pa.ListArray.from_arrays(offsets, values, type=list_type)
