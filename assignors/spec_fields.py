"""Field definitions and JSON readers shared by the Streams and Connect spec codecs.

A spec codec declares each JSON object of its contract once, as a tuple of :class:`SpecField`
(name, JSON Schema of the value, meaning, required, default). That one definition gives the keys a
parser accepts, the required ones, the defaults, and the JSON Schema files in ``schemas/``
(:func:`object_schema`), so the parser and the published schema cannot disagree about which fields
exist. The value checks themselves are written out in the codecs, because their messages must name
the field path and say what is wrong ("clients[1].capacity: must be an integer >= 1, got 0").

Pure: decoded JSON in, Python values out; every problem is an :class:`InvalidGroupSpecError`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from .errors import AssignmentError, InvalidGroupSpecError

#: Marks a field that is absent (``None`` is JSON ``null``, a value some fields accept).
MISSING: Any = object()


@dataclass(frozen=True)
class SpecField:
    """One field of a JSON object in a spec contract."""

    name: str
    #: JSON Schema (draft 2020-12) of the value, without ``description``/``default``.
    schema: Mapping[str, Any]
    doc: str
    required: bool = False
    #: Default when absent (shown in the schema); ``MISSING`` = none, or one computed by the codec.
    default: Any = field(default=MISSING)


def object_schema(fields: tuple[SpecField, ...], description: str | None = None) -> dict[str, Any]:
    """The JSON Schema of an object made of ``fields``; unknown keys are not allowed."""
    properties: dict[str, Any] = {}
    for f in fields:
        prop = dict(f.schema)
        prop["description"] = f.doc
        if f.default is not MISSING:
            prop["default"] = f.default
        properties[f.name] = prop
    schema: dict[str, Any] = {"type": "object"}
    if description:
        schema["description"] = description
    schema["properties"] = properties
    schema["required"] = [f.name for f in fields if f.required]
    schema["additionalProperties"] = False
    return schema


def field_names(fields: tuple[SpecField, ...]) -> frozenset[str]:
    return frozenset(f.name for f in fields)


# --- readers --------------------------------------------------------------------------------------


def show(value: object) -> str:
    """A short rendering of a bad value for a message, in JSON spelling where it differs."""
    if value is MISSING:
        return "nothing (the field is missing)"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def is_int(value: object) -> bool:
    # JSON true/false decode to bool, which Python counts as int; a thread count of `true` is a mistake.
    return isinstance(value, int) and not isinstance(value, bool)


def check_members_match(assignor: str, what: str, expected: list[str], returned: Mapping[str, Any]) -> None:
    """An assignor that leaves a member out or invents one is broken: say so instead of papering
    over it with an empty entry, so that the differential tests against Kafka see it."""
    missing = [m for m in expected if m not in returned]
    extra = sorted(set(returned) - set(expected))
    if missing or extra:
        raise AssignmentError(f"assignor {assignor!r} returned {what} that do not match the spec"
                              f" (missing {missing}, unknown {extra}); this is a bug in the assignor")


def join_path(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def check_object(value: object, fields: tuple[SpecField, ...], path: str, what: str) -> Mapping[str, Any]:
    """``value`` as a mapping with only the declared keys and every required one."""
    if not isinstance(value, Mapping):
        where = f"{path}: " if path else ""
        raise InvalidGroupSpecError(f"{where}must be {what}, got {show(value)}")
    allowed = field_names(fields)
    # A misspelt optional field would otherwise be silently ignored and change the answer.
    unknown = sorted(str(k) for k in value if k not in allowed)
    if unknown:
        where = f"{path}: " if path else ""
        raise InvalidGroupSpecError(
            f"{where}unknown field(s) {', '.join(map(repr, unknown))}; allowed: {', '.join(sorted(allowed))}"
        )
    for f in fields:
        if f.required and f.name not in value:
            raise InvalidGroupSpecError(f"{join_path(path, f.name)}: missing (required)")
    return value


def read_int(
    obj: Mapping[str, Any], key: str, path: str, *, default: Any = MISSING, minimum: int | None = None,
    nullable: bool = False,
) -> Any:
    """An integer field (``default`` when absent; ``None`` for ``null`` when ``nullable``)."""
    value = obj.get(key, MISSING)
    if value is MISSING:
        return default
    if value is None and nullable:
        return None
    where = join_path(path, key)
    if not is_int(value):
        raise InvalidGroupSpecError(f"{where}: must be an integer, got {show(value)}")
    if minimum is not None and value < minimum:
        raise InvalidGroupSpecError(f"{where}: must be >= {minimum}, got {value}")
    return value


def read_str(obj: Mapping[str, Any], key: str, path: str, *, default: Any = MISSING) -> Any:
    """A non-empty string field (``default`` when absent)."""
    value = obj.get(key, MISSING)
    if value is MISSING:
        return default
    if not isinstance(value, str) or not value:
        raise InvalidGroupSpecError(f"{join_path(path, key)}: must be a non-empty string, got {show(value)}")
    return value


def read_bool(obj: Mapping[str, Any], key: str, path: str, *, default: bool) -> bool:
    value = obj.get(key, MISSING)
    if value is MISSING:
        return default
    if not isinstance(value, bool):
        raise InvalidGroupSpecError(f"{join_path(path, key)}: must be true or false, got {show(value)}")
    return value


def read_str_list(obj: Mapping[str, Any], key: str, path: str, *, what: str = "name") -> list[str]:
    """A list of distinct non-empty strings (empty when absent)."""
    value = obj.get(key, MISSING)
    if value is MISSING:
        return []
    where = join_path(path, key)
    if not isinstance(value, list):
        raise InvalidGroupSpecError(f"{where}: must be a list of {what}s, got {show(value)}")
    seen: dict[str, int] = {}
    for i, item in enumerate(value):
        if not isinstance(item, str) or not item:
            raise InvalidGroupSpecError(f"{where}[{i}]: a {what} must be a non-empty string, got {show(item)}")
        if item in seen:
            raise InvalidGroupSpecError(f"{where}[{i}]: {what} {item!r} is already listed at [{seen[item]}]")
        seen[item] = i
    return list(value)


def read_int_map(
    obj: Mapping[str, Any], key: str, path: str, *, what: str, minimum: int | None = None,
    allowed_below: frozenset[int] = frozenset(),
) -> dict[str, int] | None:
    """An object of name -> integer (``None`` when absent or null).

    Values below ``minimum`` are errors unless in ``allowed_below`` (Kafka's sentinel values).
    """
    value = obj.get(key, MISSING)
    if value is MISSING or value is None:
        return None
    where = join_path(path, key)
    if not isinstance(value, Mapping):
        raise InvalidGroupSpecError(f"{where}: must be an object of {what} -> integer, got {show(value)}")
    out: dict[str, int] = {}
    for name, number in value.items():
        if not is_int(number):
            raise InvalidGroupSpecError(f"{where}[{name!r}]: must be an integer, got {show(number)}")
        if minimum is not None and number < minimum and number not in allowed_below:
            sentinels = "".join(f" or {s}" for s in sorted(allowed_below, reverse=True))
            raise InvalidGroupSpecError(f"{where}[{name!r}]: must be >= {minimum}{sentinels}, got {number}")
        out[name] = number
    return out


def read_list(obj: Mapping[str, Any], key: str, path: str, *, what: str) -> list[Any]:
    value = obj.get(key, MISSING)
    if not isinstance(value, list):
        raise InvalidGroupSpecError(f"{join_path(path, key)}: must be a list of {what}, got {show(value)}")
    return value


def read_spec_id(obj: Mapping[str, Any]) -> str | int | None:
    value = obj.get("id")
    if value is None or isinstance(value, str) or is_int(value):
        return value
    raise InvalidGroupSpecError(f"id: must be a string, an integer or null, got {show(value)}")


#: The ``id`` field every spec contract shares: echoed back on the answer line.
ID_FIELD = SpecField(
    "id", {"type": ["string", "integer", "null"]},
    "Echoed back on the answer line so answers can be matched to specs.",
)
