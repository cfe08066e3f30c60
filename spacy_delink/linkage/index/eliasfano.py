"""Elias–Fano coding of sorted integer sequences, decoded only where a search looks.

The index's keys and postings are monotone integer sequences, stored Elias–Fano coded
(Elias 1974, Fano 1971; as in Vigna, "Quasi-succinct indices", WSDM 2013); what the
sequences hold is ``lookup.py``'s concern, how one is coded and searched is this module's.

A sequence of ``n`` values below ``u`` keeps the low ``L = floor(log2(u / n))`` bits of
each value in a packed array (``packing.py``) and the high bits in unary (a one per value,
a zero closing each of the ``u >> L`` buckets), about ``L + 2`` bits per value, the
minimum to within half a bit. Every 256th zero's position is sampled, so finding bucket
``h`` scans at most 256 zeros (a few words). Nothing is decoded up front: a search touches
the words of the buckets it visits, and ``decode_from`` decodes only the values asked for.
The code is exact: every value round-trips (``tests/test_index_scale.py``).

The kernels are compiled with numba: these bit-level loops are per element and cannot be
expressed as whole-array numpy operations. ``lookup.py``'s kernels call the searches
(``_find_one``, ``_row_bounds_one``, ``_decode_from``, ``_sample``) directly.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Union

import numba as nb
import numpy as np

from ... import _kernels  # noqa: F401  (announces a compile of these kernels)
from ..bits import popcount, select, trailing_zeros
from .packing import read_packed

#: What the compiled loops pass around as integers: Python ints in, numpy int64 inside.
Int = Union[int, np.int64]

#: log2 of the zeros between two samples: 256 (1/4 bit per bucket) by default; 128 (1/2
#: bit per bucket) where lookups dominate, as for the keys, so a bucket is found within a
#: cache line or two (64 cost the full corpus 2.2 MB more).
SAMPLE_SHIFT = 8
KEY_SAMPLE_SHIFT = 7
_U1 = np.uint64(1)
_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)
_LOW32 = np.uint64(0xFFFFFFFF)
#: Bits of a high part up to which its samples are stored as uint32s, two to a word: a
#: sample is a position in the high part, and 32 bits halve the samples' 4.6 MB on the full corpus.
_NARROW_SAMPLES = 1 << 32


#: Values of one row walked one by one before ``row_bounds`` searches for the row's end.
_SHORT_LIST = 16


@dataclass(frozen=True)
class Layout:
    """The parameters of one coded sequence: count, low bits, buckets and word counts."""

    count: int
    low_bits: int
    buckets: int
    sample_shift: int = SAMPLE_SHIFT

    def __post_init__(self) -> None:
        if min(self.count, self.buckets - 1) < 0 or not 0 <= self.low_bits <= 63 or not 1 <= self.sample_shift <= 16:
            raise ValueError(f"invalid Elias-Fano layout {self}")

    @classmethod
    def for_values(cls, count: int, universe: int, sample_shift: int = SAMPLE_SHIFT) -> "Layout":
        """The smallest layout for ``count`` values below ``universe`` (a Python int, up to 2^64).

        Elias-Fano's usual low width, floor(log2(universe / count)), is the best without
        samples; the samples cost a bit per 2^``sample_shift`` buckets, so one low bit more
        (half the buckets) can be smaller in all. Both are tried and the fewer words kept.
        """
        if count < 0 or universe < 1:
            raise ValueError(f"invalid Elias-Fano layout: {count} values below {universe}")
        usual = min(63, max(0, (universe // max(1, count)).bit_length() - 1))
        candidates = [
            cls(count, low_bits, ((universe - 1) >> low_bits) + 1, sample_shift) for low_bits in {usual, min(63, usual + 1)}
        ]
        return min(candidates, key=lambda layout: (layout.words, layout.low_bits))

    @property
    def low_words(self) -> int:
        return (self.count * self.low_bits + 63) // 64 + 1

    @property
    def high_words(self) -> int:
        return (self.count + self.buckets + 63) // 64 + 1

    @property
    def samples(self) -> int:
        return ((self.buckets - 1) >> self.sample_shift) + 1

    @property
    def sample_words(self) -> int:
        """Two 32-bit samples to a word when the high part's positions fit (``_sample``), else one."""
        return (self.samples + 1) // 2 if self.high_words << 6 <= _NARROW_SAMPLES else self.samples

    @property
    def words(self) -> int:
        return self.low_words + self.high_words + self.sample_words

    def to_dict(self) -> dict[str, int]:
        return {"count": self.count, "low_bits": self.low_bits, "buckets": self.buckets, "sample_shift": self.sample_shift}



@nb.njit(cache=True, nogil=True)
def _encode(
    values: np.ndarray, low_bits: Int, buckets: Int, out: np.ndarray, low_words: Int, high_words: Int, sample_shift: Int
) -> None:
    n = len(values)
    shift = np.uint64(low_bits)
    mask = (_U1 << shift) - _U1 if low_bits else np.uint64(0)
    high_base = low_words
    for i in range(n):
        value = values[i]
        if low_bits:
            bit = i * low_bits
            word, offset = bit >> 6, bit & 63
            low = value & mask
            out[word] |= low << np.uint64(offset)
            if offset + low_bits > 64:
                out[word + 1] |= low >> np.uint64(64 - offset)
        position = np.int64(value >> shift) + i
        out[high_base + (position >> 6)] |= _U1 << np.uint64(position & 63)
    sample_base = low_words + high_words
    i = 0
    for j in range(((buckets - 1) >> sample_shift) + 1):
        bucket = j << sample_shift
        while i < n and np.int64(values[i] >> shift) < bucket:
            i += 1
        word, offset, _ = _sample_at(high_base, sample_base, j)
        out[word] |= np.uint64(i + bucket) << np.uint64(offset)


@nb.njit(cache=True, nogil=True)
def _sample_at(high_base: Int, sample_base: Int, sample: Int) -> tuple[Int, Int, np.uint64]:
    """(word, bit shift, mask) of sample ``sample``: a uint32 half-word when the high part's
    positions fit 32 bits (``Layout.sample_words``), else a whole word."""
    if (sample_base - high_base) << 6 <= _NARROW_SAMPLES:
        return sample_base + (sample >> 1), 32 * (sample & 1), _LOW32
    return sample_base + sample, 0, _ALL


@nb.njit(cache=True, nogil=True)
def _sample(words: np.ndarray, high_base: Int, sample_base: Int, sample: Int) -> Int:
    """The high-part position where the ``sample``-th sampled bucket's ones begin."""
    word, shift, mask = _sample_at(high_base, sample_base, sample)
    return np.int64((words[word] >> np.uint64(shift)) & mask)


def encode(values: np.ndarray, universe: int, sample_shift: int = SAMPLE_SHIFT) -> tuple[Layout, np.ndarray]:
    """Code sorted (non-decreasing) uint64 ``values``, all below ``universe``."""
    values = np.ascontiguousarray(values, dtype=np.uint64)
    layout = Layout.for_values(len(values), universe, sample_shift)
    if len(values) and (int(values[-1]) >= universe or np.any(values[1:] < values[:-1])):
        raise ValueError("Elias-Fano input must be sorted and below its universe")
    words = np.zeros(layout.words, dtype=np.uint64)
    _encode(values, layout.low_bits, layout.buckets, words, layout.low_words, layout.high_words, sample_shift)
    return layout, words



@nb.njit(cache=True, nogil=True)
def _bucket_start(words: np.ndarray, high_base: Int, sample_base: Int, shift: Int, bucket: Int) -> Int:
    """Bit position (relative to the high part) where bucket ``bucket``'s ones begin.

    Every scan stops at the end of the high part, so a damaged file read without
    verification gives wrong answers at worst, never a read outside the mapped words.
    """
    limit = sample_base - high_base
    sample = bucket >> shift
    position = _sample(words, high_base, sample_base, sample)
    need = bucket - (sample << shift)
    word_no = position >> 6
    if need == 0 or word_no >= limit or position < 0:
        end = limit << 6
        return end if position > end else (position if position > 0 else np.int64(0))
    zeros = (~words[high_base + word_no]) >> np.uint64(position & 63)
    base = position
    while True:
        count = popcount(zeros)
        if count >= need:
            return base + select(zeros, need - 1) + 1
        need -= count
        word_no += 1
        if word_no >= limit:
            return limit << 6
        base = word_no << 6
        zeros = ~words[high_base + word_no]


@nb.njit(cache=True, nogil=True)
def _next_bit(words: np.ndarray, high_base: Int, sample_base: Int, position: Int, one: bool) -> Int:
    """Position of the first one (or zero) at or after ``position`` in the high part, or its end."""
    limit = sample_base - high_base
    word_no = position >> 6
    if word_no >= limit:
        return limit << 6
    flip = np.uint64(0) if one else _ALL
    bits = (words[high_base + word_no] ^ flip) >> np.uint64(position & 63)
    if bits:
        return position + trailing_zeros(bits)
    word_no += 1
    while word_no < limit and words[high_base + word_no] ^ flip == 0:
        word_no += 1
    if word_no >= limit:
        return limit << 6
    return (word_no << 6) + trailing_zeros(words[high_base + word_no] ^ flip)


@nb.njit(cache=True, nogil=True)
def _lower_bound(
    words: np.ndarray, count: Int, low_bits: Int, buckets: Int, high_base: Int, sample_base: Int, shift: Int, value: np.uint64
) -> tuple[Int, Int]:
    """(rank of the first value >= ``value``, a high-part position at or before that value's one).

    The position is the value's own one when it lies in ``value``'s bucket, else the zero
    that closes the bucket; the next one from there is the value's. Past the last bucket
    the rank is ``count`` and the position -1.
    """
    high = value >> np.uint64(low_bits)
    if high >= np.uint64(buckets):
        return count, -1
    bucket = np.int64(high)
    start = _bucket_start(words, high_base, sample_base, shift, bucket)
    end = _next_bit(words, high_base, sample_base, start, False)
    target = value & ((_U1 << np.uint64(low_bits)) - _U1) if low_bits else np.uint64(0)
    rank = start - bucket
    for position in range(start, end):
        if read_packed(words, low_bits, rank) >= target:
            return rank, position
        rank += 1
    return rank, end


@nb.njit(cache=True, nogil=True)
def _find_one(
    words: np.ndarray, count: Int, low_bits: Int, buckets: Int, high_base: Int, sample_base: Int, shift: Int, value: np.uint64
) -> Int:
    """Rank of ``value`` among the (distinct) values, or -1 where it is absent.

    The first value >= ``value`` is ``value`` itself exactly when ``_lower_bound`` stopped
    on a one (a value of ``value``'s bucket, not the zero closing it) with equal low bits.
    """
    rank, position = _lower_bound(words, count, low_bits, buckets, high_base, sample_base, shift, value)
    if rank >= count or position < 0 or position >= (sample_base - high_base) << 6:
        return -1
    if not (words[high_base + (position >> 6)] >> np.uint64(position & 63)) & _U1:
        return -1
    target = value & ((_U1 << np.uint64(low_bits)) - _U1) if low_bits else np.uint64(0)
    return rank if read_packed(words, low_bits, rank) == target else -1


@nb.njit(cache=True, nogil=True)
def _find_many(
    words: np.ndarray, count: Int, low_bits: Int, buckets: Int, high_base: Int, sample_base: Int, shift: Int, needles: np.ndarray
) -> np.ndarray:
    ranks = np.empty(len(needles), dtype=np.int64)
    for i in range(len(needles)):
        ranks[i] = _find_one(words, count, low_bits, buckets, high_base, sample_base, shift, needles[i])
    return ranks


@nb.njit(cache=True, nogil=True)
def _row_bounds_one(
    words: np.ndarray, count: Int, low_bits: Int, buckets: Int, high_base: Int, sample_base: Int, shift: Int,
    row: Int, width: np.uint64, cap: Int,
) -> tuple[Int, Int]:
    """The ranks [start, stop) of the values in [row * width, (row + 1) * width).

    With ``cap`` > 0 the stop is at most ``start + cap``: the df capped at ``cap``, which is
    all a threshold ``k <= cap`` needs, and found without searching for the row's end.
    """
    low = np.uint64(row) * width
    high = low + width
    rank, position = _lower_bound(words, count, low_bits, buckets, high_base, sample_base, shift, low)
    # Most lists are short: walk the values from the first on, then search if it is long.
    walk = _SHORT_LIST if cap <= 0 or cap > _SHORT_LIST else cap
    low_shift = np.uint64(low_bits)
    stop = rank
    while stop < count and stop - rank < walk:
        position = _next_bit(words, high_base, sample_base, position + 1 if stop > rank else position, True)
        if (np.uint64(position - stop) << low_shift) | read_packed(words, low_bits, stop) >= high:
            break
        stop += 1
    if stop < count and stop - rank == _SHORT_LIST and walk == _SHORT_LIST:
        stop = _lower_bound(words, count, low_bits, buckets, high_base, sample_base, shift, high)[0]
        if cap > 0:  # a cap above the walk: the end was searched, the df is still capped
            stop = min(stop, rank + cap)
    return rank, stop


@nb.njit(cache=True, nogil=True)
def _row_bounds(
    words: np.ndarray, count: Int, low_bits: Int, buckets: Int, high_base: Int, sample_base: Int, shift: Int,
    rows: np.ndarray, width: np.uint64,
) -> tuple[np.ndarray, np.ndarray]:
    """For each row, the ranks [start, stop) of the values in [row * width, (row + 1) * width)."""
    starts = np.zeros(len(rows), dtype=np.int64)
    stops = np.zeros(len(rows), dtype=np.int64)
    for i in range(len(rows)):
        if rows[i] >= 0:
            starts[i], stops[i] = _row_bounds_one(
                words, count, low_bits, buckets, high_base, sample_base, shift, rows[i], width, 0
            )
    return starts, stops



@nb.njit(cache=True, nogil=True)
def _decode_from(
    words: np.ndarray, count: Int, low_bits: Int, buckets: Int, high_base: Int, sample_base: Int, shift: Int,
    value: np.uint64, length: Int,
) -> np.ndarray:
    """The ``length`` values from the first one >= ``value`` on."""
    out = np.empty(length, dtype=np.uint64)
    if length == 0:
        return out
    rank, position = _lower_bound(words, count, low_bits, buckets, high_base, sample_base, shift, value)
    low_shift = np.uint64(low_bits)
    for j in range(length):
        position = _next_bit(words, high_base, sample_base, position + 1 if j else position, True)
        out[j] = (np.uint64(position - rank - j) << low_shift) | read_packed(words, low_bits, rank + j)
    return out



class EliasFano:
    """A read-only coded sequence over ``words`` (for example a memory-mapped slice)."""

    def __init__(self, layout: Layout, words: np.ndarray) -> None:
        if len(words) != layout.words:
            raise ValueError(f"Elias-Fano data has {len(words)} words, its layout needs {layout.words}")
        self.layout = layout
        self.words = words
        self._args = (
            words,
            layout.count,
            layout.low_bits,
            layout.buckets,
            layout.low_words,
            layout.low_words + layout.high_words,
            layout.sample_shift,
        )

    def __len__(self) -> int:
        return self.layout.count

    @property
    def params(self) -> tuple[int, int, int, int, int, int]:
        """The layout as the compiled searches take it: count, low bits, buckets, the high
        and sample parts' first words, the sample shift."""
        return self._args[1:]

    def find(self, needles: np.ndarray) -> np.ndarray:
        """Rank of each needle among the (distinct) values, or -1 where it is absent."""
        return _find_many(*self._args, np.ascontiguousarray(needles, dtype=np.uint64))

    def row_bounds(self, rows: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
        """Rank bounds of each row's values in ``[row * width, (row + 1) * width)``; rows < 0 give (0, 0)."""
        return _row_bounds(*self._args, np.ascontiguousarray(rows, dtype=np.int64), np.uint64(width))

    def decode_from(self, value: int, length: int) -> np.ndarray:
        """``length`` consecutive values starting at the first value >= ``value``."""
        return _decode_from(*self._args, np.uint64(value), length)

    def decode_all(self) -> np.ndarray:
        return self.decode_from(0, self.layout.count)


@lru_cache(maxsize=1)
def empty_sequence() -> EliasFano:
    """A sequence of no values (the rare rows' class, which needs no row numbers, has these);
    made on first use, since coding it compiles the encoder and every spaCy pipeline imports this module."""
    layout, words = encode(np.zeros(0, dtype=np.uint64), 1)
    return EliasFano(layout, words)
