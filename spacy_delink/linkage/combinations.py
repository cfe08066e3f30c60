"""SPEC §5–6: linkable combinations of up to three frequent phrases, exactly.

An adversary can search for several common phrases together. With the candidates of a
document (its maximal frequent n-grams, one per key) and their posting lists, a
combination's support is the size of the posting lists' intersection. This module finds
every minimal linkable combination of size 2..arity, the exact anonymity over *all*
linkable combinations, and the decision — without enumerating all C³/6 triples.

Algorithm
---------
1. **Candidate matrix.** Posting lists become rows of a 0/1 matrix over the documents
   that hold at least two candidates (a document in one list can be in no intersection),
   packed 64 documents to a word.
2. **Pairs.** Popcounts of the AND of two packed rows give every pair's support (64
   documents per instruction, exact); pairs with 1 <= support < k are linkable, hence minimal.
3. **Triples with no linkable or empty pair** (the only minimal triples). Candidates are
   ordered by df and each triple is visited from its rarest member ``a``, within ``a``'s
   own documents (so the bitsets shrink to df_a bits). Inclusion–exclusion gives a lower
   bound without touching postings: |a∩b∩c| >= |a∩b| + |a∩c| − |a| (and the same around b
   and c). A triple whose bound is >= k cannot be linkable and is skipped; for common
   phrases, whose pairwise overlaps are large, this prunes almost every triple. ``a`` is
   skipped outright when even its two smallest overlaps exceed the bound. The survivors'
   supports are popcounts of packed bitsets.
4. **Anonymity.** It is the minimum support over linkable n-grams, pairs and triples. A
   triple containing a linkable pair (a, b) has support <= |a∩b| < k; it can only lower
   the minimum when the pair's support is above the best so far, and then its support is
   a column sum over the < k documents of a∩b. A triple with an empty pair has support 0.
   So every triple is accounted for, and ``anonymity`` is exact whatever ``max_combinations``
   cuts from the reported list.
5. **Only what is asked.** Triples are enumerated in full only when the answer needs them:
   when no pair is linkable (the decision), when the best support is still above 1 (the
   anonymity), or when the pairs do not fill the report; a document with fewer than three
   candidates has no triple, so its list is complete. Otherwise they wait until asked:
   the paper's flags (``flagged``) search only triples whose flagged member is not flagged
   yet, and a cover (``linkage.cover``) asks for the triples among the candidates it keeps
   (``triples_among``). When the source document is in the collection, a document easily
   has 10^5 linkable pairs and 10^6 minimal triples, which the report cap cuts anyway.
   The report's order (size, support, start offsets) is built by one packed-key selection
   of the head, not a full sort.
6. **Again after a mask.** Postings and pair supports depend on the keys only, so the
   analysis of a masked text (``previous``) reuses them for the candidates it shares with
   the analysis before the mask and computes products for the new candidates only.

This module holds the analysis (``CombinationAnalysis``, ``analyze_combinations``);
``candidate_matrix`` the posting lists, packed rows and pair supports (steps 1, 2 and 6);
``combination_search`` the compiled searches, the SPEC order and the flagging rank (steps
2–5). Their underscored helpers are private to these three modules.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cached_property

import numpy as np

from ..errors import InputError
from .candidate_matrix import _candidate_postings, _membership, _pair_supports
from .combination_search import (
    _flags,
    _head_indices,
    _linkable_pairs,
    _lowest_ranked,
    _lowest_triple_through_pairs,
    _minimal_triples,
    _ranks,
    _scan_pairs,
)
from .gap import BRIDGE_ROW, GapAnalysis
from .index import CorpusIndex
from .index.levels import split_documents
from .ngrams import LinkageAnalysis, Occurrence, occurrence_keys
from .scores import SupportRisk

ARITY_RANGE = (2, 3)


def check_arity(arity: int, allow_single: bool = False) -> int:
    """2 or 3 (combinations); with ``allow_single`` also 1 (single phrases only)."""
    lowest = 1 if allow_single else ARITY_RANGE[0]
    if not isinstance(arity, int) or isinstance(arity, bool) or not lowest <= arity <= ARITY_RANGE[1]:
        allowed = "1 (single phrases), 2 or 3" if allow_single else "2 or 3 for combinations (1 means single phrases only)"
        raise InputError(f"arity must be {allowed}, got {arity!r}")
    return arity


def check_max_combinations(max_combinations: int) -> int:
    if not isinstance(max_combinations, int) or max_combinations < 0:
        raise InputError(f"max_combinations must be a non-negative integer, got {max_combinations!r}")
    return max_combinations


@dataclass(frozen=True)
class Combination(SupportRisk):
    """A minimal linkable combination: candidate indices (in text order) and its support."""

    members: tuple[int, ...]
    support: int


@dataclass
class CombinationAnalysis:
    """Candidates, the minimal linkable combinations found, and the exact scores.

    Combinations stay in arrays (a document can have a million minimal triples):
    ``pairs`` (P×2) and ``triples`` (T×3) hold candidate indices in ascending order, which
    is text order. ``pairs`` holds every linkable pair, or with a report cap the first
    ``max_combinations`` of them (``pair_count`` counts them all; a cap of 0, the rewriter's,
    lists nothing to report but keeps them all for its cover); ``triples_complete``
    says whether every minimal triple was enumerated (module docstring, step 5). The
    posting lists (``documents``: all of them concatenated in candidate order, ``df`` long
    each), membership matrix (``bits``: packed rows, see ``_membership``) and pair supports
    stay for what is asked later (flags, covers, the analysis after a mask).
    """

    columns: dict[str, np.ndarray]
    pairs: np.ndarray
    pair_support: np.ndarray
    pair_count: int
    triples: np.ndarray
    triple_support: np.ndarray
    triples_complete: bool
    anonymity: int | None
    arity: int
    k: int
    keys: np.ndarray
    documents: np.ndarray
    bits: np.ndarray
    df: np.ndarray
    pair_matrix: np.ndarray
    anchored: np.ndarray | None = None
    _flagged: list[int] | None = None
    _all_pairs: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def combination_linkable(self) -> bool:
        return self.pair_count > 0 or len(self.triples) > 0

    @cached_property
    def candidates(self) -> list[Occurrence]:
        """The candidates as objects, for reports (the search itself reads ``columns``)."""
        return [Occurrence(*values) for values in zip(*(self.columns[f.name].tolist() for f in fields(Occurrence)))]

    @property
    def count(self) -> int:
        """How many candidates there are."""
        return len(self.keys)

    @property
    def postings(self) -> list[np.ndarray]:
        """Each candidate's posting list (sorted document numbers)."""
        return split_documents(self.df, self.documents)

    def head(self, limit: int | None = None) -> list[Combination]:
        """The first ``limit`` combinations in the SPEC order (size, support, start offsets)."""
        limit = self.pair_count + len(self.triples) if limit is None else limit
        if len(self.pairs) < min(limit, self.pair_count):
            raise ValueError("only the report's head of the pairs was kept; analyze with a larger max_combinations")
        head = _ordered_head(self.pairs, self.pair_support, limit)
        if len(head) < limit:
            if not self.triples_complete:
                raise ValueError("triples were not enumerated; analyze with max_combinations=None or a larger cap")
            head += _ordered_head(self.triples, self.triple_support, limit - len(head))
        return head

    def flagged_member(self, combination: Combination) -> int:
        """SPEC §5: the shortest member (fewest tokens), ties going to the earliest."""
        return int(self.flagged_members(np.array([combination.members]))[0])

    def flagged_members(self, members: np.ndarray) -> np.ndarray:
        """``flagged_member`` of each row of candidate indices."""
        return _lowest_ranked(members, _ranks(self.columns["n"]))

    def flagged(self) -> list[int]:
        """SPEC §5's ``shortest`` rule: each minimal linkable combination's flagged member (computed once)."""
        if self._flagged is None:
            rank = _ranks(self.columns["n"])
            flagged = np.zeros(self.count, dtype=bool)
            if self.count >= 2:
                _scan_pairs(self.pair_matrix, self.k, 0, rank, flagged)
            if self.arity >= 3 and self.count >= 3:
                if self.triples_complete:
                    _flags(self.triples, rank, flagged)
                else:
                    _minimal_triples(self.bits, self.df, self.pair_matrix, self.k, rank, flagged, self.anchored)
            self._flagged = np.flatnonzero(flagged).tolist()
        return self._flagged

    def all_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """Every linkable pair (members P×2 in ascending order, supports), whatever the report cap."""
        if len(self.pairs) == self.pair_count:
            return self.pairs, self.pair_support
        if self._all_pairs is None:  # a cover asks several times per pass
            self._all_pairs = _linkable_pairs(self.pair_matrix, self.k)
        return self._all_pairs

    def triples_among(
        self, kept: np.ndarray, through: np.ndarray | None = None, ordered: bool = True
    ) -> tuple[np.ndarray, np.ndarray]:
        """Linkable triples of the candidates ``kept`` (bool per candidate) none of whose pairs is linkable.

        For a set that holds no linkable pair (a cover's survivors) these are all its
        linkable triples: a triple with an empty pair has support 0. With ``through`` (bool
        per candidate), only those with a member in it. Without ``ordered`` the rows come in
        no fixed order, for a caller that uses them as a set.
        """
        anchored = self.anchored if through is None else through
        chosen = np.flatnonzero(kept)
        if self.arity < 3 or len(chosen) < 3:
            return np.zeros((0, 3), dtype=np.int64), np.zeros(0, dtype=np.int64)
        if self.triples_complete:
            inside = kept[self.triples].all(axis=1)
            if anchored is not None:
                inside &= anchored[self.triples].any(axis=1)
            return self.triples[inside], self.triple_support[inside]
        return _minimal_triples(
            self.bits, self.df, self.pair_matrix, self.k, _ranks(self.columns["n"]), None, anchored, ordered, among=chosen
        )


def _ordered_head(members: np.ndarray, support: np.ndarray, limit: int) -> list[Combination]:
    """The ``limit`` smallest combinations by (support, member indices), in that order."""
    chosen = _head_indices(members, support, limit)
    return [Combination(tuple(m), s) for m, s in zip(members[chosen].tolist(), support[chosen].tolist())]


def candidate_columns(analysis: LinkageAnalysis | GapAnalysis) -> dict[str, np.ndarray]:
    """SPEC §5's candidates: maximal frequent occurrences, one per key (its first in the
    text), as arrays named as ``Occurrence``'s fields, in text order."""
    columns = analysis.maximal_columns()
    if not len(columns["token"]):
        return columns
    _, first = np.unique(occurrence_keys(columns["n"], columns["row"]), return_index=True)
    order = np.sort(first)
    return {name: column[order] for name, column in columns.items()}


def analyze_combinations(
    index: CorpusIndex,
    analysis: LinkageAnalysis | GapAnalysis,
    arity: int,
    max_combinations: int | None = None,
    previous: CombinationAnalysis | None = None,
    settled: np.ndarray | None = None,
) -> CombinationAnalysis:
    """SPEC §5–6 for one analysed document (see the module docstring for the algorithm).

    ``max_combinations`` is the report cap (None: enumerate every minimal combination);
    ``previous``, the analysis of this document before a mask (same index, k and reading), lends
    the postings and pair supports of the candidates both share; ``settled`` are keys
    (``occurrence_keys``) of which no combination is linkable, so the triple search
    skips the triples made of them alone (step 6).
    """
    check_arity(arity)
    if max_combinations is not None:
        check_max_combinations(max_combinations)
    k = analysis.k
    columns = candidate_columns(analysis)
    count = len(columns["token"])
    keys = occurrence_keys(columns["n"], columns["row"])
    known = _known_rows(keys, previous)
    # The gap reading's candidates are bridges (their documents come with them) beside the search
    # reading's n-grams; only combinations holding a bridge are its own (the rest are the search reading's).
    bridged = (columns["row"] & BRIDGE_ROW) != 0 if isinstance(analysis, GapAnalysis) else None
    given = analysis.given_documents(keys[bridged]) if isinstance(analysis, GapAnalysis) and bridged is not None and bridged.any() else None
    if bridged is not None:
        known[bridged] = -1  # a bridge's key is numbered per text: never lent from another analysis
    documents, df = _candidate_postings(index.levels_of(analysis.reading), columns, known, previous, bridged, given)
    if bridged is not None:
        settled = keys[~bridged] if settled is None else np.union1d(settled, keys[~bridged])
    arity1 = analysis.anonymity()
    best = arity1 if arity1 is not None else k
    rank = _ranks(columns["n"])
    pair_members = np.zeros((0, 2), dtype=np.int32)
    pair_support = np.zeros(0, dtype=np.int32)
    pair_count = 0
    triple_members = np.zeros((0, 3), dtype=np.int64)
    triple_support = np.zeros(0, dtype=np.int64)
    # Fewer than three candidates hold no triple: there is nothing left to enumerate.
    triples_complete = arity < 3 or count < 3
    anchored = None if settled is None else ~np.isin(keys, settled)
    bits = _membership(index, documents, df)
    pairs = _pair_supports(bits, known, previous.pair_matrix if previous is not None else None)
    if count >= 2:
        if max_combinations == 0:  # the rewriter's detection: its cover reads every pair, listed in one compiled pass
            pair_members, pair_support = _linkable_pairs(pairs, k)
            pair_count = len(pair_support)
            if pair_count:
                best = min(best, int(pair_support.min()))
        else:
            scan = _scan_pairs(pairs, k, max_combinations, rank, None)
            pair_members, pair_support, pair_count = scan.members, scan.support, scan.count
            if scan.lowest is not None:
                best = min(best, scan.lowest)
        if bridged is not None:
            pair_members, pair_support, pair_count = _through(pair_members, pair_support, pair_count, bridged, pairs, k)
        if arity >= 3 and count >= 3:
            report_needs_triples = max_combinations is None or pair_count < max_combinations
            if report_needs_triples or not pair_count or best > 1:
                triple_members, triple_support = _minimal_triples(bits, df, pairs, k, rank, None, anchored)
                triples_complete = True
            if len(triple_support):
                best = min(best, int(triple_support.min()))
            best = _lowest_triple_through_pairs(bits, pairs, k, int(best))
    return CombinationAnalysis(
        columns=columns,
        pairs=pair_members,
        pair_support=pair_support,
        pair_count=pair_count,
        triples=triple_members,
        triple_support=triple_support,
        triples_complete=triples_complete,
        anonymity=best if best < k else None,
        arity=arity,
        k=k,
        keys=keys,
        documents=documents,
        bits=bits,
        df=df,
        pair_matrix=pairs,
        anchored=anchored,
    )


def _through(
    members: np.ndarray, support: np.ndarray, count: int, bridged: np.ndarray, pairs: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray, int]:
    """The gap reading's linkable pairs: those with a bridge (the others are the search reading's).
    All of them are listed when the head kept fewer than all pairs, so the count is exact."""
    if len(members) < count:
        members, support = _linkable_pairs(pairs, k)
    keep = bridged[members].any(axis=1) if len(members) else np.zeros(0, dtype=bool)
    return members[keep], support[keep], int(np.count_nonzero(keep))


def _known_rows(keys: np.ndarray, previous: CombinationAnalysis | None) -> np.ndarray:
    """Each key's candidate row in ``previous`` (-1 where it has none)."""
    if previous is None or not len(previous.keys) or not len(keys):
        return np.full(len(keys), -1, dtype=np.int64)
    order = np.argsort(previous.keys)
    rows = order[np.minimum(np.searchsorted(previous.keys, keys, sorter=order), len(order) - 1)]
    return np.where(previous.keys[rows] == keys, rows, -1).astype(np.int64)
