"""Typed rows of the job's tables: one class per table, generated from :mod:`schemas.tables`.

The engine writes its output as these rows. Each table's columns are defined once, in
:mod:`schemas.tables`; this module turns every definition into a frozen dataclass, so a row is
built with keyword arguments that must be columns of its table, and a column the table marks
required must be given (the others default to null)::

    AssignmentRow(group_id="orders", generation=3, event_time=..., member_id="c-1", ...)
    AssignmentRow(..., partitons=[...])   # TypeError: unexpected keyword argument 'partitons'

So a misspelled column fails where the row is built, never as a silent null in Delta. A row also
reads like a mapping (``row["generation"]``), and :meth:`TableRow.to_json` gives the JSON object the
job's sink parses with the table's Arrow schema.
"""

from __future__ import annotations

from dataclasses import field, make_dataclass, replace
from typing import Any, ClassVar

from . import tables
from .events import Array, FieldType, Map, Struct

_PYTHON_TYPES = {"string": str, "int": int, "long": int, "double": float, "boolean": bool}


class TableRow:
    """Base of the generated row classes: a row of table ``TABLE`` with the columns ``COLUMNS``."""

    __slots__ = ()
    TABLE: ClassVar[str]
    COLUMNS: ClassVar[tuple[str, ...]]

    @property
    def table(self) -> str:
        return self.TABLE

    def __getitem__(self, column: str) -> Any:
        if column not in self.COLUMNS:
            raise KeyError(f"{self.TABLE} has no column {column!r}")
        return getattr(self, column)

    def get(self, column: str, default: Any = None) -> Any:
        value = self[column]
        return default if value is None else value

    def as_dict(self) -> dict[str, Any]:
        """Every column, nulls included."""
        return {column: getattr(self, column) for column in self.COLUMNS}

    def to_json(self) -> dict[str, Any]:
        """The row as a JSON object; null columns are left out (the sink reads them as null)."""
        out = {}
        for column in self.COLUMNS:
            value = getattr(self, column)
            if value is not None:
                out[column] = value
        return out

    def but(self, **changes: Any) -> "TableRow":
        """A copy with ``changes`` (column names checked like the constructor's)."""
        return replace(self, **changes)


def _python_type(t: FieldType) -> Any:
    if isinstance(t, str):
        return _PYTHON_TYPES[t]
    if isinstance(t, Array):
        return list
    if isinstance(t, (Map, Struct)):
        return dict
    raise TypeError(f"unknown field type {t!r}")


def _class_name(table: str) -> str:
    singular = table[:-1] if table.endswith("s") else table
    return "".join(part.capitalize() for part in singular.split("_")) + "Row"


def row_type(table: str) -> type[TableRow]:
    """The row class of ``table`` (a key of :data:`schemas.tables.TABLES`)."""
    columns = tables.TABLES[table]
    spec = []
    for f in columns:
        kind = _python_type(f.type)
        if f.required:
            spec.append((f.name, kind))
        else:
            spec.append((f.name, kind | None, field(default=None)))
    return make_dataclass(_class_name(table), spec, bases=(TableRow,), frozen=True, slots=True, kw_only=True,
                          namespace={"TABLE": table, "COLUMNS": tuple(f.name for f in columns),
                                     "__module__": __name__})


AssignmentRow = row_type(tables.ASSIGNMENTS)
RevocationRow = row_type(tables.REVOCATIONS)
BalanceMetricsRow = row_type(tables.BALANCE_METRICS)
MemberEventRow = row_type(tables.MEMBER_EVENTS)
RejectedEventRow = row_type(tables.REJECTED_EVENTS)
AssignmentCheckRow = row_type(tables.ASSIGNMENT_CHECKS)
AlertRow = row_type(tables.ALERTS)

#: The row class of every table the engine writes (ingest_metrics is the sink's: it sums batches).
ROW_TYPES: dict[str, type[TableRow]] = {cls.TABLE: cls for cls in (
    AssignmentRow, RevocationRow, BalanceMetricsRow, MemberEventRow, RejectedEventRow, AssignmentCheckRow,
    AlertRow)}
