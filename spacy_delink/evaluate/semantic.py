"""Semantic linkage (the limit the paper names): who is nearest in meaning, before and after protection.

The adversary embeds a released document and orders the original collection by cosine
similarity; the attack succeeds at top-n when the true source is among the first n. The
source's rank is computed exactly (1 + documents clearly more similar). Three readings of
"similar" are measured (``semantic.chunks``): the whole documents' mean vectors
(``document``; from the embedding index beside the N-gram index when there is one for the
same model, ``delink index --embeddings``), and window by window (``best``, ``mean``: the
originals are then read here). ``variants`` holds all three; ``before``/``after`` and each
document's ``rank`` are those of the reading that found the most sources on these very
documents (``chunks.strongest``: top-1, then top-10, after protection when there is an
after), named in ``attack`` — the reading that finds more linkages, as everywhere.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..linkage.index import CorpusIndex
from ..semantic.chunks import VARIANTS, ranks_from_scores, strongest, window_scores
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
    windows = encoder.encode_windows([text for _, text in collection], progress=progress, desc="embed originals")
    if (stored / "manifest.json").exists():
        embedding_index = EmbeddingIndex(index, stored)
        encoder.check_compatible(embedding_index.model, str(stored))
        vectors = embedding_index.vectors
        origin = f"embedding index {stored}; windows embedded from --original"
    else:
        vectors = windows.document_vectors(len(collection))
        origin = "embedded from --original"
    sources = np.array([d.source for d in documents], dtype=np.int64)
    result: dict[str, Any] = {
        "available": True,
        "model": encoder.info.to_dict(),
        "collection_vectors": origin,
        "collection": len(vectors),
        "variants": {variant: {} for variant in VARIANTS},
    }
    per_document: list[dict[str, Any]] = [{} for _ in documents]
    texts = {"before": [d.deidentified for d in documents]}
    if all(d.protected is not None for d in documents) and documents[0].protected is not None:
        texts["after"] = [d.protected or "" for d in documents]
    queries: dict[str, np.ndarray] = {}
    ranked: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
    for version, version_texts in texts.items():
        query_windows = encoder.encode_windows(version_texts, progress=progress, desc=f"embed {version} protection")
        queries[version] = query_windows.document_vectors(len(version_texts))
        ranked[version] = {"document": exact_ranks(vectors, queries[version], sources)}
        for variant, scores in window_scores(query_windows, windows, len(version_texts), len(collection)).items():
            ranked[version][variant] = ranks_from_scores(scores, sources)
        for variant, (ranks, _) in ranked[version].items():
            result["variants"][variant][version] = _ranking(ranks)
    attack = result["attack"] = strongest(result["variants"], "after" if "after" in texts else "before")
    for version in texts:
        result[version] = result["variants"][attack][version]
        ranks, similarity = ranked[version][attack]
        for i, (row, rank, sim) in enumerate(zip(per_document, ranks.tolist(), similarity.tolist())):
            row[version] = {
                "rank": rank, "similarity_to_source": round(sim, 4),
                "ranks": {variant: int(ranked[version][variant][0][i]) for variant in VARIANTS},
            }
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

