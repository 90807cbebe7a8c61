"""The group coordinator's own log, ``__consumer_offsets``, decoded exactly as Kafka 4.1 writes it.

Pure: bytes in, typed records out; no Spark, no I/O, no clock. The entry point is :func:`decode`
(one record's key and value bytes -> :class:`CoordinatorRecord`), with :func:`is_offset_commit` to
skip the offset commits that make up most of the topic before decoding anything. Anything that
cannot be decoded raises :class:`~streaming.errors.CoordinatorRecordError`, whose message names
the record type, the version and what is wrong; nothing else is raised.

Follows Kafka 4.1.1 (``kafka-group-coordinator``'s ``common/message/*.json`` and
``CoordinatorRecordSerde``; kafka-clients', Kafka Streams' and Connect's protocol classes for the
bytes a classic group's members exchange). Checked field by field against Kafka's own decoding
(``jvm/coordinator-reference``) on records of real groups: docs/coordinator-log.md.

Why Python and not Kafka's own classes in the JVM, measured (``bench/coordinator_log.py``: a mix of
2,000 real offset commits per real generation record, per CPU second of the decoding thread on the
shared 2-core machine): Kafka's Java decodes about 60 times faster (4.7 M records/s against 76 K
for this package decoding everything; 1.05 M against 31 K on the group records alone), but the
job drops offset commits from their key's first two bytes before decoding anything (3.2 M
records/s with :func:`is_offset_commit`), and the group records left are a trickle on any
cluster. Kafka's classes would need kafka-clients 4.1 in a JVM whose kafka-clients is Spark's
3.9.2: the decoding path links today, but ``kafka-group-coordinator-4.1.1.jar`` refers to 54
classes 3.9.2 lacks, an untested mix that any decoding path or upgrade can break at run time, and
the Streams and Connect decoders would bring kafka-streams (RocksDB) and connect-runtime (Jetty)
into Spark. So: Python, exact, one error type, no classpath coupling.
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
