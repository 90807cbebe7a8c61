"""The group coordinator's own log, ``__consumer_offsets``, decoded exactly as Kafka 4.1 writes it.

Pure: bytes in, typed records out; no Spark, no I/O, no clock. The entry point is :func:`decode`
(one record's key and value bytes -> :class:`CoordinatorRecord`), with :func:`is_offset_commit` to
skip the offset commits that make up most of the topic before decoding anything. Anything that
cannot be decoded raises :class:`~streaming.errors.CoordinatorRecordError`, whose message names
the record type, the version and what is wrong; nothing else is raised.

Why Python and not Kafka's own Java classes, measured: see docs/coordinator-log.md.

Modules, one concern each: :mod:`.wire` (Kafka's primitive encodings), :mod:`.records` (the typed
records), :mod:`.decode` (key/value bytes -> record), :mod:`.consumer_protocol`,
:mod:`.connect_protocol` and :mod:`.streams_protocol` (the protocol bytes a classic group's
members exchange, which the coordinator stores unread).
"""

from streaming.errors import CoordinatorRecordError

from .decode import decode, is_offset_commit, peek_record_type
from .records import CoordinatorRecord, RecordType, kafka_uuid

__all__ = [
    "CoordinatorRecord",
    "CoordinatorRecordError",
    "RecordType",
    "decode",
    "is_offset_commit",
    "kafka_uuid",
    "peek_record_type",
]
