"""SPEC §9, the gap reading: a mask does not hide its neighbours.

"[PERSON] was born in [DATE] and lives in [LOC]" still sends ``"born in * and lives in"``
to its source: every engine answers a phrase with a gap (sloppy phrases, ``*`` in a quoted
web search). Under this reading a text's *bridges* — runs of the search reading's tokens
separated by mask stretches, at most ``max_n`` tokens in all — are looked up with their
gaps: a document matches a bridge within s when it holds the runs in order, each run as
consecutive tokens, with 1.. tokens between consecutive runs and at most s in all.

The text's bridges and the documents holding their runs come from ``bridges``; where the
collection's words stand, from the index's gap store, matched by ``gap_lookup`` (anchored at
each bridge's rarest word). Each document's smallest total gap ``m_d`` is all the reading needs:
``df_s = #{d : m_d <= s}``. The source of the text (given, or found as the only document
holding all its runs in order with 1..G tokens between them) decides which s a bridge is
read at (SPEC §9; choices where the SPEC is silent are in docs/linkage-rules.md §9).

A bridge's tokens are consecutive in the text's token list (a mask yields none), so to a
cover it is one more interval of tokens: masking any of its words breaks it — and makes
the next, wider bridge, which the rewriter's next pass looks up.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from .bridges import RunHolders, _not_contained, _not_containing, enumerate_bridges, run_edges, runs_of, segments_of
from .gap_lookup import GapLookup, lookup_of
from .index import CorpusIndex
from .ngrams import LevelLookup, LinkageAnalysis, occurrence_keys
from .tokenize import Tokens

#: Rows of bridge candidates carry this bit, so their keys (``ngrams.occurrence_keys``) never
#: meet an n-gram's (a level's rows stay far below it).
BRIDGE_ROW = 1 << 39
#: The most documents a source search tries; more holders mean the text says too little to
#: single one out (it is then read with every holder in turn, which is what this bound keeps).
_NO_LIMIT = 1 << 40


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
    # A bridge's findings depend on its runs' words alone (its place only says where it is), with
    # the sources and k it is read with: a text with many masks repeats bridges, and a rewriter's
    # passes re-read every bridge no new mask touched, so each is decided once per opened index
    # (``lookup.decisions``).
    reading = sources.tobytes() + np.array([unknown, k], dtype=np.int64).tobytes()
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
        memo = b"".join(np.int64(len(run)).tobytes() + run for run in words) + reading
        known = lookup.decisions.get(memo)
        if known is None:
            _decide(lookup, bridges, i, runs_of(first, last, starts, numbers), sources, unknown, k, max_gap, holders.of(first, last, starts))
            lookup.keep_decision(memo, tuple(bridges[name][i].item() for name in _DECIDED))
        else:
            for name, value in zip(_DECIDED, known):
                bridges[name][i] = value
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
