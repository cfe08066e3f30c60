"""The id rule and the text rule, shared by every command that reads documents (docs/index.md).

Each document carries its own id, a non-empty string or an integer (JSONL: the id field; a
``.txt`` file: its path in the folder; a DocBin doc: ``doc.user_data["id"]``), and ids are
unique within one input. Nothing is invented: an id made from a file name and line number
changes when the file moves or lines are added, so outputs and resumed runs would no longer
match. A text is a string of valid Unicode within the size limit.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Optional, Union

from ..errors import InputError

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
