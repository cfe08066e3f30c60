"""SPEC §5–6: linkable combinations of up to three frequent phrases, exactly.

An adversary can search for several common phrases together. With the candidates of a
document (its maximal frequent n-grams, one per key) and their posting lists, a
combination's support is the size of the posting lists' intersection. This module finds
every minimal linkable combination of size 2..arity, the exact anonymity over *all*
linkable combinations, and the decision — without enumerating all C³/6 triples.

Algorithm
---------
1. **Candidate matrix.** Posting lists become rows of a 0/1 matrix over the documents
   that hold at least two candidates (a document in one list can be in no intersection).
2. **Pairs.** Float32 products of row blocks give every pair's support (exact below 2^24);
   pairs with 1 <= support < k are linkable, hence minimal.
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
   anonymity), or when the pairs do not fill the report. Otherwise, if flags are wanted
   (the rewriter's ``to_rephrase``), the search keeps only triples whose flagged member is
   not flagged yet; else it is skipped. When the source document is in the collection,
   a document easily has 10^5 linkable pairs and 10^6 minimal triples, which the report
   cap cuts anyway. The report's order (size, support, start offsets) is built by one
   packed-key selection of the head, not a full sort.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from ..errors import InputError
from .index import CorpusIndex
from .ngrams import LinkageAnalysis, Occurrence

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
    ``max_combinations`` of them (``pair_count`` counts them all); ``triples_complete``
    says whether every minimal triple was enumerated (module docstring, step 5).
    """

    candidates: list[Occurrence]
    pairs: np.ndarray
    pair_support: np.ndarray
    pair_count: int
    triples: np.ndarray
    triple_support: np.ndarray
    triples_complete: bool
    anonymity: int | None
    arity: int
    k: int
    flagged_candidates: list[int] | None

    @property
    def combination_linkable(self) -> bool:
        return self.pair_count > 0 or len(self.triples) > 0

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
        return int(_lowest_ranked(np.array([combination.members]), _ranks(self.candidates))[0])

    def flagged(self) -> list[int]:
        """Candidates flagged by at least one minimal linkable combination (for rewriting)."""
        if self.flagged_candidates is None:
            raise ValueError("flags were not computed; analyze with flags=True")
        return self.flagged_candidates


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


def _ordered_head(members: np.ndarray, support: np.ndarray, limit: int) -> list[Combination]:
    """The ``limit`` smallest combinations by (support, member indices), in that order."""
    if limit <= 0 or not len(members):
        return []
    keys = _spec_keys(members, support)
    if keys is not None:
        chosen = np.argpartition(keys, limit - 1)[:limit] if limit < len(keys) else np.arange(len(keys))
        chosen = chosen[np.argsort(keys[chosen])]
    else:
        chosen = np.lexsort([members[:, j] for j in reversed(range(members.shape[1]))] + [support])[:limit]
    return [Combination(tuple(m), s) for m, s in zip(members[chosen].tolist(), support[chosen].tolist())]


def candidates_of(analysis: LinkageAnalysis) -> list[Occurrence]:
    """Maximal frequent occurrences, one per key (its first occurrence in the text)."""
    return analysis.frequent_maximal(unique_keys=True)


def _membership(index: CorpusIndex, candidates: list[Occurrence]) -> tuple[np.ndarray, np.ndarray]:
    """0/1 rows (bool) over the documents holding >= 2 candidates, and each row's df."""
    postings = [index.levels[c.n].documents(c.row) for c in candidates]
    df = np.array([len(p) for p in postings], dtype=np.int64)
    holders = np.zeros(index.documents, dtype=np.int32)
    for posting in postings:
        holders[posting] += 1  # a posting list has no repeats
    shared = holders >= 2
    column = np.cumsum(shared, dtype=np.int64) - 1
    matrix = np.zeros((len(candidates), int(shared.sum())), dtype=bool)
    for row, posting in enumerate(postings):
        matrix[row, column[posting[shared[posting]]]] = True
    return matrix, df


#: Rows per block in the matrix products (two float copies of this many rows exist at once).
_PRODUCT_BLOCK_ROWS = 64
#: Rows per block when scanning the pair matrix (a block's linkable pairs exist at once).
_SCAN_BLOCK_ROWS = 32


def _pair_supports(matrix: np.ndarray) -> np.ndarray:
    """|I_a ∩ I_b| for all candidate pairs: float32 BLAS products of row-block pairs.

    Only two blocks exist as floats at a time, so the extra memory stays small; counts
    are exact integers (below 2^24) kept in the narrowest type that holds them.
    """
    count = len(matrix)
    pairs = np.empty((count, count), dtype=np.int16 if matrix.shape[1] < 1 << 15 else np.int32)
    starts = range(0, count, _PRODUCT_BLOCK_ROWS)
    for i in starts:
        left = matrix[i : i + _PRODUCT_BLOCK_ROWS].astype(np.float32)
        for j in starts:
            if j < i:
                continue
            right = left if j == i else matrix[j : j + _PRODUCT_BLOCK_ROWS].astype(np.float32)
            product = left @ right.T
            pairs[i : i + len(left), j : j + len(right)] = product
            pairs[j : j + len(right), i : i + len(left)] = product.T
    return pairs


def _packed(rows: np.ndarray) -> np.ndarray:
    """Pack 0/1 rows into uint64 words for popcounts."""
    bits = np.packbits(rows.astype(bool), axis=1)
    pad = (-bits.shape[1]) % 8
    if pad:
        bits = np.pad(bits, ((0, 0), (0, pad)))
    return bits.view(np.uint64)


_POPCOUNT_CHUNK_WORDS = 1 << 19


def _intersection_sizes(bits: np.ndarray, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Popcount of ``bits[left] & bits[right]`` row by row, in chunks of bounded memory."""
    step = max(1, _POPCOUNT_CHUNK_WORDS // max(bits.shape[1], 1))
    sizes = np.empty(len(left), dtype=np.int64)
    for start in range(0, len(left), step):
        stop = start + step
        sizes[start:stop] = np.bitwise_count(bits[left[start:stop]] & bits[right[start:stop]]).sum(axis=1)
    return sizes


def _viable_pairs(pairs: np.ndarray, a: int, partners: np.ndarray, df: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Partner index pairs (b, c), b < c, with |b∩c| >= k whose triple with ``a`` may be linkable.

    The test is the largest of the three inclusion-exclusion lower bounds (around a, b and
    c) staying below k. It is built for one block of partner rows at a time, in place, so
    memory stays at a block's width whatever the number of partners.
    """
    overlap_a = pairs[a, partners].astype(np.int32)  # int32: sums of int16 counts overflow
    df_p = df[partners].astype(np.int32)
    column = np.arange(len(partners))
    found_b: list[np.ndarray] = []
    found_c: list[np.ndarray] = []
    step = max(_SCAN_BLOCK_ROWS, (1 << 16) // len(partners))  # ~64K bound cells per block
    for start in range(0, len(partners), step):
        rows = slice(start, start + step)
        overlap_bc = pairs[np.ix_(partners[rows], partners)].astype(np.int32)
        bound = overlap_a[rows, None] + overlap_a[None, :]
        bound -= np.int32(df[a])
        around = overlap_bc + overlap_a[rows, None]
        around -= df_p[rows, None]
        np.maximum(bound, around, out=bound)
        np.add(overlap_bc, overlap_a[None, :], out=around)
        around -= df_p[None, :]
        np.maximum(bound, around, out=bound)
        viable = bound < k
        viable &= overlap_bc >= k
        viable &= column[None, :] > column[rows, None]
        b_idx, c_idx = np.nonzero(viable)
        found_b.append(b_idx + start)
        found_c.append(c_idx)
    return np.concatenate(found_b), np.concatenate(found_c)


def _minimal_triples(
    matrix: np.ndarray, df: np.ndarray, pairs: np.ndarray, k: int, rank: np.ndarray, flagged: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """Linkable triples all of whose pairs have support >= k (see module docstring, step 3).

    With ``flagged`` (bool per candidate), only triples whose flagged member — the lowest
    ``rank`` — is not flagged yet are kept, and ``flagged`` is updated as they are found.
    """
    order = np.argsort(df, kind="stable")
    strong = pairs >= k
    found: list[np.ndarray] = []
    supports: list[np.ndarray] = []
    for position, a in enumerate(order[:-2]):
        later = order[position + 1 :]
        partners = later[strong[a, later]]
        if len(partners) < 2:
            continue
        overlap_a = pairs[a, partners].astype(np.int64)
        two_smallest = np.partition(overlap_a, 1)[:2]
        if two_smallest.sum() - df[a] >= k:
            continue
        partners = partners[overlap_a < df[a] + k - two_smallest[0]]
        if flagged is not None and flagged[a] and flagged[partners].all():
            continue  # every such triple's flagged member is flagged already
        if len(partners) < 2:
            continue
        b_idx, c_idx = _viable_pairs(pairs, int(a), partners, df, k)
        if flagged is not None and len(b_idx):
            members = np.stack([np.full(len(b_idx), a), partners[b_idx], partners[c_idx]], axis=1)
            open_ = ~flagged[_lowest_ranked(members, rank)]
            b_idx, c_idx = b_idx[open_], c_idx[open_]
        if not len(b_idx):
            continue
        bits = _packed(matrix[np.ix_(partners, np.flatnonzero(matrix[a]))])
        support = _intersection_sizes(bits, b_idx, c_idx)
        linkable = (support >= 1) & (support < k)
        if linkable.any():
            members = np.sort(
                np.stack([np.full(int(linkable.sum()), a), partners[b_idx[linkable]], partners[c_idx[linkable]]], axis=1),
                axis=1,
            )
            found.append(members)
            supports.append(support[linkable])
            if flagged is not None:
                _flags(members, rank, flagged)
    if not found:
        return np.zeros((0, 3), dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(found), np.concatenate(supports)


def _lowest_triple_through_pairs(matrix: np.ndarray, pairs: np.ndarray, k: int, best: int) -> int:
    """Smallest positive support of a triple containing a linkable pair, if below ``best``.

    Only a pair with support >= 2 can have a triple below ``best`` (>= 1), so nothing is
    needed once ``best`` is 1; the pairs are read again from the pair matrix.
    """
    for start in range(0, len(pairs), _SCAN_BLOCK_ROWS):
        if best <= 1:
            break
        block = pairs[start : start + _SCAN_BLOCK_ROWS]
        rows, cols = np.nonzero((block >= 2) & (block < k))
        for a, b in zip((rows + start).tolist(), cols.tolist()):
            if best <= 1:
                break
            if a >= b:
                continue
            shared_docs = np.flatnonzero(matrix[a] & matrix[b])
            through = matrix[:, shared_docs].sum(axis=1, dtype=np.int64)
            through[[a, b]] = 0
            positive = through[through >= 1]
            if len(positive):
                best = min(best, int(positive.min()))
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
        if keep is not None and held > 2 * keep + 4096:
            merged_members, merged_support = np.concatenate(kept_members), np.concatenate(kept_support)
            keys = _spec_keys(merged_members, merged_support)
            if keys is not None:
                chosen = np.argpartition(keys, keep)[:keep] if keep < len(keys) else np.arange(len(keys))
                merged_members, merged_support = merged_members[chosen], merged_support[chosen]
            kept_members, kept_support, held = [merged_members], [merged_support], len(merged_members)
    if not kept_members:
        return _PairScan(np.zeros((0, 2), dtype=np.int32), np.zeros(0, dtype=np.int32), 0, None)
    return _PairScan(np.concatenate(kept_members), np.concatenate(kept_support), count, lowest)


def _ranks(candidates: list[Occurrence]) -> np.ndarray:
    """Flagging order of the candidates: fewer tokens first, then earlier in the text."""
    lengths = np.array([c.n for c in candidates], dtype=np.int64)
    return lengths * max(len(candidates), 1) + np.arange(len(candidates))


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
    analysis: LinkageAnalysis,
    arity: int,
    max_combinations: int | None = None,
    flags: bool = True,
) -> CombinationAnalysis:
    """SPEC §5–6 for one analysed document (see the module docstring for the algorithm).

    ``max_combinations`` is the report cap (None: enumerate every minimal combination);
    ``flags`` asks for the complete set of flagged members (``to_rephrase``).
    """
    check_arity(arity)
    if max_combinations is not None:
        check_max_combinations(max_combinations)
    k = analysis.k
    candidates = candidates_of(analysis)
    arity1 = analysis.anonymity()
    best = arity1 if arity1 is not None else k
    rank = _ranks(candidates)
    flagged = np.zeros(len(candidates), dtype=bool)
    pair_members = np.zeros((0, 2), dtype=np.int32)
    pair_support = np.zeros(0, dtype=np.int32)
    pair_count = 0
    triple_members = np.zeros((0, 3), dtype=np.int64)
    triple_support = np.zeros(0, dtype=np.int64)
    triples_complete = arity < 3
    if len(candidates) >= 2:
        matrix, df = _membership(index, candidates)
        pairs = _pair_supports(matrix)
        scan = _scan_pairs(pairs, k, max_combinations, rank, flagged if flags else None)
        pair_members, pair_support, pair_count = scan.members, scan.support, scan.count
        if scan.lowest is not None:
            best = min(best, scan.lowest)
        if arity >= 3 and len(candidates) >= 3:
            report_needs_triples = max_combinations is None or pair_count < max_combinations
            if report_needs_triples or not pair_count or best > 1:
                triple_members, triple_support = _minimal_triples(matrix, df, pairs, k, rank, None)
                triples_complete = True
                if flags:
                    _flags(triple_members, rank, flagged)
            elif flags:
                triple_members, triple_support = _minimal_triples(matrix, df, pairs, k, rank, flagged)
            if len(triple_support):
                best = min(best, int(triple_support.min()))
            best = _lowest_triple_through_pairs(matrix, pairs, k, best)
    elif arity >= 3:
        triples_complete = True
    return CombinationAnalysis(
        candidates=candidates,
        pairs=pair_members,
        pair_support=pair_support,
        pair_count=pair_count,
        triples=triple_members,
        triple_support=triple_support,
        triples_complete=triples_complete,
        anonymity=best if best < k else None,
        arity=arity,
        k=k,
        flagged_candidates=np.flatnonzero(flagged).tolist() if flags else None,
    )


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
