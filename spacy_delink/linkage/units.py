"""The positions a flagging strategy chooses among: every reading's tokens, merged where they overlap.

Each reading of the rules (SPEC §8) cuts a text into its own tokens: ``So­va`` (with a soft
hyphen) is two exact tokens and one search token, ``supply. He`` the same two tokens in
both. A mask over a *unit* — a maximal run of tokens of any reading that overlap each
other — removes whole tokens under every reading at once, so one cover can answer the
linkable phrases and combinations of all readings together, and its cost (units masked)
is what a pass changes. With one reading, or where the readings agree, a unit is a token.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .tokenize import Tokens


@dataclass(frozen=True)
class Units:
    """Character ranges of the units (``starts``/``ends``, in text order) and, per reading
    (in the order given), the unit of each of its tokens."""

    starts: np.ndarray
    ends: np.ndarray
    of_token: tuple[np.ndarray, ...]

    def __len__(self) -> int:
        return len(self.starts)

    @classmethod
    def of(cls, readings: Sequence[Tokens]) -> "Units":
        """The units of one text's tokens under several readings."""
        starts = np.concatenate([np.asarray(t.starts, dtype=np.int64) for t in readings]) if readings else np.zeros(0, np.int64)
        ends = np.concatenate([np.asarray(t.ends, dtype=np.int64) for t in readings]) if readings else np.zeros(0, np.int64)
        order = np.lexsort((ends, starts))
        starts, ends = starts[order], ends[order]
        reach = np.maximum.accumulate(ends) if len(ends) else ends
        new_unit = np.ones(len(starts), dtype=bool)
        new_unit[1:] = starts[1:] >= reach[:-1]  # a token that starts where the run so far ends begins a unit
        first = np.flatnonzero(new_unit)
        unit_starts = starts[first]
        unit_ends = np.maximum.reduceat(ends, first) if len(first) else ends[:0]
        of_token = tuple(
            np.searchsorted(unit_starts, np.asarray(t.starts, dtype=np.int64), side="right").astype(np.int64) - 1 for t in readings
        )
        return cls(unit_starts, unit_ends, of_token)
