"""The compiled searches for linkable combinations (``linkage.combinations``, steps 2–5): the
pairs of the pair matrix, the minimal triples from their rarest member, the lowest support of a
triple through a linkable pair, and the SPEC order and flagging rank they are reported in.
"""
from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

from .. import _kernels  # noqa: F401  (announces a compile of these kernels)
from .bits import popcount
from .candidate_matrix import _local_bits


#: A triple's rarest member with at most this many documents (<= 64, one word) has its
#: partners' supports counted exactly for every pair, without the bounds (``_triple_scan``).
_NARROW_DOCUMENTS = 64
#: Rows per block when scanning the pair matrix (a block's linkable pairs exist at once).
_SCAN_BLOCK_ROWS = 32
#: Linkable pairs held beyond twice the report cap before the scan trims them to the cap.
_SCAN_SLACK = 4096


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
    """Step 3's search (``combinations``), compiled: every triple from its rarest member ``a``, within ``a``'s documents.

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
    """Linkable triples all of whose pairs have support >= k (``combinations``, step 3).

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
