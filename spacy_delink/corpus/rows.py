"""An input's documents as rows: each with its place, id, text and whole record (``InputRow``), from JSONL or a table.

Every row carries its whole record (``InputRow.fields``), which outputs keep.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from ..errors import InputError
from ..io.jsonl import JsonlStats, read_jsonl
from ..io.streams import StdinCopy
from ..urls import display_name
from .rules import CLI_FIELD_HINTS, CorpusStats, DocId, check_doc_id, check_text

if TYPE_CHECKING:
    import pyarrow as pa


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


def unique_rows(rows: Iterable[InputRow]) -> Iterator[InputRow]:
    """Pass rows through, refusing a repeated id (outputs are keyed by it), naming both places."""
    seen: dict[DocId, str] = {}
    for row in rows:
        first = seen.setdefault(row.doc_id, row.where)
        if first != row.where:
            raise InputError(f"{row.where}: duplicate document id {row.doc_id!r} (first at {first}); ids must be unique")
        yield row


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
    from ..tables import json_value, table_rows as rows_of

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
