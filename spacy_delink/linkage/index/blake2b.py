"""BLAKE2b (RFC 7693) compiled with numba: the keyed digest of ASCII tokens without the GIL.

``ascii_digests`` computes the keyed BLAKE2b digest of each new ASCII token's search form
(its characters, lowercased when the rules casefold): ~0.3 µs a token without the GIL,
where Python's search form and ``hashlib`` took ~3 µs; other tokens are digested in
Python (``hashing.TokenHasher``). Apart from the vocabulary and the n-gram keys because it
is a hash function of its own, checked against ``hashlib`` (tests/test_build_speed_paths.py).
"""
from __future__ import annotations

from typing import Union

import numba as nb
import numpy as np

from ... import _kernels  # noqa: F401  (announces a compile of these kernels)

#: What the compiled loops pass around as integers: Python ints in, numpy int64 inside.
Int = Union[int, np.int64]

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
