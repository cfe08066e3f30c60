"""Semantic linkage (the limit the paper names): who is nearest in meaning, before and after protection.

The adversary embeds a released document and orders the original collection by cosine
similarity; the attack succeeds at top-n when the true source is among the first n. The
source's rank is computed exactly (1 + documents clearly more similar). The collection's
vectors come from the embedding index beside the N-gram index when there is one for the
same model (``delink index --embeddings``), else the original texts are embedded here.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..linkage.index import CorpusIndex
from ..semantic.encoder import DocumentEncoder, embeddings_unavailable
from ..semantic.index import EmbeddingIndex, embeddings_path, exact_ranks
from .inputs import Document

TOP = (1, 10)


def _ranking(ranks: np.ndarray) -> dict[str, Any]:
    summary: dict[str, Any] = {f"top{n}": float(np.mean(ranks <= n)) for n in TOP}
    summary.update(mean_rank=float(np.mean(ranks)), median_rank=float(np.median(ranks)))
    return summary


def semantic_linkage(
    index: CorpusIndex, collection: list[tuple[Any, str]], documents: list[Document], progress: bool = True
) -> dict[str, Any]:
    """Summary (``per_document`` included, aligned with ``documents``), or why it is unavailable."""
    reason = embeddings_unavailable()
    if reason:
        return {"available": False, "reason": reason}
    encoder = DocumentEncoder()
    stored = embeddings_path(index.path)
    if (stored / "manifest.json").exists():
        embedding_index = EmbeddingIndex(index, stored)
        encoder.check_compatible(embedding_index.model, str(stored))
        vectors = embedding_index.vectors
        origin = f"embedding index {stored}"
    else:
        vectors = encoder.encode([text for _, text in collection], progress=progress, desc="embed originals")
        origin = "embedded from --original"
    sources = np.array([d.source for d in documents], dtype=np.int64)
    result: dict[str, Any] = {
        "available": True,
        "model": encoder.info.to_dict(),
        "collection_vectors": origin,
        "collection": len(vectors),
    }
    per_document: list[dict[str, Any]] = [{} for _ in documents]
    queries = {"before": encoder.encode([d.deidentified for d in documents], progress=progress, desc="embed de-identified")}
    if all(d.protected is not None for d in documents) and documents[0].protected is not None:
        queries["after"] = encoder.encode([d.protected or "" for d in documents], progress=progress, desc="embed protected")
    for version, vectors_of_docs in queries.items():
        ranks, similarity = exact_ranks(vectors, vectors_of_docs, sources)
        result[version] = _ranking(ranks)
        for row, rank, sim in zip(per_document, ranks.tolist(), similarity.tolist()):
            row[version] = {"rank": rank, "similarity_to_source": round(sim, 4)}
    if "after" in queries:
        similarity = np.einsum("nd,nd->n", queries["before"], queries["after"])
        result["similarity"] = {
            "mean": float(similarity.mean()),
            "median": float(np.median(similarity)),
            "min": float(similarity.min()),
            "values": [round(float(v), 4) for v in similarity],
        }
        for row, value in zip(per_document, similarity.tolist()):
            row["similarity_deidentified_protected"] = round(value, 4)
    result["per_document"] = per_document
    return result
