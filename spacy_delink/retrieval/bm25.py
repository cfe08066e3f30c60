"""BM25 over the original collection, with exact term contributions.

An adversary pastes a released text into a search box: every word of it (masks removed)
is one OR query, and the engine ranks the collection by BM25. This module scores that
query exactly as Lucene and tantivy define BM25, with their defaults k1 = 1.2, b = 0.75:

    score(D) = sum over the query's words t (each occurrence once) of
               idf(t) * tf(t, D) * (k1 + 1) / (tf(t, D) + k1 * (1 - b + b * |D| / avgdl))
    idf(t)   = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))

A word the query holds q times counts q times (a query parser turns every word into a
clause of its own). Engines do not keep |D| exactly: Lucene and tantivy store it in one
byte (``fieldnorm``: Lucene's ``SmallFloat.intToByte4``, exact below 24, then four
significant bits, rounded down), so a document's score can differ by several percent
from the exact formula, enough to swap two documents that score close. Both length
readings are provided (``LENGTHS``): ``exact`` and ``fieldnorm``; the defence holds under
both, and ``evaluate`` and ``benchmarks/bench_retrieval.py`` check it under tantivy itself.

Terms are the search reading's tokens (SPEC §8: folded, masks removed) named by the
index's keyed 64-bit digests, so the statistics hold no text. The *rank* of the source is
1 + the number of other documents that score strictly higher: ties count for the adversary.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Lucene's and tantivy's defaults (tantivy fixes them; Lucene's BM25Similarity defaults).
K1 = 1.2
B = 0.75
#: How document lengths are read: exactly, or as an engine's one-byte fieldnorm.
LENGTHS = ("exact", "fieldnorm")
#: Lengths below this are stored exactly in a fieldnorm (Lucene's ``SmallFloat.NUM_FREE_VALUES``).
_FREE_VALUES = 24


def fieldnorm(lengths: np.ndarray) -> np.ndarray:
    """Each length as a one-byte fieldnorm decodes it: exact below 24, above that the length less
    24 keeps its four most significant bits (the rest rounded down), then 24 is added back."""
    lengths = np.asarray(lengths, dtype=np.int64)
    rest = np.maximum(lengths - _FREE_VALUES, 0)
    bits = np.zeros(len(rest), dtype=np.int64)
    positive = rest > 0
    bits[positive] = np.floor(np.log2(rest[positive])).astype(np.int64) + 1
    shift = np.maximum(bits - 4, 0)
    decoded = (rest >> shift) << shift
    return np.where(lengths < _FREE_VALUES, lengths, _FREE_VALUES + decoded)


@dataclass
class Bm25Statistics:
    """Per-term document frequencies and per-document term frequencies, as postings by term.

    ``terms`` are sorted keyed digests; the postings of ``terms[i]`` are
    ``docs[starts[i]:starts[i + 1]]`` (ascending) with their term frequencies ``tfs``.
    """

    terms: np.ndarray  # uint64, sorted, unique
    starts: np.ndarray  # int64, len(terms) + 1
    docs: np.ndarray  # int32
    tfs: np.ndarray  # int32
    lengths: np.ndarray  # int64, one per document: its search tokens

    @classmethod
    def from_documents(cls, keys_per_document: list[np.ndarray]) -> "Bm25Statistics":
        """The statistics of a collection given each document's token digests (in document order)."""
        pairs_terms, pairs_docs, pairs_tfs = [], [], []
        lengths = np.zeros(len(keys_per_document), dtype=np.int64)
        for number, keys in enumerate(keys_per_document):
            keys = np.asarray(keys, dtype=np.uint64)
            lengths[number] = len(keys)
            unique, counts = np.unique(keys, return_counts=True)
            pairs_terms.append(unique)
            pairs_docs.append(np.full(len(unique), number, dtype=np.int32))
            pairs_tfs.append(counts.astype(np.int32))
        if not pairs_terms:
            empty = np.zeros(0, dtype=np.uint64)
            return cls(empty, np.zeros(1, dtype=np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32), lengths)
        all_terms = np.concatenate(pairs_terms)
        all_docs = np.concatenate(pairs_docs)
        all_tfs = np.concatenate(pairs_tfs)
        order = np.lexsort((all_docs, all_terms))
        all_terms, all_docs, all_tfs = all_terms[order], all_docs[order], all_tfs[order]
        terms, first = np.unique(all_terms, return_index=True)
        starts = np.append(first, len(all_terms)).astype(np.int64)
        return cls(terms, starts, all_docs, all_tfs, lengths)

    @property
    def documents(self) -> int:
        return len(self.lengths)

    @property
    def average_length(self) -> float:
        return float(self.lengths.mean()) if len(self.lengths) and self.lengths.sum() else 1.0

    def df(self, term_index: np.ndarray) -> np.ndarray:
        return self.starts[term_index + 1] - self.starts[term_index]

    def idf(self, term_index: np.ndarray) -> np.ndarray:
        df = self.df(term_index).astype(np.float64)
        return np.log1p((self.documents - df + 0.5) / (df + 0.5))

    def query(self, keys: np.ndarray, lengths: str = "exact") -> "QueryPostings":
        """The postings of a query (its token digests, each occurrence a clause) with each entry's exact contribution,
        document lengths read as ``lengths`` (``LENGTHS``); the average length is always the exact one, as engines keep it."""
        unique, counts = np.unique(np.asarray(keys, dtype=np.uint64), return_counts=True)
        where = np.searchsorted(self.terms, unique)
        where = np.minimum(where, max(len(self.terms) - 1, 0))
        known = (len(self.terms) > 0) & (self.terms[where] == unique) if len(self.terms) else np.zeros(len(unique), bool)
        unique, counts, where = unique[known], counts[known], where[known]
        spans = self.starts[where + 1] - self.starts[where]
        entry_term = np.repeat(np.arange(len(unique), dtype=np.int64), spans)
        offsets = np.repeat(self.starts[where] - np.cumsum(spans) + spans, spans) + np.arange(int(spans.sum()), dtype=np.int64)
        docs = self.docs[offsets].astype(np.int64)
        tf = self.tfs[offsets].astype(np.float64)
        if lengths not in LENGTHS:
            raise ValueError(f"lengths must be one of {LENGTHS}, got {lengths!r}")
        read = self.lengths if lengths == "exact" else fieldnorm(self.lengths)
        norm = K1 * (1.0 - B + B * read[docs] / self.average_length)
        weights = self.idf(where)[entry_term] * tf * (K1 + 1.0) / (tf + norm)
        return QueryPostings(unique, counts.astype(np.int64), entry_term, docs, weights, self.documents)


@dataclass
class QueryPostings:
    """A query's terms (``keys``, each ``counts`` times in the query) and, per posting entry,
    its term, document and contribution per occurrence of the term in the query (``weights``)."""

    keys: np.ndarray
    counts: np.ndarray
    entry_term: np.ndarray
    entry_doc: np.ndarray
    weights: np.ndarray
    documents: int

    def scores(self, counts: np.ndarray | None = None) -> np.ndarray:
        """Every document's BM25 score for the query with these term ``counts`` (default: the query's)."""
        counts = self.counts if counts is None else counts
        return np.bincount(self.entry_doc, weights=self.weights * counts[self.entry_term], minlength=self.documents)

    def contributions(self, document: int) -> np.ndarray:
        """Per query term, its contribution per occurrence to ``document``'s score (0 where absent)."""
        mine = self.entry_doc == document
        return np.bincount(self.entry_term[mine], weights=self.weights[mine], minlength=len(self.keys))


def rank_of(scores: np.ndarray, source: int) -> int:
    """1 + the documents other than ``source`` that score strictly higher (ties count for the adversary)."""
    return 1 + int(np.count_nonzero(scores > scores[source]))


def margin_of(scores: np.ndarray, source: int) -> float:
    """The source's score minus the best other document's: > 0 means first, by that much."""
    others = np.delete(scores, source)
    return float(scores[source] - (others.max() if len(others) else 0.0))
