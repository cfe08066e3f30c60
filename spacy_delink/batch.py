"""Batches of strings through the jobs of `delink assess` and `delink protect`, without files.

``assess_texts`` and ``protect_texts`` return exactly the records those commands write
(``assess_text`` per document; ``protected_records`` with ``protected_under``), for
callers that hold texts in memory: a notebook, a service (``delink serve``), a pipeline
step. Texts are checked as the commands check input lines (ids by the shared id rule and
unique, texts valid Unicode), so a bad batch fails before any work.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

from .corpus.rules import DocId, check_doc_id, unicode_problem, unique_ids
from .errors import InputError
from .claims import THREAT_MODEL_ARITY
from .evaluate.assess import assess_document
from .linkage.attack import DEFAULT_MAX_COMBINATIONS
from .linkage.combinations import check_arity, check_max_combinations
from .linkage.index import CorpusIndex, open_index
from .linkage.ngrams import check_k
from .linkage.readings import DEFAULT_READINGS, check_readings
from .components.rewriter import DelinkRewriter
from .rewrite.config import RewriterSpec
from .rewrite.protect import protected_records
from .rewrite.resume import protection_settings

IndexLike = CorpusIndex | str | Path
#: Rewriters ``protect_texts`` keeps loaded, by their settings (each maps nothing new: the index is shared).
LOADED_REWRITERS = 8


def batch_documents(texts: Iterable[Any], ids: Optional[Iterable[Any]] = None, where: str = "texts") -> list[tuple[DocId, str]]:
    """``(id, text)`` of each text: ``ids`` (the id rule of every command, unique) or the positions 0, 1, ..."""
    texts = list(texts)
    id_list: Sequence[Any] = range(len(texts)) if ids is None else list(ids)
    if len(id_list) != len(texts):
        raise InputError(f"{len(id_list)} ids for {len(texts)} texts; give one id per text, or none")
    documents = []
    for position, (doc_id, text) in enumerate(zip(id_list, texts)):
        place = f"{where}[{position}]"
        check_doc_id(doc_id, place, "ids", "give every text a string or integer id in ids=, or no ids at all")
        if not isinstance(text, str):
            raise InputError(f"{place}: a text must be a string, got {type(text).__name__}")
        problem = unicode_problem(text)
        if problem:
            raise InputError(f"{place}: the text holds {problem}, which is not Unicode text (a broken \\u escape); fix the source")
        documents.append((doc_id, text))
    return list(unique_ids(documents))


def opened_index(index: IndexLike) -> CorpusIndex:
    """``index`` itself when open, else the index at that path (its key beside it or in ``$DELINK_KEY_FILE``)."""
    return index if isinstance(index, CorpusIndex) else open_index(index)


def check_assess_settings(k: int, arity: int, max_combinations: int) -> None:
    """`delink assess`'s settings checked, before any text is read or index opened."""
    check_k(k)
    check_arity(arity, allow_single=True)
    check_max_combinations(max_combinations)


def assess_texts(
    index: IndexLike,
    texts: Iterable[str],
    k: int = 2,
    arity: int = THREAT_MODEL_ARITY,
    *,
    ids: Optional[Iterable[DocId]] = None,
    max_combinations: int = DEFAULT_MAX_COMBINATIONS,
    readings: Sequence[str] = DEFAULT_READINGS,
) -> list[dict[str, Any]]:
    """The `delink assess` record of each text, in order (ids: ``ids``, else 0, 1, ...).

    ``index`` is an open index or its path (opened once per process, its key beside it or
    in ``$DELINK_KEY_FILE``).
    """
    check_assess_settings(k, arity, max_combinations)
    opened = opened_index(index)
    return assess_documents(opened, batch_documents(texts, ids), k, arity, max_combinations, opened.require_readings(readings))


def assess_documents(
    index: CorpusIndex, documents: list[tuple[DocId, str]], k: int, arity: int, max_combinations: int = DEFAULT_MAX_COMBINATIONS,
    readings: Sequence[str] = DEFAULT_READINGS,
) -> list[dict[str, Any]]:
    """``assess_texts`` on documents already checked (``batch_documents``) at settings already checked."""
    return [assess_document(index, doc_id, text, k, arity, max_combinations, readings=readings) for doc_id, text in documents]


@lru_cache(maxsize=LOADED_REWRITERS)
def _rewriter(spec: RewriterSpec) -> DelinkRewriter:
    return spec.load()


def protect_texts(
    index: IndexLike,
    texts: Iterable[str],
    k: int = 2,
    arity: int = THREAT_MODEL_ARITY,
    *,
    ids: Optional[Iterable[DocId]] = None,
    config: Optional[str | Path] = None,
    flagging: Optional[str] = None,
    threads: Optional[int] = None,
    readings: Sequence[str] = DEFAULT_READINGS,
) -> list[dict[str, Any]]:
    """The `delink protect` record of each text, in order, each with its ``protected_under``.

    ``config`` is a rewriter config or a shipped name (``openai``; default: the offline
    Mask model), as ``delink protect --config`` takes it. The rewriter of each setting is
    loaded once per process; a batch shares its LLM calls, as one batch of the command.
    """
    check_k(k)
    check_arity(arity, allow_single=True)
    documents = batch_documents(texts, ids)
    if isinstance(index, CorpusIndex):
        path, key_file = index.path, index.key_path
    else:
        path, key_file = Path(index), None
    spec = RewriterSpec.of(
        path, k, arity, Path(config) if config is not None else None, key_file, False, flagging, {}, threads, check_readings(readings)
    )
    return protect_documents(_rewriter(spec), documents)


def protect_documents(rewriter: DelinkRewriter, documents: list[tuple[DocId, str]]) -> list[dict[str, Any]]:
    """``protect_texts`` on documents already checked (``batch_documents``), by a loaded rewriter."""
    return protected_records(rewriter, documents, protection_settings(rewriter))
