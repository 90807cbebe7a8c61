"""An ``assignments`` row's partitions held as integer columns, and their compact JSON form.

An ``assignments`` row lists what its member holds as (topic, partition) structs. A huge group's
generation is 10,000 rows holding 500,000 partitions: as dicts they took 0.15-0.24 s to build, as
JSON 19 MiB, handed from the Python worker to Spark and on to the driver, where the sink parsed
500,000 structs again. :class:`PartitionList` keeps a member's partitions as slices of the
generation's columns: it reads like the list of ``{"topic", "partition"}`` dicts (whoever looks at
a row sees the same value), and the operator writes it under :data:`COMPACT_KEY` as
``{"topics": [names], "topic": [index into names], "partition": [numbers]}``, which the sink
turns back into the table's column with Arrow (:func:`expand_arrow`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: The payload key of the compact form; never a column of the table.
COMPACT_KEY = "partition_columns"
#: How the sink parses the compact form.
COMPACT_TYPE = pa.struct([("topics", pa.list_(pa.string())), ("topic", pa.list_(pa.int32())),
                          ("partition", pa.list_(pa.int32()))])


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

    def compact(self) -> dict[str, Any]:
        """The :data:`COMPACT_KEY` value (NumPy arrays: orjson writes them with ``OPT_SERIALIZE_NUMPY``)."""
        return {"topics": self.topics, "topic": self.topic.astype(np.int32), "partition": self.partition.astype(np.int32)}


def compact_of(partitions: Sequence[dict]) -> dict[str, Any]:
    """The compact form of any list of ``{"topic", "partition"}`` dicts."""
    if isinstance(partitions, PartitionList):
        return partitions.compact()
    number: dict[str, int] = {}
    topic = [number.setdefault(p["topic"], len(number)) for p in partitions]
    return {"topics": list(number), "topic": topic, "partition": [p["partition"] for p in partitions]}


def expand_json(compact: dict[str, Any]) -> list[dict]:
    """The list of dicts a compact form stands for."""
    names = compact["topics"]
    return [{"topic": names[t], "partition": p} for t, p in zip(compact["topic"], compact["partition"])]


def expand_arrow(compact: pa.StructArray, list_type: pa.DataType) -> pa.Array:
    """Per row, the list of ``list_type`` (the table's ``partitions`` type) the compact struct
    array ``compact`` stands for; a null row stays null."""
    topics = compact.field("topics")
    topic = compact.field("topic")
    partition = compact.field("partition")
    # Row r's topic indices point into its own names: shift them by where its names start.
    starts = topics.offsets.to_numpy()[:-1] - topics.offsets[0].as_py()
    lengths = pc.list_value_length(topic).fill_null(0).to_numpy()
    index = topic.flatten().to_numpy().astype(np.int64) + np.repeat(starts, lengths)
    names = topics.flatten().take(pa.array(index))
    struct_type = list_type.value_type
    values = pa.StructArray.from_arrays([names.cast(struct_type.field(0).type),
                                         partition.flatten().cast(struct_type.field(1).type)],
                                        fields=list(struct_type))
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
    return pa.ListArray.from_arrays(offsets, values, type=list_type, mask=compact.is_null())
