"""From character offsets of the index's tokenization to spans of the pipeline's tokens.

The linkage core finds phrases on ``doc.text`` with its own tokenizer; a component shows
them on the pipeline's tokens. A long document can have one linkable phrase for every
two or three tokens (every phrase of a text that is itself in the collection is), so the
per-phrase cost matters: the offsets are aligned for all phrases at once with numpy
(``Doc.char_span(..., alignment_mode="expand")`` per phrase costs more than the search
itself), and span attribute values are written where spaCy keeps them, in one pass.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat
from typing import Any, Sequence

import numpy as np
from spacy.attrs import ORTH, SPACY  # type: ignore[import-not-found]  # a Cython module without stubs
from spacy.tokens import Doc, Span

from .extensions import EXTENSION_MARK


#: The text after a token: indexed by its ``SPACY`` flag.
_TRAILING = np.array(["", " "], dtype=object)


class DocText(dict[int, str]):
    """``doc.text``, rebuilt from the Doc's token array and a cache of token texts.

    spaCy builds ``doc.text`` from a ``Token`` object per token, which on a long document
    costs a third as much as the whole index search. The same text is each token's
    ``orth_`` followed by one space where ``SPACY`` is set; this cache maps ``orth`` to
    ``orth_``, so a Doc's text is a C-level map over its token array and one join. Texts
    come from the Doc's own string store, so the result is exactly ``doc.text``. The cache
    holds no other state (threads may share it) and is emptied when it reaches ``limit``
    texts, to bound its memory.
    """

    def __init__(self, limit: int = 1 << 18) -> None:
        super().__init__()
        self.limit = limit

    def __call__(self, doc: Doc) -> str:
        if len(self) >= self.limit:
            self.clear()
        tokens = doc.to_array([ORTH, SPACY])
        orths = tokens[:, 0].tolist()
        pieces = np.empty(2 * len(orths), dtype=object)
        try:
            pieces[0::2] = list(map(self.__getitem__, orths))
        except KeyError:  # a token text not seen yet (or the cache was just emptied)
            strings = doc.vocab.strings
            texts = {orth: strings[orth] for orth in set(orths)}
            self.update(texts)
            pieces[0::2] = list(map(texts.__getitem__, orths))
        pieces[1::2] = _TRAILING[tokens[:, 1]]
        return "".join(pieces.tolist())


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
