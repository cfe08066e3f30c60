"""Where runs of words stand in the collection (SPEC §9): each document's smallest total gap.

For a bridge, the positions of its rarest word (the index's gap store, ``index.gapstore``)
anchor the match, and the other runs are checked beside it, in compiled kernels: a lookup
costs the anchor's occurrences times the gap, not the collection.
"""
from __future__ import annotations

import numba as nb
import numpy as np

from .. import _kernels  # noqa: F401  (announces a compile of these kernels)
from .index import CorpusIndex
from .index.gapstore import GapStore

#: Bytes of gap results kept per opened index (bridges recur across a text's passes and across texts).
_CACHE_BYTES = 64 << 20
#: Bridge decisions kept per opened index (about 300 bytes each; one text of 10,000 characters
#: at arity 3 decides some 14,000 over its passes).
_DECISIONS_KEPT = 1 << 16


@nb.njit(cache=True, nogil=True)
def _run_at(ids: np.ndarray, breaks: np.ndarray, start: int, run: np.ndarray) -> bool:
    """Whether ``run`` (vocabulary numbers) is at ``start``, as consecutive tokens of one run of the collection."""
    size = len(run)
    for i in range(size):
        if ids[start + i] != run[i]:
            return False
        if i < size - 1 and breaks[start + i]:
            return False
    return True


@nb.njit(cache=True, nogil=True)
def _side(
    ids: np.ndarray, breaks: np.ndarray, flat: np.ndarray, bounds: np.ndarray, runs: np.ndarray,
    edge: int, low: int, high: int, max_each: int, max_total: int, forward: bool, work: np.ndarray,
) -> int:
    """The smallest total gap with which the runs ``runs`` (in order away from the anchor) follow
    (``forward``) or precede the anchor's run, whose last (first) token is at ``edge``; -1: none.

    Each state is a reachable edge with its smallest gap so far; one pass per run. ``work``
    (4 × ``max_each`` × runs + 4 int64) holds the states: no allocation per anchor position."""
    half = len(work) // 2
    size_states = half // 2
    edges, totals = work[:size_states], work[size_states:half]
    new_edges, new_totals = work[half : half + size_states], work[half + size_states :]
    edges[0] = edge
    totals[0] = 0
    states = 1
    for r in runs:
        run = flat[bounds[r] : bounds[r + 1]]
        size = len(run)
        count = 0
        for s in range(states):
            for gap in range(1, max_each + 1):
                total = totals[s] + gap
                if total > max_total:
                    break
                if forward:
                    start = edges[s] + 1 + gap
                    if start + size > high:
                        break
                    reached = start + size - 1
                else:
                    start = edges[s] - gap - size
                    if start < low:
                        break
                    reached = start
                if not _run_at(ids, breaks, start, run):
                    continue
                known = -1
                for j in range(count):
                    if new_edges[j] == reached:
                        known = j
                        break
                if known < 0:
                    new_edges[count] = reached
                    new_totals[count] = total
                    count += 1
                elif total < new_totals[known]:
                    new_totals[known] = total
        if count == 0:
            return -1
        edges[:count] = new_edges[:count]
        totals[:count] = new_totals[:count]
        states = count
    best = totals[0]
    for s in range(1, states):
        if totals[s] < best:
            best = totals[s]
    return best


@nb.njit(cache=True, nogil=True)
def _inside(positions: np.ndarray, offsets: np.ndarray, documents: np.ndarray) -> np.ndarray:
    """The ``positions`` (ascending) that lie in ``documents`` (ascending), by a binary search per document."""
    out = np.empty(len(positions), dtype=np.int64)
    count = 0
    for document in documents:
        first = np.searchsorted(positions, offsets[document])
        stop = np.searchsorted(positions, offsets[document + 1])
        out[count : count + stop - first] = positions[first:stop]
        count += stop - first
    return out[:count]


@nb.njit(cache=True, nogil=True)
def _nearest(
    ids: np.ndarray, breaks: np.ndarray, flat: np.ndarray, bounds: np.ndarray, anchor_run: int, start: int, size: int,
    low: int, high: int, widest: int,
) -> int:
    """Of a two-run bridge whose run ``anchor_run`` is at ``start``: the smallest gap (1..``widest``)
    to the other run, after it or before it; -1 when it is not within reach."""
    other = flat[bounds[1 - anchor_run] : bounds[2 - anchor_run]]
    for gap in range(1, widest + 1):
        at = start + size + gap if anchor_run == 0 else start - gap - len(other)
        if at < low or at + len(other) > high:
            return -1
        if _run_at(ids, breaks, at, other):
            return gap
    return -1


@nb.njit(cache=True, nogil=True)
def _match(
    ids: np.ndarray, breaks: np.ndarray, offsets: np.ndarray, positions: np.ndarray,
    flat: np.ndarray, bounds: np.ndarray, anchor_run: int, anchor_offset: int, max_each: int, max_total: int,
    stop_gap: int, stop_count: int, shrink: bool,
) -> tuple[np.ndarray, np.ndarray, bool]:
    """Every document matching the runs ``flat[bounds[r]:bounds[r + 1]]`` in order, each gap
    1..``max_each`` tokens and ``max_total`` in all, with its smallest total gap (documents
    ascending), and whether the scan went to the end. ``positions`` are the anchor word's,
    ascending; it is token ``anchor_offset`` of run ``anchor_run``. The scan stops once
    ``stop_count`` documents (> 0) matched within ``stop_gap``: enough to know a df is >= k.
    With ``shrink``, only the smallest total gap matters: the reach narrows to the best found
    so far (documents recorded earlier with a larger gap stay; the caller keeps the smallest)."""
    runs = len(bounds) - 1
    docs = np.empty(len(positions), dtype=np.int64)
    gaps = np.empty(len(positions), dtype=np.int64)
    found = 0
    doc = 0
    anchor = flat[bounds[anchor_run] : bounds[anchor_run + 1]]
    after = np.arange(anchor_run + 1, runs)
    before = np.arange(anchor_run - 1, -1, -1)
    # Reachable edges after each run: at most one per token of the widest reach, which grows by
    # max_each per run (and, in a source search, stays within the document).
    work = np.empty(4 * (max_each * runs + 2), dtype=np.int64)
    within = 0
    for position in positions:
        if stop_count > 0 and within >= stop_count:
            return docs[:found], gaps[:found], False
        while offsets[doc + 1] <= position:
            doc += 1
        low, high = offsets[doc], offsets[doc + 1]
        start = position - anchor_offset
        if start < low or start + len(anchor) > high or not _run_at(ids, breaks, start, anchor):
            continue
        if runs == 2:  # most bridges: the nearest other run is the smallest gap, no states to keep
            total = _nearest(ids, breaks, flat, bounds, anchor_run, start, len(anchor), low, high, min(max_each, max_total))
            if total < 0:
                continue
        else:
            right = _side(ids, breaks, flat, bounds, after, start + len(anchor) - 1, low, high, max_each, max_total, True, work)
            if right < 0:
                continue
            left = _side(ids, breaks, flat, bounds, before, start, low, high, max_each, max_total - right, False, work)
            if left < 0:
                continue
            total = left + right
        if shrink and total < max_total:
            max_total = total
        if found and docs[found - 1] == doc:
            if total < gaps[found - 1]:
                if gaps[found - 1] > stop_gap >= total:
                    within += 1
                gaps[found - 1] = total
        else:
            docs[found] = doc
            gaps[found] = total
            found += 1
            if total <= stop_gap:
                within += 1
    return docs[:found], gaps[:found], True


class GapLookup:
    """Where runs of words stand in the collection: each document's smallest total gap."""

    def __init__(self, store: GapStore) -> None:
        self.store = store
        self.ids, self.breaks = store.stream
        self.starts, self.positions = store.postings
        self.offsets = np.asarray(store.offsets, dtype=np.int64)
        self._cache: dict[bytes, tuple[np.ndarray, np.ndarray, bool]] = {}
        self._cached_bytes = 0
        #: The search reading's posting lists of runs, by (length, row) (``RunHolders``).
        self.run_documents: dict[tuple[int, int], np.ndarray] = {}
        #: Bridges already decided (``gap._decide``), by their runs' words and the sources and k
        #: they were read with: a rewriter's passes re-read every bridge that no new mask touched.
        self.decisions: dict[bytes, tuple[bool, bool, int, int, int]] = {}

    def occurrences(self, number: int) -> int:
        return int(self.starts[number + 1] - self.starts[number])

    def match(
        self, runs: list[np.ndarray], max_each: int, max_total: int, stop_gap: int = -1, stop_count: int = 0, only: int | None = None,
        candidates: np.ndarray | None = None, shrink: bool = False,
    ) -> tuple[np.ndarray, np.ndarray, bool]:
        """Documents (ascending) holding ``runs`` (vocabulary numbers) in order within the gaps, each
        one's smallest total gap, and whether that is all of them: the scan may stop once
        ``stop_count`` documents matched within ``stop_gap`` (``_match``). ``only``: that document
        alone; ``candidates``: the documents that can hold the runs (sorted; the others are not read)."""
        empty = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), True)
        if any((run < 0).any() for run in runs):
            return empty
        key = b"".join(np.int64(len(run)).tobytes() + run.astype(np.int64).tobytes() for run in runs) + np.array(
            [max_each, max_total, shrink], dtype=np.int64
        ).tobytes()
        cached = self._cache.get(key)
        stopping = key + np.array([stop_gap, stop_count], dtype=np.int64).tobytes()
        if cached is None and only is None and stop_count > 0:
            cached = self._cache.get(stopping)  # a scan that stopped early, asked the same again
        if cached is not None:
            if only is None:
                return cached
            at = np.searchsorted(cached[0], only)
            hit = at < len(cached[0]) and cached[0][at] == only
            return (cached[0][at : at + 1], cached[1][at : at + 1], True) if hit else empty
        flat = np.concatenate(runs).astype(np.int64)
        bounds = np.concatenate([[0], np.cumsum([len(run) for run in runs])]).astype(np.int64)
        counts = self.starts[flat + 1] - self.starts[flat]
        rarest = int(np.argmin(counts))
        anchor_run = int(np.searchsorted(bounds, rarest, side="right") - 1)
        word = flat[rarest]
        positions = self.positions[self.starts[word] : self.starts[word + 1]]
        if only is not None:  # the anchor's positions inside that document
            positions = positions[np.searchsorted(positions, self.offsets[only]) : np.searchsorted(positions, self.offsets[only + 1])]
        elif candidates is not None and len(candidates) * 8 < len(positions):  # fewer documents than positions: read only theirs
            positions = _inside(positions, self.offsets, np.asarray(candidates, dtype=np.int64))
        found = _match(
            self.ids, self.breaks, self.offsets, positions, flat, bounds, anchor_run, rarest - int(bounds[anchor_run]),
            max_each, max_total, stop_gap, stop_count, shrink,
        )
        if only is None:
            self._remember(key if found[2] else stopping, found)
        return found

    def _remember(self, key: bytes, found: tuple[np.ndarray, np.ndarray, bool]) -> None:
        """Keep a result (a text's passes and the next texts ask again), within ``_CACHE_BYTES``."""
        size = len(key) + found[0].nbytes + found[1].nbytes + 64
        if self._cached_bytes + size > _CACHE_BYTES:
            self._cache.clear()
            self._cached_bytes = 0
        self._cache[key] = found
        self._cached_bytes += size

    def keep_decision(self, key: bytes, decision: tuple[bool, bool, int, int, int]) -> None:
        """Keep a bridge's decision (``decisions``), within ``_DECISIONS_KEPT``."""
        if len(self.decisions) >= _DECISIONS_KEPT:
            self.decisions.clear()
        self.decisions[key] = decision


def lookup_of(index: CorpusIndex) -> GapLookup:
    """The index's gap lookup, made once per opened index (reading the store back costs a pass over it)."""
    lookup = index.__dict__.get("_gap_lookup")
    if lookup is None:
        if index.gap is None:
            index.require_readings(["gap"])
        assert index.gap is not None
        lookup = index.__dict__["_gap_lookup"] = GapLookup(index.gap)
    return lookup
