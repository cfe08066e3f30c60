"""The original collection in a tantivy index: what both independent attacks of ``delink evaluate``
search (the phrase engine of ``adversary.py`` and the BM25 ranking of ``ranked.py``).

One text field read by a registered analyzer, and each document's number as a fast field, so
hits map back to input order without storing any text.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

#: The field every document's words are indexed in, and the fast field of its number (input order).
TEXT_FIELD = "text"
NUMBER_FIELD = "number"


@dataclass
class TantivyCollection:
    """A built, committed tantivy index of a collection and a searcher over it."""

    schema: Any
    engine: Any
    searcher: Any
    documents: int


def index_collection(analyzer: Any, tokenizer_name: str, index_option: str, values: Iterable[Iterable[str]]) -> TantivyCollection:
    """Index each document's text values (one list per document, in input order) with ``analyzer``.

    ``index_option`` is tantivy's: ``"position"`` for phrase queries, ``"freq"`` for BM25 alone.
    """
    import tantivy

    builder = tantivy.SchemaBuilder()
    builder.add_text_field(TEXT_FIELD, stored=False, tokenizer_name=tokenizer_name, index_option=index_option)
    builder.add_unsigned_field(NUMBER_FIELD, stored=False, indexed=False, fast=True)
    schema = builder.build()
    engine = tantivy.Index(schema)
    engine.register_tokenizer(tokenizer_name, analyzer)
    writer = engine.writer(heap_size=64_000_000, num_threads=1)
    count = 0
    for number, texts in enumerate(values):
        document = tantivy.Document()
        document.add_unsigned(NUMBER_FIELD, number)
        for text in texts:
            document.add_text(TEXT_FIELD, text)
        writer.add_document(document)
        count = number + 1
    writer.commit()
    writer.wait_merging_threads()
    engine.reload()
    return TantivyCollection(schema, engine, engine.searcher(), count)
