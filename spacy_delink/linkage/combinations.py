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
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cached_property
from typing import Any, Mapping

import numba as nb
import numpy as np

from .. import _kernels  # noqa: F401  (announces a compile of these kernels)
from ..errors import InputError
from .bits import popcount
from .index import CorpusIndex
from .index.levels import split_documents
from .gap import BRIDGE_ROW, GapAnalysis
from .ngrams import LinkageAnalysis, Occurrence, occurrence_keys

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
class Combination:
    """A minimal linkable combination: candidate indices (in text order) and its support."""

    members: tuple[int, ...]
    support: int

    @property
    def risk(self) -> float:
        return 1.0 / self.support


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


def _spec_keys(members: np.ndarray, support: np.ndarray) -> np.ndarray | None:
    """One uint64 per combination that sorts in the SPEC order (support, then members).

    Support takes the top 16 bits and the members share the other 48 (24 bits each for
    pairs, 16 for triples); None when the values do not fit.
    """
    width = 48 // members.shape[1]
    if not len(members) or members.max() >= 1 << width or support.max() >= 1 << 16:
        return None
    keys = support.astype(np.uint64) << np.uint64(48)
    for j in range(members.shape[1]):
        keys |= members[:, j].astype(np.uint64) << np.uint64(width * (members.shape[1] - 1 - j))
    return keys


def _head_indices(members: np.ndarray, support: np.ndarray, limit: int) -> np.ndarray:
    """Rows of the ``limit`` smallest combinations by (support, member indices), in that order.

    A packed-key partial selection when the values fit (the usual case), a full lexsort otherwise.
    """
    if limit <= 0 or not len(members):
        return np.zeros(0, dtype=np.int64)
    keys = _spec_keys(members, support)
    if keys is None:
        return np.lexsort([members[:, j] for j in reversed(range(members.shape[1]))] + [support])[:limit]
    chosen = np.argpartition(keys, limit - 1)[:limit] if limit < len(keys) else np.arange(len(keys))
    return chosen[np.argsort(keys[chosen], kind="stable")]


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


def _candidate_postings(
    levels: Mapping[int, Any], columns: dict[str, np.ndarray], known: np.ndarray, previous: CombinationAnalysis | None,
    bridged: np.ndarray | None = None, given: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The candidates' posting lists, concatenated in candidate order, and each one's length (df).

    A list is lent by ``previous`` where it had the candidate (``known``: its row there,
    else -1); the candidates ``bridged`` (the gap reading's bridges) bring theirs (``given``:
    documents concatenated, and their counts); the rest are decoded level by level, one
    compiled call each. Each list is then one range of the previous lists or of the new
    ones, gathered in one compiled call.
    """
    count = len(known)
    df = np.zeros(count, dtype=np.int64)
    start = np.zeros(count, dtype=np.int64)  # of each list in the previous lists or the new ones
    lent = known >= 0 if previous is not None else np.zeros(count, dtype=bool)
    lent_documents = np.zeros(0, dtype=np.int64)
    if lent.any():
        assert previous is not None
        df[lent] = previous.df[known[lent]]
        start[lent] = (np.cumsum(previous.df) - previous.df)[known[lent]]
        lent_documents = previous.documents
    pool: list[np.ndarray] = []
    pooled = 0
    if bridged is not None and given is not None:
        chosen = np.flatnonzero(bridged & ~lent)
        given_documents, given_df = given
        at = np.flatnonzero(~lent[bridged])  # the given lists of the bridges not lent
        ranges = np.cumsum(given_df) - given_df
        df[chosen] = given_df[at]
        start[chosen] = pooled + np.cumsum(df[chosen]) - df[chosen]
        pool += [given_documents[r : r + n] for r, n in zip(ranges[at].tolist(), given_df[at].tolist())]
        pooled += int(df[chosen].sum())
    missing = np.flatnonzero(~lent if bridged is None else ~(lent | bridged))  # decoded from the levels
    lengths, rows = columns["n"], columns["row"]
    for n in np.unique(lengths[missing]).tolist():
        chosen = missing[lengths[missing] == n]
        df[chosen], documents = levels[n].documents_flat(rows[chosen])
        start[chosen] = pooled + np.cumsum(df[chosen]) - df[chosen]
        pool.append(documents)
        pooled += len(documents)
    decoded = np.concatenate(pool) if pool else np.zeros(0, dtype=np.int64)
    return _gather_ranges(lent_documents, decoded, lent, start, df), df


@nb.njit(cache=True, nogil=True)
def _gather_ranges(lent: np.ndarray, decoded: np.ndarray, from_lent: np.ndarray, start: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The ranges ``[start[i], start[i] + lengths[i])`` of ``lent`` or ``decoded`` (``from_lent``), one after another."""
    out = np.empty(lengths.sum(), dtype=np.int64)
    at = 0
    for i in range(len(lengths)):
        source = lent if from_lent[i] else decoded
        out[at : at + lengths[i]] = source[start[i] : start[i] + lengths[i]]
        at += lengths[i]
    return out


def _membership(index: CorpusIndex, documents: np.ndarray, df: np.ndarray) -> np.ndarray:
    """Packed 0/1 rows over the documents holding >= 2 candidates: ``documents`` are the
    posting lists concatenated, ``df`` long each (``_candidate_postings``).

    Column ``d`` of a row is bit ``d % 64`` of its word ``d // 64`` (uint64), so a support
    is the popcount of an AND, 64 documents at a time, in an eighth of a bool matrix's memory.
    """
    return _pack_rows(np.ascontiguousarray(documents, dtype=np.int64), np.ascontiguousarray(df, dtype=np.int64), index.documents)


@nb.njit(cache=True, nogil=True)
def _pack_rows(documents: np.ndarray, df: np.ndarray, collection: int) -> np.ndarray:
    """``_membership`` in one compiled call: each document's holders counted (a posting list
    has no repeats), the shared ones numbered as columns, each row's bits set."""
    holders = np.zeros(collection, dtype=np.int64)
    for document in documents:
        holders[document] += 1
    column = np.full(collection, -1, dtype=np.int64)
    shared = 0
    for document in range(collection):
        if holders[document] >= 2:
            column[document] = shared
            shared += 1
    bits = np.zeros((len(df), (shared + 63) // 64), dtype=np.uint64)
    at = 0
    for row in range(len(df)):
        for _ in range(df[row]):
            c = column[documents[at]]
            at += 1
            if c >= 0:
                bits[row, c >> 6] |= np.uint64(1) << np.uint64(c & 63)
    return bits


#: A triple's rarest member with at most this many documents (<= 64, one word) has its
#: partners' supports counted exactly for every pair, without the bounds (``_triple_scan``).
_NARROW_DOCUMENTS = 64
#: Rows per block when scanning the pair matrix (a block's linkable pairs exist at once).
_SCAN_BLOCK_ROWS = 32
#: Linkable pairs held beyond twice the report cap before the scan trims them to the cap.
_SCAN_SLACK = 4096


def _pair_supports(bits: np.ndarray, known: np.ndarray, known_pairs: np.ndarray | None) -> np.ndarray:
    """|I_a ∩ I_b| for all candidate pairs: popcounts of the AND of packed rows (``_membership``).

    Counts are exact, kept in the narrowest type that holds the column count. The supports
    between candidates with a row in ``known_pairs`` (``known``; -1: none) are copied from
    it; only the rows of new candidates are counted.
    """
    count = len(bits)
    pairs = np.empty((count, count), dtype=np.int16 if bits.shape[1] * 64 < 1 << 15 else np.int32)
    if known_pairs is None:
        known, known_pairs = np.full(count, -1, dtype=np.int64), np.zeros((0, 0), dtype=pairs.dtype)
    _popcount_products(bits, np.ascontiguousarray(known, dtype=np.int64), np.ascontiguousarray(known_pairs), pairs)
    return pairs


@nb.njit(cache=True, nogil=True)
def _popcount_products(bits: np.ndarray, known: np.ndarray, known_pairs: np.ndarray, pairs: np.ndarray) -> None:
    """Fill ``pairs``: copied from ``known_pairs`` between known candidates, counted for the rest (each pair once)."""
    for a in range(len(bits)):
        if known[a] < 0:
            continue
        for b in range(len(bits)):
            if known[b] >= 0:
                pairs[a, b] = known_pairs[known[a], known[b]]
    for a in range(len(bits)):
        if known[a] >= 0:
            continue
        for b in range(len(bits)):
            if known[b] < 0 and b < a:  # filled with b's row
                continue
            support = 0
            for w in range(bits.shape[1]):
                support += popcount(bits[a, w] & bits[b, w])
            pairs[a, b] = support
            pairs[b, a] = support


@nb.njit(cache=True, nogil=True)
def _local_bits(bits: np.ndarray, a: int, rows: np.ndarray, words_of_a: np.ndarray, out: np.ndarray) -> int:
    """Each of ``rows``' share of ``a``'s documents as bits (row-major, the returned words per row, into ``out``).

    Bit ``i`` of a row stands for ``a``'s ``i``-th document. A row is read only in the words
    where ``a`` has documents (``words_of_a`` receives their numbers), and only its documents
    shared with ``a`` are placed, each by the rank of its bit within ``a``'s word: the cost
    is the overlap, not ``a``'s whole document list per row.
    """
    used = 0
    own = 0
    for w in range(bits.shape[1]):
        if bits[a, w]:
            words_of_a[used] = w
            used += 1
            own += popcount(bits[a, w])
    words = (own + 63) // 64
    out[: len(rows) * max(words, 1)] = 0
    for row_at in range(len(rows)):
        row = rows[row_at]
        before = 0  # a's documents in its words before this one
        for u in range(used):
            mine = bits[a, words_of_a[u]]
            shared = bits[row, words_of_a[u]] & mine
            while shared:
                lowest = shared & (~shared + np.uint64(1))
                at = before + popcount(mine & (lowest - np.uint64(1)))
                out[row_at * words + (at >> 6)] |= np.uint64(1) << np.uint64(at & 63)
                shared ^= lowest
            before += popcount(mine)
    return words


@nb.njit(cache=True, nogil=True)
def _triple_scan(
    bits: np.ndarray,
    df: np.ndarray,
    pairs: np.ndarray,
    k: int,
    anchored: np.ndarray,
    rank: np.ndarray,
    flagged: np.ndarray,
    use_flags: bool,
    narrow_limit: int,
    ordered: bool,
    among: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Step 3's search, compiled: every triple from its rarest member ``a``, within ``a``'s documents.

    A partner b of ``a`` needs |a∩b| >= k (else the triple holds a linkable or empty pair)
    and |a∩b| < df_a + k - (a's smallest overlap) (else no c brings the bound below k); a
    pair (b, c) needs |b∩c| >= k and the three inclusion–exclusion bounds below k before
    its support is counted on bitsets of ``a``'s documents. The partners are visited by
    their overlap with ``a``, so those c that can meet |a∩b| + |a∩c| - df_a < k for a b are
    a prefix, which shrinks as |a∩b| grows: pairs failing that bound are never visited.
    Only triples with an ``anchored`` member are searched; with ``use_flags`` only those
    whose lowest-``rank`` member is not ``flagged`` yet, which are then flagged. With
    ``ordered``, the triples come in the order of (a, b, c) by df (the order of a scan of
    every pair); without, in the order found (a cover treats them as a set, and the sort
    is a fifth of the search). Only triples of the candidates ``among`` (ascending) are
    searched, in place: a cover asks for those of the ones it keeps.
    """
    count = len(among)
    order = among[np.argsort(df[among], kind="mergesort")]
    position_of = np.empty(len(df), dtype=np.int64)
    position_of[order] = np.arange(count)
    found = np.empty((64, 3), dtype=np.int64)
    supports = np.empty(64, dtype=np.int64)
    visit = np.empty(64 if ordered else 0, dtype=np.int64)  # scan order: only when asked
    total = 0
    partners = np.empty(count, dtype=np.int64)
    # a's partners' bits (``_local_bits``): one word each for a narrow a, at most every word
    # for a wide one. One buffer for the whole search: an array reassigned inside the loop
    # costs reference counting on every pair.
    local = np.zeros(count * bits.shape[1], dtype=np.uint64)
    words_of_a = np.empty(bits.shape[1], dtype=np.int64)
    for position in range(count - 2):
        a = order[position]
        size = 0
        smallest = 1 << 62
        for later in range(position + 1, count):
            x = order[later]
            overlap = int(pairs[a, x])
            if overlap >= k:
                partners[size] = x
                size += 1
                if overlap < smallest:
                    smallest = overlap
        if size < 2:
            continue
        limit = df[a] + k - smallest
        kept = 0
        any_anchor = anchored[a]
        all_flagged = flagged[a]
        for i in range(size):
            x = partners[i]
            if pairs[a, x] < limit:
                partners[kept] = x
                kept += 1
                any_anchor = any_anchor or anchored[x]
                all_flagged = all_flagged and flagged[x]
        if kept < 2 or not any_anchor or (use_flags and all_flagged):
            continue
        overlap_with_a = np.empty(kept, dtype=np.int64)
        for i in range(kept):
            overlap_with_a[i] = pairs[a, partners[i]]
        by_overlap = np.argsort(overlap_with_a, kind="mergesort")
        ranked = partners[:kept][by_overlap]
        overlap_with_a = overlap_with_a[by_overlap]
        own = 0
        for w in range(bits.shape[1]):
            own += popcount(bits[a, w])
        narrow = own <= narrow_limit  # each partner's share of a's documents fits one word: count every support exactly
        words = 0  # a wide a's bits are built when the first pair passes the bounds (most never do)
        if narrow:
            words = _local_bits(bits, a, ranked, words_of_a, local)
        # Where no triple through a and b is anchored, only the anchored partners c are visited.
        anchored_at = np.flatnonzero(anchored[ranked])
        next_anchored = 0
        end = kept
        for i in range(kept):
            b = ranked[i]
            ab = overlap_with_a[i]
            while end > i + 1 and ab + overlap_with_a[end - 1] - df[a] >= k:
                end -= 1
            if end <= i + 1:
                break
            while next_anchored < len(anchored_at) and anchored_at[next_anchored] <= i:
                next_anchored += 1
            every = anchored[a] or anchored[b]
            at = next_anchored
            j = i
            while True:
                if every:
                    j += 1
                elif at < len(anchored_at):
                    j = anchored_at[at]
                    at += 1
                else:
                    break
                if j >= end:
                    break
                if narrow:
                    support = popcount(local[i] & local[j])  # one word per partner
                    if support < 1 or support >= k:
                        continue
                c = ranked[j]
                if not (anchored[a] or anchored[b] or anchored[c]):
                    continue
                bc = np.int64(pairs[b, c])
                if bc < k:
                    continue
                if not narrow and (ab + bc - df[b] >= k or overlap_with_a[j] + bc - df[c] >= k):
                    continue
                lowest = a
                if rank[b] < rank[lowest]:
                    lowest = b
                if rank[c] < rank[lowest]:
                    lowest = c
                if use_flags and flagged[lowest]:
                    continue
                if not narrow:
                    if not words:
                        words = _local_bits(bits, a, ranked, words_of_a, local)
                    support = 0
                    for w in range(words):
                        support += popcount(local[i * words + w] & local[j * words + w])
                    if support < 1 or support >= k:
                        continue
                if total == len(supports):
                    found = np.concatenate((found, np.empty_like(found)))
                    supports = np.concatenate((supports, np.empty_like(supports)))
                    visit = np.concatenate((visit, np.empty_like(visit)))
                first, second, third = min(a, b, c), max(min(a, b), min(max(a, b), c)), max(a, b, c)
                found[total, 0], found[total, 1], found[total, 2] = first, second, third
                supports[total] = support
                if ordered:
                    near, far = min(position_of[b], position_of[c]), max(position_of[b], position_of[c])
                    visit[total] = (position * count + near) * count + far
                total += 1
                if use_flags:
                    flagged[lowest] = True
    if not ordered:
        return found[:total], supports[:total]
    in_order = np.argsort(visit[:total], kind="mergesort")
    return found[:total][in_order], supports[:total][in_order]


def _minimal_triples(
    bits: np.ndarray,
    df: np.ndarray,
    pairs: np.ndarray,
    k: int,
    rank: np.ndarray,
    flagged: np.ndarray | None,
    anchored: np.ndarray | None = None,
    ordered: bool = True,
    among: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Linkable triples all of whose pairs have support >= k (see module docstring, step 3).

    With ``flagged`` (bool per candidate), only triples whose flagged member — the lowest
    ``rank`` — is not flagged yet are kept, and ``flagged`` is updated as they are found.
    With ``anchored`` (bool per candidate), only triples with an anchored member are searched
    (the others are known not to be linkable, step 6). With ``among`` (ascending candidate
    indices), only triples of those. Without ``ordered``, they come in the order found
    rather than the order of a full scan (``_triple_scan``).
    """
    count = len(df)
    among = np.arange(count, dtype=np.int64) if among is None else np.ascontiguousarray(among, dtype=np.int64)
    if len(among) < 3:
        return np.zeros((0, 3), dtype=np.int64), np.zeros(0, dtype=np.int64)
    return _triple_scan(
        np.ascontiguousarray(bits, dtype=np.uint64),
        np.ascontiguousarray(df, dtype=np.int64),
        np.ascontiguousarray(pairs),
        int(k),
        np.ones(count, dtype=np.bool_) if anchored is None else np.ascontiguousarray(anchored, dtype=np.bool_),
        np.ascontiguousarray(rank, dtype=np.int64),
        np.zeros(count, dtype=np.bool_) if flagged is None else flagged,
        flagged is not None,
        _NARROW_DOCUMENTS,
        ordered,
        among,
    )


@nb.njit(cache=True, nogil=True)
def _lowest_triple_through_pairs(bits: np.ndarray, pairs: np.ndarray, k: int, best: int) -> int:
    """Smallest positive support of a triple containing a linkable pair, if below ``best``.

    Only a pair with support >= 2 can have a triple below ``best`` (>= 1), so nothing is
    needed once ``best`` is 1; the pairs are read again from the pair matrix.
    """
    shared = np.empty(bits.shape[1], dtype=np.uint64)
    for a in range(len(pairs)):
        for b in range(a + 1, len(pairs)):
            if best <= 1:
                return best
            if pairs[a, b] < 2 or pairs[a, b] >= k:
                continue
            for w in range(bits.shape[1]):
                shared[w] = bits[a, w] & bits[b, w]
            for c in range(len(pairs)):
                if c == a or c == b:
                    continue
                support = 0
                for w in range(bits.shape[1]):
                    support += popcount(bits[c, w] & shared[w])
                if 1 <= support < best:
                    best = support
    return best


@dataclass
class _PairScan:
    """What one pass over the pair matrix keeps: the report's head, the count, the minimum."""

    members: np.ndarray
    support: np.ndarray
    count: int
    lowest: int | None


def _scan_pairs(
    pairs: np.ndarray, k: int, keep: int | None, rank: np.ndarray, flagged: np.ndarray | None
) -> _PairScan:
    """Linkable pairs (a < b, 1 <= support < k), one block of rows at a time.

    Every pair marks its flagged member (when ``flagged`` is given) and counts, but only
    the ``keep`` first in the SPEC order are held (all when ``keep`` is None): a document
    can have 10^5 linkable pairs, and the report cap cuts them anyway.
    """
    kept_members: list[np.ndarray] = []
    kept_support: list[np.ndarray] = []
    held = 0
    count = 0
    lowest: int | None = None
    for start in range(0, len(pairs), _SCAN_BLOCK_ROWS):
        block = pairs[start : start + _SCAN_BLOCK_ROWS]
        rows, cols = np.nonzero((block >= 1) & (block < k))
        upper = rows + start < cols
        rows, cols = rows[upper], cols[upper]
        if not len(rows):
            continue
        support = block[rows, cols].astype(np.int32)
        members = np.stack([rows + start, cols], axis=1).astype(np.int32)
        count += len(members)
        lowest = int(support.min()) if lowest is None else min(lowest, int(support.min()))
        if flagged is not None:
            _flags(members, rank, flagged)
        kept_members.append(members)
        kept_support.append(support)
        held += len(members)
        if keep is not None and held > 2 * keep + _SCAN_SLACK:
            merged_members, merged_support = np.concatenate(kept_members), np.concatenate(kept_support)
            chosen = _head_indices(merged_members, merged_support, keep)
            kept_members, kept_support, held = [merged_members[chosen]], [merged_support[chosen]], len(chosen)
    if not kept_members:
        return _PairScan(np.zeros((0, 2), dtype=np.int32), np.zeros(0, dtype=np.int32), 0, None)
    return _PairScan(np.concatenate(kept_members), np.concatenate(kept_support), count, lowest)


@nb.njit(cache=True, nogil=True)
def _linkable_pairs(pairs: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Every linkable pair (a < b, 1 <= support < k) in row order, as ``_scan_pairs`` lists them."""
    count = 0
    for a in range(len(pairs)):
        for b in range(a + 1, len(pairs)):
            if pairs[a, b] >= 1 and pairs[a, b] < k:
                count += 1
    members = np.empty((count, 2), dtype=np.int32)
    support = np.empty(count, dtype=np.int32)
    found = 0
    for a in range(len(pairs)):
        for b in range(a + 1, len(pairs)):
            value = pairs[a, b]
            if value >= 1 and value < k:
                members[found, 0], members[found, 1] = a, b
                support[found] = value
                found += 1
    return members[:found], support[:found]


def _ranks(lengths: np.ndarray) -> np.ndarray:
    """Flagging order of the candidates (their token ``lengths``, in text order): fewer tokens first, then earlier."""
    return lengths * max(len(lengths), 1) + np.arange(len(lengths))


def _lowest_ranked(members: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """Each combination's flagged member: the lowest ``rank`` (fewest tokens, then earliest)."""
    lowest = members[:, 0]
    for column in range(1, members.shape[1]):
        lowest = np.where(rank[members[:, column]] < rank[lowest], members[:, column], lowest)
    return lowest


def _flags(members: np.ndarray, rank: np.ndarray, flagged: np.ndarray) -> None:
    """Mark each combination's flagged member in ``flagged``."""
    if len(members):
        flagged[_lowest_ranked(members, rank)] = True


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


def combination_records(
    text: str, result: CombinationAnalysis, max_combinations: int
) -> list[dict[str, Any]]:
    """The ``combinations`` list of ``delink assess`` (the head of the SPEC order, capped)."""
    records = []
    for combination in result.head(max_combinations):
        members = sorted((result.candidates[i] for i in combination.members), key=lambda o: (o.start, o.end))
        records.append(
            {
                "members": [{"start": m.start, "end": m.end, "text": text[m.start : m.end]} for m in members],
                "support": combination.support,
            }
        )
    return records
