"""The token vocabulary of a build: each distinct token's dense id, so its digest is computed once.

``Vocabulary`` is a hash table from a token's code points (ASCII-lowercased when the
rules casefold) to a dense id: the keyed digest of each distinct token is computed once
(``hashing.TokenHasher``) and every other occurrence is an array gather. Its probe loop
carries state from one token to the next (a slot prefetched ahead, a probe sequence), so
it is compiled with numba; numpy could only express it as several whole-array passes with
temporaries, which the profile of the index build showed to be 5–10x slower.
"""
from __future__ import annotations

from typing import Union

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
