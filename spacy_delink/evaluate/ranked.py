"""Ranked retrieval as an outside adversary runs it: tantivy's BM25, the released text as the query.

The originals go into an in-memory tantivy index, each folded to its search form first
(``fold_text``: what an ICU folding filter does in Elasticsearch, OpenSearch or Lucene),
then analyzed by tantivy itself: its simple tokenizer (runs of letters and digits),
lower case, ASCII folding. A released text is read the same way, with its masks
(``[REDACTED]``, ...) removed first, and every word of it is one SHOULD clause of a
boolean query — a word the text holds five times is five clauses, as a query parser
reading the pasted text makes it (``distinct=True`` asks each word once instead).
tantivy scores with BM25 at its fixed k1 = 1.2, b = 0.75, document lengths stored in one
byte (``fieldnorm``).

This shares no scoring or tokenizing code with ``spacy_delink.retrieval`` (the defence):
it is the independent check of ``delink protect --retrieval`` and what ``delink
evaluate`` reports. The source's rank is 1 + the documents scoring strictly higher (ties
count for the adversary); a source the query does not match at all is not returned, and
ranks last (N).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from ..linkage.search_form import fold_text
from .collection import NUMBER_FIELD, TEXT_FIELD, index_collection

#: tantivy's BM25 (fixed in tantivy; Lucene's BM25Similarity defaults).
TANTIVY_BM25 = {"engine": "tantivy", "k1": 1.2, "b": 0.75, "analyzer": "fold_text, simple tokenizer, lowercase, ascii_fold"}


@dataclass(frozen=True)
class RankedResult:
    """The source's rank, whether it is first or in the top 10, and its score's margin to the best other document."""

    rank: int
    margin: float

    @property
    def top1(self) -> bool:
        return self.rank == 1

    @property
    def top10(self) -> bool:
        return self.rank <= 10


class RankedAdversary:
    """The original collection in a tantivy index, ranked by BM25 for a released text."""

    def __init__(self, originals: Iterable[str], mask_patterns: Sequence[str]) -> None:
        import tantivy

        self._tantivy = tantivy
        self._masks = [re.compile(pattern) for pattern in mask_patterns]
        self.analyzer = (
            tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
            .filter(tantivy.Filter.lowercase())
            .filter(tantivy.Filter.ascii_fold())
            .build()
        )
        collection = index_collection(self.analyzer, "delink_ranked", "freq", ([fold_text(text)] for text in originals))
        self.schema, self.engine, self.searcher = collection.schema, collection.engine, collection.searcher
        self.documents = collection.documents

    def words(self, text: str) -> list[str]:
        """The query's words: masks removed, folded, analyzed by tantivy."""
        for pattern in self._masks:
            text = pattern.sub(" ", text)
        return list(self.analyzer.analyze(fold_text(text)))

    def scores(self, text: str, distinct: bool = False) -> np.ndarray:
        """Every document's BM25 score for ``text`` as the query (0 where it matches no word)."""
        tantivy = self._tantivy
        words = self.words(text)
        if distinct:
            words = sorted(set(words))
        scores = np.zeros(self.documents, dtype=np.float64)
        if not words or not self.documents:
            return scores
        query = tantivy.Query.boolean_query([(tantivy.Occur.Should, tantivy.Query.term_query(self.schema, TEXT_FIELD, w)) for w in words])
        hits = self.searcher.search(query, limit=self.documents).hits
        numbers = self.searcher.fast_field_values(NUMBER_FIELD, [address for _, address in hits])
        scores[np.asarray(numbers, dtype=np.int64)] = [score for score, _ in hits]
        return scores

    def rank(self, text: str, source: int, distinct: bool = False) -> RankedResult:
        """The source's rank for ``text`` and the margin of its score over the best other document's."""
        scores = self.scores(text, distinct)
        others = np.delete(scores, source)
        margin = float(scores[source] - (others.max() if len(others) else 0.0))
        if scores[source] <= 0:
            return RankedResult(self.documents, margin)
        return RankedResult(1 + int(np.count_nonzero(others > scores[source])), margin)


def ranking_summary(ranks: Sequence[int]) -> dict[str, Any]:
    """top-1 and top-10 shares and the mean rank of the source."""
    values = np.asarray(ranks, dtype=np.float64)
    if not len(values):
        return {"documents": 0, "top1": None, "top10": None, "mean_rank": None, "median_rank": None}
    return {
        "documents": int(len(values)),
        "top1": round(float(np.mean(values == 1)), 4),
        "top10": round(float(np.mean(values <= 10)), 4),
        "mean_rank": round(float(values.mean()), 2),
        "median_rank": float(np.median(values)),
    }


def ranked_linkage(
    collection: Sequence[tuple[Any, str]], documents: Sequence[Any], mask_patterns: Sequence[str], progress: bool = True
) -> dict[str, Any]:
    """``delink evaluate``'s BM25 attack: the source's rank for each de-identified (and protected) text.

    Returns the summary per version (``before``, ``after``) and ``per_document`` (aligned
    with ``documents``: each version's ``rank``, ``margin`` and ``rank_distinct``, the rank
    when each word is asked once), or why it did not run.
    """
    from ..progress import track
    from . import adversary as engine

    reason = engine.engine_unavailable()  # the same engine as the phrase adversary: one check of whether it is here
    if reason:
        return {"available": False, "reason": reason}
    adversary = RankedAdversary((text for _, text in collection), mask_patterns)
    versions = [("before", "deidentified")] + ([("after", "protected")] if documents and all(d.protected is not None for d in documents) else [])
    per_document: list[dict[str, Any]] = []
    for document in track(list(documents), "bm25", "docs", enabled=progress):
        row: dict[str, Any] = {}
        for version, attribute in versions:
            text = getattr(document, attribute)
            found = adversary.rank(text, document.source)
            row[version] = {
                "rank": found.rank,
                "margin": round(found.margin, 4),
                "rank_distinct": adversary.rank(text, document.source, distinct=True).rank,
            }
        per_document.append(row)
    result: dict[str, Any] = {"available": True, "engine": TANTIVY_BM25, "collection": adversary.documents}
    for version, _ in versions:
        result[version] = ranking_summary([row[version]["rank"] for row in per_document])
        result[version]["distinct"] = ranking_summary([row[version]["rank_distinct"] for row in per_document])
    result["per_document"] = per_document
    return result
