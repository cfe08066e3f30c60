"""From character offsets of the index's tokenization to spans of the pipeline's tokens.

The linkage core finds phrases on ``doc.text`` with its own tokenizer; a component shows
them on the pipeline's tokens. A long document can have one linkable phrase for every
two or three tokens (every phrase of a text that is itself in the collection is), so the
per-phrase cost matters: the offsets are aligned for all phrases at once with numpy
(``Doc.char_span(..., alignment_mode="expand")`` per phrase costs more than the search
itself), and span attribute values are written where spaCy keeps them, in one pass.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from spacy.tokens import Doc, Span

from .extensions import EXTENSION_MARK


def expanded_spans(doc: Doc, offsets: Sequence[tuple[int, int]], label: str) -> list[Span | None]:
    """For each ``(start, end)`` character range, the smallest span of whole tokens that
    covers every token it overlaps (``alignment_mode="expand"``), or None if it overlaps none
    (where ``char_span`` would give an empty span: the range lies in a token's trailing space)."""
    if not offsets:
        return []
    if len(doc) == 0:
        return [None] * len(offsets)
    token_offsets = doc.to_array(["IDX", "LENGTH"]).astype(np.int64, copy=False)
    token_starts = token_offsets[:, 0]
    token_ends = token_starts + token_offsets[:, 1]
    ranges = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
    first = np.searchsorted(token_ends, ranges[:, 0], side="right")  # first token ending after the range starts
    stop = np.searchsorted(token_starts, ranges[:, 1], side="left")  # tokens starting before the range ends
    return [
        Span(doc, int(start), int(end), label=label) if start < end else None
        for start, end in zip(first.tolist(), stop.tolist())
    ]


def set_span_values(doc: Doc, spans: Sequence[Span], name: str, values: Sequence[Any]) -> None:
    """``span._.<name> = value`` for every span, written straight into ``doc.user_data``.

    This is where and how ``span._`` stores a value (keyed by the span's character
    offsets; ``extensions.carry_over`` relies on the same key), without building an
    ``Underscore`` object per span.
    """
    data: dict[Any, Any] = doc.user_data  # typed str-keyed; spaCy's own extension keys are tuples
    for span, value in zip(spans, values):
        data[(EXTENSION_MARK, name, span.start_char, span.end_char)] = value
