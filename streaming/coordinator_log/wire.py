"""Kafka's primitive encodings, read from a byte string: the one place that knows how bytes become numbers.

Follows Kafka 4.1's ``org.apache.kafka.common.protocol`` (``ByteBufferAccessor``, ``ByteUtils``,
``MessageUtil``) and ``protocol.types.Type`` for the hand-built schemas of Connect and the sticky
assignors: big-endian integers; a UUID as two int64; classic strings (int16 length, -1 = null),
bytes and arrays (int32 length or count, -1 = null); and, in "flexible" versions (KIP-482),
compact strings, bytes and arrays (unsigned varint of length + 1, 0 = null) and a tagged-field
section at the end of every struct.

A :class:`Reader` checks every length against what is left before it reads, so a record that
lies about a length is refused at once (never a huge allocation, never a long loop), and every
refusal is a :class:`~streaming.errors.CoordinatorRecordError` whose message starts with what was
being read (``context``: the record type and version) and says at which byte it went wrong.
"""

from __future__ import annotations

import struct
import uuid

from streaming.errors import CoordinatorRecordError

_I16 = struct.Struct(">h").unpack_from
_U16 = struct.Struct(">H").unpack_from
_I32 = struct.Struct(">i").unpack_from
_I64 = struct.Struct(">q").unpack_from
_UUID = struct.Struct(">16s").unpack_from

#: Kafka refuses an unsigned varint of more than 5 bytes (``ByteUtils.readUnsignedVarint``).
_MAX_VARINT_BYTES = 5


class Reader:
    """A cursor over ``data`` that decodes Kafka's primitives and refuses what does not fit.

    ``context`` prefixes every error message ("GroupMetadata (type 2) value v3", "consumer
    subscription of member m1 ..."), so the caller never has to catch and re-wrap.
    """

    __slots__ = ("data", "pos", "end", "context", "lenient_utf8")

    def __init__(self, data: bytes, context: str, start: int = 0, end: int | None = None,
                 lenient_utf8: bool = False) -> None:
        self.data = data
        self.pos = start
        self.end = len(data) if end is None else end
        self.context = context
        # True only where Kafka's reader is lenient and a bad string changes nothing that matters
        # (an assignor's user data): bad UTF-8 then becomes U+FFFD, as Java's String does.
        self.lenient_utf8 = lenient_utf8

    # -- errors ------------------------------------------------------------------------------------

    def error(self, what: str) -> CoordinatorRecordError:
        return CoordinatorRecordError(f"{self.context}: {what}")

    def take(self, size: int, field: str) -> int:
        """Consume ``size`` bytes for ``field`` and return where they start; refuse if they are not there."""
        pos = self.pos
        if pos + size > self.end:
            raise self.error(f"truncated at byte {pos} reading {field}: needs {size} bytes, "
                             f"{self.end - pos} left")
        self.pos = pos + size
        return pos

    # -- fixed-size numbers --------------------------------------------------------------------------

    def int8(self, field: str) -> int:
        pos = self.take(1, field)
        value = self.data[pos]
        return value - 256 if value > 127 else value

    def int16(self, field: str) -> int:
        return _I16(self.data, self.take(2, field))[0]

    def uint16(self, field: str) -> int:
        return _U16(self.data, self.take(2, field))[0]

    def int32(self, field: str) -> int:
        return _I32(self.data, self.take(4, field))[0]

    def int64(self, field: str) -> int:
        return _I64(self.data, self.take(8, field))[0]

    def uuid(self, field: str) -> uuid.UUID:
        return uuid.UUID(bytes=_UUID(self.data, self.take(16, field))[0])

    def unsigned_varint(self, field: str) -> int:
        value = 0
        data, end = self.data, self.end
        for i in range(_MAX_VARINT_BYTES):
            pos = self.pos
            if pos >= end:
                raise self.error(f"truncated at byte {pos} reading {field} (a varint)")
            byte = data[pos]
            self.pos = pos + 1
            value |= (byte & 0x7F) << (7 * i)
            if not byte & 0x80:
                return value
        raise self.error(f"bad varint at byte {self.pos - _MAX_VARINT_BYTES} reading {field}: "
                         f"longer than {_MAX_VARINT_BYTES} bytes")

    # -- lengths -----------------------------------------------------------------------------------

    def _length(self, flexible: bool, field: str) -> int:
        """A string's or bytes' length; -1 means null (the caller decides whether that is allowed)."""
        if flexible:
            at = self.pos
            size = self.unsigned_varint(field) - 1
            if size > 0x7FFF:  # as Kafka's generated readers: a string never exceeds int16
                raise self.error(f"string {field} at byte {at} has invalid length {size}")
            return size
        return self.int16(field)

    def array_length(self, flexible: bool, field: str, min_item_size: int = 1,
                     nullable: bool = False) -> int:
        """An array's element count, checked against the bytes left (each element takes at least
        ``min_item_size``); -1 only when ``nullable``."""
        at = self.pos
        count = self.unsigned_varint(field) - 1 if flexible else self.int32(field)
        if count < 0:
            if nullable:
                return -1
            raise self.error(f"non-nullable array {field} is null or negative ({count}) at byte {at}")
        if count * min_item_size > self.end - self.pos:
            raise self.error(f"truncated at byte {at}: array {field} claims {count} elements, "
                             f"only {self.end - self.pos} bytes left")
        return count

    # -- strings and bytes ---------------------------------------------------------------------------

    def _text(self, size: int, field: str) -> str:
        pos = self.take(size, field)
        if self.lenient_utf8:
            return self.data[pos:pos + size].decode("utf-8", "replace")
        try:
            return self.data[pos:pos + size].decode("utf-8")
        except UnicodeDecodeError as e:
            raise self.error(f"bad UTF-8 in {field} at byte {pos + e.start}") from None

    def string(self, flexible: bool, field: str) -> str:
        at = self.pos
        size = self._length(flexible, field)
        if size < 0:
            raise self.error(f"non-nullable string {field} is null or negative ({size}) at byte {at}")
        return self._text(size, field)

    def nullable_string(self, flexible: bool, field: str) -> str | None:
        # Kafka's generated readers take any negative length of a nullable field as null.
        size = self._length(flexible, field)
        return None if size < 0 else self._text(size, field)

    def _bytes_length(self, flexible: bool, field: str) -> int:
        return self.unsigned_varint(field) - 1 if flexible else self.int32(field)

    def bytes(self, flexible: bool, field: str) -> bytes:
        at = self.pos
        size = self._bytes_length(flexible, field)
        if size < 0:
            raise self.error(f"non-nullable bytes {field} are null or negative ({size}) at byte {at}")
        pos = self.take(size, field)
        return self.data[pos:pos + size]

    def nullable_bytes(self, flexible: bool, field: str) -> bytes | None:
        size = self._bytes_length(flexible, field)
        if size < 0:
            return None
        pos = self.take(size, field)
        return self.data[pos:pos + size]

    # -- compound ----------------------------------------------------------------------------------

    def int32_array(self, flexible: bool, field: str) -> tuple[int, ...]:
        count = self.array_length(flexible, field, 4)
        pos = self.take(4 * count, field)
        return struct.unpack_from(f">{count}i", self.data, pos)

    def int16_array(self, flexible: bool, field: str) -> tuple[int, ...]:
        count = self.array_length(flexible, field, 2)
        pos = self.take(2 * count, field)
        return struct.unpack_from(f">{count}h", self.data, pos)

    def string_array(self, flexible: bool, field: str) -> tuple[str, ...]:
        count = self.array_length(flexible, field, 1 if flexible else 2)
        return tuple(self.string(flexible, field) for _ in range(count))

    def tagged_fields(self, known: dict | None = None, field: str = "tagged fields") -> dict:
        """Read a struct's tagged-field section (flexible versions only).

        ``known`` maps a tag to a function that reads its value from a :class:`Reader` bounded to
        the field's declared size; that value must fill the size exactly. Unknown tags are skipped,
        as Kafka keeps them aside without reading them. Returns {tag: value} for the known ones.
        """
        found: dict = {}
        count = self.unsigned_varint(field)
        for _ in range(count):
            tag = self.unsigned_varint(field)
            size = self.unsigned_varint(f"the size of tagged field {tag}")
            start = self.take(size, f"tagged field {tag}")
            if known is not None and tag in known:
                sub = Reader(self.data, f"{self.context}, tagged field {tag} of {size} bytes", start, start + size)
                found[tag] = known[tag](sub)
                if sub.pos != sub.end:
                    raise self.error(f"tagged field {tag} declares {size} bytes but its value takes "
                                     f"{sub.pos - start}")
        return found

    def expect_end(self, what: str) -> None:
        if self.pos != self.end:
            left = self.end - self.pos
            raise self.error(f"{left} trailing byte{'s' if left > 1 else ''} after {what} (at byte {self.pos})")

    @property
    def remaining(self) -> int:
        return self.end - self.pos
