"""SPEC §9, the gap reading: a mask does not hide its neighbours.

"[PERSON] was born in [DATE] and lives in [LOC]" still sends ``"born in * and lives in"``
to its source: every engine answers a phrase with a gap (sloppy phrases, ``*`` in a quoted
web search). Under this reading a text's *bridges* — runs of the search reading's tokens
separated by mask stretches, at most ``max_n`` tokens in all — are looked up with their
gaps: a document matches a bridge within s when it holds the runs in order, each run as
consecutive tokens, with 1.. tokens between consecutive runs and at most s in all.

Where the collection's words stand comes from the index's gap store (``index.gapstore``):
for each bridge, the positions of its rarest word anchor the match, and the other runs are
checked beside it, so a lookup costs the anchor's occurrences times the gap, not the
collection. Each document's smallest total gap ``m_d`` is all the reading needs:
``df_s = #{d : m_d <= s}``. The source of the text (given, or found as the only document
holding all its runs in order with 1..G tokens between them) decides which s a bridge is
read at (SPEC §9; choices where the SPEC is silent are in docs/linkage-rules.md §9).

A bridge's tokens are consecutive in the text's token list (a mask yields none), so to a
cover it is one more interval of tokens: masking any of its words breaks it — and makes
the next, wider bridge, which the rewriter's next pass looks up.
"""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any, Sequence

import numba as nb
import numpy as np

from .. import _kernels  # noqa: F401  (announces a compile of these kernels)
from .index import CorpusIndex
from .index.gapstore import GapStore
from .ngrams import LevelLookup, LinkageAnalysis, occurrence_keys
from .tokenize import Tokens

#: Rows of bridge candidates carry this bit, so their keys (``ngrams.occurrence_keys``) never
#: meet an n-gram's (a level's rows stay far below it).
BRIDGE_ROW = 1 << 39
#: Bytes of gap results kept per opened index (bridges recur across a text's passes and across texts).
_CACHE_BYTES = 64 << 20
#: Posting lists of runs kept per opened index.
_RUN_LISTS = 50_000
#: The most documents a source search tries; more holders mean the text says too little to
#: single one out (it is then read with every holder in turn, which is what this bound keeps).
_NO_LIMIT = 1 << 40


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


def lookup_of(index: CorpusIndex) -> GapLookup:
    """The index's gap lookup, made once per opened index (reading the store back costs a pass over it)."""
    lookup = index.__dict__.get("_gap_lookup")
    if lookup is None:
        if index.gap is None:
            index.require_readings(["gap"])
        assert index.gap is not None
        lookup = index.__dict__["_gap_lookup"] = GapLookup(index.gap)
    return lookup


@dataclass
class GapAnalysis:
    """The gap reading's findings in one text: its bridges, the source, the linkable ones and the candidates.

    It answers what a cover and the records ask of a reading's analysis (``ngrams.LinkageAnalysis``):
    ``tokens`` and ``levels`` are the search reading's, ``minimal_arrays`` the minimal linkable
    bridges, ``maximal_columns`` the candidates' occurrences (the search reading's and the bridges').
    """

    text: str
    search: LinkageAnalysis
    k: int
    max_gap: int
    #: "given", "found", "several" or "unknown" (docs/linkage-rules.md §9).
    source_rule: str
    sources: np.ndarray
    #: Per bridge: first and last token, stretches crossed, linkable, support, slop and rule ("source" 1, "unknown" 0).
    bridges: dict[str, np.ndarray]
    #: Per candidate version: its bridge, its documents (ascending).
    versions: list[tuple[int, np.ndarray]] = field(default_factory=list)
    reading: str = "gap"
    _minimal: dict[str, np.ndarray] | None = None
    _maximal: dict[str, np.ndarray] | None = None

    @property
    def tokens(self) -> Tokens:
        return self.search.tokens

    @property
    def levels(self) -> list[LevelLookup]:
        return self.search.levels

    def _columns(self, chosen: np.ndarray, support: np.ndarray, row: np.ndarray) -> dict[str, np.ndarray]:
        first, last = self.bridges["first"][chosen], self.bridges["last"][chosen]
        return {
            "token": first,
            "n": last - first + 1,
            "start": self.tokens.starts[first].astype(np.int64),
            "end": self.tokens.ends[last].astype(np.int64),
            "support": support.astype(np.int64),
            "row": row.astype(np.int64),
        }

    def minimal_arrays(self) -> dict[str, np.ndarray]:
        """The minimal linkable bridges (no linkable bridge or search n-gram inside their range), by start then end,
        as ``ngrams._COLUMNS`` plus ``slop`` and ``rule`` (1: the source's, 0: the unknown-source rule)."""
        if self._minimal is None:
            b = self.bridges
            linkable = np.flatnonzero(b["linkable"])
            search = self.search.minimal_arrays()
            inner_first = np.concatenate([search["token"], b["first"][linkable]])
            inner_last = np.concatenate([search["token"] + search["n"] - 1, b["last"][linkable]])
            keep = _not_containing(b["first"][linkable], b["last"][linkable], inner_first, inner_last)
            chosen = linkable[keep]
            columns = self._columns(chosen, b["support"][chosen], chosen)
            columns["slop"] = b["slop"][chosen]
            columns["rule"] = b["rule"][chosen]
            order = np.lexsort((columns["end"], columns["start"]))
            self._minimal = {name: column[order] for name, column in columns.items()}
        return self._minimal

    def anonymity(self) -> int | None:
        """The smallest support of any linkable bridge (SPEC §6 with §9), or None."""
        support = self.bridges["support"][self.bridges["linkable"]]
        return int(support.min()) if len(support) else None

    def maximal_columns(self) -> dict[str, np.ndarray]:
        """Every occurrence of a candidate: the search reading's maximal frequent n-grams and each
        version of each maximal frequent bridge across one stretch, in text order."""
        if self._maximal is None:
            search = self.search.maximal_columns()
            bridge_of = np.array([bridge for bridge, _ in self.versions], dtype=np.int64)
            support = np.array([len(documents) for _, documents in self.versions], dtype=np.int64)
            key_of = self._version_keys()
            mine = self._columns(bridge_of, support, BRIDGE_ROW | key_of)
            columns = {name: np.concatenate([search[name].astype(np.int64), mine[name]]) for name in search}
            order = np.lexsort((columns["n"], columns["token"]))
            self._maximal = {name: column[order] for name, column in columns.items()}
        return self._maximal

    def _version_keys(self) -> np.ndarray:
        """One number per distinct (bridge key, document set): versions of one key at several places share it."""
        seen: dict[bytes, int] = {}
        keys = np.empty(len(self.versions), dtype=np.int64)
        for i, (bridge, documents) in enumerate(self.versions):
            name = self.bridges["key"][bridge] + documents.tobytes()
            keys[i] = seen.setdefault(name, len(seen))
        return keys

    def given_documents(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The documents of the bridge candidates ``keys`` (``occurrence_keys``), concatenated, and each one's count."""
        by_key: dict[int, np.ndarray] = {}
        version_keys = self._version_keys()
        for (bridge, documents), key in zip(self.versions, version_keys.tolist()):
            first, last = int(self.bridges["first"][bridge]), int(self.bridges["last"][bridge])
            by_key[int(occurrence_keys(np.array(last - first + 1), np.array(BRIDGE_ROW | key)))] = documents
        chosen = [by_key[int(key)] for key in keys.tolist()]
        df = np.array([len(d) for d in chosen], dtype=np.int64)
        return (np.concatenate(chosen).astype(np.int64) if chosen else np.zeros(0, dtype=np.int64)), df


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


def find_sources(lookup: GapLookup, segments: np.ndarray, numbers: np.ndarray, max_gap: int) -> np.ndarray:
    """The documents holding every segment of the text in order, 1..``max_gap`` tokens apart (SPEC §9)."""
    runs = [numbers[a:b] for a, b in segments.tolist()]
    documents, _, _ = lookup.match(runs, max_gap, _NO_LIMIT)
    return documents


def analyze_gap(
    index: CorpusIndex, search: LinkageAnalysis, k: int, arity: int = 1, source: int | None = None, carried: Sequence[int] = (),
) -> GapAnalysis:
    """SPEC §9 for one text, from its search-reading analysis (``search``): the bridges, their
    supports under the source's rule, and (``arity`` >= 2) the candidates for combinations.
    ``source``: the document number of the text's source when given with it; ``carried``:
    sources found on an earlier version of the text (the rewriter's input), read as sources too
    — a text masked until its runs lie more than G apart in its source no longer finds it.

    Each bridge is first decided with a scan that stops as soon as k documents are within
    reach (enough to know it is not linkable); only the bridges that end up as candidates for
    combinations are read in full. A bridge holding a linkable n-gram of the search reading
    is skipped when that n-gram already singles the text out: it is not minimal, it matches
    fewer than k documents (no candidate), and it cannot lower an anonymity of 1.
    """
    lookup = lookup_of(index)
    max_gap = index.rules.max_gap
    tokens = search.tokens
    digests = search.levels[0].keys if search.levels else np.zeros(0, dtype=np.uint64)
    numbers = lookup.store.numbers(digests)
    segments = segments_of(np.asarray(tokens.segment_start, dtype=bool))
    spans = enumerate_bridges(segments, index.max_n) if len(segments) > 1 else []
    if source is not None:
        found, rule = np.array([source], dtype=np.int64), "given"
    elif spans:
        found = find_sources(lookup, segments, numbers, max_gap)
        rule = "found" if len(found) == 1 else ("several" if len(found) else "unknown")
    else:
        found, rule = np.zeros(0, dtype=np.int64), "unknown"
    # Sources carried from an earlier version add to those found; with none found on this text
    # the unknown-source rule applies as well (each is a reading that can only find more).
    unknown = not len(found)
    sources = np.union1d(found, np.asarray(carried, dtype=np.int64)).astype(np.int64)
    count = len(spans)
    bridges: dict[str, Any] = {
        "first": np.array([s[0] for s in spans], dtype=np.int64),
        "last": np.array([s[1] for s in spans], dtype=np.int64),
        "stretches": np.array([s[2] for s in spans], dtype=np.int64),
        "linkable": np.zeros(count, dtype=bool),
        "frequent": np.zeros(count, dtype=bool),
        "support": np.zeros(count, dtype=np.int64),
        "slop": np.zeros(count, dtype=np.int64),
        "rule": np.zeros(count, dtype=np.int64),
        "key": [b""] * count,
    }
    skipped = _holding_a_single(search, bridges["first"], bridges["last"])
    holders = RunHolders(index, search, lookup)
    # A bridge's findings depend on its runs' words alone (its place only says where it is): a text
    # with many masks repeats bridges, each decided once (the first bridge with those runs).
    decided: dict[tuple[bytes, ...], int] = {}
    words_of_bridge: list[tuple[bytes, ...]] = []
    starts = segments[:, 0].tolist()
    word_bytes = numbers.astype(np.int64).tobytes()  # a bridge's runs as bytes: slicing them costs less than arrays
    for i, (first, last, _) in enumerate(spans):
        edges = run_edges(first, last, starts)
        words = tuple(word_bytes[8 * a : 8 * b] for a, b in zip(edges[:-1], edges[1:]))
        words_of_bridge.append(words)
        bridges["key"][i] = b"|".join(words)
        if skipped[i]:
            continue
        same = decided.setdefault(words, i)
        if same == i:
            _decide(lookup, bridges, i, runs_of(first, last, starts, numbers), sources, unknown, k, max_gap, holders.of(first, last, starts))
        else:
            for name in _DECIDED:
                bridges[name][i] = bridges[name][same]
    versions: list[tuple[int, np.ndarray]] = []
    eligible = np.flatnonzero((bridges["stretches"] == 1) & bridges["frequent"])
    if arity >= 2 and len(eligible):
        sets: dict[tuple[bytes, ...], list[np.ndarray]] = {}
        for bridge in eligible.tolist():
            words = words_of_bridge[bridge]
            if words not in sets:
                first, last = spans[bridge][:2]
                runs = runs_of(first, last, starts, numbers)
                documents, gaps, _ = lookup.match(runs, max_gap, max_gap, candidates=holders.of(first, last, starts))
                sets[words] = _document_sets(documents, gaps, sources, found, k)
            versions.extend((bridge, within) for within in sets[words])
        versions = _widest_of_each_set(versions, bridges["first"], bridges["last"])
    return GapAnalysis(search.text, search, k, max_gap, rule, sources, bridges, versions)


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


def _holding_a_single(search: LinkageAnalysis, first: np.ndarray, last: np.ndarray) -> np.ndarray:
    """Bridges that hold a search n-gram of df 1: not minimal, no candidate, and no lower anonymity."""
    minimal = search.minimal_arrays()
    single = minimal["support"] == 1
    if not single.any() or not len(first):
        return np.zeros(len(first), dtype=bool)
    return ~_not_containing(first, last, minimal["token"][single], minimal["token"][single] + minimal["n"][single] - 1)


#: What ``_decide`` writes of a bridge.
_DECIDED = ("linkable", "frequent", "support", "slop", "rule")


def _decide(
    lookup: GapLookup, bridges: dict[str, Any], i: int, runs: list[np.ndarray], sources: np.ndarray, unknown: bool, k: int,
    max_gap: int, candidates: np.ndarray | None,
) -> None:
    """One bridge under SPEC §9's rules: linkable (with support, slop and rule) or frequent (a
    candidate for combinations when it crosses one stretch), scanning no further than needed.
    The source's rule for each of ``sources`` that holds the bridge; with ``unknown`` (no source
    found on the text), the unknown-source rule too."""
    held = []
    for source in sources.tolist():
        documents, gaps, _ = lookup.match(runs, max_gap, max_gap, only=source)
        if len(documents):
            held.append(int(gaps[0]))
    if held:  # the source's rule: the search that reaches a source with the least slop decides
        g = min(held)
        documents, gaps, complete = lookup.match(runs, max_gap, g, stop_gap=g, stop_count=k, candidates=candidates)
        within = int(np.count_nonzero(gaps <= g))
        if complete and within < k:
            bridges["linkable"][i], bridges["support"][i], bridges["slop"][i], bridges["rule"][i] = True, within, g, 1
            return
        bridges["frequent"][i] = True
        if not unknown:
            return
    least = len(runs) - 1  # the smallest total gap there can be: one token per stretch
    # Across several stretches a bridge is never a candidate: only the smallest gap matters.
    documents, gaps, complete = lookup.match(
        runs, max_gap, max_gap, stop_gap=least, stop_count=k, candidates=candidates, shrink=len(runs) > 2
    )
    if not len(documents):
        return
    if complete:
        lowest = int(gaps.min())
        at_lowest = int(np.count_nonzero(gaps == lowest))
        if unknown and at_lowest < k:
            bridges["linkable"][i], bridges["support"][i], bridges["slop"][i], bridges["rule"][i] = True, at_lowest, lowest, 0
            bridges["frequent"][i] = False
            return
        bridges["frequent"][i] |= len(documents) >= k
    else:
        bridges["frequent"][i] = True


def _widest_of_each_set(versions: list[tuple[int, np.ndarray]], first: np.ndarray, last: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """The candidate versions, less those whose bridge lies inside another's with the same documents
    (one search, one set: the wider bridge stands for both, as SPEC §5 keeps maximal n-grams).

    A shorter bridge is kept when its set differs: read at the slop that reaches the source,
    "case * the" can narrow further than the wider bridge around it, read at its own slop."""
    by_set: dict[bytes, list[int]] = {}
    for i, (_, documents) in enumerate(versions):
        by_set.setdefault(documents.tobytes(), []).append(i)
    kept = []
    for group in by_set.values():
        bridges = np.array([versions[i][0] for i in group], dtype=np.int64)
        inside = ~_not_contained(first[bridges], last[bridges])
        kept += [i for i, dropped in zip(group, inside.tolist()) if not dropped]
    return [versions[i] for i in sorted(kept)]


def _document_sets(
    documents: np.ndarray, gaps: np.ndarray, sources: np.ndarray, found: np.ndarray, k: int
) -> list[np.ndarray]:
    """The document sets a frequent bridge is read with in combinations: at each source's own
    smallest gap where a source holds it, and, where no source found on this very text holds it
    (or none was found), at every slop where its documents grow; k or more documents each. So
    the sources carried from an earlier version only ever add sets to what the text alone reads."""
    held = np.isin(sources, documents)
    slops = gaps[np.searchsorted(documents, sources[held])] if held.any() else np.zeros(0, dtype=np.int64)
    if not np.isin(found, documents).any():
        slops = np.concatenate([slops, np.unique(gaps)])
    sets = []
    for s in np.unique(slops).tolist():
        within = documents[gaps <= s]
        if len(within) >= k:
            sets.append(within)
    return sets


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


def bridge_records(analysis: GapAnalysis) -> list[dict[str, Any]]:
    """The minimal linkable bridges as ``delink assess`` phrase entries (SPEC §9): the text from
    the first word to the last, masks included, and the slop the adversary searches with."""
    columns = {name: column.tolist() for name, column in analysis.minimal_arrays().items()}
    text = analysis.text
    return [
        {
            "start": start, "end": end, "text": text[start:end], "support": support, "readings": ["gap"],
            "slop": slop, "rule": "source" if rule else "unknown",
        }
        for start, end, support, slop, rule in zip(columns["start"], columns["end"], columns["support"], columns["slop"], columns["rule"])
    ]
