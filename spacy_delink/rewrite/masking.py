"""What to mask: the fewest tokens that break every flagged span (SPEC §2 masks break n-grams).

A mask yields no tokens and breaks every n-gram across it, so masking one token inside
each minimal linkable span breaks every linkable n-gram (each contains a minimal one) and
creates none (the n-grams left are pieces of old ones). The fewest such tokens is a
minimum interval-stabbing problem (``linkage.stabbing``), over the units of every reading
checked (``linkage.units``): a mask over a unit removes whole tokens under each reading.
Which spans to break is the flagging strategy's choice (``linkage.cover``); combinations
can reappear from the shorter frequent pieces a mask leaves, hence the loop's repeated
detect-and-mask.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from ..linkage.cover import cover_rarity
from ..linkage.stabbing import stab

from .. import _kernels  # noqa: F401  (announces a compile of these kernels)

if TYPE_CHECKING:
    from ..linkage.attack import Detection

GRANULARITIES = ("token", "span")


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

    "token": the fewest units (tokens of every reading, ``linkage.units``) that hit every
    range the cover rewrites (the cover's own cost); "span": every unit of those ranges.
    """
    units = detection.units
    intervals = detection.cover(granularity).intervals
    if not len(intervals):
        return []
    if granularity == "span":
        unit_runs = merge_ranges((int(a), int(b) + 1) for a, b in intervals)
        return [(int(units.starts[a]), int(units.ends[b - 1])) for a, b in unit_runs]
    rarity = cover_rarity(detection)
    return [(int(units.starts[u]), int(units.ends[u])) for u in sorted(stab(intervals, rarity))]
