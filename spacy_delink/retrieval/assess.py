"""``delink assess``'s ranked-retrieval fields: each text's BM25 rank of its source, and the score margin.

assess runs against the keyed-hash index, which holds no text, so the statistics come
from the retrieval index beside it (``<index>.retrieval``, ``delink index --retrieval``):
word digests under the index key, document frequencies and per-document term
frequencies — what BM25 needs and nothing more. When it is there, every record gets:

* ``retrieval_source``: the source's id (``--source-field``, by default the record's own id
  when the collection holds it; null when neither names a document of the collection);
* ``retrieval_rank``: 1 + the documents scoring strictly higher than the source with the
  text as the query (ties count for the adversary), the adversary's best over the two
  readings of document lengths (``bm25.LENGTHS``); null without a source;
* ``retrieval_margin``: the source's score minus the best other document's under that
  reading (> 0: first by that much; < 0: that far behind the first).
"""
from __future__ import annotations

from typing import Any

from ..corpus.rules import DocId
from ..linkage.index import CorpusIndex
from .bm25 import LENGTHS, margin_of
from .defence import source_rank
from .store import open_retrieval_index, retrieval_path, search_keys


class RetrievalRanker:
    """The BM25 statistics beside an index, read for assess records."""

    def __init__(self, index: CorpusIndex) -> None:
        self.index = index
        self.statistics = open_retrieval_index(index)

    @staticmethod
    def available(index: CorpusIndex) -> bool:
        return (retrieval_path(index.path) / "manifest.json").exists()

    def fields(self, text: str, source_id: DocId | None) -> dict[str, Any]:
        number = None if source_id is None else self.index.document_number(source_id)
        if number is None:
            return {"retrieval_source": None, "retrieval_rank": None, "retrieval_margin": None}
        keys = search_keys(self.index, text)
        best: tuple[int, float] | None = None
        for lengths in LENGTHS:
            scores = self.statistics.query(keys, lengths).scores()
            found = (source_rank(scores, number), margin_of(scores, number))
            if best is None or found[0] < best[0]:
                best = found
        assert best is not None
        return {"retrieval_source": source_id, "retrieval_rank": best[0], "retrieval_margin": round(best[1], 4)}
