"""The gap reading's bridges in a text (SPEC §9): runs of tokens between mask stretches, the
bridges they make, their ranges, and the documents holding each run as a phrase.

A bridge's tokens are consecutive in the text's token list (a mask yields none), so a bridge
is a token range [first, last] cut into runs at the segment starts inside it.
"""
from __future__ import annotations

from bisect import bisect_right

import numba as nb
import numpy as np

from .. import _kernels  # noqa: F401  (announces a compile of these kernels)
from .gap_lookup import GapLookup
from .index import CorpusIndex
from .ngrams import LinkageAnalysis

#: Posting lists of runs kept per opened index.
_RUN_LISTS = 50_000


def segments_of(segment_start: np.ndarray) -> np.ndarray:
    """The text's runs of tokens between mask stretches, as [first, stop) rows (SPEC §9)."""
    count = len(segment_start)
    firsts = np.flatnonzero(segment_start) if count else np.zeros(0, dtype=np.int64)
    if count and (not len(firsts) or firsts[0] != 0):
        firsts = np.concatenate([[0], firsts])
    stops = np.concatenate([firsts[1:], [count]]) if len(firsts) else firsts
    return np.stack([firsts, stops], axis=1).astype(np.int64) if len(firsts) else np.zeros((0, 2), dtype=np.int64)


def enumerate_bridges(segments: np.ndarray, max_n: int) -> list[tuple[int, int, int]]:
    """Every bridge as (first token, last token, stretches crossed): a suffix of one segment, the
    whole segments after it, a prefix of the last one, at most ``max_n`` tokens in all."""
    found = []
    lengths = (segments[:, 1] - segments[:, 0]).tolist()
    firsts = segments[:, 0].tolist()
    for i in range(len(lengths) - 1):
        for suffix in range(1, min(lengths[i], max_n - 1) + 1):
            used = suffix
            for j in range(i + 1, len(lengths)):
                room = max_n - used
                if room < 1:
                    break
                for prefix in range(1, min(lengths[j], room) + 1):
                    found.append((firsts[i] + lengths[i] - suffix, firsts[j] + prefix - 1, j - i))
                used += lengths[j]  # the whole segment is a middle run of any longer bridge
    return found


def run_edges(first: int, last: int, starts: list[int]) -> list[int]:
    """Where the runs of the bridge [first, last] begin, and its end: the segment starts inside it,
    found by bisection of ``starts`` (the segments' first tokens, ascending), so a text with
    thousands of masks does not read all its segments for each of its bridges."""
    return [first, *starts[bisect_right(starts, first) : bisect_right(starts, last)], last + 1]


def runs_of(first: int, last: int, starts: list[int], numbers: np.ndarray) -> list[np.ndarray]:
    """The runs of the bridge [first, last]: its tokens cut at the segment bounds inside it."""
    edges = run_edges(first, last, starts)
    return [numbers[a:b] for a, b in zip(edges[:-1], edges[1:])]


class RunHolders:
    """The documents that hold each run of a bridge as a phrase (the search reading's posting
    lists, SPEC §3): a document that matches the bridge holds all its runs, so only the
    intersection is read for positions. Decoded once per run and text."""

    def __init__(self, index: CorpusIndex, search: LinkageAnalysis, lookup: GapLookup) -> None:
        self.levels = index.levels_of("search")
        self.search = search
        self.rows = lookup.run_documents  # decoded lists, by (length, row), kept across passes and texts
        self._lists: dict[tuple[int, int], np.ndarray | None] = {}

    def run(self, start: int, size: int) -> np.ndarray | None:
        """The documents holding tokens [start, start + size) as a phrase; None when it was not looked up."""
        found = self._lists.get((start, size), False)
        if found is not False:
            return found  # type: ignore[return-value]
        documents = None
        if size <= len(self.search.levels):
            level = self.search.levels[size - 1]
            at = int(np.searchsorted(level.positions, start))
            if at < len(level.positions) and level.positions[at] == start:
                row = int(level.rows[at])
                documents = self.rows.get((size, row))
                if documents is None:
                    documents = self.levels[size].documents_flat(level.rows[at : at + 1])[1] if row >= 0 else np.zeros(0, np.int64)
                    if len(self.rows) > _RUN_LISTS:
                        self.rows.clear()
                    self.rows[(size, row)] = documents
        self._lists[(start, size)] = documents
        return documents

    def of(self, first: int, last: int, starts: list[int]) -> np.ndarray | None:
        """The documents holding every run of the bridge [first, last] (None: not known, read all);
        ``starts``: the segments' first tokens."""
        edges = run_edges(first, last, starts)
        held: np.ndarray | None = None
        for a, b in zip(edges[:-1], edges[1:]):
            documents = self.run(a, b - a)
            if documents is None:
                continue
            held = documents if held is None else _intersect(held, documents)
        return held


@nb.njit(cache=True, nogil=True)
def _intersect(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The common values of two ascending arrays of distinct values, by one merge."""
    out = np.empty(min(len(a), len(b)), dtype=np.int64)
    i = j = count = 0
    while i < len(a) and j < len(b):
        if a[i] < b[j]:
            i += 1
        elif b[j] < a[i]:
            j += 1
        else:
            out[count] = a[i]
            count += 1
            i += 1
            j += 1
    return out[:count]


@nb.njit(cache=True, nogil=True)
def _not_containing(first: np.ndarray, last: np.ndarray, inner_first: np.ndarray, inner_last: np.ndarray) -> np.ndarray:
    """Whether each range [first, last] strictly contains none of the inner ranges."""
    keep = np.ones(len(first), dtype=np.bool_)
    for i in range(len(first)):
        for j in range(len(inner_first)):
            if first[i] <= inner_first[j] and inner_last[j] <= last[i] and (first[i] != inner_first[j] or last[i] != inner_last[j]):
                keep[i] = False
                break
    return keep


@nb.njit(cache=True, nogil=True)
def _not_contained(first: np.ndarray, last: np.ndarray) -> np.ndarray:
    """Whether each range is strictly inside none of the others (SPEC §5's maximality by token range)."""
    keep = np.ones(len(first), dtype=np.bool_)
    for i in range(len(first)):
        for j in range(len(first)):
            if i != j and first[j] <= first[i] and last[i] <= last[j] and (first[i] != first[j] or last[i] != last[j]):
                keep[i] = False
                break
    return keep
