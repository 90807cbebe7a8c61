"""What a builder hands back to the facade, still in global partition indices."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(slots=True)
class Draft:
    """Per member (spec position): partitions kept from its owned ones, then newly given ones.

    ``kept`` and ``fresh`` hold global indices in the order they are listed in the answer.
    ``transfer_g``/``transfer_to``: partitions that change owner while a live member still owns
    them, with the member that will get them (the cooperative assignor withholds these this round).
    """

    kept: list[np.ndarray]
    fresh: list[np.ndarray]
    transfer_g: np.ndarray
    transfer_to: np.ndarray


def group_by_member(n_members: int, member: np.ndarray, g: np.ndarray) -> list[np.ndarray]:
    """Split ``g`` by ``member`` keeping the order of ``g`` inside each member."""
    empty = np.zeros(0, dtype=np.int64)
    if len(g) == 0:
        return [empty] * n_members
    order = np.argsort(member, kind="stable")
    sizes = np.bincount(member, minlength=n_members)
    parts = np.split(g[order], np.cumsum(sizes)[:-1])
    return parts


def rank_within_runs(keys: np.ndarray) -> np.ndarray:
    """For an array whose equal values are contiguous: each element's position inside its run."""
    n = len(keys)
    idx = np.arange(n, dtype=np.int64)
    if n == 0:
        return idx
    starts = np.zeros(n, dtype=np.int64)
    change = np.flatnonzero(keys[1:] != keys[:-1]) + 1
    starts[change] = change
    return idx - np.maximum.accumulate(starts)
