"""Values packed end to end in uint64 words: fixed-width fields and one-bit flags with ranks.

The index stores three kinds of packed bits, which every other part reads through here:
the low parts of its Elias–Fano sequences (``eliasfano.py``), the documents of its df-1
rows and the tokens of its forward store (``Packed``: ``count`` values of ``width`` bits
each, one spare word at the end so a value that straddles two words is read with two
loads), and its flag files (``flag_words``: one bit per row, and a rank directory that
gives a row's rank among the set rows from one cache line).

Apart from the sequences because the forward store and the flag files are no sequences:
they need packing and ranks alone. The kernels are compiled with numba: each is a loop
over bits that numpy cannot express as whole-array operations.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import numba as nb
import numpy as np

from ... import _kernels  # noqa: F401  (announces a compile of these kernels)
from ..bits import popcount

#: What the compiled loops pass around as integers: Python ints in, numpy int64 inside.
Int = Union[int, np.int64]

_U1 = np.uint64(1)


@dataclass(frozen=True)
class Packed:
    """The layout of ``count`` values of ``width`` bits packed end to end (the df-1 rows' documents)."""

    count: int
    width: int

    def __post_init__(self) -> None:
        if self.count < 0 or not 1 <= self.width <= 63:
            raise ValueError(f"invalid packed layout {self}")

    @classmethod
    def for_documents(cls, count: int, documents: int) -> "Packed":
        """``count`` document numbers below ``documents``."""
        return cls(count, max(1, (max(1, documents) - 1).bit_length()))

    @property
    def words(self) -> int:
        return packed_words(self.count, self.width)

    def to_dict(self) -> dict[str, int]:
        return {"count": self.count, "width": self.width}


@dataclass(frozen=True)
class PackedArray:
    """A read-only packed array over ``words`` (for example a memory-mapped slice)."""

    layout: Packed
    words: np.ndarray

    def __post_init__(self) -> None:
        if len(self.words) != self.layout.words:
            raise ValueError(f"packed data has {len(self.words)} words, its layout needs {self.layout.words}")



#: log2 of the rows per entry of a flag file's rank directory: 512 rows, 8 words, one cache line.
_RANK_BLOCK_SHIFT = 9


def flag_words(flags: np.ndarray) -> np.ndarray:
    """The words of a flag file: one bit per row (bit ``r % 64`` of word ``r // 64``), then its
    rank directory, the set bits before each block of 512 rows as uint32s, two to a word.

    A row's rank among the set rows (``flag_rank``) is then one directory entry and the
    popcounts of at most 8 words of the same cache line.
    """
    bits = np.packbits(np.asarray(flags, dtype=bool), bitorder="little")
    words = np.concatenate([bits, np.zeros(-len(bits) % 8, dtype=np.uint8)]).view("<u8")
    counts = np.bitwise_count(np.concatenate([words, np.zeros(-len(words) % 8, dtype=np.uint64)])).reshape(-1, 8).sum(axis=1)
    before = (np.cumsum(counts) - counts).astype("<u4")
    directory = np.concatenate([before, np.zeros(len(before) % 2, dtype="<u4")]).view("<u8")
    return np.concatenate([words, directory])


def flag_words_length(rows: int) -> int:
    """Words of the flag file of ``rows`` rows (``flag_words``)."""
    words = (rows + 63) >> 6
    blocks = (words + 7) >> 3
    return words + (blocks + 1) // 2


@nb.njit(cache=True, nogil=True)
def _rank_entry(rows: Int, row: Int) -> Int:
    """The word of a flag file of ``rows`` rows that holds ``row``'s rank directory entry
    (two uint32 entries to a word, after the flag words: ``flag_words``)."""
    return ((rows + 63) >> 6) + (row >> (_RANK_BLOCK_SHIFT + 1))


@nb.njit(cache=True, nogil=True)
def flag_rank(flags: np.ndarray, rows: Int, row: Int) -> Int:
    """Set flags among rows ``[0, row)`` of a flag file of ``rows`` rows (``flag_words``), ``row < rows``.

    A damaged, unverified file gives a wrong rank at worst, never a read outside ``flags``.
    """
    block = row >> _RANK_BLOCK_SHIFT
    entry = _rank_entry(rows, row)
    if row < 0 or entry >= len(flags):
        return np.int64(0)
    rank = np.int64((flags[entry] >> np.uint64(32 * (block & 1))) & np.uint64(0xFFFFFFFF))
    for word in range(block << (_RANK_BLOCK_SHIFT - 6), row >> 6):
        rank += popcount(flags[word])
    if row & 63:
        rank += popcount(flags[row >> 6] & ((_U1 << np.uint64(row & 63)) - _U1))
    return rank



@nb.njit(cache=True, nogil=True)
def read_packed(words: np.ndarray, low_bits: Int, rank: Int) -> np.uint64:
    """Value ``rank`` of the ``low_bits``-bit values packed in ``words`` (0 when ``low_bits`` is 0).

    A damaged, unverified file gives 0 at worst, never a read outside ``words``.
    """
    if low_bits == 0:
        return np.uint64(0)
    bit = rank * low_bits
    word, offset = bit >> 6, bit & 63
    if word < 0 or word + 1 >= len(words):  # only a damaged, unverified file gets here
        return np.uint64(0)
    value = words[word] >> np.uint64(offset)
    if offset + low_bits > 64:
        value |= words[word + 1] << np.uint64(64 - offset)
    return value & ((_U1 << np.uint64(low_bits)) - _U1)



@nb.njit(cache=True, nogil=True)
def _pack_into(words: np.ndarray, first: Int, values: np.ndarray, width: Int) -> None:
    mask = (_U1 << np.uint64(width)) - _U1
    for i in range(len(values)):
        bit = (first + i) * width
        word, offset = bit >> 6, bit & 63
        value = values[i] & mask
        words[word] |= value << np.uint64(offset)
        if offset + width > 64:
            words[word + 1] |= value >> np.uint64(64 - offset)


@nb.njit(cache=True, nogil=True)
def _unpack(words: np.ndarray, start_bit: Int, count: Int, width: Int) -> np.ndarray:
    out = np.empty(count, dtype=np.uint64)
    mask = (_U1 << np.uint64(width)) - _U1
    for i in range(count):
        bit = start_bit + i * width
        word, offset = bit >> 6, bit & 63
        value = words[word] >> np.uint64(offset)
        if offset + width > 64:
            value |= words[word + 1] << np.uint64(64 - offset)
        out[i] = value & mask
    return out


def packed_words(count: int, width: int) -> int:
    """Words that hold ``count`` values of ``width`` bits (one spare, as the low part of a sequence)."""
    return (count * width + 63) // 64 + 1


def pack_into(words: np.ndarray, first: int, values: np.ndarray, width: int) -> None:
    """OR ``values`` (each below ``2 ** width``) into zeroed ``words`` as values ``first``, ``first + 1``, ...

    Consecutive calls with ascending ``first`` pack a long sequence piece by piece.
    """
    if not 1 <= width <= 63:
        raise ValueError(f"packed width must be 1..63 bits, got {width}")
    values = np.ascontiguousarray(values, dtype=np.uint64)
    if len(values) and int(values.max()) >> width:
        raise ValueError(f"a value does not fit {width} bits")
    _pack_into(words, first, values, width)


def unpack(words: np.ndarray, start_bit: int, count: int, width: int) -> np.ndarray:
    """``count`` values of ``width`` bits packed from bit ``start_bit`` of ``words`` on."""
    if start_bit < 0 or count < 0 or start_bit + count * width > 64 * (len(words) - 1):
        raise ValueError(f"{count} values from bit {start_bit} are outside the packed words")
    return _unpack(np.ascontiguousarray(words, dtype=np.uint64), start_bit, count, width)
