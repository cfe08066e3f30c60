"""Streaming readers for the collections the index is built from and the documents assessed.

Sources: JSONL / JSONL.gz (configurable text and id fields), a folder of ``.txt`` files,
or a spaCy ``DocBin`` (``.spacy``). Every reader yields ``(doc_id, text)`` one document at a
time, so a corpus is never held in memory whole.

The id rule, shared by every command that reads documents (docs/index.md): each document
carries its own id, a non-empty string or an integer (JSONL: the id field; a ``.txt`` file:
its path in the folder; a DocBin doc: ``doc.user_data["id"]``), and ids are unique within
one input. Nothing is invented: an id made from a file name and line number changes when
the file moves or lines are added, so outputs and resumed runs would no longer match.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional, Union

from .errors import InputError
from .io import JsonlStats, read_jsonl

MAX_DOCUMENT_CHARS = 50_000_000
#: A document id as given by the user (JSON string or integer).
DocId = Union[str, int]


@dataclass
class CorpusStats:
    """What a pass over the sources saw, for the build summary and --skip-invalid reports."""

    documents: int = 0
    empty: int = 0
    skipped_lines: list[str] = field(default_factory=list)


def unicode_problem(value: str) -> Optional[str]:
    """Where ``value`` stops being text (a lone UTF-16 surrogate such as \\ud800, from a broken
    ``\\u`` escape), if anywhere: such a string cannot be written as UTF-8 or shown."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as err:
        return f"a lone UTF-16 surrogate \\u{ord(value[err.start]):04x} at character {err.start}"
    return None


def _check_unicode(value: str, where: str, what: str) -> None:
    problem = unicode_problem(value)
    if problem:
        raise InputError(f"{where}: {what} holds {problem}, which is not a character; fix the source") from None


def check_doc_id(value: Any, where: str, id_field: str = "id") -> DocId:
    """A document's id under the id rule, or a one-line error naming the document."""
    if value is None:
        raise InputError(
            f"{where}: no id (field {id_field!r}); every document needs a unique string or integer id "
            "(pass --id-field to name the field holding it)"
        )
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InputError(f"{where}: id field {id_field!r} must be a string or an integer, got {value!r}")
    if isinstance(value, str):
        if not value:
            raise InputError(f"{where}: id field {id_field!r} is empty; every document needs a non-empty id")
        _check_unicode(value, where, "the id")
    return value


def unique_ids(documents: Iterable[tuple[DocId, str]]) -> Iterator[tuple[DocId, str]]:
    """Pass documents through, refusing a repeated id (outputs and index rows are keyed by it)."""
    seen: dict[DocId, int] = {}
    for number, (doc_id, text) in enumerate(documents, start=1):
        first = seen.setdefault(doc_id, number)
        if first != number:
            raise InputError(f"duplicate document id {doc_id!r} (documents {first} and {number}); ids must be unique")
        yield doc_id, text


def _check_text(text: object, where: str, text_field: str) -> str:
    if text is None:
        raise InputError(f"{where}: missing text field {text_field!r}; pass --text-field to name it")
    if not isinstance(text, str):
        raise InputError(f"{where}: field {text_field!r} must be a string, got {type(text).__name__}")
    if len(text) > MAX_DOCUMENT_CHARS:
        raise InputError(f"{where}: document has {len(text):,} characters, over the {MAX_DOCUMENT_CHARS:,} limit")
    _check_unicode(text, where, "the text")
    return text


def read_jsonl_documents(
    path: Path,
    text_field: str = "text",
    id_field: str = "id",
    skip_invalid: bool = False,
    stats: CorpusStats | None = None,
) -> Iterator[tuple[DocId, str]]:
    """``(id, text)`` per JSON line under the id rule.

    With ``skip_invalid``, a line that is not JSON or breaks the rules (no id, no text, ...)
    is skipped and listed in ``stats.skipped_lines`` as ``<file>:<line>``, in line order.
    """
    stats = stats if stats is not None else CorpusStats()
    line_stats = JsonlStats()
    try:
        for record in read_jsonl(path, skip_invalid=skip_invalid, stats=line_stats):
            where = f"{path}:{line_stats.lines}"
            try:
                doc_id = check_doc_id(record.get(id_field), where, id_field)
                text = _check_text(record.get(text_field), where, text_field)
            except InputError:
                if not skip_invalid:
                    raise
                line_stats.skipped.append(line_stats.lines)
                continue
            yield doc_id, text
    finally:
        stats.skipped_lines.extend(f"{path}:{n}" for n in line_stats.skipped)


def read_text_folder(path: Path) -> Iterator[tuple[DocId, str]]:
    """One document per ``*.txt`` file (recursively, sorted), id = path relative to the folder."""
    files = sorted(p for p in path.rglob("*.txt") if p.is_file())
    if not files:
        raise InputError(f"{path}: folder has no .txt files")
    for file in files:
        try:
            text = file.read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            raise InputError(f"{file}: not valid UTF-8 ({err.reason} at byte {err.start}); re-encode it") from None
        yield check_doc_id(str(file.relative_to(path)), str(file)), _check_text(text, str(file), "text")


def read_docbin(path: Path) -> Iterator[tuple[DocId, str]]:
    """Texts of a spaCy DocBin, each with its id from ``doc.user_data['id']``."""
    import spacy
    from spacy.tokens import DocBin

    try:
        doc_bin = DocBin().from_disk(path)
    except Exception as err:  # DocBin raises several unrelated types on bad bytes
        raise InputError(f"{path}: not a readable spaCy DocBin ({err})") from None
    vocab = spacy.blank("xx").vocab
    for n, doc in enumerate(doc_bin.get_docs(vocab), start=1):
        where = f"{path} doc {n}"
        doc_id = check_doc_id(doc.user_data.get("id"), where, "user_data['id']")
        yield doc_id, _check_text(doc.text, where, "text")


def read_documents(
    sources: Iterable[str | Path],
    text_field: str = "text",
    id_field: str = "id",
    skip_invalid: bool = False,
    stats: CorpusStats | None = None,
) -> Iterator[tuple[DocId, str]]:
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
