"""Chunk scores: a released text and each original read window by window, not as one mean vector.

The encoder reads ``max_length`` sub-word tokens at a time (``DocumentEncoder.encode_windows``).
A whole document's mean vector dilutes a passage that gives its source away among
thousands of ordinary words, so the adversary can also compare windows:

* ``best``: a document's score is the highest cosine between any window of the query and
  any window of the document;
* ``mean``: each query window finds its most similar window of the document, and the
  document's score is the mean of those.

``document`` is the mean vector of all token windows (``DocumentEncoder.encode``).
``delink evaluate`` reports all three and, as its semantic attack, whichever found the
most sources on the documents evaluated (``strongest``).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .encoder import Windows

VARIANTS = ("document", "best", "mean")
#: Scores closer than this count as ties (for the adversary), as ``index.RANK_TOLERANCE`` does for whole documents.
TOLERANCE = 1e-6


def window_scores(queries: Windows, documents: Windows, n_queries: int, n_documents: int) -> dict[str, np.ndarray]:
    """``best`` and ``mean`` scores, each an (n_queries, n_documents) matrix."""
    query_vectors, document_vectors = queries.unit_vectors(), documents.unit_vectors()
    order = np.argsort(documents.owners, kind="stable")
    owners = documents.owners[order]
    starts = np.searchsorted(owners, np.arange(n_documents))
    present = np.bincount(owners, minlength=n_documents) > 0
    similarity = query_vectors @ document_vectors[order].T  # query window x document window
    per_window = np.full((len(query_vectors), n_documents), -1.0, dtype=np.float32)
    if similarity.size:
        reduced = np.maximum.reduceat(similarity, starts[present], axis=1)
        per_window[:, present] = reduced
    best = np.full((n_queries, n_documents), -1.0, dtype=np.float32)
    total = np.zeros((n_queries, n_documents), dtype=np.float64)
    np.maximum.at(best, queries.owners, per_window)
    np.add.at(total, queries.owners, per_window)
    counts = np.bincount(queries.owners, minlength=n_queries)
    mean = (total / np.maximum(counts, 1)[:, None]).astype(np.float32)
    return {"best": best, "mean": mean}


def ranks_from_scores(scores: np.ndarray, sources: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """1 + documents scoring clearly higher than the source (ties count for the adversary), and the source's score."""
    own = scores[np.arange(len(sources)), sources]
    return 1 + (scores > own[:, None] + TOLERANCE).sum(axis=1), own


def strongest(summaries: dict[str, dict[str, Any]], version: str) -> str:
    """The reading whose ``version`` ranking names the most sources first, then in the first ten (earlier in ``VARIANTS`` on ties)."""
    return max(VARIANTS, key=lambda variant: (summaries[variant][version]["top1"], summaries[variant][version]["top10"], -VARIANTS.index(variant)))
