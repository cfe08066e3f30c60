"""Streaming readers for the collections the index is built from and the documents assessed.

Sources: JSONL / JSONL.gz (configurable text and id fields), a folder of ``.txt`` files,
or a spaCy ``DocBin`` (``.spacy``). Every reader yields ``(doc_id, text)`` one document at a
time, so a corpus is never held in memory whole.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from .errors import InputError
from .io import JsonlStats, read_jsonl

MAX_DOCUMENT_CHARS = 50_000_000


@dataclass
class CorpusStats:
    """What a pass over the sources saw, for the build summary and --skip-invalid reports."""

    documents: int = 0
    empty: int = 0
    skipped_lines: list[str] = field(default_factory=list)


def _check_text(text: object, where: str, text_field: str) -> str:
    if text is None:
        raise InputError(f"{where}: missing text field {text_field!r}; pass --text-field to name it")
    if not isinstance(text, str):
        raise InputError(f"{where}: field {text_field!r} must be a string, got {type(text).__name__}")
    if len(text) > MAX_DOCUMENT_CHARS:
        raise InputError(f"{where}: document has {len(text):,} characters, over the {MAX_DOCUMENT_CHARS:,} limit")
    return text


def read_jsonl_documents(
    path: Path,
    text_field: str = "text",
    id_field: str = "id",
    skip_invalid: bool = False,
    stats: CorpusStats | None = None,
) -> Iterator[tuple[str | int, str]]:
    """``(id, text)`` per JSON line, the id as given; a line without one gets ``<file>:<line>``."""
    stats = stats if stats is not None else CorpusStats()
    line_stats = JsonlStats()
    for record in read_jsonl(path, skip_invalid=skip_invalid, stats=line_stats):
        where = f"{path}:{line_stats.lines}"
        text = _check_text(record.get(text_field), where, text_field)
        doc_id = record.get(id_field)
        if doc_id is None:
            doc_id = where
        elif isinstance(doc_id, bool) or not isinstance(doc_id, (str, int)):
            raise InputError(f"{where}: field {id_field!r} must be a string or an integer, got {doc_id!r}")
        yield doc_id, text
    stats.skipped_lines.extend(f"{path}:{n}" for n in line_stats.skipped)


def read_text_folder(path: Path) -> Iterator[tuple[str | int, str]]:
    """One document per ``*.txt`` file (recursively, sorted), id = path relative to the folder."""
    files = sorted(p for p in path.rglob("*.txt") if p.is_file())
    if not files:
        raise InputError(f"{path}: folder has no .txt files")
    for file in files:
        try:
            text = file.read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            raise InputError(f"{file}: not valid UTF-8 ({err.reason} at byte {err.start}); re-encode it") from None
        yield str(file.relative_to(path)), _check_text(text, str(file), "text")


def read_docbin(path: Path) -> Iterator[tuple[str | int, str]]:
    """Texts of a spaCy DocBin; ids from ``doc.user_data['id']`` when set, else ``<file>#<n>``."""
    import spacy
    from spacy.tokens import DocBin

    try:
        doc_bin = DocBin().from_disk(path)
    except Exception as err:  # DocBin raises several unrelated types on bad bytes
        raise InputError(f"{path}: not a readable spaCy DocBin ({err})") from None
    vocab = spacy.blank("xx").vocab
    for n, doc in enumerate(doc_bin.get_docs(vocab)):
        doc_id = doc.user_data.get("id", f"{path.name}#{n}")
        yield str(doc_id), doc.text


def read_documents(
    sources: Iterable[str | Path],
    text_field: str = "text",
    id_field: str = "id",
    skip_invalid: bool = False,
    stats: CorpusStats | None = None,
) -> Iterator[tuple[str | int, str]]:
    """Stream ``(id, text)`` from every source in order, choosing the reader by path."""
    stats = stats if stats is not None else CorpusStats()
    for source in sources:
        path = Path(source)
        if not path.exists():
            raise InputError(f"{path}: no such file or folder")
        if path.is_dir():
            documents = read_text_folder(path)
        elif path.suffix == ".spacy":
            documents = read_docbin(path)
        elif path.name.endswith((".jsonl", ".jsonl.gz", ".json.gz", ".ndjson")):
            documents = read_jsonl_documents(path, text_field, id_field, skip_invalid, stats)
        else:
            raise InputError(f"{path}: unsupported corpus format; use .jsonl, .jsonl.gz, .spacy or a folder of .txt")
        for doc_id, text in documents:
            stats.documents += 1
            stats.empty += not text.strip()
            yield doc_id, text
