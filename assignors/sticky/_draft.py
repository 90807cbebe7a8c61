"""What a builder hands back to the facade, still in global partition indices."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(slots=True)
class Draft:
    """The answer as flat (member, global index) pairs: partitions kept from a member's owned ones
    (``kept_m``, ``kept_g``) and partitions newly given (``fresh_m``, ``fresh_g``).

    A member's list in the answer is its kept pairs, then its fresh ones, each in array order.
    Flat arrays rather than one array per member: the facade builds every member's list with one
    stable sort, where per-member arrays cost a few microseconds of NumPy overhead each.
    ``transfer_g``/``transfer_to``: partitions that change owner while a live member still owns
    them, with the member that will get them (the cooperative assignor withholds these this round).
    """

    kept_m: np.ndarray
    kept_g: np.ndarray
    fresh_m: np.ndarray
    fresh_g: np.ndarray
    transfer_g: np.ndarray
    transfer_to: np.ndarray

    def owner(self, total: int) -> np.ndarray:
        """Global index -> member (-1: unassigned)."""
        owner = np.full(total, -1, dtype=np.int64)
        owner[self.kept_g] = self.kept_m
        owner[self.fresh_g] = self.fresh_m
        return owner


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
