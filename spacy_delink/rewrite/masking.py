"""What to mask: the fewest tokens that break every flagged span (SPEC §2 masks break n-grams).

A mask yields no tokens and breaks every n-gram across it, so masking one token inside
each minimal linkable span breaks every linkable n-gram (each contains a minimal one) and
creates none (the n-grams left are pieces of old ones). The fewest such tokens is a
minimum interval-stabbing problem (``linkage.stabbing``), over the units of every reading
checked (``linkage.units``): a mask over a unit removes whole tokens under each reading.
Which spans to break is the flagging strategy's choice (``linkage.cover``); combinations
can reappear from the shorter frequent pieces a mask leaves, hence the loop's repeated
detect-and-mask.

How a mask is *written* is ``one_mask_per_stretch``'s: one mask per hidden stretch, however
many tokens it hides, so that the output never tells a sloppy phrase search its slop
(SPEC §9).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Optional, Sequence

import numpy as np

from ..errors import DelinkError
from ..linkage.cover import cover_rarity
from ..linkage.stabbing import stab

from .. import _kernels  # noqa: F401  (announces a compile of these kernels)

if TYPE_CHECKING:
    from ..linkage.attack import Detection
    from ..linkage.units import Units

GRANULARITIES = ("token", "span")
#: A paragraph end (SPEC §1: a newline, optional spaces, tabs or carriage returns, a newline),
#: with the carriage return of a CRLF line end before it, so that the one a stretch keeps is whole.
_PARAGRAPH_END = re.compile(r"\r?\n[ \t\r]*\n")
_WHITESPACE = re.compile(r"\s*")


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


@dataclass
class _Stretch:
    """Hidden things with no token between them: where they start and end, whether the pass
    masks one of them, and the first paragraph end between them."""

    start: int
    end: int
    new: bool
    paragraph_end: Optional[str] = None


def one_mask_per_stretch(text: str, ranges: Sequence[tuple[int, int]], detection: "Detection", mask: str) -> list[tuple[int, int, str]]:
    """The replacements that mask ``ranges`` of ``text``: one ``mask`` per hidden stretch.

    A stretch (SPEC §9) is a maximal run of hidden things — the ``ranges``, and the masks
    ``text`` holds already (SPEC §2: the input's own, an earlier pass's) — with no token of
    any reading checked between them (``detection`` is that of ``text``). Written one mask per
    masked token, ``[REDACTED] [REDACTED] [REDACTED]`` would tell the adversary the exact slop
    of a sloppy phrase around it; so every stretch that holds one of ``ranges`` is written as
    one mask, swallowing what lies between its parts (spaces, punctuation, sentence ends, the
    input's masks). A stretch that swallows a paragraph end keeps one, right after the mask
    and in place of the spaces that followed the stretch (unless a paragraph end follows
    already, or only spaces are left), so the text keeps its paragraphs and still shows one
    mask. Stretches made of the input's masks alone are left as the input wrote them.
    Every replacement covers whole tokens and non-token characters only, so the tokens the
    masks remove are those of ``ranges`` (``Detection.after_mask`` takes the replacements'
    ranges as they are).
    """
    if detection.text != text:
        raise DelinkError("one_mask_per_stretch was given the detection of another text (a bug; please report)")
    hidden = sorted([(start, end, True) for start, end in ranges] + [(start, end, False) for start, end in detection.parts[0].analysis.tokens.masks])
    units = detection.units
    stretches: list[_Stretch] = []
    for start, end, new in hidden:
        last = stretches[-1] if stretches else None
        if last is None or not _token_free(units, last.end, start):
            stretches.append(_Stretch(start, end, new))
            continue
        if last.paragraph_end is None:
            found = _PARAGRAPH_END.search(text, last.end, start)
            last.paragraph_end = found.group() if found else None
        last.end, last.new = max(last.end, end), last.new or new
    replacements = []
    for stretch in stretches:
        if not stretch.new:
            continue
        end, written = stretch.end, mask
        if stretch.paragraph_end is not None:
            trailing = _WHITESPACE.match(text, end).group()
            if end + len(trailing) < len(text) and not _PARAGRAPH_END.search(trailing):
                end, written = end + len(trailing), mask + stretch.paragraph_end
        replacements.append((stretch.start, end, written))
    return replacements


def _token_free(units: "Units", start: int, end: int) -> bool:
    """Whether no unit (token of any reading) overlaps ``text[start:end]``."""
    first = int(np.searchsorted(units.ends, start, side="right"))  # the first unit that ends after start
    return first == len(units) or int(units.starts[first]) >= end
