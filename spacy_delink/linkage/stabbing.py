"""Minimum interval stabbing: the fewest positions that hit every interval.

A flagging strategy prices a choice by what the rewriter then masks (``linkage.cover``),
and the rewriter masks exactly these points (``rewrite.masking``): both call this one
implementation.
"""
from __future__ import annotations

import numba as nb
import numpy as np

from .. import _kernels  # noqa: F401  (announces a compile of these kernels)
_END_SPAN = np.int64((1 << 32) - 1)


def stab(intervals: np.ndarray, rarity: np.ndarray) -> list[int]:
    """Fewest points hitting every inclusive ``[start, end]`` interval; ties go to the lowest ``rarity``.

    Intervals that contain another are dropped first (hitting the inner one hits them),
    which leaves starts and ends in the same order; then each greedy point lies in
    ``[last start <= r, r]`` for the earliest end ``r``, the window of equally good choices.
    Among equal rarities the rightmost point wins. One compiled call: a cover prices many
    choices per pass, on several threads.
    """
    if not len(intervals):
        return []
    pairs = np.asarray(intervals, dtype=np.int64).reshape(-1, 2)
    return _stab_points(
        np.ascontiguousarray(pairs[:, 0]), np.ascontiguousarray(pairs[:, 1]), np.ascontiguousarray(rarity, dtype=np.int64)
    ).tolist()


@nb.njit(cache=True, nogil=True)
def _stab_points(starts: np.ndarray, ends: np.ndarray, rarity: np.ndarray) -> np.ndarray:
    """``stab``'s points: the intervals deduplicated and sorted by start, then by end descending
    (one key each: token positions fit 32 bits), those containing another dropped, then the greedy."""
    keys = np.unique((starts << 32) | (_END_SPAN - ends))
    first = keys >> 32
    last = _END_SPAN - (keys & _END_SPAN)
    innermost = np.ones(len(keys), dtype=np.bool_)
    later_min_end = last[len(keys) - 1]
    for i in range(len(keys) - 2, -1, -1):  # an interval ending no earlier than a later-starting one contains it
        if later_min_end <= last[i]:
            innermost[i] = False
        later_min_end = min(later_min_end, last[i])
    first, last = first[innermost], last[innermost]
    chosen = np.empty(len(first), dtype=np.int64)
    count = 0
    i = 0
    while i < len(first):
        right = last[i]
        j = i
        while j < len(first) and first[j] <= right:
            j += 1
        best = right
        for point in range(right, first[j - 1] - 1, -1):
            if rarity[point] < rarity[best]:
                best = point
        chosen[count] = best
        count += 1
        i = j
    return chosen[:count]
