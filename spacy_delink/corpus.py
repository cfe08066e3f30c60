"""The one reader of every command and of the Python API: the collections indexed and the documents assessed.

Sources (``InputSource``): JSONL (also ``.gz``, ``.zst``; configurable text and id fields),
CSV and TSV (columns), Parquet, a folder of ``.txt`` and ``.md`` files, a spaCy ``DocBin``
(``.spacy``, for the index), or ``-`` for stdin; each a local path or (JSONL, folders,
DocBins) a URL fsspec opens (``urls.is_url``: ``s3://``, ``gs://``, ``https://``,
``file://``, ``memory://``, chains; not an http(s) folder, which cannot be listed). The
format is read off the name (``--format`` where it does not say; stdin is JSONL unless
told), so a URL reads as the same bytes at a path would. JSONL and folders are streamed a
document at a time; a table (CSV, TSV, Parquet) is read whole by pyarrow (``tables.py``).
Every row carries its whole record (``InputRow.fields``), which outputs keep.

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
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Optional, Union

from .errors import InputError
from .io.files import is_stdio
from .io.jsonl import JsonlStats, read_jsonl
from .io.streams import StdinCopy
from .urls import WEB_PROTOCOLS, display_name, innermost_filesystem, is_url, local_path, read_bytes, redact_url, url_errors, url_name, url_protocols

if TYPE_CHECKING:
    import pyarrow as pa

#: Names read as JSONL whose lines a progress bar counts first (gzipped when they end in .gz).
JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".json.gz", ".ndjson", ".ndjson.gz")
#: ... and those it does not (zstd-compressed).
JSONL_ZSTD_SUFFIXES = (".jsonl.zst", ".ndjson.zst")
#: The files of a folder input, each one document.
TEXT_FILE_SUFFIXES = (".txt", ".md")
#: Every input format, as ``--format`` names it; the name of an input says which unless told.
INPUT_FORMATS = ("jsonl", "csv", "tsv", "parquet", "folder", "spacy")
#: Name endings of each format that a name says (compressed CSV/TSV too: pyarrow reads them by name).
_FORMAT_SUFFIXES = {
    "jsonl": JSONL_SUFFIXES + JSONL_ZSTD_SUFFIXES,
    "csv": (".csv", ".csv.gz", ".csv.zst", ".csv.bz2"),
    "tsv": (".tsv", ".tab", ".tsv.gz", ".tsv.zst", ".tsv.bz2"),
    "parquet": (".parquet", ".pq"),
    "spacy": (".spacy",),
}
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


#: How a command-line user names the id and text fields (an API caller is told its own argument names).
CLI_FIELD_HINTS = ("pass --id-field to name the field holding it", "pass --text-field to name it")


def check_doc_id(value: Any, where: str, id_field: str = "id", hint: str = CLI_FIELD_HINTS[0]) -> DocId:
    """A document's id under the id rule, or a one-line error naming the document (``hint``: how to name the field)."""
    if value is None:
        raise InputError(
            f"{where}: no id (field {id_field!r}); every document needs a unique string or integer id ({hint})"
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


def unique_rows(rows: Iterable[InputRow]) -> Iterator[InputRow]:
    """Pass rows through, refusing a repeated id (outputs are keyed by it), naming both places."""
    seen: dict[DocId, str] = {}
    for row in rows:
        first = seen.setdefault(row.doc_id, row.where)
        if first != row.where:
            raise InputError(f"{row.where}: duplicate document id {row.doc_id!r} (first at {first}); ids must be unique")
        yield row


def output_format(path: str | Path) -> str:
    """The format an output is written in, by its name: ``.csv``, ``.tsv``, ``.parquet``, else JSONL (also ``-``)."""
    name = Path(str(path)).name.lower()
    for fmt in ("csv", "tsv", "parquet"):
        if name.endswith(_FORMAT_SUFFIXES[fmt]):
            if name.endswith((".gz", ".zst", ".bz2")):
                raise InputError(f"{path}: a compressed {fmt.upper()} output is not written; name it .{fmt}")
            return fmt
    return "jsonl"


def nothing_done(command: str, documents: int, stats: CorpusStats, source: str) -> str | None:
    """Why a run that handled no document must not end as a success (an all-clear about nothing), or None.

    ``delink assess`` and ``delink protect`` stop with this line (unless ``--allow-empty``):
    a script that checks the exit status would read "nothing links" from an empty run.
    """
    if documents:
        return None
    skipped = stats.skipped_lines
    if skipped:
        return (
            f"{source}: no document to {command}: all {len(skipped):,} input(s) were skipped as invalid (first: {skipped[0]}); "
            "fix them (--id-field and --text-field name the fields, --format the format), or pass --allow-empty"
        )
    return f"{source}: no document to {command}: the input is empty; check the file, or pass --allow-empty"


def check_text(text: object, where: str, text_field: str, hint: str = CLI_FIELD_HINTS[1]) -> str:
    """A document's text: a string of valid Unicode within the size limit, or a one-line error naming the document."""
    if text is None:
        raise InputError(f"{where}: missing text field {text_field!r}; {hint}")
    if not isinstance(text, str):
        raise InputError(f"{where}: field {text_field!r} must be a string, got {type(text).__name__}")
    if len(text) > MAX_DOCUMENT_CHARS:
        raise InputError(f"{where}: document has {len(text):,} characters, over the {MAX_DOCUMENT_CHARS:,} limit")
    _check_unicode(text, where, "the text")
    return text


@dataclass(frozen=True)
class InputRow:
    """One document of an input: where it is, its id and text, and its whole record (every field, as read)."""

    #: The row's place in the input: a JSONL line number, a table row (0-based) or a folder file (0-based).
    position: int
    #: How errors name it: ``file:line``, ``file row N`` (data rows from 1), or the file of a folder.
    where: str
    doc_id: DocId
    text: str
    #: The record as read, id and text included (table cells as JSON values; a folder file: id and text).
    fields: dict[str, Any]

    def with_results(self, record: dict[str, Any], id_field: str, text_field: str) -> dict[str, Any]:
        """The output record of this row: every field of the input untouched, then the command's ``record``.

        The record's ``id`` is this row's (kept under ``id_field``); its ``text`` (a protected
        text) replaces the input's text in place, and a record without one (``assess``) drops
        it. A field of the input that the record would overwrite is refused: rename it.
        """
        merged = dict(self.fields)
        if "text" in record:
            merged[text_field] = record["text"]
        else:
            merged.pop(text_field, None)
        for key, value in record.items():
            if key in ("id", "text"):
                continue
            if key in merged:
                raise InputError(
                    f"{self.where}: the input has a field {key!r}, which is also a field of the output; rename it in the input"
                )
            merged[key] = value
        return merged


def jsonl_rows(
    path: str | Path | StdinCopy, text_field: str = "text", id_field: str = "id", skip_invalid: bool = False,
    stats: CorpusStats | None = None, hints: tuple[str, str] = CLI_FIELD_HINTS,
) -> Iterator[InputRow]:
    """Every JSON line as an ``InputRow`` under the id rule.

    With ``skip_invalid``, a line that is not JSON or breaks the rules (no id, no text, ...)
    is skipped and listed in ``stats.skipped_lines`` as ``<file>:<line>``, in line order.
    """
    stats = stats if stats is not None else CorpusStats()
    line_stats = JsonlStats()
    name = display_name(str(path))
    try:
        for record in read_jsonl(path, skip_invalid=skip_invalid, stats=line_stats):
            where = f"{name}:{line_stats.lines}"
            try:
                doc_id = check_doc_id(record.get(id_field), where, id_field, hints[0])
                text = check_text(record.get(text_field), where, text_field, hints[1])
            except InputError:
                if not skip_invalid:
                    raise
                line_stats.skipped.append(line_stats.lines)
                continue
            yield InputRow(line_stats.lines, where, doc_id, text, record)
    finally:
        stats.skipped_lines.extend(f"{name}:{n}" for n in sorted(line_stats.skipped))


def read_jsonl_documents(
    path: str | Path,
    text_field: str = "text",
    id_field: str = "id",
    skip_invalid: bool = False,
    stats: CorpusStats | None = None,
) -> Iterator[tuple[DocId, str]]:
    """``(id, text)`` per JSON line under the id rule (``jsonl_rows``)."""
    for row in jsonl_rows(path, text_field, id_field, skip_invalid, stats):
        yield row.doc_id, row.text


def table_rows(
    table: "pa.Table", name: str, text_field: str, id_field: str, skip_invalid: bool, stats: CorpusStats,
    hints: tuple[str, str] = CLI_FIELD_HINTS,
) -> Iterator[InputRow]:
    """Every row of a CSV, TSV or Parquet table as an ``InputRow``; a table without the id or text column is refused at once."""
    from .tables import json_value, table_rows as rows_of

    for column, hint in ((id_field, hints[0]), (text_field, hints[1])):
        if table.num_rows and column not in table.column_names:
            shown = ", ".join(repr(name) for name in table.column_names[:10])
            raise InputError(f"{name}: no column {column!r} (its columns: {shown}); {hint}")
    for position, row in enumerate(rows_of(table)):
        where = f"{name} row {position + 1}"
        try:
            doc_id = check_doc_id(row.get(id_field), where, id_field, hints[0])
            text = check_text(row.get(text_field), where, text_field, hints[1])
            fields = {column: json_value(value, where, column) for column, value in row.items()}
        except InputError:
            if not skip_invalid:
                raise
            stats.skipped_lines.append(where)
            continue
        yield InputRow(position, where, doc_id, text, fields)


def input_format(source: str | Path | StdinCopy, given: Optional[str] = None) -> str:
    """The format of an input: ``given`` (``--format``), else what its name says; stdin is JSONL unless told."""
    if given is not None:
        if given not in INPUT_FORMATS:
            raise InputError(f"--format {given!r}: not a format; use one of {', '.join(INPUT_FORMATS)}")
        return given
    if isinstance(source, StdinCopy) or is_stdio(source):
        return "jsonl"
    name = (url_name(str(source)) if is_url(source) else Path(source).name).lower()
    for fmt, suffixes in _FORMAT_SUFFIXES.items():
        if name.endswith(suffixes):
            return fmt
    if not is_url(source) and Path(source).is_dir():
        return "folder"
    if is_url(source):
        return "folder"  # a URL without a known ending: a folder to list (``read_url_text_folder`` says when it is not)
    if not Path(source).exists():
        raise InputError(f"{source}: no such file or folder")
    raise InputError(
        f"{source}: its name does not say its format; name it .jsonl, .csv, .tsv or .parquet, or pass --format "
        f"({', '.join(INPUT_FORMATS[:-1])})"
    )


@dataclass
class InputSource:
    """An input as every command and the API read it: a path, URL or ``-`` (stdin), its format, its id and text fields.

    A table is read once and kept (``table``), so the commands that read their input twice
    (``protect``) and write it back with their columns added (CSV in, CSV out) parse it once;
    so is stdin, when it is a table or must be read twice (``StdinCopy``).
    """

    path: str | Path | StdinCopy
    format: Optional[str] = None
    id_field: str = "id"
    text_field: str = "text"
    #: How errors tell the user to name the fields (the command line's options, or the API's arguments).
    hints: tuple[str, str] = CLI_FIELD_HINTS
    _table: Any = field(default=None, repr=False)
    _table_skipped: list[str] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        self.format = input_format(self.path, self.format)
        if self.format in ("folder", "spacy") and (isinstance(self.path, StdinCopy) or is_stdio(self.path)):
            raise InputError(f"--format {self.format}: stdin cannot be a {self.format}; give its path")

    @property
    def name(self) -> str:
        return display_name(str(self.path))

    @property
    def is_table(self) -> bool:
        from .tables import TABLE_FORMATS

        return self.format in TABLE_FORMATS

    def table(self, skip_invalid: bool = False) -> "pa.Table":
        """The whole table of a CSV, TSV or Parquet input, read once."""
        from .tables import read_table

        if self._table is None:
            path = self.path
            if isinstance(path, StdinCopy):
                data: bytes | Path = path.data
            elif is_stdio(path):
                self.path = path = StdinCopy.read()
                data = path.data
            elif is_url(path):
                data = read_bytes(path)
            else:
                data = Path(path)
                if not data.is_file():
                    raise InputError(f"{path}: no such file")
            self._table = read_table(data, str(self.format), self.name, skip_invalid, self._table_skipped)
        return self._table

    def rows(
        self, skip_invalid: bool = False, stats: CorpusStats | None = None, check: Callable[[str, str], None] | None = None
    ) -> Iterator[InputRow]:
        """Every document, in input order; an invalid one stops the run or, with ``skip_invalid``, is listed in ``stats``.

        ``check(text, where)`` is a command's own rule on a text (``memory.check_document_size``):
        an ``InputError`` from it makes the row invalid like any other.
        """
        stats = stats if stats is not None else CorpusStats()
        for row in self._rows(skip_invalid, stats):
            if check is not None:
                try:
                    check(row.text, row.where)
                except InputError:
                    if not skip_invalid:
                        raise
                    stats.skipped_lines.append(row.where)
                    continue
            yield row

    def _rows(self, skip_invalid: bool, stats: CorpusStats) -> Iterator[InputRow]:
        if self.format == "jsonl":
            yield from jsonl_rows(self.path, self.text_field, self.id_field, skip_invalid, stats, self.hints)
        elif self.is_table:
            table = self.table(skip_invalid)
            stats.skipped_lines.extend(f"{self.name}: {reason}" for reason in self._table_skipped)
            yield from table_rows(table, self.name, self.text_field, self.id_field, skip_invalid, stats, self.hints)
        else:
            for position, (doc_id, text) in enumerate(self._documents(skip_invalid, stats)):
                yield InputRow(position, f"{self.name}/{doc_id}", doc_id, text, {self.id_field: doc_id, self.text_field: text})

    def _documents(self, skip_invalid: bool, stats: CorpusStats) -> Iterator[tuple[DocId, str]]:
        """A folder's files or a DocBin's docs, which carry no fields but their id and text."""
        source = str(self.path)
        if self.format == "spacy":
            return read_docbin(source)
        if is_url(source):
            local = local_path(source)
            if local is not None and local.is_dir():  # a file:// folder: the local reader keeps to it (fsspec reads links through)
                return read_text_folder(local, skip_invalid, stats)
            return read_url_text_folder(source)
        if not Path(source).is_dir():
            raise InputError(f"{source}: --format folder, but this is not a folder; give a folder of .txt or .md files")
        return read_text_folder(Path(source), skip_invalid, stats)


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


def read_documents(
    sources: Iterable[str | Path],
    text_field: str = "text",
    id_field: str = "id",
    skip_invalid: bool = False,
    stats: CorpusStats | None = None,
    input_format: Optional[str] = None,
) -> Iterator[tuple[DocId, str]]:
    """Stream ``(id, text)`` from every source (a path or a URL) in order, each read as ``InputSource`` reads it."""
    stats = stats if stats is not None else CorpusStats()
    for source in sources:
        for row in InputSource(source, input_format, id_field, text_field).rows(skip_invalid, stats):
            stats.documents += 1
            stats.empty += not row.text.strip()
            yield row.doc_id, row.text


def resolve_sources(sources: Iterable[str]) -> list[str]:
    """Corpus arguments as every reader (and Dask worker) can open them: local paths made absolute,
    URL globs expanded (in name order; not for http(s), where ``?`` starts the query)."""
    resolved: list[str] = []
    for source in sources:
        if is_stdio(source):
            resolved.append(source)
        elif not is_url(source):
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
