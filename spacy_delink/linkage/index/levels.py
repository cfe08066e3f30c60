"""Reading a level of the index: its shards (and deltas) answering lookups and posting lists.

The build (``shards.py``) writes one Elias–Fano coded file per shard and level; here those
files, mapped, answer ``lookup`` (row and df of each key) and ``documents`` (one row's
posting list), routing every key to the one shard that can hold it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numba as nb
import numpy as np

from ... import _kernels  # noqa: F401  (announces a compile of these kernels)
from .eliasfano import EliasFano, Layout
from .lookup import PostingClasses, ShardedLevel, open_part
from .manifest import CodedFile
from .packing import Packed, PackedArray
from .ngram_keys import TWIN


class Level:
    """The stored n-grams of one length, across shards: ``lookup`` and ``documents``.

    A key is routed by its top ``shard_bits`` bits to the one shard that can hold it, so a
    lookup costs one Elias–Fano search per key whatever the number of shards. Rows are
    numbered shard after shard (``row_base``); a row's posting list is decoded only when
    ``documents`` asks for it.
    """

    def __init__(
        self, keys: list[EliasFano], postings: list[PostingClasses], frequent: list[np.ndarray],
        shard_bits: int, documents: int, class_floors: Sequence[int],
    ) -> None:
        self.width = max(1, documents)
        self._search = ShardedLevel(keys, postings, frequent, shard_bits, self.width, class_floors)  # checks the shard counts
        self._keys = keys
        self.shard_bits = shard_bits
        self.row_base = self._search.row_base

    def __len__(self) -> int:
        return int(self.row_base[-1])

    def lookup(self, keys: np.ndarray, cap: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """Row of each key (-1 when not stored) and its document frequency (0), capped at
        ``cap`` when ``cap`` > 0 (a threshold k <= cap needs no more, and it is cheaper).

        Repeated keys are searched again, from cache (``ShardedLevel``).
        """
        return self._search.lookup(keys, cap)

    def documents(self, row: int) -> np.ndarray:
        """Document numbers of one row's posting list (sorted)."""
        return self.documents_many(np.array([row], dtype=np.int64))[0]

    def documents_many(self, rows: np.ndarray) -> list[np.ndarray]:
        """``documents`` of each row, decoded in one compiled call."""
        return split_documents(*self.documents_flat(rows))

    def documents_flat(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The posting lists of ``rows``: each one's length, and their documents concatenated
        (int64), in one compiled call: a detection asks for every candidate's and uses them
        concatenated, so they are never split into an array per row."""
        rows = np.asarray(rows, dtype=np.int64)
        if not len(rows):
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        if not (0 <= int(rows.min()) and int(rows.max()) < len(self)):
            raise IndexError(f"a row of {rows.tolist()} is not in this level ({len(self)} rows)")
        return self._search.documents(rows)

    def keys_by_row(self) -> np.ndarray:
        """Every stored key in row order, decoded (for updates and compaction, not for queries)."""
        parts = [
            coded.decode_all() + (np.uint64(shard << (64 - self.shard_bits)) if self.shard_bits else np.uint64(0))
            for shard, coded in enumerate(self._keys)
        ]
        return np.concatenate(parts)


class TwinLevel:
    """A level as the search reading reads it, where search rows that repeat their exact twin are not stored.

    A build with both readings writes a search n-gram whose documents are its exact
    twin's (the same strings: the key less the family bit, ``ngram_keys.TWIN``) only as the
    twin's row, with a bit in the twin file (``shards.write_level``). A search key is
    therefore looked up as its twin first — one search for the shared n-grams, most of
    them — and as itself only where the twin does not answer for it.
    """

    def __init__(self, level: Level, twin_words: list[np.ndarray]) -> None:
        self.level = level
        self._row_base = np.asarray(level.row_base, dtype=np.int64)
        self._word_base = np.cumsum([0, *(len(words) for words in twin_words)]).astype(np.int64)
        self._words = np.concatenate(twin_words) if twin_words else np.zeros(0, dtype=np.uint64)

    def __len__(self) -> int:
        return len(self.level)

    def lookup(self, keys: np.ndarray, cap: int = 0, lent: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """Row of each search-reading key (-1 when not stored) and its df (capped as ``Level.lookup``).

        ``lent`` (keys, rows, df: the exact reading's lookups of this level for the same text,
        at the same cap) answers the twins it already looked up; only the others are searched.
        """
        keys = np.ascontiguousarray(keys, dtype=np.uint64)
        twin_keys = keys ^ TWIN
        if lent is None or not len(lent.keys):
            rows, df = self.level.lookup(twin_keys, cap)
        else:
            order = np.argsort(lent.keys)
            at = order[np.minimum(np.searchsorted(lent.keys, twin_keys, sorter=order), len(order) - 1)]
            known = lent.keys[at] == twin_keys
            rows = np.where(known, lent.rows[at], -1).astype(np.int64)
            df = np.where(known, lent.df[at], 0).astype(np.int64)
            unknown = np.flatnonzero(~known)
            if len(unknown):
                rows[unknown], df[unknown] = self.level.lookup(twin_keys[unknown], cap)
        own = ~_twin_bits(rows, self._row_base, self._word_base, self._words)
        if own.any():
            rows[own], df[own] = self.level.lookup(keys[own], cap)
        return rows, df

    def documents(self, row: int) -> np.ndarray:
        return self.level.documents(row)

    def documents_many(self, rows: np.ndarray) -> list[np.ndarray]:
        return self.level.documents_many(rows)

    def documents_flat(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.level.documents_flat(rows)


@nb.njit(cache=True, nogil=True)
def _twin_bits(rows: np.ndarray, row_base: np.ndarray, word_base: np.ndarray, words: np.ndarray) -> np.ndarray:
    """Whether each row (-1: none) answers for its search twin: its bit in its shard's twin file."""
    found = np.zeros(len(rows), dtype=np.bool_)
    for i in range(len(rows)):
        row = rows[i]
        if row < 0:
            continue
        shard = np.searchsorted(row_base, row, side="right") - 1
        local = row - row_base[shard]
        found[i] = (words[word_base[shard] + (local >> 6)] >> np.uint64(local & 63)) & np.uint64(1) == 1
    return found


def split_documents(lengths: np.ndarray, documents: np.ndarray) -> list[np.ndarray]:
    """``documents_flat``'s answer as one sorted uint32 array per row."""
    return np.split(documents.astype(np.uint32), np.cumsum(lengths)[:-1]) if len(lengths) else []


def row_documents(postings: EliasFano, row: int, width: int) -> np.ndarray:
    """The documents of one row of a ``row * width + document`` sequence (sorted): a delta's."""
    starts, stops = postings.row_bounds(np.array([row], dtype=np.int64), width)
    low = row * width
    return (postings.decode_from(low, int(stops[0] - starts[0])) - np.uint64(low)).astype(np.uint32)


@dataclass(frozen=True)
class DeltaLevel:
    """One delta's part of a level (``update.py``).

    ``keys``/``postings``: the n-grams the delta stores first, rows ``row_base`` on, coded as
    a base level's (one shard); ``additions``: the delta's documents of n-grams stored
    before it, as ``row * width + document`` over those earlier rows. ``width`` is the
    number of documents once the delta is added.
    """

    keys: EliasFano
    postings: EliasFano
    additions: EliasFano
    row_base: int
    width: int

    @property
    def stop(self) -> int:
        return self.row_base + len(self.keys)


class UpdatedLevel:
    """A base level and its deltas, answering as one level of a fresh build of the union.

    A key has one row, in the segment that stored it first (the base, or the delta that
    introduced it); its df and documents are that segment's plus every later delta's
    additions to the row. Documents are numbered base first, then delta by delta, so the
    concatenated posting list stays sorted. A lookup costs one search per segment.
    """

    def __init__(self, base: Level, deltas: list[DeltaLevel]) -> None:
        self.base = base
        self.deltas = deltas

    def __len__(self) -> int:
        return self.deltas[-1].stop if self.deltas else len(self.base)

    def lookup(self, keys: np.ndarray, cap: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """Row of each key (-1 when not stored) and its document frequency (0), capped at
        ``cap`` when ``cap`` > 0, as ``Level.lookup``."""
        keys = np.ascontiguousarray(keys, dtype=np.uint64)
        rows, df = self.base.lookup(keys, cap)
        for delta in self.deltas:
            known = np.flatnonzero(rows >= 0)
            if len(known) and len(delta.additions):
                starts, stops = delta.additions.row_bounds(rows[known], delta.width)
                df[known] += stops - starts
            missing = np.flatnonzero(rows < 0)
            if len(missing) and len(delta.keys):
                ranks = delta.keys.find(keys[missing])
                found = ranks >= 0
                starts, stops = delta.postings.row_bounds(ranks, delta.width)
                rows[missing[found]] = ranks[found] + delta.row_base
                df[missing[found]] = (stops - starts)[found]
        return rows, (np.minimum(df, cap) if cap > 0 else df)

    def documents(self, row: int) -> np.ndarray:
        """Document numbers of one row's posting list (sorted), across the segments."""
        row = int(row)
        if not 0 <= row < len(self):
            raise IndexError(f"row {row} is not in this level ({len(self)} rows)")
        if row < len(self.base):
            parts, later = [self.base.documents(row)], self.deltas
        else:
            owner = next(i for i, delta in enumerate(self.deltas) if row < delta.stop)
            delta = self.deltas[owner]
            parts, later = [row_documents(delta.postings, row - delta.row_base, delta.width)], self.deltas[owner + 1 :]
        parts += [row_documents(delta.additions, row, delta.width) for delta in later]
        return np.concatenate(parts)

    def documents_many(self, rows: np.ndarray) -> list[np.ndarray]:
        """``documents`` of each row (across the segments: row by row)."""
        return [self.documents(row) for row in np.asarray(rows, dtype=np.int64).tolist()]

    def documents_flat(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``Level.documents_flat`` across the segments."""
        lists = self.documents_many(rows)
        lengths = np.array([len(documents) for documents in lists], dtype=np.int64)
        return lengths, (np.concatenate(lists).astype(np.int64) if lists else np.zeros(0, dtype=np.int64))

    def keys_by_row(self) -> np.ndarray:
        """Every stored key in row order, decoded (for updates and compaction, not for queries)."""
        return np.concatenate([self.base.keys_by_row(), *(delta.keys.decode_all() for delta in self.deltas)])


def coded_from_words(words: np.ndarray, coded: CodedFile) -> list[EliasFano | PackedArray]:
    """The coded parts of one level file (in file order), from its words and its parts' layouts."""
    layouts = [(Packed if part.packed else Layout)(**part.fields) for part in coded.parts]
    needed = sum(layout.words for layout in layouts)
    if needed != len(words):
        raise ValueError(f"{len(words)} words, the layouts need {needed}")
    bounds = np.cumsum([0, *(layout.words for layout in layouts)]).tolist()
    return [open_part(layout, words[a:b]) for layout, a, b in zip(layouts, bounds[:-1], bounds[1:])]


def sequences(coded: Sequence[EliasFano | PackedArray]) -> list[EliasFano]:
    """``coded`` where every part must be an Elias–Fano sequence; ValueError when a manifest says otherwise."""
    checked = [part for part in coded if isinstance(part, EliasFano)]
    if len(checked) != len(coded):
        raise ValueError("a part that must be an Elias–Fano sequence is packed")
    return checked
