"""What to mask: the fewest tokens that break every flagged span (SPEC §2 masks break n-grams).

A mask yields no tokens and breaks every n-gram across it, so masking one token inside
each minimal linkable span breaks every linkable n-gram (each contains a minimal one) and
creates none (the n-grams left are pieces of old ones). The fewest such tokens is a
minimum interval-stabbing problem, solved exactly by the greedy "stab at the right end of
the earliest-ending span"; any token between the last start and that right end hits the
same spans, and the rarest of them is masked. Which spans to break is the flagging
strategy's choice (``linkage.cover``); combinations can reappear from the shorter frequent
pieces a mask leaves, hence the loop's repeated detect-and-mask.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

import numba as nb
import numpy as np

from .. import _kernels  # noqa: F401  (announces a compile of these kernels)

if TYPE_CHECKING:
    from ..linkage.attack import Detection

GRANULARITIES = ("token", "span")
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


def merge_ranges(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Union of overlapping half-open ranges, in order."""
    merged: list[list[int]] = []
    for start, end in sorted(ranges):
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(start, end) for start, end in merged]


def mask_ranges(detection: "Detection", granularity: str) -> list[tuple[int, int]]:
    """Character ranges to mask for the detection's flagging strategy (``linkage.cover``).

    "token": the fewest tokens that hit every range the cover rewrites (the cover's own
    cost); "span": every token of those ranges.
    """
    tokens = detection.analysis.tokens
    intervals = detection.cover(granularity).intervals
    if not len(intervals):
        return []
    if granularity == "span":
        token_runs = merge_ranges((int(a), int(b) + 1) for a, b in intervals)
        return [(int(tokens.starts[a]), int(tokens.ends[b - 1])) for a, b in token_runs]
    df = detection.analysis.levels[0].df
    return [(int(tokens.starts[t]), int(tokens.ends[t])) for t in sorted(stab(intervals, df))]
