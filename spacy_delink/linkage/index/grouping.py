"""Grouping a level's (key, document) pairs: cut into shards, radix sorted, counted into posting lists.

* ``split_shards`` / ``gather_shard_flags``: a level's pairs cut into their shards (the
  top key bits) in one stable pass, and the shards' per-pair flags put back in pair order
  (numpy needed a mask, two compressions and a scatter per shard, holding the GIL);
* ``group``: the distinct keys, document frequencies and posting lists of one sorted
  batch of (key, document) pairs, and each pair's df, in one pass (on several threads
  when asked: the loops release the GIL), taking the partitions' pairs as they are.

Compiled with numba: a stable scatter, an LSD radix sort and a run-length pass carry
state from one pair to the next, which numpy can only express as several passes.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence, Union

import numba as nb
import numpy as np

from ... import _kernels  # noqa: F401  (announces a compile of these kernels)

#: What the compiled loops pass around as integers: Python ints in, numpy int64 inside.
Int = Union[int, np.int64]

@nb.njit(cache=True, nogil=True)
def split_shards(keys: np.ndarray, docs: np.ndarray, shard_bits: Int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pairs ordered by shard (top ``shard_bits`` key bits, 1 or more), input order kept
    within each, and each shard's bounds: shard ``s`` is ``[bounds[s], bounds[s + 1])``."""
    shift = np.uint64(64 - shard_bits)
    bounds = np.zeros((1 << shard_bits) + 1, dtype=np.int64)
    for i in range(len(keys)):
        bounds[np.int64(keys[i] >> shift) + 1] += 1
    for shard in range(1 << shard_bits):
        bounds[shard + 1] += bounds[shard]
    cursor = bounds[:-1].copy()
    out_keys = np.empty(len(keys), dtype=np.uint64)
    out_docs = np.empty(len(keys), dtype=np.uint32)
    for i in range(len(keys)):
        s = np.int64(keys[i] >> shift)
        at = cursor[s]
        out_keys[at] = keys[i]
        out_docs[at] = docs[i]
        cursor[s] = at + 1
    return out_keys, out_docs, bounds


@nb.njit(cache=True, nogil=True)
def gather_shard_flags(keys: np.ndarray, shard_bits: Int, flags: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Each key's flag in input order, from the shards' flags (``split_shards``'s order, concatenated)."""
    shift = np.uint64(64 - shard_bits)
    cursor = bounds[:-1].copy()
    out = np.empty(len(keys), dtype=np.bool_)
    for i in range(len(keys)):
        s = np.int64(keys[i] >> shift)
        out[i] = flags[cursor[s]] != 0
        cursor[s] += 1
    return out


_INDEX_BITS = 24
_INDEX_MASK = np.uint64((1 << _INDEX_BITS) - 1)


@nb.njit(cache=True, nogil=True)
def _bucket_counts(keys: np.ndarray, shift: Int, buckets: Int) -> np.ndarray:
    """How many keys fall in each of ``buckets`` key ranges (``(key >> shift) % buckets``)."""
    counts = np.zeros(buckets, dtype=np.int64)
    mask = np.uint64(buckets - 1)
    for i in range(len(keys)):
        counts[np.int64((keys[i] >> np.uint64(shift)) & mask)] += 1
    return counts


@nb.njit(cache=True, nogil=True)
def _scatter(
    keys: np.ndarray, docs: np.ndarray, shift: Int, cursor: np.ndarray, out_keys: np.ndarray, out_docs: np.ndarray
) -> None:
    """Stable scatter of one chunk of the pairs to its bucket cursors (advanced past them)."""
    mask = np.uint64(len(cursor) - 1)
    for i in range(len(keys)):
        b = np.int64((keys[i] >> np.uint64(shift)) & mask)
        at = cursor[b]
        out_keys[at] = keys[i]
        out_docs[at] = docs[i]
        cursor[b] = at + 1


@nb.njit(cache=True, nogil=True)
def _gather(keys: np.ndarray, shift: Int, cursor: np.ndarray, bucketed: np.ndarray, out: np.ndarray) -> None:
    """``_scatter`` undone for one chunk: each pair's value, from its place in the buckets, back in input order.

    Each bucket is read in order, so this streams, where writing each value straight to its
    input position from inside a bucket missed the cache at every pair.
    """
    mask = np.uint64(len(cursor) - 1)
    for i in range(len(keys)):
        b = np.int64((keys[i] >> np.uint64(shift)) & mask)
        out[i] = bucketed[cursor[b]]
        cursor[b] += 1


#: Bits of the key sorted per pass of ``_sorted_packed`` (a 16 KB count table: L1-resident).
_RADIX_BITS = 11


@nb.njit(cache=True, nogil=True)
def _sorted_packed(keys: np.ndarray) -> np.ndarray:
    """The (top 40 key bits | index) words of one bucket, sorted ascending.

    A stable LSD radix sort of the key bits only, over the bits where the words differ
    (a bucket's keys share their top bits): the words start in index order, so ties keep
    it, which is the order of the whole words. ~4x faster than numpy's sort here.
    """
    count = len(keys)
    src = np.empty(count, dtype=np.uint64)
    top = ~_INDEX_MASK
    varying = np.uint64(0)
    for i in range(count):
        src[i] = (keys[i] & top) | np.uint64(i)
        varying |= (keys[i] ^ keys[0]) & top
    dst = np.empty(count, dtype=np.uint64)
    digit_mask = np.uint64((1 << _RADIX_BITS) - 1)
    cursor = np.empty(1 << _RADIX_BITS, dtype=np.int64)
    shift = _INDEX_BITS
    while shift < 64 and (varying >> np.uint64(shift)) != 0:
        cursor[:] = 0
        for i in range(count):
            cursor[np.int64((src[i] >> np.uint64(shift)) & digit_mask)] += 1
        total = 0
        for digit in range(len(cursor)):
            size = cursor[digit]
            cursor[digit] = total
            total += size
        for i in range(count):
            d = np.int64((src[i] >> np.uint64(shift)) & digit_mask)
            dst[cursor[d]] = src[i]
            cursor[d] += 1
        src, dst = dst, src
        shift += _RADIX_BITS
    return src


@nb.njit(cache=True, nogil=True)
def _group_bucket(
    packed: np.ndarray,
    keys: np.ndarray,
    docs: np.ndarray,
    unique: np.ndarray,
    df: np.ndarray,
    postings: np.ndarray,
    pair_df: np.ndarray,
    groups: Int,
    written: Int,
) -> tuple[Int, Int]:
    """Group one bucket whose ``packed`` (top key bits | local index) words are sorted.

    Equal top bits with different keys (a few per million distinct keys) are put in full
    key order by insertion sort, index order kept; then each key's documents, already
    ascending, are deduplicated into its posting list, and every pair gets its key's df
    (``pair_df``: the bucket's, in the bucket's order; it may be ``docs`` itself, as each
    pair's document is read before its df is written).
    """
    count = len(packed)
    top = ~_INDEX_MASK
    order = np.empty(count, dtype=np.int64)
    sorted_keys = np.empty(count, dtype=np.uint64)
    for j in range(count):
        order[j] = np.int64(packed[j] & _INDEX_MASK)
        sorted_keys[j] = keys[order[j]]
    i = 0
    while i < count:
        head = packed[i] & top
        j = i + 1
        mixed = False
        while j < count and packed[j] & top == head:
            mixed |= sorted_keys[j] != sorted_keys[i]
            j += 1
        if mixed:
            for a in range(i + 1, j):
                key, item = sorted_keys[a], order[a]
                b = a - 1
                while b >= i and (sorted_keys[b] > key or (sorted_keys[b] == key and order[b] > item)):
                    sorted_keys[b + 1], order[b + 1] = sorted_keys[b], order[b]
                    b -= 1
                sorted_keys[b + 1], order[b + 1] = key, item
        i = j
    i = 0
    while i < count:
        key = sorted_keys[i]
        first = written
        last = np.int64(-1)
        j = i
        while j < count and sorted_keys[j] == key:
            doc = np.int64(docs[order[j]])
            if doc != last:
                postings[written] = np.uint32(doc)
                written += 1
                last = doc
            j += 1
        frequency = np.uint32(written - first)
        for m in range(i, j):
            pair_df[order[m]] = frequency
        unique[groups] = key
        df[groups] = frequency
        groups += 1
        i = j
    return groups, written


@nb.njit(cache=True, nogil=True)
def _group_buckets(
    bucket_keys: np.ndarray,
    bucket_docs: np.ndarray,
    bounds: np.ndarray,
    first: Int,
    stop: Int,
    unique: np.ndarray,
    df: np.ndarray,
    postings: np.ndarray,
    bucket_df: np.ndarray,
) -> tuple[Int, Int, Int]:
    """Buckets ``first``..``stop - 1`` in one call (no GIL taken between buckets): their outputs
    from the run's first pair on (a key has at least one pair); returns (that offset, groups, written)."""
    offset = bounds[first]
    groups, written = offset, offset
    for b in range(first, stop):
        low, high = bounds[b], bounds[b + 1]
        if low < high:
            part = bucket_keys[low:high]
            groups, written = _group_bucket(
                _sorted_packed(part), part, bucket_docs[low:high], unique, df, postings, bucket_df[low:high], groups, written
            )
    return offset, groups, written


#: Pairs per bucket that keep one bucket's sort and gathers in the L2 cache.
_BUCKET_PAIRS = 1 << 14


def _on_threads(function: Callable[..., Any], calls: list[tuple[Any, ...]]) -> list[Any]:
    """``function(*args)`` for each call, on one thread per call beyond the first (the kernels release the GIL)."""
    if len(calls) == 1:
        return [function(*calls[0])]
    with ThreadPoolExecutor(len(calls) - 1, thread_name_prefix="delink-group") as pool:
        others = [pool.submit(function, *args) for args in calls[1:]]
        return [function(*calls[0])] + [future.result() for future in others]


def _chunks(firsts: list[int], threads: int) -> list[list[tuple[int, int, int]]]:
    """The pairs of the parts starting at ``firsts`` (the last entry: the end) cut into ``threads``
    runs of about equal size, each a list of (part, start, stop) pieces in input order."""
    cuts = [firsts[-1] * t // threads for t in range(threads + 1)]
    return [
        [(part, max(low, first) - first, min(high, end) - first)
         for part, (first, end) in enumerate(zip(firsts, firsts[1:])) if max(low, first) < min(high, end)]
        for low, high in zip(cuts, cuts[1:])
    ]


def group(
    parts_keys: Sequence[np.ndarray], parts_docs: Sequence[np.ndarray], key_bits: int = 64, threads: int = 1
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Distinct keys (ascending), their df, their posting lists (concatenated), each pair's df.

    The pairs come in parts (a shard's pairs from each partition), taken in order as one
    sequence without copying them together. Documents must be non-decreasing in input
    order (pairs come in document order), so a stable key order leaves each posting list
    sorted with duplicates adjacent. All keys must agree above their low ``key_bits`` bits
    (a shard's keys share their top bits).
    The pairs are first scattered by their top bits into buckets that fit the cache; each
    bucket's (top 40 key bits | 24-bit index) words are radix sorted (``_sorted_packed``)
    and grouped in one compiled pass, a run of buckets per call (``_group_buckets``).
    Buckets are contiguous key ranges, so their outputs concatenate in key order.

    ``threads`` > 1 splits the steps: the scatter, and the pairs' df gathered back to input
    order (``_gather``), by input chunks (each chunk's pairs go after the earlier chunks'
    in every bucket, so it stays stable), the grouping by runs of buckets. The result does
    not depend on it.
    """
    keys = [np.ascontiguousarray(part, dtype=np.uint64) for part in parts_keys]
    docs = [np.ascontiguousarray(part, dtype=np.uint32) for part in parts_docs]
    firsts = np.cumsum([0, *(len(part) for part in keys)]).tolist()
    count = firsts[-1]
    if count >= 1 << 32:
        raise ValueError(f"{count:,} pairs in one group call; use more shards")
    bucket_bits = 0
    while (count >> bucket_bits) > _BUCKET_PAIRS and bucket_bits < min(20, key_bits):
        bucket_bits += 1
    shift = key_bits - bucket_bits
    buckets = 1 << bucket_bits
    chunks = _chunks(firsts, max(1, min(threads, count >> 16)))

    def counts(chunk: list[tuple[int, int, int]]) -> np.ndarray:
        return sum((_bucket_counts(keys[p][a:b], shift, buckets) for p, a, b in chunk), np.zeros(buckets, dtype=np.int64))

    per_chunk = np.array(_on_threads(counts, [(chunk,) for chunk in chunks]))
    bounds = np.zeros(buckets + 1, dtype=np.int64)
    np.cumsum(per_chunk.sum(axis=0), out=bounds[1:])
    largest = int(np.diff(bounds).max())
    if largest >= 1 << _INDEX_BITS:
        raise ValueError(f"{largest:,} pairs in one key range; the keys are not uniform hashes")
    cursors = bounds[:-1] + np.cumsum(per_chunk, axis=0) - per_chunk
    bucket_keys = np.empty(count, dtype=np.uint64)
    bucket_docs = np.empty(count, dtype=np.uint32)

    def scatter(chunk: list[tuple[int, int, int]], cursor: np.ndarray) -> None:
        for p, a, b in chunk:  # each call moves the cursor past its pairs
            _scatter(keys[p][a:b], docs[p][a:b], shift, cursor, bucket_keys, bucket_docs)

    _on_threads(scatter, [(chunk, cursors[t].copy()) for t, chunk in enumerate(chunks)])
    # Outputs are sized for the worst case but only what is written is ever touched, so
    # they are returned as views; and the pairs' dfs reuse the scattered pairs' memory
    # (a fresh page costs a fault and its zeroing): each bucket's dfs overwrite its documents
    # (``_group_bucket`` reads a pair's document before it writes its df), and the dfs in
    # input order go where the bucketed keys were.
    unique = np.empty(count, dtype=np.uint64)
    df = np.empty(count, dtype=np.uint32)
    postings = np.empty(count, dtype=np.uint32)
    cuts = np.searchsorted(bounds, [count * t // len(chunks) for t in range(len(chunks) + 1)]).tolist()
    cuts[0], cuts[-1] = 0, buckets
    runs = _on_threads(
        _group_buckets, [(bucket_keys, bucket_docs, bounds, first, stop, unique, df, postings, bucket_docs) for first, stop in zip(cuts, cuts[1:])]
    )
    pair_df = bucket_keys.view(np.uint32)[:count]

    def gather(chunk: list[tuple[int, int, int]], cursor: np.ndarray) -> None:
        for p, a, b in chunk:
            _gather(keys[p][a:b], shift, cursor, bucket_docs, pair_df[firsts[p] + a : firsts[p] + b])

    _on_threads(gather, [(chunk, cursors[t].copy()) for t, chunk in enumerate(chunks)])
    if len(runs) == 1:
        offset, groups, written = runs[0]
        return unique[:groups], df[:groups], postings[:written], pair_df
    return (
        np.concatenate([unique[offset:groups] for offset, groups, _ in runs]),
        np.concatenate([df[offset:groups] for offset, groups, _ in runs]),
        np.concatenate([postings[offset:written] for offset, _, written in runs]),
        pair_df,
    )
