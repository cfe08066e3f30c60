"""An index level's lookups: the coding of its postings by df, and the compiled searches over its shards.

A level is stored one file per shard, and each file is Elias–Fano sequences
(``eliasfano.py``) and a packed array (``packing.py``):

* the **keys**: the sorted keyed n-gram hashes of one shard, minus the shard's base
  (a shard holds one hash range), in a universe of 2^64 / shards;
* the **postings**: ``row * documents + document`` over the rows in order, which is
  non-decreasing because rows are in key order and each posting list is sorted. The
  row's posting list is the run of values in ``[row * D, (row + 1) * D)``, so no
  offsets array is needed: a row's bounds and df come from two ``lower_bound`` calls.

  One sequence over all rows spends about ``2 + log2(rows * D / postings)`` bits on every
  posting, the same for a phrase in one document as for a word in every one. So the
  postings are coded by the row's df:

  - a row of df 1 (two thirds of the rows) is told by its flag bit (the level's
    ``.frequent`` file: df >= 2), so its one document is stored alone, in a packed array of
    ``ceil(log2 D)``-bit values indexed by the row's rank among the df-1 rows (``Packed``):
    15 bits against 16.4 in the shared sequence, and no search to find it;
  - the other rows are numbered by their rank among the flagged rows (``flag_rank``, from
    a rank directory in the flag file), which shrinks the sequences' universe threefold;
  - rows of df 2..15 keep one sequence ``rank * D + document``; an empty run there means
    a frequent row, coded in a *class* by df (``format.POSTING_CLASSES``): class ``c`` is
    the sorted ranks of its rows and their postings as ``rank_in_class * D + document``,
    which cost about ``2 + log2(D / df)`` bits each, down to two bits for a word in every
    document (``_locate``).

The coding (``encode_posting_classes``) and the searches (``ShardedLevel``) live together
because each search follows the coding step by step: a row's flag, its rank, its class.
The searches are compiled with numba, over all of a level's shards in one call.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence, Union

import numba as nb
import numpy as np
from numba import types
from numba.extending import intrinsic

from ... import _kernels  # noqa: F401  (announces a compile of these kernels)
from ..bits import prefetch
from .eliasfano import (
    KEY_SAMPLE_SHIFT,
    EliasFano,
    Layout,
    _decode_from,
    _find_one,
    _row_bounds_one,
    _sample,
    _sample_at,
    empty_sequence,
    encode,
)
from .packing import Packed, PackedArray, _rank_entry, flag_rank, flag_words_length, pack_into, read_packed

#: What the compiled loops pass around as integers: Python ints in, numpy int64 inside.
Int = Union[int, np.int64]

_U1 = np.uint64(1)
_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)


@intrinsic
def _words_pointer(typingctx: Any, address: Any) -> Any:
    """The integer ``address`` as a pointer to uint64 words, for ``numba.carray``."""
    if not isinstance(address, types.Integer):
        return None
    pointer = types.CPointer(types.uint64)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.inttoptr(args[0], context.get_value_type(pointer))

    return pointer(address), codegen


@nb.njit(cache=True, nogil=True)
def _words(table: np.ndarray, shard: Int) -> np.ndarray:
    """Shard ``shard``'s words of one table row ``(address, length)`` (see ``ShardedLevel``)."""
    pointer = _words_pointer(np.uint64(table[shard, 0]))  # type: ignore[call-arg,var-annotated]  # numba supplies the typing context
    return nb.carray(pointer, (np.int64(table[shard, 1]),))


#: The class ``_locate`` and ``_posting_bounds`` report for a row of df 1 (its document stands alone).
_SINGLE = -2


@nb.njit(cache=True, nogil=True)
def _locate(
    posting_table: np.ndarray, posting_params: np.ndarray, member_table: np.ndarray, member_params: np.ndarray,
    shard: Int, rank: Int, width: np.uint64, cap: Int, dense_floor: Int,
) -> tuple[Int, Int, Int, Int]:
    """Where one shard's flagged row (df >= 2) of rank ``rank`` among the flagged rows keeps
    its postings: (class, rank in the class, start, stop).

    Class 0 is the sequence of the rows of df 2..15, under their ranks; ``[start, stop)`` are
    the ranks of the row's values in its class's sequence, whose values are ``rank * width
    + document``. With ``cap`` > 0 the stop is at most ``start + cap``; a row absent from
    class 0 has df >= ``dense_floor``, so a ``cap`` at most that is answered as (-1, -1,
    0, cap) without searching the classes.
    """
    q = posting_params[0, shard]
    start, stop = _row_bounds_one(_words(posting_table[0], shard), q[0], q[1], q[2], q[3], q[4], q[5], rank, width, cap)
    if stop > start or posting_params.shape[0] == 1:
        return 0, rank, start, stop
    if 0 < cap <= dense_floor:
        return -1, -1, 0, cap
    for c in range(1, posting_params.shape[0]):
        m = member_params[c, shard]
        member = _find_one(_words(member_table[c], shard), m[0], m[1], m[2], m[3], m[4], m[5], np.uint64(rank))
        if member >= 0:
            q = posting_params[c, shard]
            start, stop = _row_bounds_one(_words(posting_table[c], shard), q[0], q[1], q[2], q[3], q[4], q[5], member, width, cap)
            return c, member, start, stop
    return 0, rank, start, start  # in no class: only a damaged, unverified file gets here


#: Searches between the first loads of one and the search itself (``_lookup_sharded``, ``_posting_bounds``).
_PREFETCH_DISTANCE = 8


@nb.njit(cache=True, nogil=True)
def _prefetch_sample(table: np.ndarray, params: np.ndarray, shard: Int, value: np.uint64) -> None:
    """First loads of a search for ``value`` in shard ``shard``'s sequence of ``table`` (layouts
    ``params``, as ``EliasFano.params``): the sample word of its bucket."""
    p = params[shard]
    bucket = np.int64(value >> np.uint64(p[1]))
    if bucket < p[2]:
        prefetch(table[shard, 0] + np.uint64(8 * _sample_at(p[3], p[4], bucket >> p[5])[0]))  # type: ignore[call-arg]  # numba supplies the typing context


@nb.njit(cache=True, nogil=True)
def _prefetch_words(table: np.ndarray, params: np.ndarray, shard: Int, value: np.uint64) -> Int:
    """Second loads of that search, once its sample word is in cache: the high-bit word the
    sample points to and the low-bit word at the rank it predicts; that rank (an estimate)."""
    p = params[shard]
    bucket = np.int64(value >> np.uint64(p[1]))
    if bucket >= p[2]:
        return p[0]
    sample = bucket >> p[5]
    position = _sample(_words(table, shard), p[3], p[4], sample)
    address = table[shard, 0]
    rank = position - (sample << p[5]) + ((bucket - (sample << p[5])) * p[0]) // max(1, p[2])
    prefetch(address + np.uint64(8 * (p[3] + (position >> 6))))  # type: ignore[call-arg]  # numba supplies the typing context
    prefetch(address + np.uint64(8 * ((rank * p[1]) >> 6)))
    return rank


@nb.njit(cache=True, nogil=True)
def _lookup_sharded(
    key_table: np.ndarray, key_params: np.ndarray, posting_table: np.ndarray, posting_params: np.ndarray,
    member_table: np.ndarray, member_params: np.ndarray, frequent_table: np.ndarray, row_base: np.ndarray,
    shard_bits: Int, width: np.uint64, dense_floor: Int, keys: np.ndarray, cap: Int,
) -> tuple[np.ndarray, np.ndarray]:
    """Row (-1 when absent) and df (capped at ``cap`` > 0) of each key, over a level's shards.

    Each key goes to the shard named by its top ``shard_bits`` bits and is searched there
    without those bits, in one compiled call whatever the number of shards. At ``cap == 2``
    the df comes from the row's frequent bit (df >= 2), not from the postings.

    A lookup is a chain of dependent loads from a large mapped file (the bucket's sample,
    its high bits, the low bits at its rank, the frequent bit), each a likely cache miss.
    So the loads of later keys are started early: ``2 * _PREFETCH_DISTANCE`` keys ahead the
    sample word, ``_PREFETCH_DISTANCE`` ahead the high-bit word it points to and the low-bit
    and frequent words at the rank it predicts; the search itself is unchanged. The
    posting bounds of any other df are searched afterwards the same way (``_posting_bounds``).
    """
    count = len(keys)
    rows = np.full(count, -1, dtype=np.int64)
    ranks = np.full(count, -1, dtype=np.int64)
    shards = np.zeros(count, dtype=np.int64)
    df = np.zeros(count, dtype=np.int64)
    low_mask = _ALL >> np.uint64(shard_bits) if shard_bits else _ALL
    for i in range(count):
        shards[i] = np.int64(keys[i] >> np.uint64(64 - shard_bits)) if shard_bits else np.int64(0)
    for step in range(count + 2 * _PREFETCH_DISTANCE):
        if step < count:
            _prefetch_sample(key_table, key_params, shards[step], keys[step] & low_mask)
        ahead = step - _PREFETCH_DISTANCE
        if 0 <= ahead < count:
            shard = shards[ahead]
            rank = _prefetch_words(key_table, key_params, shard, keys[ahead] & low_mask)
            if cap == 2:
                prefetch(frequent_table[shard, 0] + np.uint64(8 * (rank >> 6)))  # type: ignore[call-arg]  # numba supplies the typing context
        i = step - 2 * _PREFETCH_DISTANCE
        if i < 0:
            continue
        shard = shards[i]
        p = key_params[shard]
        rank = _find_one(_words(key_table, shard), p[0], p[1], p[2], p[3], p[4], p[5], keys[i] & low_mask)
        if rank < 0:
            continue
        ranks[i] = rank
        rows[i] = rank + row_base[shard]
        if cap == 2:
            frequent = _words(frequent_table, shard)
            df[i] = np.int64(1 + ((frequent[rank >> 6] >> np.uint64(rank & 63)) & _U1))
    if cap != 2:
        _posting_bounds(
            posting_table, posting_params, member_table, member_params, frequent_table, key_params, shards, ranks, width,
            cap, dense_floor, df, np.zeros(count, dtype=np.int64), np.zeros(count, dtype=np.int64),
        )
    return rows, df


@nb.njit(cache=True, nogil=True)
def _posting_bounds(
    posting_table: np.ndarray, posting_params: np.ndarray, member_table: np.ndarray, member_params: np.ndarray,
    frequent_table: np.ndarray, key_params: np.ndarray, shards: np.ndarray, rows: np.ndarray, width: np.uint64, cap: Int,
    dense_floor: Int, df: np.ndarray, classes: np.ndarray, class_ranks: np.ndarray,
) -> None:
    """For shard ``shards[i]``'s row ``rows[i]`` (-1: none): ``df[i]`` its (capped) df and
    ``classes[i]``, ``class_ranks[i]`` where its postings are: ``_SINGLE`` and its rank
    among the df-1 rows (its flag is clear), else where ``_locate`` found it.

    The loads of later rows are started early (``_lookup_sharded``): ``3 * _PREFETCH_DISTANCE``
    rows ahead the flag word and its rank directory entry, then the sample and the words
    of the search in the df 2..15 rows' sequence at the rank they give.
    """
    count = len(rows)
    rare, rare_params = posting_table[0], posting_params[0]
    ranks = np.zeros(count, dtype=np.int64)  # flagged: rank among the flagged rows; else -1 - rank among the others
    for step in range(count + 3 * _PREFETCH_DISTANCE):
        if step < count and rows[step] >= 0:
            address, row = frequent_table[shards[step], 0], rows[step]
            prefetch(address + np.uint64(8 * (row >> 6)))  # type: ignore[call-arg]  # numba supplies the typing context
            prefetch(address + np.uint64(8 * _rank_entry(key_params[shards[step], 0], row)))
        j = step - _PREFETCH_DISTANCE
        if 0 <= j < count and rows[j] >= 0:
            flags, row = _words(frequent_table, shards[j]), rows[j]
            flagged = flag_rank(flags, key_params[shards[j], 0], row)
            if (flags[row >> 6] >> np.uint64(row & 63)) & _U1:
                ranks[j] = flagged
                _prefetch_sample(rare, rare_params, shards[j], np.uint64(flagged) * width)
            else:
                ranks[j] = -1 - (row - flagged)
        j = step - 2 * _PREFETCH_DISTANCE
        if 0 <= j < count and rows[j] >= 0 and ranks[j] >= 0:
            _prefetch_words(rare, rare_params, shards[j], np.uint64(ranks[j]) * width)
        i = step - 3 * _PREFETCH_DISTANCE
        if i < 0 or rows[i] < 0:
            continue
        if ranks[i] < 0:
            classes[i], class_ranks[i], df[i] = _SINGLE, -1 - ranks[i], 1
        else:
            classes[i], class_ranks[i], start, stop = _locate(
                posting_table, posting_params, member_table, member_params, shards[i], ranks[i], width, cap, dense_floor
            )
            df[i] = stop - start




@nb.njit(cache=True, nogil=True)
def _rows_documents(
    posting_table: np.ndarray, posting_params: np.ndarray, member_table: np.ndarray, member_params: np.ndarray,
    frequent_table: np.ndarray, key_params: np.ndarray, single_table: np.ndarray, single_widths: np.ndarray,
    row_base: np.ndarray, width: np.uint64, rows: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """The posting lists of ``rows`` (level-wide row numbers, valid): each row's length, and
    its documents concatenated in the order of ``rows``."""
    lengths = np.zeros(len(rows), dtype=np.int64)
    classes = np.zeros(len(rows), dtype=np.int64)
    ranks = np.zeros(len(rows), dtype=np.int64)
    shards = np.searchsorted(row_base, rows, side="right") - 1
    _posting_bounds(
        posting_table, posting_params, member_table, member_params, frequent_table, key_params, shards,
        rows - row_base[shards], width, 0, 0, lengths, classes, ranks,
    )
    documents = np.empty(lengths.sum(), dtype=np.int64)
    at = 0
    for i in range(len(rows)):
        if classes[i] == _SINGLE:
            documents[at] = np.int64(read_packed(_words(single_table, shards[i]), single_widths[shards[i]], ranks[i]))
            at += 1
            continue
        q = posting_params[classes[i], shards[i]]
        low = np.uint64(ranks[i]) * width
        values = _decode_from(_words(posting_table[classes[i]], shards[i]), q[0], q[1], q[2], q[3], q[4], q[5], low, lengths[i])
        documents[at : at + lengths[i]] = (values - low).astype(np.int64)
        at += lengths[i]
    return lengths, documents



class ShardedLevel:
    """One level's key sequences, posting classes and flag files, one of each per shard.

    A compiled loop cannot take a Python list of arrays (numba's typed list costs over a
    second to set up in every process), so each kind of array is passed as a table of
    ``(address, length)`` rows that the kernel views with ``numba.carray``; this object
    holds the arrays, which keeps every address valid. ``lookup`` searches the keys as
    given: a repeated key's second search reads lines already in cache, which costs less
    than the sort that would find the repeats.

    ``postings[s]`` is shard ``s``'s posting classes (``PostingClasses``), ``frequent[s]``
    its flag file (``flag_words``: df >= 2, with the rank directory); the lowest df of each
    class of frequent rows is in ``class_floors`` (module docstring).
    """

    def __init__(
        self, keys: Sequence[EliasFano], postings: Sequence[PostingClasses], frequent: Sequence[np.ndarray], shard_bits: int,
        width: int, class_floors: Sequence[int] = (),
    ) -> None:
        if len(keys) != 1 << shard_bits or len(postings) != len(keys) or len(frequent) != len(keys):
            raise ValueError(f"{len(keys)} key, {len(postings)} posting and {len(frequent)} flag shards for {1 << shard_bits} shards")
        if any(len(flags) != flag_words_length(len(k)) for k, flags in zip(keys, frequent)):
            raise ValueError("a shard's flag file does not have one bit per key and its rank directory")
        if any(len(classes.dense) != len(class_floors) for classes in postings):
            raise ValueError(f"a shard does not have the {len(class_floors)} posting classes of its level")
        self.shard_bits = shard_bits
        self.row_base = np.cumsum([0, *(len(k) for k in keys)]).astype(np.int64)
        self.width = np.uint64(max(1, width))
        self._dense_floor = min(class_floors, default=0)
        self._held: list[np.ndarray] = []
        self._key_table = self._address_table([k.words for k in keys])
        self._frequent_table = self._address_table(frequent)
        self._key_params = np.array([k.params for k in keys], dtype=np.int64)
        self._single_table = self._address_table([classes.singles.words for classes in postings])
        self._single_widths = np.array([classes.singles.layout.width for classes in postings], dtype=np.int64)
        # Per class (0: the rows of df 2..15), per shard; class 0 has no member rows (an empty placeholder).
        members = [[empty_sequence()] * len(keys), *([classes.dense[c][0] for classes in postings] for c in range(len(class_floors)))]
        sequences = [[classes.rare for classes in postings], *([classes.dense[c][1] for classes in postings] for c in range(len(class_floors)))]
        self._posting_table = np.stack([self._address_table([p.words for p in part]) for part in sequences])
        self._posting_params = np.array([[p.params for p in part] for part in sequences], dtype=np.int64)
        self._member_table = np.stack([self._address_table([m.words for m in part]) for part in members])
        self._member_params = np.array([[m.params for m in part] for part in members], dtype=np.int64)

    def _address_table(self, arrays: Sequence[np.ndarray]) -> np.ndarray:
        """``(data address, length)`` of each array, which this object holds from now on
        (an empty array's words are never read)."""
        held = [np.ascontiguousarray(array, dtype=np.uint64) for array in arrays]
        self._held += held
        return np.array([(array.ctypes.data, len(array)) for array in held], dtype=np.uint64).reshape(-1, 2)

    def documents(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The posting lists of ``rows`` (valid level-wide rows): lengths, and documents concatenated."""
        return _rows_documents(
            self._posting_table, self._posting_params, self._member_table, self._member_params, self._frequent_table,
            self._key_params, self._single_table, self._single_widths, self.row_base, self.width,
            np.asarray(rows, dtype=np.int64),
        )

    def lookup(self, needles: np.ndarray, cap: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """Row of each needle (-1 when absent) and its df, capped at ``cap`` when ``cap`` > 0."""
        return _lookup_sharded(
            self._key_table, self._key_params, self._posting_table, self._posting_params, self._member_table,
            self._member_params, self._frequent_table, self.row_base, self.shard_bits, self.width, self._dense_floor,
            np.ascontiguousarray(needles, dtype=np.uint64), cap,
        )


@dataclass(frozen=True)
class PostingClasses:
    """One shard-level's postings (module docstring): the df 2..15 rows' sequence, the df-1
    rows' documents and, per class of frequent rows, their ranks and postings."""

    rare: EliasFano
    singles: PackedArray
    dense: tuple[tuple[EliasFano, EliasFano], ...] = ()

    @classmethod
    def from_parts(cls, parts: Sequence[Union[EliasFano, PackedArray]]) -> "PostingClasses":
        """From the parts ``encode_posting_classes`` codes, in its order (``open_part`` each)."""
        rare, *dense, singles = parts
        if not isinstance(rare, EliasFano) or not isinstance(singles, PackedArray) or len(dense) % 2:
            raise ValueError("posting parts are not a sequence, class pairs and the df-1 documents")
        return cls(rare, singles, tuple(zip(dense[0::2], dense[1::2])))  # type: ignore[arg-type]  # checked by the ShardedLevel


def open_part(layout: Union[Layout, Packed], words: np.ndarray) -> Union[EliasFano, PackedArray]:
    """A coded part of a level file over its words."""
    return EliasFano(layout, words) if isinstance(layout, Layout) else PackedArray(layout, words)


@nb.njit(cache=True, nogil=True)
def _class_values(
    df: np.ndarray, classes: np.ndarray, postings: np.ndarray, width: np.uint64, class_count: Int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each class's sequence values, concatenated class by class (and where each class's
    begin), and the df-1 rows' documents (class -1), in one pass over the posting lists:
    ``rank * width + document`` for class 0 (the rank among rows of df >= 2),
    ``rank_in_class * width + document`` for the others."""
    starts = np.zeros(class_count + 1, dtype=np.int64)
    singles = 0
    for row in range(len(df)):
        if classes[row] < 0:
            singles += 1
        else:
            starts[classes[row] + 1] += df[row]
    starts = np.cumsum(starts)
    filled = starts[:-1].copy()
    ranks = np.zeros(class_count, dtype=np.int64)
    values = np.empty(starts[-1], dtype=np.uint64)
    documents = np.empty(singles, dtype=np.uint64)
    at = 0
    single = 0
    flagged = 0
    for row in range(len(df)):
        c = classes[row]
        if c < 0:
            documents[single] = postings[at]
            single += 1
        else:
            base = np.uint64(flagged if c == 0 else ranks[c]) * width
            ranks[c] += 1
            flagged += 1
            for j in range(df[row]):
                values[filled[c] + j] = base + np.uint64(postings[at + j])
            filled[c] += df[row]
        at += df[row]
    return values, starts, documents


def encode_posting_classes(
    df: np.ndarray, postings: np.ndarray, width: int, class_floors: Sequence[int]
) -> list[tuple[Union[Layout, Packed], np.ndarray]]:
    """Code one level's posting lists (concatenated in row order, ``df`` each, all >= 1) by
    df: the df 2..15 rows' sequence, each class's ranks and postings, then the df-1 rows'
    documents (``PostingClasses``, module docstring)."""
    if list(class_floors) != sorted(class_floors) or min(class_floors, default=3) < 3:
        raise ValueError(f"class floors must ascend from 3 up, got {class_floors}")
    df = np.asarray(df, dtype=np.int64)
    flagged = df >= 2
    classes = np.where(flagged, np.searchsorted(np.asarray(class_floors, dtype=np.int64), df, side="right"), -1)
    values, starts, singles = _class_values(df, classes, np.asarray(postings), np.uint64(width), len(class_floors) + 1)
    rank = np.cumsum(flagged) - 1  # each flagged row's rank among the flagged rows
    count = int(np.count_nonzero(flagged))
    parts: list[tuple[Union[Layout, Packed], np.ndarray]] = []
    for c in range(len(class_floors) + 1):
        own = values[starts[c] : starts[c + 1]]
        if c == 0:
            parts.append(encode(own, max(1, count * width)))
            continue
        members = rank[classes == c]
        parts.append(encode(members.astype(np.uint64), max(1, count), KEY_SAMPLE_SHIFT))
        parts.append(encode(own, max(1, len(members) * width)))
    layout = Packed.for_documents(len(singles), width)
    words = np.zeros(layout.words, dtype=np.uint64)
    pack_into(words, 0, singles, layout.width)
    parts.append((layout, words))
    return parts


def encode_rows(df: np.ndarray, postings: np.ndarray, width: int) -> tuple[Layout, np.ndarray]:
    """Code posting lists (concatenated in row order, ``df`` each) as one sequence ``row * width + document``
    (a delta's, which answers through ``EliasFano.row_bounds``)."""
    rows = np.repeat(np.arange(len(df), dtype=np.uint64), np.asarray(df, dtype=np.int64))
    return encode(rows * np.uint64(width) + np.asarray(postings, dtype=np.uint64), max(1, len(df) * width))
