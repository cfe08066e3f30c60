"""The embedding index of an original collection, stored beside its N-gram index.

``delink index --embeddings`` writes ``<index>.embeddings/``: one unit vector per document
(float32, in the N-gram index's document order, so a row number *is* a document number),
a manifest with the model's fingerprint and the files' SHA-256, and — for large
collections — an HNSW graph (usearch). The manifest records the MAC of the N-gram index's
own manifest, so embeddings of another build are refused (their rows would name other
documents), and is itself authenticated by a MAC under a subkey of the index key, so an
edited manifest (vectors swapped and their checksum updated) is refused too.

Search. Exact search is one matrix product per block of documents: for 384 dimensions and
10^5 documents that is ~40 MFLOP per query, a few milliseconds with BLAS, and it is exact.
Above ``ann_threshold`` documents (default 200,000, see ``benchmarks/bench_semantic.py`` for
the measured crossover and recall) the graph answers instead, over-fetching candidates that
are then re-scored exactly from the stored vectors, so returned similarities are always
exact and only recall is approximate. usearch rather than hnswlib: it ships wheels for
every platform (hnswlib builds from source), saves the graph as one file that can be
checksummed and memory-mapped (``view``) rather than loaded, and builds multi-threaded.
Ranks of a given document (``ranks_of``) are always computed exactly.

The vectors are not plaintext but they are not anonymous either (embeddings can be
partly inverted): keep the embedding index as private as the collection itself.
"""
from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from ..errors import IndexFormatError, InputError
from ..progress import Progress
from ..io.files import atomic_directory, atomic_write
from ..linkage.index import CorpusIndex
from ..linkage.index.format import canonical_bytes, read_sidecar_manifest, sidecar_of_format
from .encoder import DocumentEncoder, file_sha256

FORMAT_NAME = "spacy-delink-embeddings"
FORMAT_VERSION = 2  # 2: the manifest is authenticated (version 1 was not)
MANIFEST = "manifest.json"
VECTORS = "vectors.f32"
GRAPH = "graph.usearch"
DEFAULT_ANN_THRESHOLD = 200_000
#: HNSW settings: connectivity (M), construction and search depth (ef).
ANN_CONNECTIVITY = 16
ANN_EXPANSION_ADD = 128
ANN_EXPANSION_SEARCH = 128
#: Candidates fetched from the graph per requested neighbour, re-scored exactly.
ANN_OVERFETCH = 4
_EXACT_BLOCK_ROWS = 1 << 16
_ENCODE_CHUNK = 256


def embeddings_path(index_dir: str | Path) -> Path:
    """``<index>.embeddings`` beside the index directory (like ``<index>.key``)."""
    index_dir = Path(index_dir)
    return index_dir.with_name(index_dir.name + ".embeddings")


def index_fingerprint(index: CorpusIndex) -> str:
    """The N-gram index's manifest MAC: authenticated when the index opens, new with every build."""
    return str(index.manifest["mac"])


@dataclass
class EmbeddingSummary:
    documents: int
    dimensions: int
    graph: bool
    bytes_on_disk: int
    path: Path


def _documents_in_index_order(index: CorpusIndex, documents: Iterable[tuple[Any, str]]) -> Iterator[tuple[int, str]]:
    """Texts numbered as the index numbers them; any other order or set of ids is refused."""
    number = -1
    for number, (doc_id, text) in enumerate(documents):
        if number >= index.documents or not index.doc_id_matches(number, doc_id):
            raise InputError(
                f"document {number + 1} of the corpus has id {doc_id!r}, not the id index {index.path} has there; "
                "embed the same corpus, in the same order, that the index was built from"
            )
        yield number, text
    if number + 1 != index.documents:
        raise InputError(
            f"the corpus has {number + 1:,} documents but index {index.path} has {index.documents:,}; "
            "embed the same corpus the index was built from"
        )


def build_embedding_index(
    index: CorpusIndex,
    documents: Iterable[tuple[Any, str]],
    encoder: DocumentEncoder,
    output: Path | None = None,
    ann_threshold: int = DEFAULT_ANN_THRESHOLD,
    progress: bool = True,
) -> EmbeddingSummary:
    """Embed every document of the index's collection and write the embedding index atomically.

    An earlier embedding index at ``output`` is replaced (it belongs to an older build, or
    to this one: either way it is derived data); anything else there is refused.
    """
    output = embeddings_path(index.path) if output is None else Path(output)
    if ann_threshold < 0:
        raise InputError(f"ann_threshold must be >= 0, got {ann_threshold}")
    if output.exists() and not sidecar_of_format(output, FORMAT_NAME, MANIFEST):
        raise InputError(f"{output} exists and is not an embedding index; move it away so the embeddings can be written there")
    with atomic_directory(output, overwrite=True) as folder:
        hasher = hashlib.sha256()
        with open(folder / VECTORS, "wb") as handle:
            chunk: list[str] = []

            def flush() -> None:
                data = encoder.encode(chunk).tobytes()
                handle.write(data)
                hasher.update(data)

            with Progress("embeddings", "docs", index.documents, enabled=progress) as bar:
                for _number, text in _documents_in_index_order(index, documents):
                    chunk.append(text)
                    if len(chunk) == _ENCODE_CHUNK:
                        flush()
                        bar.update(len(chunk))
                        chunk = []
                if chunk:
                    flush()
                    bar.update(len(chunk))
        documents_count = index.documents
        width = encoder.info.dimensions
        arrays: dict[str, Any] = {
            VECTORS: {"dtype": "<f4", "shape": [documents_count, width], "sha256": hasher.hexdigest()}
        }
        graph = documents_count >= ann_threshold
        if graph:
            vectors = np.memmap(folder / VECTORS, dtype="<f4", mode="r", shape=(documents_count, width))
            build_graph(vectors, folder / GRAPH)
            arrays[GRAPH] = {"sha256": file_sha256(folder / GRAPH), "bytes": (folder / GRAPH).stat().st_size}
        manifest = {
            "format": FORMAT_NAME,
            "format_version": FORMAT_VERSION,
            "model": encoder.info.to_dict(),
            "documents": documents_count,
            "index_mac": index_fingerprint(index),
            "graph": {
                "library": "usearch",
                "metric": "cos",
                "connectivity": ANN_CONNECTIVITY,
                "expansion_add": ANN_EXPANSION_ADD,
                "expansion_search": ANN_EXPANSION_SEARCH,
            }
            if graph
            else None,
            "arrays": arrays,
        }
        manifest["mac"] = index.sidecar_mac(canonical_bytes(manifest))
        with atomic_write(folder / MANIFEST) as manifest_file:
            json.dump(manifest, manifest_file, indent=1)
        size = sum(f.stat().st_size for f in folder.iterdir() if f.is_file())
    return EmbeddingSummary(documents_count, width, graph, size, output)


def embed_corpus(
    index_dir: Path,
    corpus: Sequence[Path],
    key_file: Path | None = None,
    text_field: str = "text",
    id_field: str = "id",
    skip_invalid: bool = False,
    progress: bool = True,
) -> EmbeddingSummary:
    """``delink index --embeddings``: embed the corpus an index was just built from, beside it."""
    from ..corpus.source import read_documents

    index = CorpusIndex(index_dir, key_file=key_file)
    documents = read_documents(corpus, text_field, id_field, skip_invalid)
    return build_embedding_index(index, documents, DocumentEncoder(), progress=progress)


class EmbeddingIndex:
    """An opened embedding index, checked against the N-gram index it belongs to."""

    def __init__(self, index: CorpusIndex, path: str | Path | None = None, verify: bool = True) -> None:
        self.index = index
        self.path = embeddings_path(index.path) if path is None else Path(path)
        manifest_path = self.path / MANIFEST
        manifest = read_sidecar_manifest(
            self.path, FORMAT_NAME, "embedding", "build one with `delink index ... --embeddings`", "rebuild the embeddings", MANIFEST
        )
        if not isinstance(manifest.get("format_version"), int) or manifest["format_version"] > FORMAT_VERSION:
            raise IndexFormatError(f"{self.path} uses embedding format {manifest.get('format_version')!r}; upgrade spacy-delink")
        if manifest["format_version"] < FORMAT_VERSION:
            raise IndexFormatError(
                f"{self.path} was written by an older spacy-delink without an authenticated manifest; "
                "rebuild it with `delink index ... --embeddings --overwrite`"
            )
        if manifest.get("index_mac") != index_fingerprint(index) or manifest.get("documents") != index.documents:
            raise IndexFormatError(
                f"embedding index {self.path} belongs to another build of index {index.path}; "
                "rebuild it with `delink index ... --embeddings --overwrite`"
            )
        if not isinstance(manifest.get("mac"), str) or not hmac.compare_digest(
            manifest["mac"], index.sidecar_mac(canonical_bytes(manifest))
        ):
            raise IndexFormatError(
                f"{manifest_path} does not verify under the key of index {index.path} (edited, or not written by "
                "spacy-delink for it); rebuild it with `delink index ... --embeddings --overwrite`"
            )
        self.manifest = manifest
        self.model: dict[str, Any] = manifest["model"]
        spec = manifest["arrays"][VECTORS]
        shape = tuple(int(v) for v in spec["shape"])
        file = self.path / VECTORS
        expected = shape[0] * shape[1] * 4
        if not file.exists() or file.stat().st_size != expected:
            raise IndexFormatError(f"embedding index {self.path}: {VECTORS} is missing or truncated; rebuild it")
        self.vectors = np.asarray(np.memmap(file, dtype="<f4", mode="r", shape=shape)) if expected else np.zeros(shape, "<f4")
        if verify and hashlib.sha256(self.vectors.view(np.uint8).data).hexdigest() != spec["sha256"]:
            raise IndexFormatError(f"embedding index {self.path}: checksum mismatch in {VECTORS} (corrupted); rebuild it")
        self._graph: Any = None
        if manifest.get("graph"):
            graph_spec = manifest["arrays"][GRAPH]
            graph_file = self.path / GRAPH
            if not graph_file.exists() or graph_file.stat().st_size != graph_spec["bytes"]:
                raise IndexFormatError(f"embedding index {self.path}: {GRAPH} is missing or truncated; rebuild it")
            if verify and file_sha256(graph_file) != graph_spec["sha256"]:
                raise IndexFormatError(f"embedding index {self.path}: checksum mismatch in {GRAPH} (corrupted); rebuild it")

    @property
    def has_graph(self) -> bool:
        return bool(self.manifest.get("graph"))

    def _open_graph(self) -> Any:
        if self._graph is None:
            from usearch.index import Index

            self._graph = Index.restore(str(self.path / GRAPH), view=True)
            self._graph.expansion_search = int(self.manifest["graph"]["expansion_search"])
        return self._graph

    def nearest(self, queries: np.ndarray, count: int, exact: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Document numbers and cosine similarities of each query's ``count`` nearest documents.

        Exact unless the index has a graph (``exact=None``) or ``exact=False`` forces it;
        rows are sorted by decreasing similarity, ties by document number.
        """
        queries = np.atleast_2d(np.asarray(queries, dtype=np.float32))
        count = min(count, len(self.vectors))
        use_graph = self.has_graph if exact is None else not exact
        if use_graph and not self.has_graph:
            raise InputError(f"embedding index {self.path} has no graph; rebuild it with a lower --ann-threshold")
        if use_graph:
            return graph_nearest(self._open_graph(), self.vectors, queries, count)
        return exact_nearest(self.vectors, queries, count)

    def ranks_of(self, queries: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Exact rank (1 = most similar) of document ``targets[i]`` for query ``i``, and its similarity."""
        return exact_ranks(self.vectors, queries, targets)


def graph_nearest(graph: Any, vectors: np.ndarray, queries: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-``count`` from the HNSW graph: ``ANN_OVERFETCH`` times more candidates, re-scored exactly."""
    queries = np.atleast_2d(np.asarray(queries, dtype=np.float32))
    count = min(count, len(vectors))
    fetched = graph.search(queries, min(len(vectors), count * ANN_OVERFETCH), exact=False)
    keys = np.atleast_2d(np.asarray(fetched.keys)).astype(np.int64)
    numbers = np.zeros((len(queries), count), dtype=np.int64)
    sims = np.full((len(queries), count), -np.inf, dtype=np.float32)
    for q, row in enumerate(keys):
        rows = np.unique(row[(row >= 0) & (row < len(vectors))])
        scores = np.asarray(vectors[rows], dtype=np.float32) @ queries[q]
        best = np.lexsort((rows, -scores))[:count]
        numbers[q, : len(best)], sims[q, : len(best)] = rows[best], scores[best]
    return numbers, sims


def build_graph(vectors: np.ndarray, path: Path | None = None) -> Any:
    """The HNSW graph (usearch, cosine) over ``vectors``, saved to ``path`` when given."""
    from usearch.index import Index

    graph = Index(
        ndim=vectors.shape[1],
        metric="cos",
        dtype="f32",
        connectivity=ANN_CONNECTIVITY,
        expansion_add=ANN_EXPANSION_ADD,
        expansion_search=ANN_EXPANSION_SEARCH,
    )
    graph.add(np.arange(len(vectors), dtype=np.uint64), np.asarray(vectors), log=False)
    if path is not None:
        graph.save(str(path))
    return graph


def exact_nearest(vectors: np.ndarray, queries: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-``count`` by dot product, one block of document rows at a time."""
    queries = np.atleast_2d(np.asarray(queries, dtype=np.float32))
    count = min(count, len(vectors))
    best_rows = np.zeros((len(queries), 0), dtype=np.int64)
    best_sims = np.zeros((len(queries), 0), dtype=np.float32)
    for start in range(0, len(vectors), _EXACT_BLOCK_ROWS):
        block = np.asarray(vectors[start : start + _EXACT_BLOCK_ROWS], dtype=np.float32)
        sims = np.concatenate([best_sims, queries @ block.T], axis=1)
        rows = np.concatenate([best_rows, np.broadcast_to(np.arange(start, start + len(block)), (len(queries), len(block)))], axis=1)
        if sims.shape[1] > count:
            keep = np.argpartition(-sims, count - 1, axis=1)[:, :count]
            sims, rows = np.take_along_axis(sims, keep, 1), np.take_along_axis(rows, keep, 1)
        best_sims, best_rows = sims, rows
    order = np.lexsort((best_rows, -best_sims), axis=1) if len(queries) else np.zeros((0, 0), dtype=np.int64)
    return np.take_along_axis(best_rows, order, 1), np.take_along_axis(best_sims, order, 1)


#: Similarities closer than this count as ties: BLAS may round one product differently by block.
RANK_TOLERANCE = 1e-6


def exact_ranks(vectors: np.ndarray, queries: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rank of each target among all vectors: 1 + the number of clearly more similar documents.

    A tie counts for the target (the adversary's best case), so a document identical to
    its source ranks it first.
    """
    queries = np.atleast_2d(np.asarray(queries, dtype=np.float32))
    targets = np.asarray(targets, dtype=np.int64)
    target_sims = np.einsum("qd,qd->q", np.asarray(vectors[targets], dtype=np.float32), queries)
    above = np.zeros(len(queries), dtype=np.int64)
    for start in range(0, len(vectors), _EXACT_BLOCK_ROWS):
        block = np.asarray(vectors[start : start + _EXACT_BLOCK_ROWS], dtype=np.float32)
        above += (queries @ block.T > target_sims[:, None] + RANK_TOLERANCE).sum(axis=1)
    return above + 1, target_sims
