"""N-gram keys: the chaining step from token digests to keys, the reading families and their twins.

``mix`` makes an n-gram's key from its prefix's key and its last token's digest; one bit
of every key (``FAMILY``) names its reading, so an n-gram and its twin under the other
reading differ in that bit alone. ``extend`` chains a level's keys, ``extend_positions``
also applies the reduction in the same pass (numpy needed six passes with temporaries),
and ``shared_twins`` finds the search rows a level file need not store twice. Compiled
with numba: each is a per-element loop.
"""
from __future__ import annotations

from typing import Union

import numba as nb
import numpy as np

from ... import _kernels  # noqa: F401  (announces a compile of these kernels)

#: What the compiled loops pass around as integers: Python ints in, numpy int64 inside.
Int = Union[int, np.int64]

_MUL1 = np.uint64(0x9E3779B97F4A7C15)
_MUL2 = np.uint64(0xBF58476D1CE4E5B9)
_MUL3 = np.uint64(0x94D049BB133111EB)


#: One bit of every token digest and n-gram key names its reading's family (clear: exact,
#: set: search); ``TWIN`` flips it: an n-gram and its twin of the other reading, with the same
#: token strings, have keys that differ in that bit alone (``hashing.TokenHasher``). It is the
#: highest bit below the shard bits (at most 16), so twins share their shard, and it lies
#: within the top 40 bits the grouping sorts by (``grouping._sorted_packed``), so twins never tie there.
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
