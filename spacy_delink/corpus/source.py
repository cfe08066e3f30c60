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

The id rule (``rules``) applies to every format.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Optional

from ..errors import InputError
from ..io.files import is_stdio
from ..io.streams import StdinCopy
from ..urls import WEB_PROTOCOLS, display_name, innermost_filesystem, is_url, local_path, read_bytes, redact_url, url_errors, url_name, url_protocols
from .folders import read_docbin, read_text_folder, read_url_text_folder
from .rows import InputRow, jsonl_rows, table_rows
from .rules import CLI_FIELD_HINTS, CorpusStats, DocId

if TYPE_CHECKING:
    import pyarrow as pa

#: Names read as JSONL whose lines a progress bar counts first (gzipped when they end in .gz).
JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".json.gz", ".ndjson", ".ndjson.gz")
#: ... and those it does not (zstd-compressed).
JSONL_ZSTD_SUFFIXES = (".jsonl.zst", ".ndjson.zst")
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


def output_format(path: str | Path) -> str:
    """The format an output is written in, by its name: ``.csv``, ``.tsv``, ``.parquet``, else JSONL (also ``-``)."""
    name = Path(str(path)).name.lower()
    for fmt in ("csv", "tsv", "parquet"):
        if name.endswith(_FORMAT_SUFFIXES[fmt]):
            if name.endswith((".gz", ".zst", ".bz2")):
                raise InputError(f"{path}: a compressed {fmt.upper()} output is not written; name it .{fmt}")
            return fmt
    return "jsonl"


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
class InputRun:
    """What a command did with an input's documents, for its closing line; ``assess`` and ``protect`` add their counts."""

    documents: int = 0
    #: The inputs left out as invalid (``--skip-invalid``), each as ``file:line`` or ``file row N``.
    skipped_lines: list[str] = field(default_factory=list)
    seconds: float = 0.0


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
        from ..tables import TABLE_FORMATS

        return self.format in TABLE_FORMATS

    def table(self, skip_invalid: bool = False) -> "pa.Table":
        """The whole table of a CSV, TSV or Parquet input, read once."""
        from ..tables import read_table

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
