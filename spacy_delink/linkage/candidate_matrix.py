"""The candidates' posting lists as a packed 0/1 matrix, and every pair's support (``linkage.combinations``, steps 1, 2 and 6).

Each candidate's posting list is lent by the analysis before a mask, brought by a bridge or
decoded from the index, then becomes one row of bits over the documents that hold at least
two candidates, 64 documents to a word; a pair's support is the popcount of the AND of two rows.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

import numba as nb
import numpy as np

from .. import _kernels  # noqa: F401  (announces a compile of these kernels)
from .bits import popcount
from .index import CorpusIndex

if TYPE_CHECKING:
    from .combinations import CombinationAnalysis


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
