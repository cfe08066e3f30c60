"""From character offsets of the index's tokenization to spans of the pipeline's tokens.

The linkage core finds phrases on ``doc.text`` with its own tokenizer; a component shows
them on the pipeline's tokens. A long document can have one linkable phrase for every
two or three tokens (every phrase of a text that is itself in the collection is), so the
per-phrase cost matters: the offsets are aligned for all phrases at once with numpy
(``Doc.char_span(..., alignment_mode="expand")`` per phrase costs more than the search
itself), span attribute values are written where spaCy keeps them, in one pass, and the
spans go into their ``SpanGroup`` without a ``Span`` object each.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from itertools import repeat
from typing import Any, Sequence

import numba as nb
import numpy as np
from spacy.attrs import ORTH, SPACY  # type: ignore[import-not-found]  # a Cython module without stubs
from spacy.tokens import Doc, Span, SpanGroup

from .. import _kernels  # noqa: F401  (announces a compile of these kernels)
from .extensions import EXTENSION_MARK


class DocText:
    """``doc.text``, rebuilt from the Doc's token array and a cache of token texts.

    spaCy builds ``doc.text`` from a ``Token`` object per token, which on a long document
    costs a third as much as the whole index search. The same text is each token's
    ``orth_`` followed by one space where ``SPACY`` is set. The code points of each
    ``orth_`` are cached once, keyed by ``orth`` in a compiled hash table, so a Doc's text
    is two compiled passes over its token array and one decode: a ``dict`` of ``str``
    (one lookup and one piece per token) cost twice as much, mostly in cache misses once
    an index search has run between two documents. Texts come from the Doc's own string
    store, so the result is exactly ``doc.text``. A lock makes one cache safe to share
    between threads; it is emptied when it would pass ``limit`` texts, to bound its memory.
    """

    def __init__(self, limit: int = 1 << 18) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._empty()

    def __reduce__(self) -> tuple[type["DocText"], tuple[int]]:
        """A copy (another process) starts with an empty cache: the lock and cache stay here."""
        return DocText, (self.limit,)

    def _empty(self) -> None:
        self._slots = np.zeros(2 * 64, dtype=np.uint64)  # (orth, entry + 1) pairs; entry 0 marks a free slot
        self._orths = np.zeros(0, dtype=np.uint64)
        self._bounds = np.zeros(1, dtype=np.int64)  # entry i's code points: pool[bounds[i]:bounds[i + 1]]
        self._pool = np.zeros(0, dtype=np.uint32)

    def __call__(self, doc: Doc) -> str:
        tokens = doc.to_array([ORTH, SPACY])
        orths = np.ascontiguousarray(tokens[:, 0], dtype=np.uint64)
        spaces = np.ascontiguousarray(tokens[:, 1], dtype=np.uint64)
        with self._lock:
            entries = _cached_entries(self._slots, orths)
            if (entries < 0).any():
                self._add(doc, np.unique(orths[entries < 0]))
                entries = _cached_entries(self._slots, orths)
            codes = _text_codes(entries, spaces, self._bounds, self._pool)
        return codes.tobytes().decode("utf-32-le", "surrogatepass")

    def _add(self, doc: Doc, new: np.ndarray) -> None:
        """Cache the texts of ``new`` (distinct orths not cached); empties the cache first
        when it would pass ``limit`` (then the rest of ``doc``'s texts come back with them)."""
        if len(self._orths) + len(new) > self.limit and len(self._orths):
            self._empty()
            new = np.unique(doc.to_array(ORTH).astype(np.uint64))
        strings = doc.vocab.strings
        texts = [strings[orth] for orth in new.tolist()]
        codes = np.frombuffer("".join(texts).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
        self._bounds = np.concatenate([self._bounds, self._bounds[-1] + np.cumsum(lengths)])
        self._pool = np.concatenate([self._pool, codes])
        self._orths = np.concatenate([self._orths, new])
        slots = len(self._slots) // 2
        if 2 * len(self._orths) > slots:  # at most half full: short probes
            while 2 * len(self._orths) > slots:
                slots *= 2
            self._slots = np.zeros(2 * slots, dtype=np.uint64)
            _insert(self._slots, self._orths, 0)
        else:
            _insert(self._slots, new, len(self._orths) - len(new))


#: Spreads orths (hashes, but some are small symbol ids) over the table's slots.
_SLOT_MIX = np.uint64(0x9E3779B97F4A7C15)


@nb.njit(cache=True, nogil=True)
def _slot_of(slots: np.ndarray, orth: np.uint64) -> np.int64:
    """The slot holding ``orth``, or the free slot where it would go."""
    mask = np.uint64(len(slots) // 2 - 1)
    slot = np.int64(((orth * _SLOT_MIX) >> np.uint64(32)) & mask)
    while slots[2 * slot + 1] != 0 and slots[2 * slot] != orth:
        slot = np.int64((np.uint64(slot) + np.uint64(1)) & mask)
    return slot


@nb.njit(cache=True, nogil=True)
def _insert(slots: np.ndarray, orths: np.ndarray, first_entry: int) -> None:
    """Add ``orths`` (not in the table, which has room) as entries ``first_entry`` on."""
    for i in range(len(orths)):
        slot = _slot_of(slots, orths[i])
        slots[2 * slot] = orths[i]
        slots[2 * slot + 1] = np.uint64(first_entry + i + 1)


@nb.njit(cache=True, nogil=True)
def _cached_entries(slots: np.ndarray, orths: np.ndarray) -> np.ndarray:
    """The cache entry of each orth, -1 where it is not cached."""
    entries = np.empty(len(orths), dtype=np.int64)
    for i in range(len(orths)):
        entries[i] = np.int64(slots[2 * _slot_of(slots, orths[i]) + 1]) - 1
    return entries


@nb.njit(cache=True, nogil=True)
def _text_codes(entries: np.ndarray, spaces: np.ndarray, bounds: np.ndarray, pool: np.ndarray) -> np.ndarray:
    """The text's code points: each token's, then a space where its ``SPACY`` flag is set."""
    size = 0
    for i in range(len(entries)):
        size += bounds[entries[i] + 1] - bounds[entries[i]] + (spaces[i] != 0)
    codes = np.empty(size, dtype=np.uint32)
    at = 0
    for i in range(len(entries)):
        for j in range(bounds[entries[i]], bounds[entries[i] + 1]):
            codes[at] = pool[j]
            at += 1
        if spaces[i] != 0:
            codes[at] = 32
            at += 1
    return codes


@dataclass
class Alignment:
    """The ranges that overlap a token (``kept``, indices into the input) and their spans:
    token bounds ``[first, stop)`` and the spans' own character offsets."""

    kept: np.ndarray
    first: np.ndarray
    stop: np.ndarray
    start_char: np.ndarray
    end_char: np.ndarray

    def spans(self, doc: Doc, label: str) -> list[Span]:
        label_id = doc.vocab.strings.add(label)
        return [Span(doc, start, end, label=label_id) for start, end in zip(self.first.tolist(), self.stop.tolist())]

    def span_group(self, doc: Doc, name: str, label: str) -> SpanGroup:
        """The spans as a ``SpanGroup`` named ``name``: what ``doc.spans[name] = self.spans(doc, label)``
        stores, without a ``Span`` object per span.

        ``Span(doc, start, end)`` makes three ``Token`` objects to find its character
        offsets, which this alignment already has; a group keeps a copy of each span's
        C struct (``SpanGroup.append``), so one ``Span`` is moved over the ranges and
        appended at each: a third of the cost per span.
        """
        group = SpanGroup(doc, name=name)
        span = Span(doc, 0, 0, label=doc.vocab.strings.add(label))
        append = group.append
        for start, end, start_char, end_char in zip(
            self.first.tolist(), self.stop.tolist(), self.start_char.tolist(), self.end_char.tolist()
        ):
            span.start, span.end, span.start_char, span.end_char = start, end, start_char, end_char
            append(span)
        return group


def align(doc: Doc, starts: np.ndarray, ends: np.ndarray) -> Alignment:
    """For each character range ``[starts[i], ends[i])``, the smallest span of whole tokens
    that covers every token it overlaps (``alignment_mode="expand"``). A range that overlaps
    no token (it lies in a token's trailing space, where ``char_span`` gives an empty span)
    is left out of ``kept``."""
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    if len(doc) == 0 or not len(starts):
        empty = np.zeros(0, dtype=np.int64)
        return Alignment(empty, empty, empty, empty, empty)
    token_offsets = doc.to_array(["IDX", "LENGTH"]).astype(np.int64, copy=False)
    token_starts = token_offsets[:, 0]
    token_ends = token_starts + token_offsets[:, 1]
    first = np.searchsorted(token_ends, starts, side="right")  # first token ending after the range starts
    stop = np.searchsorted(token_starts, ends, side="left")  # tokens starting before the range ends
    kept = np.flatnonzero(first < stop)
    first, stop = first[kept], stop[kept]
    return Alignment(kept, first, stop, token_starts[first], token_ends[stop - 1])


def merge_aligned(alignment: Alignment, support: np.ndarray, readings: np.ndarray) -> tuple[Alignment, np.ndarray, np.ndarray]:
    """The distinct spans of an alignment, in text order, each with the smallest ``support``
    and the union (bitwise or) of the ``readings`` bits of the ranges that align to it.

    Two phrases can align to one span (they expand to the same tokens, or one phrase links
    under several readings): the span then holds the most severe support, never the last one written.
    """
    order = np.lexsort((alignment.end_char, alignment.start_char))
    starts, ends = alignment.start_char[order], alignment.end_char[order]
    new = np.ones(len(starts), dtype=bool)
    new[1:] = (starts[1:] != starts[:-1]) | (ends[1:] != ends[:-1])
    first = np.flatnonzero(new)
    chosen = order[first]
    merged = Alignment(alignment.kept[chosen], alignment.first[chosen], alignment.stop[chosen], starts[first], ends[first])
    if not len(first):
        return merged, np.asarray(support, dtype=np.int64)[:0], np.asarray(readings, dtype=np.int64)[:0]
    return merged, np.minimum.reduceat(np.asarray(support)[order], first), np.bitwise_or.reduceat(np.asarray(readings)[order], first)


def expanded_spans(doc: Doc, offsets: Sequence[tuple[int, int]], label: str) -> list[Span | None]:
    """``align`` for a list of ``(start, end)`` ranges: a span for each, or None where it overlaps no token."""
    ranges = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
    alignment = align(doc, ranges[:, 0], ranges[:, 1])
    spans: list[Span | None] = [None] * len(ranges)
    for i, span in zip(alignment.kept.tolist(), alignment.spans(doc, label)):
        spans[i] = span
    return spans


def set_span_values(
    doc: Doc, name: str, start_char: Sequence[int] | np.ndarray, end_char: Sequence[int] | np.ndarray, values: Sequence[Any]
) -> None:
    """``span._.<name> = value`` for the spans at these character offsets, written straight
    into ``doc.user_data``.

    This is where and how ``span._`` stores a value (keyed by the span's character
    offsets; ``extensions.carry_over`` relies on the same key), without building an
    ``Underscore`` object per span.
    """
    data: dict[Any, Any] = doc.user_data  # typed str-keyed; spaCy's own extension keys are tuples
    starts = start_char.tolist() if isinstance(start_char, np.ndarray) else start_char
    ends = end_char.tolist() if isinstance(end_char, np.ndarray) else end_char
    data.update(zip(zip(repeat(EXTENSION_MARK), repeat(name), starts, ends), values))
