"""An independent adversary: the search-based linkage attack run with a real search engine.

The original collection goes into an in-memory tantivy index; a phrase of a released text
is a tantivy phrase query, a combination an AND of phrase queries. It shares no code with
``spacy_delink.linkage``'s tokenizers and index: what it takes from there is the search
form (``fold_text``, the normalizer an engine's ICU analyzer applies) and the index's
rules values (mask patterns, break characters), so a disagreement with our index is a
finding, not an echo of the same code.

Two readings of a text (SPEC §8), each its own tantivy index (``engine_reading``): ``search``,
the adversary's ordinary engine (what ``delink evaluate`` reports as "tantivy"), and ``exact``,
SPEC §1–§7's reading, for comparing our exact reading with an engine.

The attack (SPEC §4–5, counted by the engine): a phrase is linkable at k when
1 <= hits < k; the candidates are the maximal phrases with >= k hits, one per distinct
phrase; a combination of 2..arity candidates is linkable when the AND query has
1 <= hits < k. Pair and triple supports come from tantivy's hit lists, and every linkable
combination reported is confirmed by an actual boolean AND query.

**Proximity searches** (search reading), read exactly on token positions by
``proximity`` (tantivy's sloppy phrases of three or more terms miss matches: tantivy
issues #1934, #2580), reported apart from the phrases and ANDs of phrases:

* *gap reading* (inside the contract, SPEC §9): the last 1-3 words before each stretch
  of masks and the first 1-3 after it as a sloppy phrase, read at the smallest slop that
  reaches the text's source (unknown source: that finds any document) when that slop is
  at most ``max_gap``; alone or ANDed with the text's candidate phrases;
* *beyond the contract*: the same searches when the source is only reached with a slop
  above ``max_gap`` (up to ``proximity_slop``), and phrases longer than max_n (no mask
  separates their words); reported, not prevented.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence, cast

import numpy as np

from ..errors import DelinkError, InputError
from .collection import NUMBER_FIELD, TEXT_FIELD, index_collection
from .engine_reading import ExactReading, Reading, Search, SearchReading, Segmented
from .proximity import DEFAULT_MAX_GAP, DEFAULT_WIDEST_SLOP, PositionalIndex, bridges

Cell = tuple[int, int]
#: The widest proximity search that may be asked for around a mask.
MAX_PROXIMITY_SLOP = 1000


def check_proximity_slop(slop: int, readings: Sequence[str], max_gap: int = DEFAULT_MAX_GAP) -> int:
    """The widest sloppy phrase tried around a mask, checked: at least the contract's ``max_gap``
    (the gap reading is read in full), and only under the search reading."""
    if not 1 <= max_gap <= slop <= MAX_PROXIMITY_SLOP:
        raise InputError(
            f"proximity slop {slop} with max_gap {max_gap}: need 1 <= max_gap <= slop <= {MAX_PROXIMITY_SLOP} "
            f"(the gap reading reads slops up to max_gap; default slop {DEFAULT_WIDEST_SLOP})"
        )
    if "search" not in readings:
        raise InputError("proximity searches run under the search reading; add it to the readings or turn them off")
    return slop


def engine_unavailable() -> str | None:
    """Why the independent engine cannot run here (tantivy missing), or None."""
    try:
        import tantivy  # noqa: F401
    except ImportError as err:
        return f"the independent adversary needs tantivy ({err}); install it with pip install 'spacy-delink[evaluate]'"
    return None


@dataclass
class EngineVerdict:
    """What the engine's attack finds in one text at one (k, arity)."""

    linkable: bool
    anonymity: int | None
    witness: dict[str, Any] | None = None  # the smallest linkable search found, for listings


@dataclass
class EngineFindings:
    """The engine's verdicts on one text: per reading (the SPEC's phrases and ANDs of phrases);
    with the gap reading's sloppy phrases around masks added (``gap``: inside the contract,
    SPEC §9); and with every proximity search added (``proximity``: also the searches still
    outside it). Both None when proximity searches were not asked for."""

    readings: dict[str, dict[Cell, EngineVerdict]]
    gap: dict[Cell, EngineVerdict] | None = None
    proximity: dict[Cell, EngineVerdict] | None = None

    def verdict(self, cell: Cell) -> EngineVerdict:
        """By phrases and ANDs of phrases (SPEC §8): linkable under any reading; the smallest anonymity and its search."""
        linkable = [verdicts[cell] for verdicts in self.readings.values() if verdicts[cell].linkable]
        if not linkable:
            return EngineVerdict(False, None)
        return min(linkable, key=lambda verdict: cast(int, verdict.anonymity))  # its witness names the reading


@dataclass
class _Phrases:
    """Distinct phrases of a text (word tuples) with their hit counts, and their occurrences."""

    counts: dict[tuple[str, ...], int] = field(default_factory=dict)
    occurrences: list[tuple[int, int, tuple[str, ...]]] = field(default_factory=list)  # (run, first word, key)


@dataclass(eq=False)
class _Member:
    """One search in an AND: what it is called, its documents, and the tantivy phrase query
    that confirms an AND (None for a search read on positions)."""

    label: str
    hits: np.ndarray
    search: Search | None = None


_Found = tuple[int, tuple[str, ...]]  # (hits, searches): a linkable search or combination


@dataclass
class _Proximity:
    """A text's proximity searches as read: each (search, documents), within ``max_gap`` or beyond it."""

    within: list[tuple[str, np.ndarray]] = field(default_factory=list)
    beyond: list[tuple[str, np.ndarray]] = field(default_factory=list)


class _Engine:
    """The original collection in one tantivy index, read one way, and the attack against it."""

    def __init__(self, reading: Reading, documents: Sequence[str], max_n: int, max_gap: int = DEFAULT_MAX_GAP, widest: int | None = None) -> None:
        """``widest``: read proximity searches with slops up to it (the search reading only); None: not."""
        import tantivy

        self._tantivy = tantivy
        self.reading = reading
        self.max_n = max_n
        self.max_gap = max_gap
        self.analyzer = reading.analyzer()
        collection = index_collection(self.analyzer, "delink_adversary", "position", map(reading.index_values, documents))
        self.positions: PositionalIndex | None = None
        if widest is not None:
            assert isinstance(reading, SearchReading)
            self.positions = PositionalIndex((reading.runs(text, self.analyzer) for text in documents), widest)
        self.schema, self.engine, self.searcher = collection.schema, collection.engine, collection.searcher
        self.documents = collection.documents
        self._hits: dict[Search, np.ndarray] = {}

    def _query(self, search: Search) -> Any:
        if len(search.words) == 1:
            return self._tantivy.Query.term_query(self.schema, TEXT_FIELD, search.words[0])
        return self._tantivy.Query.phrase_query(self.schema, TEXT_FIELD, list(search.words))

    def count(self, search: Search) -> int:
        """Documents matching one search."""
        if len(search.words) == 1:
            return int(self.searcher.doc_freq(TEXT_FIELD, search.words[0]))
        return int(self.searcher.search(self._query(search), limit=1).count)

    def count_all(self, searches: Sequence[Search]) -> int:
        """Documents matching every search: one boolean AND query."""
        tantivy = self._tantivy
        query = tantivy.Query.boolean_query([(tantivy.Occur.Must, self._query(search)) for search in searches])
        return int(self.searcher.search(query, limit=1).count)

    def hits(self, search: Search) -> np.ndarray:
        """Sorted document numbers matching one search (cached)."""
        found = self._hits.get(search)
        if found is None:
            result = self.searcher.search(self._query(search), limit=max(self.documents, 1))
            numbers = self.searcher.fast_field_values(NUMBER_FIELD, [address for _, address in result.hits])
            found = self._hits[search] = np.sort(np.asarray(numbers, dtype=np.int64))
        return found

    def phrases(self, segmented: Segmented) -> _Phrases:
        """Every phrase of the runs that can matter, with its hit count.

        A phrase is only searched when both its one-shorter sub-phrases hit >= 2 documents:
        otherwise it hits at most one, and that sub-phrase already shows the same (or a
        smaller) candidate set.
        """
        found = _Phrases()
        counts = found.counts
        for run_no, words in enumerate(segmented.runs):
            previous: dict[int, int] = {}
            for n in range(1, self.max_n + 1):
                current: dict[int, int] = {}
                for i in range(len(words) - n + 1):
                    if n > 1 and (previous.get(i, 0) < 2 or previous.get(i + 1, 0) < 2):
                        continue
                    key = tuple(words[i : i + n])
                    if key not in counts:
                        counts[key] = self.count(Search(key))
                    current[i] = counts[key]
                    found.occurrences.append((run_no, i, key))
                if not current:
                    break
                previous = current
        return found

    def attack(
        self, text: str, ks: list[int], arities: list[int], source: int | None = None
    ) -> tuple[dict[Cell, EngineVerdict], dict[Cell, EngineVerdict] | None, dict[Cell, EngineVerdict] | None]:
        """The attack on one text at every (k, arity): by phrases and ANDs of phrases; and, when
        the engine reads proximity, with the gap reading's searches added, then with every
        proximity search added. ``source``: the text's source document, when known."""
        segmented = self.reading.segments(text, self.analyzer)
        phrases = self.phrases(segmented)
        near = self._proximity(segmented, source) if self.positions is not None else None
        top = max(arities)
        verdicts: dict[Cell, EngineVerdict] = {}
        gap: dict[Cell, EngineVerdict] = {}
        widened: dict[Cell, EngineVerdict] = {}
        for k in ks:
            single: list[_Found] = [(count, (str(Search(key)),)) for key, count in phrases.counts.items() if 1 <= count < k]
            candidates = [self._member(Search(key)) for key in self._candidates(phrases, k)]
            combos = self._combinations(candidates, k, top, len(candidates)) if top >= 2 else {}
            if near is not None:
                within = [(len(hits), (label,)) for label, hits in near.within if 1 <= len(hits) < k]
                beyond = [(len(hits), (label,)) for label, hits in near.beyond if 1 <= len(hits) < k]
                frequent_within = [_Member(label, hits) for label, hits in near.within if len(hits) >= k]
                frequent_beyond = [_Member(label, hits) for label, hits in near.beyond if len(hits) >= k]
                within_combos = self._combinations(frequent_within + candidates, k, top, len(frequent_within)) if top >= 2 else {}
                beyond_combos = (
                    self._combinations(frequent_beyond + frequent_within + candidates, k, top, len(frequent_beyond)) if top >= 2 else {}
                )
            for arity in arities:
                found = single + [combo for m, combo in combos.items() if m <= arity and combo is not None]
                verdicts[(k, arity)] = _verdict(found, self.reading.name)
                if near is not None:
                    found += within + [combo for m, combo in within_combos.items() if m <= arity and combo is not None]
                    gap[(k, arity)] = _verdict(found, self.reading.name)
                    found += beyond + [combo for m, combo in beyond_combos.items() if m <= arity and combo is not None]
                    widened[(k, arity)] = _verdict(found, self.reading.name)
        if near is None:
            return verdicts, None, None
        return verdicts, gap, widened

    def _proximity(self, segmented: Segmented, source: int | None) -> _Proximity:
        """The text's proximity searches as the adversary reads them.

        A sloppy phrase around a mask is read at the smallest slop that reaches the source
        (unknown: that finds any document): a larger slop only adds documents. Within
        ``max_gap`` it is the gap reading's (SPEC §9); above it, outside the contract. A
        phrase longer than max_n is read at its longest from each word that the source (or
        any document) holds, once shorter phrases all find several documents.
        """
        assert self.positions is not None
        found = _Proximity()
        for bridge in bridges(segmented.runs, segmented.masked):
            docs, slops = self.positions.around(bridge)
            at = np.flatnonzero(docs == source) if source is not None else np.arange(min(len(docs), 1))
            if not len(at):
                continue
            slop = int(slops[at[0]]) if source is not None else int(slops.min())
            read = (bridge.search(slop), docs[slops <= slop])
            (found.within if slop <= self.max_gap else found.beyond).append(read)
        seen: set[str] = set()
        for words in segmented.runs:
            for start in range(max(len(words) - self.max_n, 0)):
                longest = self.positions.longest(words, start, source, self.max_n + 1)
                if longest is not None:
                    label = " ".join(words[start : start + longest[0]])
                    if label not in seen:
                        seen.add(label)
                        found.beyond.append((label, longest[1]))
        return found

    def _member(self, search: Search) -> _Member:
        return _Member(str(search), self.hits(search), search)

    def _candidates(self, phrases: _Phrases, k: int) -> list[tuple[str, ...]]:
        """Maximal phrases with >= k hits (not inside a longer one), one per distinct phrase."""
        frequent = [(run, i, key) for run, i, key in phrases.occurrences if phrases.counts[key] >= k]
        spans = {(run, i, i + len(key)) for run, i, key in frequent}
        chosen: dict[tuple[str, ...], None] = {}
        for run, i, key in sorted(frequent):
            end = i + len(key)
            inside = (run, i - 1, end) in spans or (run, i, end + 1) in spans
            if not inside:
                chosen.setdefault(key)
        return list(chosen)

    def _combinations(self, members: list[_Member], k: int, arity: int, leading: int) -> dict[int, _Found | None]:
        """The smallest linkable pair and (arity 3) triple whose first member is one of the first
        ``leading`` members: (hits, searches); an AND of phrases is confirmed by a tantivy query."""
        result: dict[int, _Found | None] = {2: None, 3: None}
        members, leading = _distinct(members, leading)
        if len(members) < 2 or leading == 0:
            return result
        hit_sets = [member.hits for member in members]
        universe = np.unique(np.concatenate(hit_sets))
        matrix = np.zeros((len(members), len(universe)), dtype=np.float32)
        for row, hits in enumerate(hit_sets):
            matrix[row, np.searchsorted(universe, hits)] = 1.0
        pairs = matrix[:leading] @ matrix.T
        upper = np.triu(np.ones_like(pairs, dtype=bool), 1)
        linkable = upper & (pairs >= 1) & (pairs < k)
        if linkable.any():
            a, b = (int(i) for i in np.unravel_index(np.argmin(np.where(linkable, pairs, np.inf)), pairs.shape))
            result[2] = self._confirmed(int(pairs[a, b]), (members[a], members[b]))
        if arity >= 3 and len(members) >= 3 and (result[2] is None or result[2][0] > 1):  # no triple finds fewer than 1
            best: tuple[int, tuple[int, int, int]] | None = None
            for a in range(min(leading, len(members) - 2)):
                columns = matrix[a] > 0
                sub = matrix[a + 1 :, columns]
                triples = sub @ sub.T  # |a ∩ b ∩ c| for b, c after a
                inner = np.triu(np.ones_like(triples, dtype=bool), 1) & (triples >= 1) & (triples < k)
                if inner.any():
                    b, c = (int(i) for i in np.unravel_index(np.argmin(np.where(inner, triples, np.inf)), triples.shape))
                    support = int(triples[b, c])
                    if best is None or support < best[0]:
                        best = (support, (a, a + 1 + b, a + 1 + c))
                    if support == 1:
                        break
            if best is not None:
                result[3] = self._confirmed(best[0], tuple(members[i] for i in best[1]))
        return result

    def _confirmed(self, support: int, members: tuple[_Member, ...]) -> _Found:
        labels = tuple(member.label for member in members)
        searches = [member.search for member in members]
        if all(search is not None for search in searches):
            engine_count = self.count_all(cast(list[Search], searches))
            if engine_count != support:
                raise DelinkError(f"tantivy counts {engine_count} documents for {' AND '.join(labels)} but its hit lists give {support} (a bug)")
        return support, labels


def _distinct(members: list[_Member], leading: int) -> tuple[list[_Member], int]:
    """One member per distinct document set, the first (a leading one where there is one): an
    AND with a second search of the same documents finds what the first finds alone."""
    seen: set[bytes] = set()
    kept: list[_Member] = []
    kept_leading = 0
    for number, member in enumerate(members):
        key = member.hits.tobytes()
        if key not in seen:
            seen.add(key)
            kept.append(member)
            kept_leading += number < leading
    return kept, kept_leading


def _verdict(found: list[_Found], reading: str) -> EngineVerdict:
    if not found:
        return EngineVerdict(False, None)
    count, searches = min(found, key=lambda item: (item[0], len(item[1]), list(item[1])))
    return EngineVerdict(True, count, {"phrases": list(searches), "hits": count, "reading": reading})


READINGS = ("exact", "search")


class SearchEngineAdversary:
    """The original collection in tantivy, under each reading asked for, and the attack against it."""

    def __init__(
        self,
        documents: Iterable[str],
        rules: Any,
        max_n: int,
        readings: Sequence[str] = READINGS,
        proximity_slop: int | None = DEFAULT_WIDEST_SLOP,
        max_gap: int = DEFAULT_MAX_GAP,
    ) -> None:
        """``proximity_slop``: also read the proximity searches (search reading only), sloppy
        phrases up to this slop (those above ``max_gap`` are outside the contract); None: not."""
        reason = engine_unavailable()
        if reason:
            raise DelinkError(reason)
        if not readings or any(r not in READINGS for r in readings):
            raise InputError(f"the independent engine reads {' or '.join(READINGS)}; got {list(readings)!r}")
        if proximity_slop is not None:
            check_proximity_slop(proximity_slop, readings, max_gap)
        self.proximity_slop = proximity_slop
        self.max_gap = max_gap
        texts = list(documents)
        self.engines = {}
        if "exact" in readings:
            self.engines["exact"] = _Engine(ExactReading.from_rules(rules), texts, max_n)
        if "search" in readings:
            self.engines["search"] = _Engine(SearchReading.from_rules(rules), texts, max_n, max_gap, proximity_slop)
        self.documents = len(texts)

    @property
    def readings(self) -> tuple[str, ...]:
        return tuple(self.engines)

    def attack(self, text: str, ks: list[int], arities: list[int], source: int | None = None) -> EngineFindings:
        """The attack on one text at every (k, arity), under every reading (and with proximity
        searches); ``source``: the number of the text's source in the collection, when known."""
        findings = EngineFindings(readings={})
        for name, engine in self.engines.items():
            findings.readings[name], gap, widened = engine.attack(text, ks, arities, source)
            if widened is not None:
                findings.gap, findings.proximity = gap, widened
        return findings
