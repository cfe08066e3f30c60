"""What a resumed ``delink protect`` keeps of an existing output: only what it can verify again.

Every input line is checked first (an id, a text, valid Unicode; ids unique). An existing
output must hold only records of this input protected under exactly the current settings
(``protected_under``: the index's key id, size and rules, k, arity, readings). A resumed run
trusts nothing it finds: every record it keeps is detected again under the settings it
claims, and its ``input_digest`` (a keyed digest of the id and the input text,
``hashing.input_digest``) must match the input's; a record that fails either — edited back
towards the input, or made from a text that has since changed — is dropped from the output
and its document protected again.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..components.rewriter import DelinkRewriter
from ..corpus.rules import CorpusStats, DocId
from ..corpus.source import InputSource
from ..errors import InputError
from ..io.files import atomic_write
from ..io.jsonl import parse_json_line
from ..memory import check_document_size
from ..retrieval.defence import retrieval_settings

#: The record field that says under what a text was protected.
PROTECTED_UNDER = "protected_under"
#: The record field holding the keyed digest of the input document it was made from.
INPUT_DIGEST = "input_digest"


def protection_settings(rewriter: DelinkRewriter) -> dict[str, Any]:
    """Under what the rewriter protects: a resumed run accepts only records with exactly this.

    The index is named by its key id (a fresh secret per build), document count and a
    digest of its linkage rules; then k, arity, the readings checked and the flagging strategy.
    """
    index = rewriter.index
    rules = json.dumps(index.rules.to_dict(), sort_keys=True, ensure_ascii=False)
    return {
        "index": index.manifest["key_id"],
        "documents": index.documents,
        "rules": hashlib.sha256(rules.encode("utf-8")).hexdigest()[:16],
        "k": rewriter.k,
        "arity": rewriter.arity,
        "readings": list(rewriter.readings),
        "flagging": rewriter.flagging,
        **({"retrieval": retrieval_settings(rewriter.retrieval)} if rewriter.retrieval else {}),
    }


def carried_digest(fields: dict[str, Any], text_field: str) -> str:
    """A digest of a record's fields other than its text: what an output copies from its input, unchecked."""
    carried = {key: value for key, value in fields.items() if key != text_field}
    return hashlib.sha256(json.dumps(carried, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


@dataclass
class InputScan:
    """The input's valid ids: each one's place, keyed input digest and the digest and names of its other fields; and the skipped inputs."""

    lines: dict[DocId, int]
    digests: dict[DocId, str]
    skipped: list[str]
    #: Per id, the input's field names but the text, and a digest of their values (``carried_digest``).
    carried: dict[DocId, tuple[tuple[str, ...], str]] = field(default_factory=dict)


def scan_input(source: InputSource, skip_invalid: bool, digest: Callable[[DocId, str], str]) -> InputScan:
    """Every valid id with its place and ``digest(id, text)``, and the skipped inputs; duplicate ids are refused.

    Ids follow the rule every command shares (``corpus.rules.check_doc_id``: given, never invented).
    """
    stats = CorpusStats()
    scan = InputScan({}, {}, stats.skipped_lines)
    where: dict[DocId, str] = {}
    for row in source.rows(skip_invalid, stats, check_document_size):
        if row.doc_id in scan.lines:
            raise InputError(
                f"{row.where}: duplicate id {row.doc_id!r} (first at {where[row.doc_id]}); "
                "ids must be unique, or the second text would never be protected"
            )
        where[row.doc_id] = row.where
        scan.lines[row.doc_id] = row.position
        scan.digests[row.doc_id] = digest(row.doc_id, row.text)
        scan.carried[row.doc_id] = (
            tuple(key for key in row.fields if key != source.text_field), carried_digest(row.fields, source.text_field)
        )
    return scan


def settings_text(settings: Any) -> str:
    if not isinstance(settings, dict):
        return repr(settings)
    return ", ".join(f"{key}={value}" for key, value in settings.items())


@dataclass
class Resumed:
    """What an existing output holds for this run: the ids kept (verified) and those to redo, by why."""

    done: set[Any] = field(default_factory=set)
    redo: dict[Any, str] = field(default_factory=dict)
    repaired_last_line: bool = False


def read_done(
    output: Path, expected: dict[str, Any], scan: InputScan, still_protected: Callable[[str, DocId], bool],
    id_field: str = "id", text_field: str = "text",
) -> Resumed:
    """The records of ``output`` this run keeps, verified, and those it redoes; any other record is refused.

    A record must be a ``delink protect`` record of an id of this input, marked protected
    under exactly ``expected``. It is kept only when its ``input_digest`` is the input's
    and the fields it copied from the input are the input's now (else ``input_changed``)
    and ``still_protected`` its text, a detection under those settings (else
    ``not_protected``); the others are redone. A
    half-written last line (a crash) is cut off. The output is rewritten (atomically)
    only once every complete line passed, and only to drop what is redone: a file that is
    refused is left exactly as it was.
    """
    resumed = Resumed()
    if not output.exists():
        return resumed
    data = output.read_bytes()
    complete = data[: data.rfind(b"\n") + 1]
    how = "write to a new --output, or rerun with the settings that file was made with"
    kept_lines: list[bytes] = []
    for line_no, raw in enumerate(complete.splitlines(keepends=True), start=1):
        if not raw.strip():
            continue
        try:
            record = parse_json_line(raw, raw.decode("utf-8"))  # a repeated key is refused, as in every input
        except ValueError:  # UnicodeDecodeError too
            record = None
        where = f"{output}:{line_no}"
        if not isinstance(record, dict) or id_field not in record:
            raise InputError(f"{where}: not a `delink protect` record; {how}")
        if PROTECTED_UNDER not in record:
            raise InputError(
                f"{where}: not a `delink protect` record (no {PROTECTED_UNDER!r}: an input, an assess result or "
                f"the output of an older spacy-delink); {how}"
            )
        if record[PROTECTED_UNDER] != expected:
            raise InputError(
                f"{where}: protected under {settings_text(record[PROTECTED_UNDER])}, but this run protects under "
                f"{settings_text(expected)}; {how}"
            )
        if record.get("protected") is not True or not isinstance(record.get(text_field), str):
            raise InputError(f"{where}: a record that is not marked protected; {how}")
        doc_id = record[id_field]
        if isinstance(doc_id, (list, dict)) or doc_id not in scan.lines:
            raise InputError(f"{where}: id {doc_id!r} is not in the input, so this output belongs to another input; {how}")
        if doc_id in resumed.done or doc_id in resumed.redo:
            raise InputError(f"{where}: id {doc_id!r} appears twice; the file was edited by hand, {how}")
        names, carried = scan.carried[doc_id]
        if record.get(INPUT_DIGEST) != scan.digests[doc_id] or carried_digest({key: record.get(key) for key in names}, text_field) != carried:
            resumed.redo[doc_id] = "input_changed"
        elif not still_protected(record[text_field], doc_id):
            resumed.redo[doc_id] = "not_protected"
        else:
            resumed.done.add(doc_id)
            kept_lines.append(raw)
    resumed.repaired_last_line = len(complete) < len(data)
    if resumed.repaired_last_line or resumed.redo:
        with atomic_write(output, "wb") as handle:
            handle.write(b"".join(kept_lines))
    return resumed
