"""Consumer-group assignors by their Kafka names.

Modules are imported on first use so that asking for one assignor does not load them all.
"""

from __future__ import annotations

import importlib
from typing import Callable

from .errors import UnknownAssignorError
from .model import GroupAssignment, GroupSpec

AssignFn = Callable[[GroupSpec], GroupAssignment]

# Kafka name -> (module, function). "range"/"roundrobin"/"sticky"/"cooperative-sticky" are the
# client-side (classic protocol) assignors; "uniform" and "server-range" are KIP-848's server-side
# assignors (the broker calls the latter "range" too; the prefix keeps the two apart here).
_CONSUMER_ASSIGNORS: dict[str, tuple[str, str]] = {
    "range": ("assignors.range", "assign_range"),
    "roundrobin": ("assignors.roundrobin", "assign_roundrobin"),
    "sticky": ("assignors.sticky", "assign_sticky"),
    "cooperative-sticky": ("assignors.sticky", "assign_cooperative_sticky"),
    "uniform": ("assignors.uniform", "assign_uniform"),
    "server-range": ("assignors.server_range", "assign_server_range"),
}

#: Assignors whose protocol is cooperative: their answer may withhold partitions (``transferring``).
COOPERATIVE_ASSIGNORS = frozenset({"cooperative-sticky"})

CONSUMER_ASSIGNOR_NAMES: tuple[str, ...] = tuple(_CONSUMER_ASSIGNORS)


def get_assignor(name: str) -> AssignFn:
    try:
        module_name, fn_name = _CONSUMER_ASSIGNORS[name]
    except KeyError:
        raise UnknownAssignorError(
            f"unknown assignor {name!r}; known assignors: {', '.join(CONSUMER_ASSIGNOR_NAMES)}"
        ) from None
    return getattr(importlib.import_module(module_name), fn_name)


def assign(spec: GroupSpec, assignor: str) -> GroupAssignment:
    """Run the named assignor on ``spec``."""
    return get_assignor(assignor)(spec)
