"""The retrieval index: BM25 statistics of the original collection, stored beside its N-gram index.

``delink index --retrieval`` writes ``<index>.retrieval/``: for every word of the search
reading (SPEC §8) its keyed 64-bit digest — the same digest the N-gram index gives that
word, under the same secret — with its postings (document numbers, in the index's order,
and term frequencies), and every document's length in words. That is all BM25 needs, and
it holds no text: without the key no word can be looked up.

It is still a bag of words per document under a keyed word-substitution, and the
frequencies of common words can be matched against any English text: keep it as private
as the collection (as the key and the embeddings). The manifest records the N-gram
index's MAC (statistics of another build are refused: their document numbers would name
other documents) and the arrays' SHA-256, and is authenticated under a subkey of the
index key, so an edited file is refused rather than trusted.
"""
from __future__ import annotations

import hashlib
import hmac
import io
import json
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from ..errors import IndexFormatError, InputError
from ..io.files import atomic_directory, atomic_write
from ..linkage.index import CorpusIndex
from ..linkage.index.format import canonical_bytes, read_sidecar_manifest, sidecar_of_format
from ..progress import Progress
from .bm25 import B, K1, Bm25Statistics

FORMAT_NAME = "spacy-delink-retrieval"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
ARRAYS = ("terms", "starts", "docs", "tfs", "lengths")
READING = "search"


def retrieval_path(index_dir: str | Path) -> Path:
    """``<index>.retrieval`` beside the index directory (like ``<index>.key``)."""
    index_dir = Path(index_dir)
    return index_dir.with_name(index_dir.name + ".retrieval")


def search_keys(index: CorpusIndex, text: str) -> np.ndarray:
    """The keyed digests of ``text``'s search-reading words (masks removed), as the N-gram index names them."""
    return search_tokens(index, text)[1]


def search_tokens(index: CorpusIndex, text: str) -> tuple[Any, np.ndarray]:
    if READING not in index.hashers:
        raise InputError(
            f"index {index.path} does not hold the search reading, which ranked retrieval reads; rebuild it with --readings exact,search,gap"
        )
    return index.tokenize(text, READING)


def _array_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def build_retrieval_index(
    index: CorpusIndex, documents: Iterable[tuple[Any, str]], output: Path | None = None, progress: bool = True
) -> Path:
    """Count the words of every document of the index's collection (same ids, same order) and write the statistics."""
    output = retrieval_path(index.path) if output is None else Path(output)
    if output.exists() and not sidecar_of_format(output, FORMAT_NAME, MANIFEST):
        raise InputError(f"{output} exists and is not a retrieval index; move it away so the statistics can be written there")
    keys_per_document = []
    with Progress("retrieval", "docs", index.documents, enabled=progress) as bar:
        for number, (doc_id, text) in enumerate(documents):
            if number >= index.documents or not index.doc_id_matches(number, doc_id):
                raise InputError(
                    f"document {number + 1} of the corpus has id {doc_id!r}, not the id index {index.path} has there; "
                    "count the same corpus, in the same order, that the index was built from"
                )
            keys_per_document.append(search_keys(index, text))
            bar.update(1)
    if len(keys_per_document) != index.documents:
        raise InputError(
            f"the corpus has {len(keys_per_document):,} documents but index {index.path} has {index.documents:,}; "
            "count the corpus the index was built from"
        )
    statistics = Bm25Statistics.from_documents(keys_per_document)
    with atomic_directory(output, overwrite=True) as folder:
        arrays: dict[str, Any] = {}
        for name in ARRAYS:
            data = _array_bytes(getattr(statistics, name))
            (folder / f"{name}.npy").write_bytes(data)
            arrays[name] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
        manifest = {
            "format": FORMAT_NAME,
            "format_version": FORMAT_VERSION,
            "documents": index.documents,
            "index_mac": str(index.manifest["mac"]),
            "reading": READING,
            "bm25": {"k1": K1, "b": B},
            "arrays": arrays,
        }
        manifest["mac"] = index.sidecar_mac(canonical_bytes(manifest))
        with atomic_write(folder / MANIFEST) as handle:
            json.dump(manifest, handle, indent=1)
    return output


def count_corpus(
    index_dir: Path, corpus: Sequence[Path], key_file: Path | None = None, text_field: str = "text", id_field: str = "id",
    skip_invalid: bool = False, progress: bool = True, input_format: str | None = None,
) -> Path:
    """``delink index --retrieval``: the statistics of the corpus an index was just built from, beside it."""
    from ..corpus.source import read_documents

    index = CorpusIndex(index_dir, key_file=key_file)
    documents = read_documents(corpus, text_field, id_field, skip_invalid, input_format=input_format)
    return build_retrieval_index(index, documents, progress=progress)


def open_retrieval_index(index: CorpusIndex, path: str | Path | None = None) -> Bm25Statistics:
    """The statistics beside ``index``, every check passed (the build, the MAC, each array's checksum)."""
    path = retrieval_path(index.path) if path is None else Path(path)
    rebuild = "rebuild it with `delink index ... --retrieval --overwrite`"
    manifest_path = path / MANIFEST
    manifest = read_sidecar_manifest(path, FORMAT_NAME, "retrieval", "build one with `delink index ... --retrieval`", rebuild, MANIFEST)
    if manifest.get("format_version") != FORMAT_VERSION:
        raise IndexFormatError(f"{path} uses retrieval format {manifest.get('format_version')!r}, not {FORMAT_VERSION}; {rebuild}")
    if manifest.get("index_mac") != str(index.manifest["mac"]) or manifest.get("documents") != index.documents:
        raise IndexFormatError(f"retrieval index {path} belongs to another build of index {index.path}; {rebuild}")
    if not isinstance(manifest.get("mac"), str) or not hmac.compare_digest(manifest["mac"], index.sidecar_mac(canonical_bytes(manifest))):
        raise IndexFormatError(f"{manifest_path} does not verify under the key of index {index.path} (edited?); {rebuild}")
    if manifest.get("bm25") != {"k1": K1, "b": B}:
        raise IndexFormatError(f"retrieval index {path} was counted for BM25 {manifest.get('bm25')}, not k1={K1}, b={B}; {rebuild}")
    loaded: dict[str, np.ndarray] = {}
    for name in ARRAYS:
        file = path / f"{name}.npy"
        data = file.read_bytes() if file.is_file() else b""
        if hashlib.sha256(data).hexdigest() != manifest["arrays"][name]["sha256"]:
            raise IndexFormatError(f"retrieval index {path}: {file.name} is missing or corrupted (checksum mismatch); {rebuild}")
        loaded[name] = np.load(io.BytesIO(data), allow_pickle=False)
    statistics = Bm25Statistics(**loaded)
    if len(statistics.lengths) != index.documents or len(statistics.starts) != len(statistics.terms) + 1:
        raise IndexFormatError(f"retrieval index {path}: its arrays do not fit together; {rebuild}")
    return statistics
