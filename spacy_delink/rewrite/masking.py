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
from typing import TYPE_CHECKING, Iterable, Sequence

import numpy as np

from ..errors import DelinkError
from ..linkage.cover.instance import cover_rarity
from ..linkage.stabbing import stab

from .. import _kernels  # noqa: F401  (announces a compile of these kernels)

if TYPE_CHECKING:
    from ..linkage.attack import Detection

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


def one_mask_per_stretch(text: str, ranges: Sequence[tuple[int, int]], detection: "Detection", mask: str) -> list[tuple[int, int, str]]:
    """The replacements that mask ``ranges`` of ``text``: one ``mask`` per hidden stretch.

    A stretch (SPEC §9) is a maximal run of hidden things — the ``ranges``, and the masks
    ``text`` holds already (SPEC §2: the input's own, an earlier pass's) — with no token of
    any reading checked between them (``detection`` is that of ``text``). Written one mask per
    masked token, ``[REDACTED] [REDACTED] [REDACTED]`` would tell the adversary the exact slop
    of a sloppy phrase around it; so every stretch that holds one of ``ranges``, or more than
    one mask, is written as one mask, swallowing what lies between its parts (spaces,
    punctuation, sentence ends, the input's masks: ``[PERSON], [DATE]`` would say two things
    were hidden). A stretch that swallows a paragraph end keeps one, right after the mask and
    in place of the spaces that followed the stretch (unless a paragraph end follows already,
    or only spaces are left), so the text keeps its paragraphs and still shows one mask. A
    lone mask of the input stays as written. Every replacement covers whole tokens and
    non-token characters only, so the tokens the masks remove are those of ``ranges``
    (``Detection.after_mask`` takes the replacements' ranges as they are; with no ``ranges``,
    only the text's own masks are merged and no token changes).
    """
    if detection.text != text:
        raise DelinkError("one_mask_per_stretch was given the detection of another text (a bug; please report)")
    masks = detection.parts[0].analysis.tokens.masks  # every reading finds the same masks (SPEC §2)
    hidden = sorted([(start, end, True) for start, end in ranges] + [(start, end, False) for start, end in masks])
    if not hidden:
        return []
    starts, ends, new = (np.array(column) for column in zip(*hidden))
    units = detection.units
    # Hidden things are whole tokens or masks, none inside another: the next one joins the stretch
    # when no unit (token of any reading) lies between: the first unit ending after this one
    # starts no earlier than the next one.
    after = np.searchsorted(units.ends, ends[:-1], side="right")
    joins = np.append(units.starts, np.iinfo(np.int64).max)[after] >= starts[1:]
    firsts = np.flatnonzero(np.concatenate(([True], ~joins)))
    replacements = []
    for first, stop in zip(firsts.tolist(), [*firsts[1:].tolist(), len(hidden)]):
        if stop - first == 1 and not new[first]:
            continue
        end, written = int(ends[first:stop].max()), mask
        paragraph_end = next(
            (found.group() for i in range(first + 1, stop) if (found := _PARAGRAPH_END.search(text, int(ends[i - 1]), int(starts[i])))),
            None,
        )
        if paragraph_end is not None:
            spaces = _WHITESPACE.match(text, end)
            assert spaces is not None  # \s* matches everywhere
            if spaces.end() < len(text) and not _PARAGRAPH_END.search(spaces.group()):
                end, written = spaces.end(), mask + paragraph_end
        replacements.append((int(starts[first]), end, written))
    return replacements
