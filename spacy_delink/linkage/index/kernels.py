"""Compiled (numba) inner loops of tokenizing, token hashing and n-gram counting.

Each is a per-character or per-element loop with state carried from one element to the
next (a gap's break status, a hash-table probe, a run of equal keys); numpy can only
express them as several whole-array passes with temporaries, which the profile of the
index build showed to be 5–10x slower. They compute exactly what the SPEC says; the
tokenizer's own pass over the characters lives in ``tokenize.py``.

* ``Vocabulary``: a hash table from a token's code points (ASCII-lowercased when the
  rules casefold) to a dense id, so that the keyed digest of each distinct token is
  computed once and every other occurrence is an array gather.
* ``ascii_digests``: the keyed BLAKE2b digest of each new ASCII token's search form
  (its characters, lowercased when the rules casefold): ~0.3 µs a token without the GIL,
  where Python's search form and ``hashlib`` took ~3 µs; other tokens are digested in Python.
* ``extend``: the n-gram key chaining step (an n-gram key from its prefix key and last token);
  ``extend_positions``: a level's surviving positions and their keys (the reduction and
  the chaining in one pass, where numpy needed six passes with temporaries).
* ``split_shards`` / ``gather_shard_flags``: a level's pairs cut into their shards (the
  top key bits) in one stable pass, and the shards' per-pair flags put back in pair order
  (numpy needed a mask, two compressions and a scatter per shard, holding the GIL);
* ``group``: the distinct keys, document frequencies and posting lists of one sorted
  batch of (key, document) pairs, and each pair's df, in one pass (on several threads
  when asked: the loops release the GIL), taking the partitions' pairs as they are.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence, Union

import numba as nb
import numpy as np

from ... import _kernels  # noqa: F401  (announces a compile of these kernels)
from ..bits import prefetch

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
#: Tokens between a table slot's prefetch and its probe (``_assign``).
_PREFETCH_TOKENS = 16


@nb.njit(cache=True, nogil=True)
def _token_keys(codes: np.ndarray, starts: np.ndarray, ends: np.ndarray, fold: bool) -> tuple[np.ndarray, np.ndarray]:
    """Each token's table key (``_token_key``) and kind (1: self-keyed, 2: folded)."""
    count = len(starts)
    token_keys = np.empty(count, dtype=np.uint64)
    kinds = np.empty(count, dtype=np.uint8)
    for t in range(count):
        key, self_keyed, folded = _token_key(codes, starts[t], ends[t], fold)
        token_keys[t] = key
        kinds[t] = np.uint8(self_keyed) | (np.uint8(folded) << np.uint8(1))
    return token_keys, kinds


@nb.njit(cache=True, nogil=True)
def _assign(
    codes: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    token_keys: np.ndarray,
    kinds: np.ndarray,
    begin: Int,
    table: np.ndarray,
    entry_start: np.ndarray,
    pool: np.ndarray,
    entries: Int,
    pool_used: Int,
    ids: np.ndarray,
    first_token: np.ndarray,
    new: Int,
    limit: Int,
    table_address: Int,
) -> tuple[Int, Int, Int, Int]:
    """Dense id of each token from ``begin`` on; new entries are appended.

    ``table`` holds (key, entry + 1 | length << 32 | self-keyed << 63) pairs, so a probe
    reads one cache line and a short ASCII token needs nothing else. Stops early when the
    table would pass half full, an array would overflow or ``limit`` entries are reached;
    returns (next token, entries, pool use, new entries so far) so the caller can resume.

    The keys (``_token_keys``) come computed, so that the slot of the token
    ``_PREFETCH_TOKENS`` ahead is fetched (``table_address``: the table's) while this one
    is probed: a large vocabulary's table is far bigger than the caches, and its misses
    dominated the pass.
    """
    slots = len(table) // 2
    mask = np.uint64(slots - 1)
    room = slots // 2
    count = len(starts)
    for t in range(begin, count):
        ahead = t + _PREFETCH_TOKENS
        if ahead < count:
            ahead_slot = ((token_keys[ahead] * _SLOT_MIX) >> np.uint64(20)) & mask
            prefetch(np.uint64(table_address) + np.uint64(16) * ahead_slot)  # type: ignore[call-arg]  # numba supplies the typing context
        start, end = starts[t], ends[t]
        length = end - start
        key, self_keyed, folded = token_keys[t], kinds[t] & 1 != 0, kinds[t] & 2 != 0
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

    def keys(self, codes: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The tokens' table keys and kinds for ``assign``: they read no table, so a caller
        that shares the vocabulary between threads computes them outside its lock."""
        return _token_keys(codes, starts, ends, self.fold_ascii)

    def assign(
        self, codes: np.ndarray, starts: np.ndarray, ends: np.ndarray, keys: tuple[np.ndarray, np.ndarray] | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Each token's id, and the tokens that introduced new ids (token ``new[j]`` got id
        ``ids[new[j]]``, ascending). The caller fills ``digests`` for the new ids.
        ``keys``: ``self.keys(codes, starts, ends)``, if already computed.

        When the table reaches ``limit`` it is cleared and the batch starts over, once; a
        batch with more distinct tokens than ``limit`` then grows the table past it.
        """
        token_keys, kinds = keys if keys is not None else self.keys(codes, starts, ends)
        ids = np.empty(len(starts), dtype=np.int64)
        first_token = np.empty(len(starts), dtype=np.int64)
        position: Int = 0
        new: Int = 0
        limit = self.limit
        while True:
            position, self.entries, self.pool_used, new = _assign(
                codes, starts, ends, token_keys, kinds, position, self.table, self.entry_start, self.pool,
                self.entries, self.pool_used, ids, first_token, new, limit, self.table.ctypes.data,
            )
            if position == len(starts):
                return ids, first_token[:new]
            if self.entries >= limit:
                self._clear()
                position = new = 0
                limit = 2**62
                continue
            self._grow(int(ends[position] - starts[position]))


#: BLAKE2b (RFC 7693): the initial vector and the message word schedule of each round.
_BLAKE_IV = np.array(
    [0x6A09E667F3BCC908, 0xBB67AE8584CAA73B, 0x3C6EF372FE94F82B, 0xA54FF53A5F1D36F1,
     0x510E527FADE682D1, 0x9B05688C2B3E6C1F, 0x1F83D9ABFB41BD6B, 0x5BE0CD19137E2179],
    dtype=np.uint64,
)
_BLAKE_SIGMA = np.array(
    [[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
     [14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3],
     [11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4],
     [7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8],
     [9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13],
     [2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9],
     [12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11],
     [13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10],
     [6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5],
     [10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0]],
    dtype=np.int64,
)
#: Bytes per BLAKE2b block.
_BLAKE_BLOCK = 128


@nb.njit(cache=True, nogil=True)
def _rotate_right(x: np.uint64, bits: Int) -> np.uint64:
    return (x >> np.uint64(bits)) | (x << np.uint64(64 - bits))


@nb.njit(cache=True, nogil=True)
def _blake_mix(
    a: np.uint64, b: np.uint64, c: np.uint64, d: np.uint64, x: np.uint64, y: np.uint64
) -> tuple[np.uint64, np.uint64, np.uint64, np.uint64]:
    """BLAKE2b's G function on four state words (scalars, so that the state stays in registers)."""
    a = a + b + x
    d = _rotate_right(d ^ a, 32)
    c = c + d
    b = _rotate_right(b ^ c, 24)
    a = a + b + y
    d = _rotate_right(d ^ a, 16)
    c = c + d
    b = _rotate_right(b ^ c, 63)
    return a, b, c, d


@nb.njit(cache=True, nogil=True)
def _blake_compress(h: np.ndarray, m: np.ndarray, counter: Int, last: bool) -> None:
    """BLAKE2b's compression of the 16-word block ``m`` into the state ``h``."""
    v0, v1, v2, v3, v4, v5, v6, v7 = h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]
    v8, v9, v10, v11 = _BLAKE_IV[0], _BLAKE_IV[1], _BLAKE_IV[2], _BLAKE_IV[3]
    v12 = _BLAKE_IV[4] ^ np.uint64(counter)
    v13 = _BLAKE_IV[5]
    v14 = ~_BLAKE_IV[6] if last else _BLAKE_IV[6]
    v15 = _BLAKE_IV[7]
    for r in range(12):
        s = _BLAKE_SIGMA[r % 10]
        v0, v4, v8, v12 = _blake_mix(v0, v4, v8, v12, m[s[0]], m[s[1]])
        v1, v5, v9, v13 = _blake_mix(v1, v5, v9, v13, m[s[2]], m[s[3]])
        v2, v6, v10, v14 = _blake_mix(v2, v6, v10, v14, m[s[4]], m[s[5]])
        v3, v7, v11, v15 = _blake_mix(v3, v7, v11, v15, m[s[6]], m[s[7]])
        v0, v5, v10, v15 = _blake_mix(v0, v5, v10, v15, m[s[8]], m[s[9]])
        v1, v6, v11, v12 = _blake_mix(v1, v6, v11, v12, m[s[10]], m[s[11]])
        v2, v7, v8, v13 = _blake_mix(v2, v7, v8, v13, m[s[12]], m[s[13]])
        v3, v4, v9, v14 = _blake_mix(v3, v4, v9, v14, m[s[14]], m[s[15]])
    h[0] ^= v0 ^ v8
    h[1] ^= v1 ^ v9
    h[2] ^= v2 ^ v10
    h[3] ^= v3 ^ v11
    h[4] ^= v4 ^ v12
    h[5] ^= v5 ^ v13
    h[6] ^= v6 ^ v14
    h[7] ^= v7 ^ v15


@nb.njit(cache=True, nogil=True)
def blake2b_keyed_state(key: np.ndarray) -> np.ndarray:
    """The state of an 8-byte BLAKE2b keyed with ``key`` (bytes, 1–64) once the key block is in:
    what ``hashlib.blake2b(digest_size=8, key=key)`` holds before any data."""
    h = _BLAKE_IV.copy()
    h[0] ^= np.uint64(0x01010008 | (len(key) << 8))
    block = np.zeros(16, dtype=np.uint64)
    for i in range(len(key)):
        block[i // 8] |= np.uint64(key[i]) << np.uint64(8 * (i % 8))
    _blake_compress(h, block, _BLAKE_BLOCK, False)
    return h


@nb.njit(cache=True, nogil=True)
def ascii_digests(
    codes: np.ndarray, starts: np.ndarray, ends: np.ndarray, fold: bool, keyed: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Each ASCII token's keyed digest (``keyed``: ``blake2b_keyed_state``), and which tokens are ASCII.

    An ASCII token's search form is its characters, lowercased when ``fold`` (NFKC and
    casefolding change nothing else in ASCII), and its digest is the first 8 bytes of the
    keyed BLAKE2b of them, little-endian: what ``TokenHasher.digest`` computes in Python.
    Other tokens get 0 and are left to Python.
    """
    count = len(starts)
    digests = np.zeros(count, dtype=np.uint64)
    is_ascii = np.zeros(count, dtype=np.bool_)
    h = np.empty(8, dtype=np.uint64)
    block = np.empty(16, dtype=np.uint64)
    for t in range(count):
        start, end = starts[t], ends[t]
        plain = True
        for i in range(start, end):
            if codes[i] >= 128:
                plain = False
                break
        if not plain:
            continue
        is_ascii[t] = True
        h[:] = keyed
        length = end - start
        offset = 0
        while True:
            block[:] = 0
            stop = min(offset + _BLAKE_BLOCK, length)
            for i in range(offset, stop):
                code = np.uint64(codes[start + i])
                if fold and 65 <= code <= 90:
                    code += np.uint64(32)
                block[(i - offset) // 8] |= code << np.uint64(8 * ((i - offset) % 8))
            last = stop == length
            _blake_compress(h, block, _BLAKE_BLOCK + stop, last)
            if last:
                break
            offset = stop
        digests[t] = h[0]
    return digests, is_ascii


_MUL1 = np.uint64(0x9E3779B97F4A7C15)
_MUL2 = np.uint64(0xBF58476D1CE4E5B9)
_MUL3 = np.uint64(0x94D049BB133111EB)


#: One bit of every token digest and n-gram key names its reading's family (clear: exact,
#: set: search); ``TWIN`` flips it: an n-gram and its twin of the other reading, with the same
#: token strings, have keys that differ in that bit alone (``hashing.TokenHasher``). It is the
#: highest bit below the shard bits (at most 16), so twins share their shard, and it lies
#: within the top 40 bits the grouping sorts by (``_sorted_packed``), so twins never tie there.
FAMILY = np.uint64(1 << 47)
TWIN = FAMILY
_HASH_BITS = ~FAMILY


@nb.njit(cache=True, nogil=True)
def mix(prefix: np.uint64, token: np.uint64) -> np.uint64:
    """One chaining step: the key of an n-gram from its prefix's key and its last token's digest.

    The family bits of the inputs are left out of the mixing and the token's is the key's, so
    an n-gram's key and its twin's (the same strings read under the other reading) differ in
    the family bit alone, at every length.
    """
    x = (prefix & _HASH_BITS) * _MUL1 + (token & _HASH_BITS)
    x ^= x >> np.uint64(30)
    x *= _MUL2
    x ^= x >> np.uint64(27)
    x *= _MUL3
    x ^= x >> np.uint64(31)
    return (x & _HASH_BITS) | (token & FAMILY)


@nb.njit(cache=True, nogil=True)
def shared_twins(keys: np.ndarray, df: np.ndarray, postings: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which rows a level file keeps, and which kept rows also answer for their search twin.

    ``keys`` are a shard's distinct keys (ascending), ``df`` and ``postings`` their posting
    lists. A search-reading row (family bit set) whose twin (the key with that bit clear)
    has the same documents is dropped, and the twin marked: a search lookup finds the
    documents there (``levels.TwinLevel``).
    """
    count = len(keys)
    keep = np.ones(count, dtype=np.bool_)
    twin = np.zeros(count, dtype=np.bool_)
    starts = np.zeros(count + 1, dtype=np.int64)
    for i in range(count):
        starts[i + 1] = starts[i] + df[i]
    for i in range(count):
        if not keys[i] & FAMILY:
            continue
        j = np.searchsorted(keys, keys[i] ^ TWIN)
        if j < count and keys[j] == keys[i] ^ TWIN and df[j] == df[i]:
            same = True
            for d in range(df[i]):
                if postings[starts[i] + d] != postings[starts[j] + d]:
                    same = False
                    break
            if same:
                keep[i] = False
                twin[j] = True
    return keep, twin


@nb.njit(cache=True, nogil=True)
def extend(prefix: np.ndarray, token: np.ndarray) -> np.ndarray:
    out = np.empty(len(prefix), dtype=np.uint64)
    for i in range(len(prefix)):
        out[i] = mix(prefix[i], token[i])
    return out


@nb.njit(cache=True, nogil=True)
def extend_positions(
    previous: np.ndarray, previous_keys: np.ndarray, frequent: np.ndarray, remaining: np.ndarray, tok: np.ndarray, level: Int
) -> tuple[np.ndarray, np.ndarray]:
    """The positions whose ``level``-grams survive the reduction, and their keys, in one pass.

    Position ``previous[i]`` survives when the (level−1)-grams at it and at the next position
    (``previous[i + 1]``) are both ``frequent`` and its segment has room for ``level`` tokens.
    """
    count = max(len(previous) - 1, 0)
    positions = np.empty(count, dtype=np.uint32)
    keys = np.empty(count, dtype=np.uint64)
    kept = 0
    for i in range(count):
        position = np.int64(previous[i])
        if frequent[i] and frequent[i + 1] and np.int64(previous[i + 1]) == position + 1 and remaining[position] >= level:
            positions[kept] = position
            keys[kept] = mix(previous_keys[i], tok[position + level - 1])
            kept += 1
    return positions[:kept], keys[:kept]  # views: the pages past ``kept`` are never touched


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
