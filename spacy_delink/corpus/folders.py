"""Inputs whose documents carry no fields but their id and text: a folder of ``.txt`` and ``.md`` files (a path or a URL), a spaCy DocBin."""
from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Iterator

from ..errors import InputError
from ..urls import WEB_PROTOCOLS, display_name, innermost_filesystem, read_bytes, redact_url, url_errors, url_protocols
from .rules import CorpusStats, DocId, check_doc_id, check_text

#: The files of a folder input, each one document.
TEXT_FILE_SUFFIXES = (".txt", ".md")


def _text_document(data: bytes, relative: str, where: str) -> tuple[DocId, str]:
    """A folder's ``.txt`` or ``.md`` file as a document: id = its path in the folder; newlines read as ``Path.read_text`` does."""
    try:
        text = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8").read()
    except UnicodeDecodeError as err:
        raise InputError(f"{where}: not valid UTF-8 ({err.reason} at byte {err.start}); re-encode it") from None
    return check_doc_id(relative, where), check_text(text, where, "text")


def read_text_folder(path: Path, skip_invalid: bool = False, stats: CorpusStats | None = None) -> Iterator[tuple[DocId, str]]:
    """One document per ``*.txt`` or ``*.md`` file (recursively, sorted), id = path relative to the folder.

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
            elif entry.name.endswith(TEXT_FILE_SUFFIXES) and entry.is_file():
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
        raise InputError(f"{path}: folder has no .txt or .md files")
    for file in sorted(by_identity.values()):
        yield _text_document(file.read_bytes(), str(file.relative_to(path)), str(file))


def read_url_text_folder(url: str) -> Iterator[tuple[DocId, str]]:
    """``read_text_folder`` for a folder URL: the same ids (path in the folder, ``/``-separated), the same order."""
    shown = redact_url(url)
    if url_protocols(url)[-1] in WEB_PROTOCOLS:
        raise InputError(
            f"{shown}: not a .jsonl, .csv, .tsv, .parquet or .spacy file, and an http(s) URL cannot be listed as a folder; "
            "give the URL of each file"
        )
    prefix, fs, root = innermost_filesystem(url)
    root = root.rstrip("/")
    with url_errors(url):
        if not fs.isdir(root):
            if fs.exists(root):
                raise InputError(f"{shown}: unsupported corpus format; use .jsonl, .csv, .tsv, .parquet, .spacy or a folder of .txt/.md files")
            raise InputError(f"{shown}: not found; check the URL")
        found = fs.find(root)
    # sorted by path components, as local folders are (a Path sorts by its parts)
    files = sorted(((path[len(root) + 1 :], path) for path in found if path.endswith(TEXT_FILE_SUFFIXES)), key=lambda f: f[0].split("/"))
    if not files:
        raise InputError(f"{shown}: folder has no .txt or .md files")
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
        doc_id = check_doc_id(doc.user_data.get("id"), where, "user_data['id']", "set doc.user_data['id'] on every Doc")
        yield doc_id, check_text(doc.text, where, "text")
