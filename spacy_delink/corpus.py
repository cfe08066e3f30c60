"""Streaming readers for the collections the index is built from and the documents assessed.

Sources: JSONL / JSONL.gz (configurable text and id fields), a folder of ``.txt`` files,
or a spaCy ``DocBin`` (``.spacy``), each a local path or a URL fsspec opens (``urls.is_url``:
``s3://``, ``gs://``, ``https://``, ``file://``, ``memory://``, chains; not an http(s)
folder, which cannot be listed). The reader is chosen by the name either way, so a URL
reads as the same bytes at a path would. Every reader yields ``(doc_id, text)`` one
document at a time, so a corpus is never held in memory whole.

The id rule, shared by every command that reads documents (docs/index.md): each document
carries its own id, a non-empty string or an integer (JSONL: the id field; a ``.txt`` file:
its path in the folder; a DocBin doc: ``doc.user_data["id"]``), and ids are unique within
one input. Nothing is invented: an id made from a file name and line number changes when
the file moves or lines are added, so outputs and resumed runs would no longer match.
"""
from __future__ import annotations

import io
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional, Union

from .errors import InputError
from .io import JsonlStats, read_jsonl
from .urls import WEB_PROTOCOLS, display_name, innermost_filesystem, is_url, local_path, read_bytes, redact_url, url_errors, url_name, url_protocols

#: Names read as JSONL (gzipped when they end in .gz).
JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".json.gz", ".ndjson")
#: Characters that make a URL's path a glob pattern (``?`` only outside http(s), where it starts the query).
_GLOB = frozenset("*?[")

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
    path: str | Path,
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
    name = display_name(path)
    try:
        for record in read_jsonl(path, skip_invalid=skip_invalid, stats=line_stats):
            where = f"{name}:{line_stats.lines}"
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
        stats.skipped_lines.extend(f"{name}:{n}" for n in line_stats.skipped)


def _text_document(data: bytes, relative: str, where: str) -> tuple[DocId, str]:
    """A folder's ``.txt`` file as a document: id = its path in the folder; newlines read as ``Path.read_text`` does."""
    try:
        text = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8").read()
    except UnicodeDecodeError as err:
        raise InputError(f"{where}: not valid UTF-8 ({err.reason} at byte {err.start}); re-encode it") from None
    return check_doc_id(relative, where), _check_text(text, where, "text")


def read_text_folder(path: Path, skip_invalid: bool = False, stats: CorpusStats | None = None) -> Iterator[tuple[DocId, str]]:
    """One document per ``*.txt`` file (recursively, sorted), id = path relative to the folder.

    The corpus is what lies in the folder: a link to a file or folder outside it is refused
    before any document is read (with ``skip_invalid``, left out and listed in
    ``stats.skipped_lines`` with its reason). Links that stay inside are fine; folders are
    walked without following links (their targets are walked where they are, so a cycle
    ends; a link that names no file, as one in a cycle of links, is no document), and a
    file reached by several paths is one document, under its own path: the same text twice
    would make its phrases look shared by two documents.
    """
    stats = stats if stats is not None else CorpusStats()
    root = Path(os.path.realpath(path))
    files, outside = [], []
    for folder, directories, names in os.walk(path):
        for entry in (Path(folder, name) for name in directories + names):
            # realpath, not Path.resolve: a cycle of links resolves to a path of its own instead of raising
            if entry.is_symlink() and not Path(os.path.realpath(entry)).is_relative_to(root):
                outside.append(entry)
            elif entry.name.endswith(".txt") and entry.is_file():
                files.append(entry)
    for entry in sorted(outside):
        if not skip_invalid:
            raise InputError(
                f"{entry}: a link that leads outside the folder {path} (to {os.path.realpath(entry)}); a corpus folder is read "
                "alone: remove the link, copy what it names into the folder, or pass --skip-invalid to leave it out"
            )
        stats.skipped_lines.append(f"{entry} (leads outside the folder)")
    by_identity: dict[tuple[int, int], Path] = {}
    for file in sorted(files):
        status = file.stat()
        identity = (status.st_dev, status.st_ino)
        first = by_identity.setdefault(identity, file)
        if first.is_symlink() and not file.is_symlink():
            by_identity[identity] = file
    if not by_identity:
        raise InputError(f"{path}: folder has no .txt files")
    for file in sorted(by_identity.values()):
        yield _text_document(file.read_bytes(), str(file.relative_to(path)), str(file))


def read_url_text_folder(url: str) -> Iterator[tuple[DocId, str]]:
    """``read_text_folder`` for a folder URL: the same ids (path in the folder, ``/``-separated), the same order."""
    shown = redact_url(url)
    if url_protocols(url)[-1] in WEB_PROTOCOLS:
        raise InputError(
            f"{shown}: not a .jsonl, .jsonl.gz or .spacy file, and an http(s) URL cannot be listed as a folder; "
            "give the URL of each file"
        )
    prefix, fs, root = innermost_filesystem(url)
    root = root.rstrip("/")
    with url_errors(url):
        if not fs.isdir(root):
            if fs.exists(root):
                raise InputError(f"{shown}: unsupported corpus format; use .jsonl, .jsonl.gz, .spacy or a folder of .txt")
            raise InputError(f"{shown}: not found; check the URL")
        found = fs.find(root)
    # sorted by path components, as local folders are (a Path sorts by its parts)
    files = sorted(((path[len(root) + 1 :], path) for path in found if path.endswith(".txt")), key=lambda f: f[0].split("/"))
    if not files:
        raise InputError(f"{shown}: folder has no .txt files")
    for relative, path in files:
        file_url = prefix + fs.unstrip_protocol(path)
        with url_errors(file_url):
            data = fs.cat_file(path)
        yield _text_document(data, relative, redact_url(file_url))


def read_docbin(path: str | Path) -> Iterator[tuple[DocId, str]]:
    """Texts of a spaCy DocBin (a path or a URL), each with its id from ``doc.user_data['id']``."""
    import spacy
    from spacy.tokens import DocBin

    name = display_name(path)
    data = read_bytes(path)
    try:
        doc_bin = DocBin().from_bytes(data)
    except Exception as err:  # DocBin raises several unrelated types on bad bytes
        raise InputError(f"{name}: not a readable spaCy DocBin ({err})") from None
    vocab = spacy.blank("xx").vocab
    for n, doc in enumerate(doc_bin.get_docs(vocab), start=1):
        where = f"{name} doc {n}"
        doc_id = check_doc_id(doc.user_data.get("id"), where, "user_data['id']")
        yield doc_id, _check_text(doc.text, where, "text")


def read_documents(
    sources: Iterable[str | Path],
    text_field: str = "text",
    id_field: str = "id",
    skip_invalid: bool = False,
    stats: CorpusStats | None = None,
) -> Iterator[tuple[DocId, str]]:
    """Stream ``(id, text)`` from every source (a path or a URL) in order, choosing the reader by name."""
    stats = stats if stats is not None else CorpusStats()
    for source in sources:
        documents = (
            _url_documents(source, text_field, id_field, skip_invalid, stats)
            if is_url(source)
            else _path_documents(Path(source), text_field, id_field, skip_invalid, stats)
        )
        for doc_id, text in documents:
            stats.documents += 1
            stats.empty += not text.strip()
            yield doc_id, text


def _path_documents(
    path: Path, text_field: str, id_field: str, skip_invalid: bool, stats: CorpusStats
) -> Iterator[tuple[DocId, str]]:
    if not path.exists():
        raise InputError(f"{path}: no such file or folder")
    if path.is_dir():
        return read_text_folder(path, skip_invalid, stats)
    if path.suffix == ".spacy":
        return read_docbin(path)
    if path.name.endswith(JSONL_SUFFIXES):
        return read_jsonl_documents(path, text_field, id_field, skip_invalid, stats)
    raise InputError(f"{path}: unsupported corpus format; use .jsonl, .jsonl.gz, .spacy or a folder of .txt")


def _url_documents(
    url: str, text_field: str, id_field: str, skip_invalid: bool, stats: CorpusStats
) -> Iterator[tuple[DocId, str]]:
    name = url_name(url)
    if name.endswith(".spacy"):
        return read_docbin(url)
    if name.endswith(JSONL_SUFFIXES):
        return read_jsonl_documents(url, text_field, id_field, skip_invalid, stats)
    local = local_path(url)
    if local is not None and local.is_dir():  # a file:// folder: the local reader keeps to it (fsspec reads links through)
        return read_text_folder(local, skip_invalid, stats)
    return read_url_text_folder(url)


def resolve_sources(sources: Iterable[str]) -> list[str]:
    """Corpus arguments as every reader (and Dask worker) can open them: local paths made absolute,
    URL globs expanded (in name order; not for http(s), where ``?`` starts the query)."""
    resolved: list[str] = []
    for source in sources:
        if not is_url(source):
            resolved.append(str(Path(source).resolve()))
        elif url_protocols(source)[-1] in WEB_PROTOCOLS or not _GLOB & set(source.rpartition("::")[2]):
            resolved.append(source)
        else:
            prefix, fs, pattern = innermost_filesystem(source)
            with url_errors(source):
                matches = sorted(fs.glob(pattern))
            if not matches:
                raise InputError(f"{redact_url(source)}: no file matches this pattern; check the URL")
            resolved += [prefix + fs.unstrip_protocol(match) for match in matches]
    return resolved
