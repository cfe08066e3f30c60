"""Compiled (numba) inner loops of tokenizing, token hashing and n-gram counting.

Each is a per-character or per-element loop with state carried from one element to the
next (a gap's break status, a hash-table probe, a run of equal keys); numpy can only
express them as several whole-array passes with temporaries, which the profile of the
index build showed to be 5–10x slower. They compute exactly what the SPEC says; the
tokenizer's own pass over the characters lives in ``tokenize.py``.

* ``Vocabulary``: a hash table from a token's code points (ASCII-lowercased when the
  rules casefold) to a dense id, so that the keyed digest of each distinct token is
  computed once in Python and every other occurrence is an array gather.
* ``extend``: the n-gram key chaining step (an n-gram key from its prefix key and last token).
* ``group``: the distinct keys, document frequencies and posting lists of one sorted
  batch of (key, document) pairs, and each pair's df, in one pass.
"""
from __future__ import annotations

from typing import Union

import numba as nb
import numpy as np

#: What the compiled loops pass around as integers: Python ints in, numpy int64 inside.
Int = Union[int, np.int64]

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)


@nb.njit(cache=True, nogil=True)
def _token_key(codes: np.ndarray, start: Int, end: Int, fold: bool) -> tuple[np.uint64, bool, bool]:
    """A token's table key, whether the key is the token itself, and whether it is folded.

    An ASCII token of at most 8 characters is its own key (its bytes, lowercased when
    ``fold``); any other token is keyed by FNV-1a over its code points and compared
    against the stored code points on a match.
    """
    ascii_only = True
    for i in range(start, end):
        if codes[i] >= 128:
            ascii_only = False
            break
    folded = fold and ascii_only
    if ascii_only and end - start <= 8:
        packed = np.uint64(0)
        for i in range(start, end):
            code = np.uint64(codes[i])
            if folded and 65 <= code <= 90:
                code += np.uint64(32)
            packed = (packed << np.uint64(8)) | code
        return packed, True, folded
    value = _FNV_OFFSET
    for i in range(start, end):
        code = np.uint64(codes[i])
        if folded and 65 <= code <= 90:
            code += np.uint64(32)
        value = (value ^ code) * _FNV_PRIME
    return value, False, folded


_SLOT_MIX = np.uint64(0x9E3779B97F4A7C15)


@nb.njit(cache=True, nogil=True)
def _assign(
    codes: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    begin: Int,
    fold: bool,
    table: np.ndarray,
    entry_start: np.ndarray,
    pool: np.ndarray,
    entries: Int,
    pool_used: Int,
    ids: np.ndarray,
    first_token: np.ndarray,
    new: Int,
    limit: Int,
) -> tuple[Int, Int, Int, Int]:
    """Dense id of each token from ``begin`` on; new entries are appended.

    ``table`` holds (key, entry + 1 | length << 32 | self-keyed << 63) pairs, so a probe
    reads one cache line and a short ASCII token needs nothing else. Stops early when the
    table would pass half full, an array would overflow or ``limit`` entries are reached;
    returns (next token, entries, pool use, new entries so far) so the caller can resume.
    """
    slots = len(table) // 2
    mask = np.uint64(slots - 1)
    room = slots // 2
    for t in range(begin, len(starts)):
        start, end = starts[t], ends[t]
        length = end - start
        key, self_keyed, folded = _token_key(codes, start, end, fold)
        meta_tag = (np.uint64(length) << np.uint64(32)) | (np.uint64(1) << np.uint64(63) if self_keyed else np.uint64(0))
        slot = np.int64(((key * _SLOT_MIX) >> np.uint64(20)) & mask)
        entry: Int = -1
        while True:
            meta = table[2 * slot + 1]
            if meta == 0:
                break
            if table[2 * slot] == key and meta & ~np.uint64(0xFFFFFFFF) == meta_tag:
                stored = np.int64(meta & np.uint64(0xFFFFFFFF)) - 1
                same = True
                if not self_keyed:
                    base = entry_start[stored]
                    for j in range(length):
                        code = codes[start + j]
                        if folded and 65 <= code <= 90:
                            code += np.uint32(32)
                        if pool[base + j] != code:
                            same = False
                            break
                if same:
                    entry = stored
                    break
            slot = (slot + 1) & np.int64(mask)
        if entry < 0:
            if entries >= room or entries >= len(entry_start) or entries >= limit or pool_used + length > len(pool):
                return t, entries, pool_used, new
            entry = entries
            table[2 * slot] = key
            table[2 * slot + 1] = meta_tag | np.uint64(entry + 1)
            entry_start[entry] = pool_used
            if not self_keyed:
                for j in range(length):
                    code = codes[start + j]
                    if folded and 65 <= code <= 90:
                        code += np.uint32(32)
                    pool[pool_used + j] = code
                pool_used += length
            entries += 1
            first_token[new] = t
            new += 1
        ids[t] = entry
    return len(starts), entries, pool_used, new


@nb.njit(cache=True, nogil=True)
def _rehash(old: np.ndarray, table: np.ndarray) -> None:
    mask = len(table) // 2 - 1
    for slot in range(len(old) // 2):
        if old[2 * slot + 1] == 0:
            continue
        at = np.int64(((old[2 * slot] * _SLOT_MIX) >> np.uint64(20)) & np.uint64(mask))
        while table[2 * at + 1] != 0:
            at = (at + 1) & mask
        table[2 * at] = old[2 * slot]
        table[2 * at + 1] = old[2 * slot + 1]


class Vocabulary:
    """Distinct tokens seen so far, each with a dense id and its keyed digest.

    Two occurrences get the same id exactly when their code points are equal (after ASCII
    lowercasing when ``fold_ascii``; for an ASCII token that is its search form). The
    table is bounded by ``limit`` entries: when full it is cleared, which costs only the
    digests of the tokens seen again.
    """

    def __init__(self, fold_ascii: bool, limit: int = 4_000_000) -> None:
        self.fold_ascii = fold_ascii
        self.limit = max(1 << 10, limit)
        self._clear()

    def _clear(self) -> None:
        self.entries: Int = 0
        self.pool_used: Int = 0
        self.table = np.zeros(2 * (1 << 12), dtype=np.uint64)
        self.entry_start = np.zeros(1 << 11, dtype=np.int64)
        self.digests = np.zeros(1 << 11, dtype=np.uint64)
        self.pool = np.zeros(1 << 14, dtype=np.uint32)

    def _grow(self, token_chars: int) -> None:
        """Double what is full: the table (at half load), the entry arrays, the pool."""
        if self.entries >= len(self.table) // 4:
            old = self.table
            self.table = np.zeros(2 * len(old), dtype=np.uint64)
            _rehash(old, self.table)
        if self.entries >= len(self.entry_start):
            for name in ("entry_start", "digests"):
                old = getattr(self, name)
                grown = np.zeros(2 * len(old), dtype=old.dtype)
                grown[: self.entries] = old[: self.entries]
                setattr(self, name, grown)
        if self.pool_used + token_chars > len(self.pool):
            grown = np.zeros(max(2 * len(self.pool), self.pool_used + token_chars), dtype=np.uint32)
            grown[: self.pool_used] = self.pool[: self.pool_used]
            self.pool = grown

    def assign(self, codes: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each token's id, and the tokens that introduced new ids (token ``new[j]`` got id
        ``ids[new[j]]``, ascending). The caller fills ``digests`` for the new ids.

        When the table reaches ``limit`` it is cleared and the batch starts over, once; a
        batch with more distinct tokens than ``limit`` then grows the table past it.
        """
        ids = np.empty(len(starts), dtype=np.int64)
        first_token = np.empty(len(starts), dtype=np.int64)
        position: Int = 0
        new: Int = 0
        limit = self.limit
        while True:
            position, self.entries, self.pool_used, new = _assign(
                codes, starts, ends, position, self.fold_ascii, self.table, self.entry_start, self.pool,
                self.entries, self.pool_used, ids, first_token, new, limit,
            )
            if position == len(starts):
                return ids, first_token[:new]
            if self.entries >= limit:
                self._clear()
                position = new = 0
                limit = 2**62
                continue
            self._grow(int(ends[position] - starts[position]))


_MUL1 = np.uint64(0x9E3779B97F4A7C15)
_MUL2 = np.uint64(0xBF58476D1CE4E5B9)
_MUL3 = np.uint64(0x94D049BB133111EB)


@nb.njit(cache=True, nogil=True)
def mix(prefix: np.uint64, token: np.uint64) -> np.uint64:
    """One chaining step: the key of an n-gram from its prefix's key and its last token's digest."""
    x = prefix * _MUL1 + token
    x ^= x >> np.uint64(30)
    x *= _MUL2
    x ^= x >> np.uint64(27)
    x *= _MUL3
    x ^= x >> np.uint64(31)
    return x


@nb.njit(cache=True, nogil=True)
def extend(prefix: np.ndarray, token: np.ndarray) -> np.ndarray:
    out = np.empty(len(prefix), dtype=np.uint64)
    for i in range(len(prefix)):
        out[i] = mix(prefix[i], token[i])
    return out


_INDEX_BITS = 24
_INDEX_MASK = np.uint64((1 << _INDEX_BITS) - 1)


@nb.njit(cache=True, nogil=True)
def _partition(keys: np.ndarray, docs: np.ndarray, shift: Int, buckets: Int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stable scatter of the pairs into ``buckets`` key ranges (``(key >> shift) % buckets``).

    Returns the bucket bounds, the keys in bucket order, and for each of them one word:
    its document in the high 32 bits, its input index in the low 32 bits.
    """
    count = len(keys)
    bounds = np.zeros(buckets + 1, dtype=np.int64)
    mask = np.uint64(buckets - 1)
    for i in range(count):
        bounds[np.int64((keys[i] >> np.uint64(shift)) & mask) + 1] += 1
    for bucket in range(buckets):
        bounds[bucket + 1] += bounds[bucket]
    cursor = bounds[:-1].copy()
    out_keys = np.empty(count, dtype=np.uint64)
    out_items = np.empty(count, dtype=np.uint64)
    for i in range(count):
        b = np.int64((keys[i] >> np.uint64(shift)) & mask)
        at = cursor[b]
        out_keys[at] = keys[i]
        out_items[at] = (np.uint64(docs[i]) << np.uint64(32)) | np.uint64(i)
        cursor[b] = at + 1
    return bounds, out_keys, out_items


@nb.njit(cache=True, nogil=True)
def _group_bucket(
    packed: np.ndarray,
    keys: np.ndarray,
    items: np.ndarray,
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
    ascending, are deduplicated into its posting list, and every pair gets its key's df.
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
    low32 = np.uint64(0xFFFFFFFF)
    i = 0
    while i < count:
        key = sorted_keys[i]
        first = written
        last = np.int64(-1)
        j = i
        while j < count and sorted_keys[j] == key:
            doc = np.int64(items[order[j]] >> np.uint64(32))
            if doc != last:
                postings[written] = np.uint32(doc)
                written += 1
                last = doc
            j += 1
        frequency = np.uint32(written - first)
        for m in range(i, j):
            pair_df[np.int64(items[order[m]] & low32)] = frequency
        unique[groups] = key
        df[groups] = frequency
        groups += 1
        i = j
    return groups, written


#: Pairs per bucket that keep one bucket's sort and gathers in the L2 cache.
_BUCKET_PAIRS = 1 << 14


def group(
    keys: np.ndarray, docs: np.ndarray, key_bits: int = 64
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Distinct keys (ascending), their df, their posting lists (concatenated), each pair's df.

    ``docs`` must be non-decreasing in input order (pairs come in document order), so a
    stable key order leaves each posting list sorted with duplicates adjacent. All keys
    must agree above their low ``key_bits`` bits (a shard's keys share their top bits).
    The pairs are first scattered by their top bits into buckets that fit the cache; each
    bucket is sorted by numpy's SIMD value sort on (top 40 key bits | 24-bit index) words,
    ~6x faster than ``argsort``, and grouped in one compiled pass. Buckets are contiguous
    key ranges, so their outputs concatenate in key order.
    """
    keys = np.ascontiguousarray(keys, dtype=np.uint64)
    docs = np.ascontiguousarray(docs, dtype=np.uint32)
    count = len(keys)
    if count >= 1 << 32:
        raise ValueError(f"{count:,} pairs in one group call; use more shards")
    bucket_bits = 0
    while (count >> bucket_bits) > _BUCKET_PAIRS and bucket_bits < min(20, key_bits):
        bucket_bits += 1
    bounds, bucket_keys, items = _partition(keys, docs, key_bits - bucket_bits, 1 << bucket_bits)
    unique = np.empty(count, dtype=np.uint64)
    df = np.empty(count, dtype=np.uint32)
    postings = np.empty(count, dtype=np.uint32)
    pair_df = np.empty(count, dtype=np.uint32)
    groups: Int = 0
    written: Int = 0
    not_index = ~_INDEX_MASK
    for start, stop in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        if start == stop:
            continue
        if stop - start >= 1 << _INDEX_BITS:
            raise ValueError(f"{stop - start:,} pairs in one key range; the keys are not uniform hashes")
        part = bucket_keys[start:stop]
        packed = (part & not_index) | np.arange(stop - start, dtype=np.uint64)
        packed.sort()
        groups, written = _group_bucket(packed, part, items[start:stop], unique, df, postings, pair_df, groups, written)
    return unique[:groups].copy(), df[:groups].copy(), postings[:written].copy(), pair_df
