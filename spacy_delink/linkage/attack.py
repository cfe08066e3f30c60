"""The attack on one text: everything the adversary finds at (k, arity), with the SPEC scores.

``detect`` runs, under each reading of the rules checked (SPEC §8: exact and search by
default), the n-gram lookups (SPEC §4) and, at arity 2–3, the combination search (SPEC §5);
``Detection`` answers the questions the components, the rewriter and ``delink assess`` ask
of it (anonymity, the §7 decision, what to rephrase under a flagging strategy, see
``linkage.cover``), and ``Detection.after_mask`` detects again after a mask without
looking anything up twice.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numba as nb
import numpy as np

from .. import _kernels  # noqa: F401  (announces a compile of these kernels)
from .combinations import CombinationAnalysis, analyze_combinations, check_arity
from .cover import Cover, choose
from .gap import GapAnalysis, analyze_gap
from .index import CorpusIndex
from .ngrams import LinkageAnalysis, alternate_analysis, analyze
from .readings import DEFAULT_READINGS, unread_scripts, warn_unread
from .records import assess_record
from .scores import risk_from_anonymity
from .strategies import DEFAULT_STRATEGY, check_strategy
from .units import Units

DEFAULT_MAX_COMBINATIONS = 1000


@dataclass
class ReadingDetection:
    """What the attack finds in one text under one reading of the rules (SPEC §4–6, §8)."""

    analysis: LinkageAnalysis | GapAnalysis
    combinations: CombinationAnalysis | None

    @property
    def reading(self) -> str:
        return self.analysis.reading

    @property
    def anonymity(self) -> int | None:
        """SPEC §6 over both arities under this reading (exact whatever the report cap)."""
        if self.combinations is not None:
            return self.combinations.anonymity
        return self.analysis.anonymity()

    @property
    def combination_linkable(self) -> bool:
        return self.combinations is not None and self.combinations.combination_linkable

    @property
    def protected(self) -> bool:
        """SPEC §7 under this reading: no linkable n-gram and not combination-linkable."""
        return not len(self.analysis.minimal_arrays()["start"]) and not self.combination_linkable

    def after_mask(
        self, index: CorpusIndex, removed: np.ndarray, text: str, arity: int, max_combinations: int | None, settled: np.ndarray | None
    ) -> "ReadingDetection | None":
        """This reading's detection of ``text``, this text with the tokens ``removed`` (bool per
        token) masked; None when ``text`` does not tokenize as that (detect it from scratch)."""
        assert isinstance(self.analysis, LinkageAnalysis)  # the gap reading is detected again from the search one's
        tokens = self.analysis.tokens
        new_tokens = (self.analysis.tokenizer or index.hashers[self.reading].tokenizer).tokenize(text)
        kept = np.flatnonzero(~removed)
        expected_start = tokens.segment_start[kept].astype(bool)
        expected_start[1:] |= np.diff(kept) > 1  # a mask in the gap breaks it
        expected_start[:1] = True  # the first token always starts a segment, also when masks came before it
        if (
            len(new_tokens) != len(kept)
            or not np.array_equal(np.asarray(new_tokens.segment_start, dtype=bool), expected_start)
            or not _same_tokens(tokens.codes, tokens.starts[kept], tokens.ends[kept], new_tokens.codes, new_tokens.starts, new_tokens.ends)
        ):
            return None
        analysis = self.analysis.without(np.flatnonzero(removed), text, new_tokens)
        combinations = None
        if self.combinations is not None:
            combinations = analyze_combinations(
                index, analysis, arity, max_combinations, previous=self.combinations, settled=settled,
            )
        return ReadingDetection(analysis, combinations)


@dataclass(frozen=True)
class FlaggedRange:
    """A character range a flagging strategy rewrites (whole tokens of every reading)."""

    start: int
    end: int


@dataclass
class Detection:
    """Everything the attack finds in one text at (k, arity) under each reading checked.

    A span links when it links under any reading, ``anonymity`` is the smallest support
    under any, and the text is protected only when it is protected under every reading
    (SPEC §8). What to rewrite is chosen across the readings at once (``linkage.cover``),
    over ``units``: the tokens of every reading, merged where they overlap.
    """

    text: str
    parts: tuple[ReadingDetection, ...]
    index: CorpusIndex
    k: int
    arity: int = 1
    max_combinations: int | None = 0
    flagging: str = DEFAULT_STRATEGY
    #: The document number of the text's source when it was given (SPEC §9; else the gap reading finds it).
    source: int | None = None
    #: Sources found on an earlier version of this text (the rewriter's input, its earlier passes):
    #: each is read as a source too, beside those found on this text (docs/linkage-rules.md §9).
    carried: tuple[int, ...] = ()
    _covers: dict[str, Cover] = field(default_factory=dict, repr=False)
    _units: Units | None = field(default=None, repr=False)
    _unread: list[str] | None = field(default=None, repr=False)

    @property
    def readings(self) -> tuple[str, ...]:
        """The readings checked, each once (the search reading can have two parts: ``alternate_analysis``)."""
        return tuple(dict.fromkeys(part.reading for part in self.parts))

    def part(self, reading: str) -> ReadingDetection:
        """The detection under one of the readings checked."""
        for part in self.parts:
            if part.reading == reading:
                return part
        raise KeyError(f"reading {reading!r} was not checked (checked: {', '.join(self.readings)})")

    @property
    def known_sources(self) -> tuple[int, ...]:
        """Every document read as this text's source (given, found or carried), for the next version of the text."""
        for part in self.parts:
            if isinstance(part.analysis, GapAnalysis):
                return tuple(part.analysis.sources.tolist())
        return self.carried

    @property
    def anonymity(self) -> int | None:
        """SPEC §6 over both arities and every reading checked (exact whatever the report cap)."""
        found = [part.anonymity for part in self.parts if part.anonymity is not None]
        return min(found) if found else None

    @property
    def linkage_risk(self) -> float:
        return risk_from_anonymity(self.anonymity)

    @property
    def combination_linkable(self) -> bool:
        return any(part.combination_linkable for part in self.parts)

    @property
    def unread_scripts(self) -> list[str]:
        """Scripts written without spaces in the text that no reading checked reads per character
        (``readings.unread_scripts``): the text is then never protected (SPEC §8)."""
        if self._unread is None:
            codes = self.parts[0].analysis.tokens.codes if self.parts else np.zeros(0, dtype=np.uint32)
            self._unread = unread_scripts(codes, self.index.splits_scripts(self.readings))
        return self._unread

    @property
    def protected(self) -> bool:
        """SPEC §7 under every reading checked (§8), and no letters of a script those readings cannot split."""
        return all(part.protected for part in self.parts) and not self.unread_scripts

    @property
    def units(self) -> Units:
        """The positions a cover chooses among (``linkage.units``), computed once."""
        if self._units is None:
            self._units = Units.of([part.analysis.tokens for part in self.parts])
        return self._units

    def cover(self, granularity: str = "token") -> Cover:
        """What this pass rewrites under the detection's flagging strategy (computed once per cost model)."""
        if granularity not in self._covers:
            self._covers[granularity] = choose(self, self.flagging, granularity)
        return self._covers[granularity]

    def to_rephrase(self, granularity: str = "token") -> list[FlaggedRange]:
        """The ranges the flagging strategy rewrites: minimal linkable n-grams and every
        occurrence of each removed candidate, under every reading, in text order (one
        object per range)."""
        units = self.units
        return [
            FlaggedRange(int(units.starts[a]), int(units.ends[b]))
            for a, b in np.unique(self.cover(granularity).intervals, axis=0).tolist()
        ]

    def after_mask(self, ranges: list[tuple[int, int]], text: str, granularity: str | None = "token") -> "Detection":
        """The detection of ``text``: this text with the character ``ranges`` (whole tokens) masked,
        equal to ``detect(text)`` but computing only what the mask can change.

        A mask breaks n-grams and creates none, so each reading's n-gram lookups are this
        detection's, less what crosses a masked token, and its combination search reuses every
        posting list and pair support it can. With ``granularity``, the ranges are ``mask_ranges``
        of this detection's cover at that cost model: the candidates the cover kept hold no
        linkable combination (a cover hits them all), so the triple search skips those made
        of them alone; with None they may be any whole tokens. When ``text`` does not
        tokenize as that under a reading (another mask string, rules that read it otherwise,
        a range that cuts a token), it is detected from scratch.
        """
        bounds = np.asarray(ranges, dtype=np.int64).reshape(-1, 2)
        kept_candidates = None
        if granularity is not None and any(part.combinations is not None for part in self.parts):
            kept_candidates = np.ones(sum(_candidate_count(part) for part in self.parts), dtype=bool)
            kept_candidates[list(self.cover(granularity).removed)] = False
        parts: list[ReadingDetection | None] = []
        offset = 0
        for part in self.parts:
            if part.reading == "gap":  # its bridges change with every mask: found again below, from the search reading's
                offset += _candidate_count(part)
                parts.append(None)
                continue
            tokens = part.analysis.tokens
            first = np.searchsorted(tokens.starts, bounds[:, 0])  # first token starting in each range
            last = np.searchsorted(tokens.ends, bounds[:, 1], side="right")  # past the last one ending in it
            change = np.zeros(len(tokens) + 1, dtype=np.int64)
            np.add.at(change, first, 1)
            np.add.at(change, np.maximum(last, first), -1)
            removed = np.cumsum(change)[: len(tokens)] > 0
            settled = None
            count = _candidate_count(part)
            if kept_candidates is not None and part.combinations is not None:
                settled = part.combinations.keys[kept_candidates[offset : offset + count]]
            offset += count
            again = part.after_mask(self.index, removed, text, self.arity, self.max_combinations, settled)
            if again is None:
                return detect(
                    self.index, text, self.k, self.arity, self.max_combinations, self.flagging, readings=self.readings,
                    source=self.source, carried=self.known_sources,
                )
            parts.append(again)
        done = [part for part in parts if part is not None]
        if "gap" in self.readings:
            search = next(part for part in done if part.reading == "search")  # the engine table's (the first)
            parts = [
                _gap_part(self.index, search, self.arity, self.max_combinations, self.source, self.known_sources) if p is None else p
                for p in parts
            ]
        return Detection(
            text, tuple(p for p in parts if p is not None), self.index, self.k, self.arity, self.max_combinations, self.flagging,
            self.source, self.known_sources,
        )


def _candidate_count(part: ReadingDetection) -> int:
    return part.combinations.count if part.combinations is not None else 0


@nb.njit(cache=True, nogil=True)
def _same_tokens(
    codes: np.ndarray, starts: np.ndarray, ends: np.ndarray, new_codes: np.ndarray, new_starts: np.ndarray, new_ends: np.ndarray
) -> bool:
    """Whether the tokens ``[starts, ends)`` of ``codes`` are, one by one, the same strings as the new ones."""
    if len(starts) != len(new_starts):
        return False
    for i in range(len(starts)):
        if ends[i] - starts[i] != new_ends[i] - new_starts[i]:
            return False
        offset = new_starts[i] - starts[i]
        for position in range(starts[i], ends[i]):
            if codes[position] != new_codes[position + offset]:
                return False
    return True


def _gap_part(
    index: CorpusIndex, search: ReadingDetection, arity: int, max_combinations: int | None, source: int | None, carried: Sequence[int] = ()
) -> ReadingDetection:
    """The gap reading's detection (SPEC §9), from the search reading's (whose lookups and postings it reuses)."""
    assert isinstance(search.analysis, LinkageAnalysis) and search.reading == "search"
    gap = analyze_gap(index, search.analysis, search.analysis.k, arity, source, carried)
    combinations = (
        analyze_combinations(index, gap, arity, max_combinations=max_combinations, previous=search.combinations) if arity >= 2 else None
    )
    return ReadingDetection(gap, combinations)


def detect(
    index: CorpusIndex,
    text: str,
    k: int,
    arity: int = 1,
    max_combinations: int | None = 0,
    flagging: str = DEFAULT_STRATEGY,
    exact_frequent: bool = True,
    readings: Sequence[str] = DEFAULT_READINGS,
    source: int | None = None,
    carried: Sequence[int] = (),
) -> Detection:
    """Run the attack on ``text`` under each of ``readings``: n-grams always, combinations when ``arity`` >= 2.

    The defaults compute what rewriting needs — the decision and the exact scores — and
    list no combinations (``max_combinations=0``), which lets the search skip minimal
    triples until a flagging strategy asks for them. A report asks for its cap instead.
    ``exact_frequent=False`` caps a frequent n-gram's df at k (``ngrams.analyze``): the
    same outputs at threshold k, but not the token rarities a flagging strategy weighs.
    A reading the index does not hold is refused (``CorpusIndex.require_readings``).
    ``source``: the document number of the text's source, when known (SPEC §9; else found);
    ``carried``: sources found on an earlier version of the text, read as sources too.
    """
    check_arity(arity, allow_single=True)
    check_strategy(flagging)
    parts: list[ReadingDetection] = []
    for reading in index.require_readings(readings):
        if reading == "gap":
            parts.append(_gap_part(index, parts[-1], arity, max_combinations, source, carried))
            continue
        twins = parts[0].analysis if parts and parts[0].reading == "exact" else None
        assert twins is None or isinstance(twins, LinkageAnalysis)
        analysis = analyze(index, text, k, exact_frequent=exact_frequent, reading=reading, twins=twins)
        combinations = analyze_combinations(index, analysis, arity, max_combinations=max_combinations) if arity >= 2 else None
        parts.append(ReadingDetection(analysis, combinations))
    parts += _alternate_part(index, text, k, arity, max_combinations, exact_frequent, parts)
    detection = Detection(text, tuple(parts), index, k, arity, max_combinations, flagging, source, tuple(carried))
    if detection.unread_scripts:
        warn_unread(detection.unread_scripts, detection.readings)
    return detection


def _alternate_part(
    index: CorpusIndex, text: str, k: int, arity: int, max_combinations: int | None, exact_frequent: bool, parts: list[ReadingDetection]
) -> list[ReadingDetection]:
    """SPEC §8's "linkable under either folding table": one more search-reading part, read with
    the other table, for a text holding a character the tables disagree on (``ngrams.alternate_analysis``)."""
    first = parts[0].analysis if parts else None
    twins = first if isinstance(first, LinkageAnalysis) and first.reading == "exact" else None
    analysis = alternate_analysis(index, text, k, [part.reading for part in parts], exact_frequent, twins)
    if analysis is None:
        return []
    combinations = analyze_combinations(index, analysis, arity, max_combinations=max_combinations) if arity >= 2 else None
    return [ReadingDetection(analysis, combinations)]


def assess_text(
    index: CorpusIndex,
    doc_id: Any,
    text: str,
    k: int,
    arity: int = 1,
    max_combinations: int = DEFAULT_MAX_COMBINATIONS,
    readings: Sequence[str] = DEFAULT_READINGS,
    source: int | None = None,
    carried: Sequence[int] = (),
) -> dict[str, Any]:
    """One output record (the schema of ``delink assess``) for one document.

    At arity 1 the record holds only linkable phrases (df < k), so df is asked for only up
    to k; combinations report their members' exact df. A phrase or combination linkable
    under several readings is one entry naming them (its support the smallest), and
    ``max_combinations`` caps the list of all readings' combinations.
    """
    detection = detect(
        index, text, k, arity, max_combinations=max_combinations, exact_frequent=arity >= 2, readings=readings, source=source,
        carried=carried,
    )
    return assess_record(detection, doc_id, max_combinations)
