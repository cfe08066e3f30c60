"""The ``delink_semantic_risk`` component: which original is nearest in meaning, and by how much.

Search-based linkage looks for shared phrases; an adversary can also embed a document and
take the most similar original (semantic linkage, the limit the paper names). This
component embeds each Doc with the model the embedding index was built with
(``delink index --embeddings``) and sets:

* ``doc._.delink_nearest_id``: the id of the most similar original document (None when
  the index was built with external ids and keeps no id mapping);
* ``doc._.delink_nearest_number``: its document number in the index (always set);
* ``doc._.delink_nearest_similarity``: its cosine similarity;
* ``doc._.delink_nearest_margin``: that similarity minus the runner-up's (a large margin
  means the nearest original stands out: the adversary's guess is confident).

Settings live in the config; the component stores no data (the embedding index is
referenced, like the N-gram index) and opens nothing until the first Doc or ``initialize``.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator

from spacy.language import Language
from spacy.tokens import Doc

from ..errors import InputError
from ..linkage.index import open_index
from ..semantic.encoder import DocumentEncoder
from ..semantic.index import EmbeddingIndex
from .extensions import register
from .settings import SEMANTIC_ATTRIBUTES, SemanticSettings

FACTORY = "delink_semantic_risk"
SEARCHES = ("auto", "exact", "ann")


def register_semantic_extensions() -> None:
    for name in SEMANTIC_ATTRIBUTES:
        register(Doc, name)


class SemanticRiskAnnotator:
    """Nearest original by embedding similarity, with the margin to the runner-up."""

    def __init__(self, nlp: Language, name: str, *, settings: SemanticSettings) -> None:
        if settings.search not in SEARCHES:
            raise InputError(f"component {name!r}: search={settings.search!r}; use one of {', '.join(SEARCHES)}")
        if settings.batch_size < 1:
            raise InputError(f"component {name!r}: batch_size must be >= 1, got {settings.batch_size}")
        register_semantic_extensions()
        self.name = name
        #: Read as configured, nothing copied: the component keeps no state of its own but the opened indexes.
        self.settings = settings
        self._embeddings: EmbeddingIndex | None = None
        self._encoder: DocumentEncoder | None = None

    def _open(self) -> tuple[EmbeddingIndex, DocumentEncoder]:
        if self._embeddings is None or self._encoder is None:
            if not self.settings.index:
                raise InputError(
                    f"component {self.name!r} has no index; pass config={{'index': 'path/to/index'}} "
                    "(build it with `delink index ... --embeddings`)"
                )
            corpus_index = open_index(self.settings.index, self.settings.key_file, self.settings.verify)
            embeddings = EmbeddingIndex(corpus_index, self.settings.embeddings, verify=self.settings.verify)
            encoder = DocumentEncoder(self.settings.model)
            encoder.check_compatible(embeddings.model, str(embeddings.path))
            self._embeddings, self._encoder = embeddings, encoder
        return self._embeddings, self._encoder

    def initialize(self, get_examples: Callable[[], Iterable[Any]] | None = None, *, nlp: Language | None = None) -> None:
        """Open the indexes and load the model now, so a bad path fails at ``nlp.initialize()``."""
        self._open()

    def _annotate(self, docs: list[Doc]) -> None:
        embeddings, encoder = self._open()
        vectors = encoder.encode([doc.text for doc in docs])
        exact = None if self.settings.search == "auto" else self.settings.search == "exact"
        numbers, similarities = embeddings.nearest(vectors, 2, exact=exact)
        doc_ids = self._doc_ids(embeddings)
        for doc, rows, sims in zip(docs, numbers.tolist(), similarities.tolist()):
            doc._.delink_nearest_id = doc_ids[rows[0]] if doc_ids is not None else None
            doc._.delink_nearest_number = rows[0]
            doc._.delink_nearest_similarity = float(sims[0])
            doc._.delink_nearest_margin = float(sims[0] - sims[1]) if len(sims) > 1 else float(sims[0])

    @staticmethod
    def _doc_ids(embeddings: EmbeddingIndex) -> list[Any] | None:
        """The index's id mapping, or None for an index built with external ids."""
        if embeddings.index.manifest["doc_ids"].get("mode") == "external":
            return None
        return embeddings.index.doc_ids

    def __call__(self, doc: Doc) -> Doc:
        self._annotate([doc])
        return doc

    def pipe(self, stream: Iterable[Doc], *, batch_size: int | None = None) -> Iterator[Doc]:
        size = batch_size or self.settings.batch_size
        batch: list[Doc] = []
        for doc in stream:
            batch.append(doc)
            if len(batch) == size:
                self._annotate(batch)
                yield from batch
                batch = []
        if batch:
            self._annotate(batch)
            yield from batch

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_embeddings"] = state["_encoder"] = None  # memory maps and models reload in workers
        return state
