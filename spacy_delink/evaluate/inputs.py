"""The inputs of ``delink evaluate``: the original collection, de-identified and protected texts, joined by id.

Nothing is trusted: ids must be strings or integers, a duplicated id leaves the join (one
cannot tell which copy is meant), a protected record's edits must replay exactly from
the de-identified text (otherwise it does not derive from it), and the original file must
be the collection the index was built from (same ids, same number of tokens). Documents
that cannot be joined are counted and named, and metrics use the rest. A protected text
that cannot be verified to derive from its de-identified text (its edits do not replay,
or it has none) stays in the metrics and counts as linkable after protection: a text
that may have been edited after it was checked is never counted as protected.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Union

from ..corpus.source import InputSource
from ..errors import InputError
from ..linkage.index import CorpusIndex

DocId = Union[str, int]

#: Why a document is left out of the metrics (keys of ``Joined.excluded``).
EXCLUSION_REASONS = {
    "duplicate_deidentified": "id occurs more than once in the de-identified file",
    "no_source": "id not in the original collection",
    "duplicate_protected": "id occurs more than once in the protected file",
    "no_protected": "no protected record with this id",
}


@dataclass
class Document:
    """One joined document: its source's number in the index, de-identified and protected text."""

    id: DocId
    source: int
    deidentified: str
    protected: str | None = None
    edits: list[dict[str, Any]] | None = None  # as recorded by ``delink protect``; None when absent
    settings: dict[str, Any] | None = None  # what the protected record says it was protected under
    #: Whether the protected text is shown to derive from the de-identified one (its edits replay);
    #: a text that is not counts as linkable after protection.
    derived: bool = True


@dataclass
class Joined:
    documents: list[Document]
    excluded: dict[str, list[DocId]] = field(default_factory=dict)
    unverified: list[DocId] = field(default_factory=list)  # protected records without edits to replay (counted linkable after)
    not_derived: list[DocId] = field(default_factory=list)  # protected records whose edits do not replay (counted linkable after)
    extra_protected: list[DocId] = field(default_factory=list)  # protected ids absent from the de-identified file
    has_protected: bool = False


@dataclass(frozen=True)
class InputFields:
    """How ``delink evaluate`` reads its three inputs: the fields (columns) of the id and the text, and
    the format where a name does not say it (``corpus.source.InputSource``)."""

    id_field: str = "id"
    text_field: str = "text"
    input_format: str | None = None


#: The fields of a ``delink protect`` record that a table output holds as JSON text (``tables.py``).
_JSON_FIELDS = ("edits", "protected_under")


def _records(path: Path, fields: InputFields) -> Iterator[tuple[DocId, str, dict[str, Any], str]]:
    """Every record of an input (any format the commands read) with its id, text and place; a bad one stops the run.

    A protect record read from a table holds its edits and settings as JSON text: they are read
    back (text that is not JSON stays text, and then fails the checks as anything else would).
    """
    source = InputSource(path, fields.input_format, fields.id_field, fields.text_field)
    for row in source.rows():
        record = dict(row.fields)
        for name in _JSON_FIELDS:
            if isinstance(record.get(name), str):
                try:
                    record[name] = json.loads(record[name])
                except ValueError:
                    pass
        yield row.doc_id, row.text, record, row.where


def replay_edits(source: str, edits: Any) -> str | None:
    """The text the edits produce from ``source``, or None when they do not apply to it.

    Edits (``delink protect``) carry offsets into the text as it was before their pass, and
    one pass's edits must not overlap. An edit that carries its ``original`` (written only
    with ``keep_source``) must cut out exactly that; the caller still compares the result
    with the protected text, so an edit without it cannot pass off a wrong replay.
    """
    if not isinstance(edits, list):
        return None
    passes: dict[int, list[tuple[int, int, str, str | None]]] = {}
    for edit in edits:
        if not isinstance(edit, dict):
            return None
        start, end, original, replacement, number = (edit.get(k) for k in ("start", "end", "original", "replacement", "pass"))
        values = (start, end, number)
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            return None
        if not (original is None or isinstance(original, str)) or not isinstance(replacement, str):
            return None
        passes.setdefault(int(number), []).append((int(start), int(end), replacement, original))  # type: ignore[arg-type]
    text = source
    for number in sorted(passes):
        pieces, cursor = [], 0
        for start, end, replacement, original in sorted(passes[number], key=lambda edit: edit[:2]):
            if start < cursor or end < start or end > len(text) or (original is not None and text[start:end] != original):
                return None
            pieces += [text[cursor:start], replacement]
            cursor = end
        pieces.append(text[cursor:])
        text = "".join(pieces)
    return text


def _protection_settings(record: dict[str, Any]) -> dict[str, Any] | None:
    """The (k, arity) and index key id a ``delink protect`` record says it was protected under."""
    under = record.get("protected_under")
    if isinstance(under, dict) and isinstance(under.get("k"), int) and isinstance(under.get("arity"), int):
        return {"k": under["k"], "arity": under["arity"], "index": under.get("index")}
    return None


def check_original(index: CorpusIndex, original: Path, fields: InputFields = InputFields()) -> list[tuple[DocId, str]]:
    """The original collection in index order, refused unless it is the one ``index`` was built from."""
    documents: list[tuple[int, DocId, str]] = []
    seen: set[int] = set()
    unknown = 0
    for doc_id, text, _, where in _records(original, fields):
        number = index.document_number(doc_id)
        if number is None:
            unknown += 1
            continue
        if number in seen:
            raise InputError(f"{where}: duplicate id {doc_id!r}; the original collection needs unique ids")
        seen.add(number)
        documents.append((number, doc_id, text))
    if unknown or len(documents) != index.documents:
        raise InputError(
            f"{original} is not the collection index {index.path} was built from ({len(documents) + unknown:,} documents, "
            f"{unknown:,} with ids the index lacks, {index.documents - len(documents):,} of the index's documents missing); "
            "pass the indexed corpus as --original"
        )
    tokenizer = index.hashers[index.readings[0]].tokenizer  # ``index.tokens`` counts that reading's tokens
    tokens = sum(len(tokenizer.tokenize(text)) for _, _, text in documents)
    if tokens != index.tokens:
        raise InputError(
            f"{original} has the index's ids but {tokens:,} tokens where index {index.path} counted {index.tokens:,}; "
            "its texts differ from the indexed ones: pass the indexed corpus as --original"
        )
    documents.sort(key=lambda item: item[0])
    return [(doc_id, text) for _, doc_id, text in documents]


def join(index: CorpusIndex, deidentified: Path, protected: Path | None, fields: InputFields = InputFields()) -> Joined:
    """De-identified documents with their source and (when given) their protected version."""
    rows = list(_records(deidentified, fields))
    if not rows:
        raise InputError(f"{deidentified} holds no documents; nothing to evaluate")
    counts = Counter(doc_id for doc_id, _, _, _ in rows)
    joined = Joined(documents=[], has_protected=protected is not None)
    excluded: dict[str, list[DocId]] = {reason: [] for reason in EXCLUSION_REASONS}
    documents: list[Document] = []
    for doc_id, text, _, _ in rows:
        number = index.document_number(doc_id)
        if counts[doc_id] > 1:
            if doc_id not in excluded["duplicate_deidentified"]:
                excluded["duplicate_deidentified"].append(doc_id)
        elif number is None:
            excluded["no_source"].append(doc_id)
        else:
            documents.append(Document(doc_id, number, text))
    if protected is not None:
        protected_rows = list(_records(protected, fields))
        protected_counts = Counter(doc_id for doc_id, _, _, _ in protected_rows)
        by_id = {doc_id: record for doc_id, _, record, _ in protected_rows}
        known = set(counts)
        joined.extra_protected = [doc_id for doc_id in protected_counts if doc_id not in known]
        kept = []
        for document in documents:
            record = by_id.get(document.id)
            if protected_counts[document.id] > 1:
                excluded["duplicate_protected"].append(document.id)
                continue
            if record is None:
                excluded["no_protected"].append(document.id)
                continue
            document.protected = record[fields.text_field]
            document.settings = _protection_settings(record)
            if "edits" in record:
                if replay_edits(document.deidentified, record["edits"]) != document.protected:
                    joined.not_derived.append(document.id)
                    document.derived = False
                else:
                    document.edits = record["edits"]
            elif document.protected != document.deidentified:
                joined.unverified.append(document.id)
                document.derived = False
            kept.append(document)
        documents = kept
    joined.documents = documents
    joined.excluded = {reason: ids for reason, ids in excluded.items() if ids}
    if not documents:
        reasons = "; ".join(f"{len(ids):,} {EXCLUSION_REASONS[r]}" for r, ids in joined.excluded.items())
        raise InputError(f"no document of {deidentified} can be evaluated ({reasons}); check that the files share ids")
    return joined
