"""A state bucket: the groups one key of Spark's stateful operator holds, as one state value.

Spark's stateful operator is keyed by bucket, not by group (see :mod:`streaming.job.processor`). Every
call to Spark's state server is a synchronous round trip from the Python worker (about 0.1 ms, and a
third of the operator's Python CPU when each group was its own MapState entry: profiled at 10,000
events/s, docs/benchmarks/job.md). So a bucket is one value: read once and written once per
micro-batch, whatever the number of its groups.

Inside, each group keeps its engine state as its own blob (:mod:`streaming.engine.codec`),
decoded only when the group has something to do in the batch; a group without events keeps its bytes
as they are. A Python worker usually gets the same buckets batch after batch, so it keeps the state
objects it wrote (:class:`RecentStates`) and skips the decoding when the stored bytes are still the
ones it wrote: decoding was a quarter of the per-group work of a heartbeat batch. Beside each blob is the group's next deadline (session expiry, coalescing window,
cooperative follow-up, ...), so a firing timer finds the groups that are due without decoding the
others, and the bucket's one timer sits at the earliest of them.

The bytes are an Arrow IPC stream of one record batch (group_id, state, deadline), with the format
version and the registered timer in its schema metadata: a versioned, self-describing format that
outlives the code that wrote it, like the group blobs inside it. Since format 2 the stream's buffers
are zstd-compressed (Arrow's IPC compression), and the group blobs are not compressed on their
own (group state format 7): one compression per bucket per batch, not one per group.
"""

from __future__ import annotations

import json

import pyarrow as pa

from streaming.engine.codec import decode_state, encode_state
from streaming.engine.state import GroupState
from streaming.engine.topic_catalog import TopicCatalog

FORMAT_VERSION = "2"
#: Format 1: the same stream uncompressed (its group blobs compressed each, group state format 6).
_READABLE_VERSIONS = ("1", "2")
_WRITE_OPTIONS = pa.ipc.IpcWriteOptions(compression="zstd")

_FIELDS = [pa.field("group_id", pa.string(), nullable=False), pa.field("state", pa.binary(), nullable=False),
           pa.field("deadline", pa.int64())]


class RecentStates:
    """Group states this process wrote recently, each with the bytes it was written as.

    A state is handed out only against exactly those bytes, so a stale entry (another worker wrote
    the group since, or the batch was retried after the state store rolled back) is never used: its
    bytes differ and the group is decoded. An entry is removed when handed out and put back when the
    group is saved again, so a batch that fails half-way leaves no half-advanced state behind. The
    bytes decode to an equal state (tests check it after every batch of the engine's stories), so
    reusing the object cannot change the history.
    """

    #: Entries kept per process; the oldest go first. A 10-member group's state is ~20 KB of objects.
    CAPACITY = 10_000
    #: Larger states (huge groups) are not kept: they would hold hundreds of MB between batches.
    #: (Uncompressed bytes since group state format 7: about three times the compressed size.)
    MAX_BLOB_BYTES = 768 * 1024

    def __init__(self):
        self._entries: dict[str, tuple[bytes, GroupState]] = {}

    def take(self, group_id: str, blob: bytes) -> GroupState | None:
        entry = self._entries.pop(group_id, None)
        return entry[1] if entry is not None and entry[0] == blob else None

    def put(self, group_id: str, blob: bytes, state: GroupState) -> None:
        if len(blob) > self.MAX_BLOB_BYTES:
            return
        if len(self._entries) >= self.CAPACITY:
            del self._entries[next(iter(self._entries))]
        self._entries[group_id] = (blob, state)


#: This process's recent states: Spark reuses a Python worker process for the next batches' tasks.
_RECENT = RecentStates()


class StateBucket:
    """One bucket's groups: their state blobs, their next deadlines, and the bucket's timer."""

    def __init__(self, blobs: dict[str, bytes] | None = None, deadlines: dict[str, int] | None = None,
                 timer_at: int | None = None, catalog: TopicCatalog | None = None, waiting: set[str] | None = None):
        self.blobs = blobs if blobs is not None else {}
        self.deadlines = deadlines if deadlines is not None else {}
        #: The event-time timer registered with Spark for this bucket (None: none registered).
        self.timer_at = timer_at
        #: The observed cluster's topics (every bucket gets every description: the coordinator's
        #: log source), and the groups whose recorded generations wait for it to cover their time.
        self.catalog = catalog if catalog is not None else TopicCatalog()
        self.waiting = waiting if waiting is not None else set()
        self.changed = False

    # -- groups -----------------------------------------------------------------------------------

    def load(self, group_id: str) -> GroupState:
        """The group's state, to be advanced and then passed to :meth:`save`."""
        blob = self.blobs.get(group_id)
        if blob is None:
            return GroupState(group_id=group_id)
        state = _RECENT.take(group_id, blob)
        return state if state is not None else decode_state(blob)

    def save(self, state: GroupState, deadline: int | None) -> None:
        blob = self.blobs[state.group_id] = encode_state(state)
        _RECENT.put(state.group_id, blob, state)
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
        if self.catalog.described_until >= 0 or self.waiting:  # only a job reading the coordinator's log
            metadata["topic_catalog"] = json.dumps(self.catalog.to_json(), separators=(",", ":"))
            metadata["waiting_groups"] = json.dumps(sorted(self.waiting))
        schema = pa.schema(_FIELDS, metadata=metadata)
        batch = pa.record_batch([pa.array(ids, pa.string()), pa.array([self.blobs[g] for g in ids], pa.binary()),
                                 pa.array([self.deadlines.get(g) for g in ids], pa.int64())], schema=schema)
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, schema, options=_WRITE_OPTIONS) as writer:
            writer.write_batch(batch)
        return sink.getvalue().to_pybytes()

    @classmethod
    def from_bytes(cls, data: bytes) -> "StateBucket":
        table = pa.ipc.open_stream(data).read_all()
        metadata = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
        if metadata.get("format") not in _READABLE_VERSIONS:
            raise ValueError(f"state bucket format {metadata.get('format')!r} is not one of "
                             f"{', '.join(_READABLE_VERSIONS)}: "
                             "this job cannot read a checkpoint written by another version")
        ids = table.column("group_id").to_pylist()
        blobs = dict(zip(ids, table.column("state").to_pylist()))
        deadlines = {g: d for g, d in zip(ids, table.column("deadline").to_pylist()) if d is not None}
        timer_at = metadata.get("timer_at")
        catalog = TopicCatalog.from_json(json.loads(metadata["topic_catalog"])) if "topic_catalog" in metadata else None
        waiting = set(json.loads(metadata.get("waiting_groups", "[]")))
        return cls(blobs, deadlines, int(timer_at) if timer_at else None, catalog, waiting)
