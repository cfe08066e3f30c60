"""``delink assess`` and ``delink protect`` on a pandas DataFrame: a frame in, the same frame with the results out.

The frame's rows and columns are kept as they are (a copy; the caller's frame is not
changed); ``assess_frame`` adds the columns of the ``delink assess`` record, and
``protect_frame`` puts the protected text in the text column and adds the columns of the
``delink protect`` record. Ids come from a column (``id_field``) or, by default, the
frame's index; they follow the id rule of every command (``corpus.check_doc_id``). pandas
is not imported: the frame's own methods do the work, so any installed pandas serves.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence

from .batch import IndexLike, assess_documents, check_assess_settings, opened_index, protect_texts
from .claims import THREAT_MODEL_ARITY
from .corpus.rules import DocId, check_doc_id, check_text, unique_ids
from .errors import InputError
from .linkage.attack import DEFAULT_MAX_COMBINATIONS
from .linkage.readings import DEFAULT_READINGS

#: How a caller of these functions names the id and the text (the command line's options do not exist here).
FRAME_HINTS = (
    "pass id_field= to name the column holding it, or id_field=None to use the frame's index",
    "pass text_field= to name the column holding the text",
)


def _documents(frame: Any, id_field: Optional[str], text_field: str) -> list[tuple[DocId, str]]:
    """``(id, text)`` of every row, checked as every command checks its input."""
    columns = [str(name) for name in frame.columns]
    for name, hint in ((text_field, FRAME_HINTS[1]), (id_field, FRAME_HINTS[0])):
        if name is not None and name not in frame.columns:
            raise InputError(f"the frame has no column {name!r} (its columns: {', '.join(columns[:10])}); {hint}")
    ids = frame.index if id_field is None else frame[id_field]
    documents = []
    for position, (doc_id, text) in enumerate(zip(ids, frame[text_field])):
        where = f"frame row {position}"
        doc_id = doc_id.item() if hasattr(doc_id, "item") else doc_id  # a NumPy integer as the int it holds
        documents.append((check_doc_id(doc_id, where, id_field or "index", FRAME_HINTS[0]), check_text(text, where, text_field, FRAME_HINTS[1])))
    return list(unique_ids(documents))


def _with_records(frame: Any, records: list[dict[str, Any]], text_field: str) -> Any:
    """A copy of ``frame`` with each record's fields as columns (its ``text``, if any, in the text column)."""
    result = frame.copy()
    names: dict[str, None] = {}
    for record in records:
        names.update(dict.fromkeys(record))
    for name in names:
        if name == "id":
            continue
        if name == "text":
            result[text_field] = [record["text"] for record in records]
            continue
        if name in result.columns:
            raise InputError(f"the frame has a column {name!r}, which the result's column of that name would overwrite; rename it")
        result[name] = [record.get(name) for record in records]
    return result


def assess_frame(
    index: IndexLike,
    frame: Any,
    k: int = 2,
    arity: int = THREAT_MODEL_ARITY,
    *,
    id_field: Optional[str] = None,
    text_field: str = "text",
    max_combinations: int = DEFAULT_MAX_COMBINATIONS,
    readings: Sequence[str] = DEFAULT_READINGS,
) -> Any:
    """``frame`` (a pandas DataFrame) with the columns of each row's `delink assess` record added
    (``anonymity``, ``linkage_risk``, ``ngrams``, ``combinations``, ...), its own columns kept."""
    check_assess_settings(k, arity, max_combinations)
    documents = _documents(frame, id_field, text_field)
    opened = opened_index(index)
    records = assess_documents(opened, documents, k, arity, max_combinations, opened.require_readings(readings))
    return _with_records(frame, records, text_field)


def protect_frame(
    index: IndexLike,
    frame: Any,
    k: int = 2,
    arity: int = THREAT_MODEL_ARITY,
    *,
    id_field: Optional[str] = None,
    text_field: str = "text",
    config: Optional[str | Path] = None,
    flagging: Optional[str] = None,
    threads: Optional[int] = None,
    readings: Sequence[str] = DEFAULT_READINGS,
) -> Any:
    """``frame`` (a pandas DataFrame) with its text column protected and the columns of each row's
    `delink protect` record added (``protected``, ``edits``, ``protected_under``, ...); the other
    columns are kept as they are, and are not checked."""
    documents = _documents(frame, id_field, text_field)
    records = protect_texts(
        index, [text for _, text in documents], k, arity, ids=[doc_id for doc_id, _ in documents], config=config,
        flagging=flagging, threads=threads, readings=readings,
    )
    return _with_records(frame, records, text_field)
