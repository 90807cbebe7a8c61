"""A state bucket: the groups one key of Spark's stateful operator holds, as one state value.

Spark's stateful operator is keyed by bucket, not by group (see :mod:`streaming.processor`). Every
call to Spark's state server is a synchronous round trip from the Python worker (about 0.1 ms, and a
third of the operator's Python CPU when each group was its own MapState entry: profiled at 10,000
events/s, docs/benchmarks/job.md). So a bucket is one value: read once and written once per
micro-batch, whatever the number of its groups.

Inside, each group keeps its engine state as its own compressed blob (:mod:`streaming.state_codec`),
decoded only when the group has something to do in the batch; a group without events keeps its bytes
as they are. Beside each blob is the group's next deadline (session expiry, coalescing window,
cooperative follow-up, ...), so a firing timer finds the groups that are due without decoding the
others, and the bucket's one timer sits at the earliest of them.

The bytes are an Arrow IPC stream of one record batch (group_id, state, deadline), with the format
version and the registered timer in its schema metadata: a versioned, self-describing format that
outlives the code that wrote it, like the group blobs inside it.
"""

from __future__ import annotations

import pyarrow as pa

from .group_state import GroupState
from .state_codec import decode_state, encode_state

FORMAT_VERSION = "1"

_FIELDS = [pa.field("group_id", pa.string(), nullable=False), pa.field("state", pa.binary(), nullable=False),
           pa.field("deadline", pa.int64())]


class StateBucket:
    """One bucket's groups: their state blobs, their next deadlines, and the bucket's timer."""

    def __init__(self, blobs: dict[str, bytes] | None = None, deadlines: dict[str, int] | None = None,
                 timer_at: int | None = None):
        self.blobs = blobs if blobs is not None else {}
        self.deadlines = deadlines if deadlines is not None else {}
        #: The event-time timer registered with Spark for this bucket (None: none registered).
        self.timer_at = timer_at
        self.changed = False

    # -- groups -----------------------------------------------------------------------------------

    def load(self, group_id: str) -> GroupState:
        blob = self.blobs.get(group_id)
        return decode_state(blob) if blob is not None else GroupState(group_id=group_id)

    def save(self, state: GroupState, deadline: int | None) -> None:
        self.blobs[state.group_id] = encode_state(state)
        if deadline is None:
            self.deadlines.pop(state.group_id, None)
        else:
            self.deadlines[state.group_id] = deadline
        self.changed = True

    def due(self, watermark: int) -> list[str]:
        """Groups whose deadline the watermark has reached, in a stable order."""
        return sorted(g for g, d in self.deadlines.items() if d <= watermark)

    def earliest_deadline(self) -> int | None:
        return min(self.deadlines.values()) if self.deadlines else None

    # -- bytes ------------------------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        ids = list(self.blobs)
        metadata = {"format": FORMAT_VERSION, "timer_at": "" if self.timer_at is None else str(self.timer_at)}
        schema = pa.schema(_FIELDS, metadata=metadata)
        batch = pa.record_batch([pa.array(ids, pa.string()), pa.array([self.blobs[g] for g in ids], pa.binary()),
                                 pa.array([self.deadlines.get(g) for g in ids], pa.int64())], schema=schema)
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, schema) as writer:
            writer.write_batch(batch)
        return sink.getvalue().to_pybytes()

    @classmethod
    def from_bytes(cls, data: bytes) -> "StateBucket":
        table = pa.ipc.open_stream(data).read_all()
        metadata = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
        if metadata.get("format") != FORMAT_VERSION:
            raise ValueError(f"state bucket format {metadata.get('format')!r} is not {FORMAT_VERSION}: "
                             "this job cannot read a checkpoint written by another version")
        ids = table.column("group_id").to_pylist()
        blobs = dict(zip(ids, table.column("state").to_pylist()))
        deadlines = {g: d for g, d in zip(ids, table.column("deadline").to_pylist()) if d is not None}
        timer_at = metadata.get("timer_at")
        return cls(blobs, deadlines, int(timer_at) if timer_at else None)
