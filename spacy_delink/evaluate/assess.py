"""``delink assess``: the linkage attack's view of each document, as JSONL (and HTML)."""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from ..claims import THREAT_MODEL_ARITY
from ..corpus import CorpusStats, DocId, read_jsonl_documents, unique_ids
from ..errors import InputError
from ..io import check_output_path, dumps_jsonl_line, is_stdio, refuse_same_file, write_output
from ..linkage.attack import DEFAULT_MAX_COMBINATIONS, assess_text
from ..linkage.combinations import check_arity, check_max_combinations
from ..linkage.index import CorpusIndex, open_index
from ..linkage.index.shards import Runner
from ..linkage.ngrams import check_k
from ..linkage.readings import DEFAULT_READINGS
from ..progress import Progress, count_lines
from ..retrieval.assess import RetrievalRanker
from .grouping import group_numbers, grouped_combinations
from .report import ReportSettings, write_html_report


#: Documents per task on a worker, and tasks in flight (so a long input streams).
CHUNK_DOCUMENTS = 32
IN_FLIGHT_CHUNKS = 16
#: Groups of combinations a record lists by default (``combination_groups`` counts them all).
#: With the 1,000 combinations of ``--max-combinations`` this keeps a TAB record near 4x its
#: input instead of 32x (docs/evaluate.md); ``--all-combinations`` lists every combination.
GROUPS_LISTED = 50


def assess_document(
    index: CorpusIndex, doc_id: DocId, text: str, k: int, arity: int, max_combinations: int, all_combinations: bool = False,
    readings: Sequence[str] = DEFAULT_READINGS,
) -> dict[str, Any]:
    """The ``delink assess`` record of one document: ``assess_text``'s, with its combinations grouped.

    One combination beyond the cap is asked for, so the record can say whether the cap cut
    the list (``combinations_capped``) and ``combination_count`` is exact when it did not.
    By default the record lists the first ``GROUPS_LISTED`` groups (``grouping``), each
    with its ``group_size``; with ``all_combinations`` it lists every combination up to the
    cap, each with the number of its ``group``. The decision and the scores are unchanged.
    """
    record = assess_text(index, doc_id, text, k, arity, max_combinations + 1, readings)
    found = record["combinations"][:max_combinations]
    groups = group_numbers(found)
    if all_combinations:
        listed = [{**combination, "group": group} for combination, group in zip(found, groups)]
    else:
        listed = grouped_combinations(found)[:GROUPS_LISTED]
    return {
        **record,
        "combinations": listed,
        "combination_count": len(found),
        "combination_groups": len(set(groups)),
        "combinations_capped": len(record["combinations"]) > max_combinations,
    }


def _chunks(documents: Iterable[tuple[DocId, str]], size: int) -> Iterator[list[tuple[DocId, str]]]:
    chunk: list[tuple[DocId, str]] = []
    for document in documents:
        chunk.append(document)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def assess_chunk(
    index_path: str, key_file: str, verify: bool, k: int, arity: int, max_combinations: int, all_combinations: bool,
    readings: tuple[str, ...],
    documents: list[tuple[DocId, str]],
) -> list[dict[str, Any]]:
    """One worker task: the records of a chunk, against the index mapped once per worker process."""
    index = open_index(index_path, key_file, verify)
    return [assess_document(index, doc_id, text, k, arity, max_combinations, all_combinations, readings) for doc_id, text in documents]


def _assess_on(
    runner: Runner, index: CorpusIndex, documents: Iterable[tuple[DocId, str]], k: int, arity: int, max_combinations: int,
    all_combinations: bool,
    readings: tuple[str, ...],
) -> Iterator[tuple[DocId, str, dict[str, Any]]]:
    """Chunks assessed on the runner's workers, records back in input order."""
    settings = (
        str(index.path.resolve()), str(index.key_path.resolve()), index.verified, k, arity, max_combinations, all_combinations,
        readings,
    )
    sent: deque[list[tuple[DocId, str]]] = deque()

    def arguments() -> Iterator[tuple[Any, ...]]:
        for chunk in _chunks(documents, CHUNK_DOCUMENTS):
            sent.append(chunk)
            yield (*settings, chunk)

    for records in runner.ordered(assess_chunk, arguments(), IN_FLIGHT_CHUNKS):
        for (doc_id, text), record in zip(sent.popleft(), records):
            yield doc_id, text, record


@dataclass
class AssessSummary:
    documents: int = 0
    linkable_documents: int = 0
    skipped_lines: list[str] = field(default_factory=list)
    seconds: float = 0.0


def _retrieval(
    index: CorpusIndex, input_path: Path, source_field: str | None, skip_invalid: bool
) -> tuple[RetrievalRanker | None, Iterator[DocId] | None]:
    """The ranker when the retrieval index is beside ``index``, and each record's source from ``source_field`` (None: its id)."""
    if not RetrievalRanker.available(index):
        if source_field is not None:
            raise InputError(
                f"--source-field {source_field}: the BM25 rank needs the retrieval index beside {index.path}; "
                "build it with `delink index ... --retrieval`"
            )
        return None, None
    if source_field is None:
        return RetrievalRanker(index), None
    if is_stdio(input_path):
        raise InputError("--source-field reads the input a second time; give a file, not - (stdin)")
    if skip_invalid:
        raise InputError("--source-field with --skip-invalid could pair a text with another line's source; fix the input and drop --skip-invalid")
    # The same lines, in the same order, under the same id rule: the source field read as an id.
    sources = (source for source, _ in read_jsonl_documents(input_path, id_field=source_field, skip_invalid=skip_invalid))
    return RetrievalRanker(index), sources


def check_assess_outputs(input_path: Path, output_path: Path, html_path: Path | None) -> None:
    """Refuse, before any work, outputs that would destroy the input or cannot be written."""
    refuse_same_file([input_path], output_path, "--output")
    check_output_path(output_path, "--output")
    if html_path is not None:
        refuse_same_file([input_path, output_path], html_path, "--html")
        check_output_path(html_path, "--html")


def assess_file(
    index: CorpusIndex,
    input_path: Path,
    output_path: Path,
    k: int,
    arity: int = THREAT_MODEL_ARITY,
    html_path: Path | None = None,
    skip_invalid: bool = False,
    progress: bool = True,
    max_combinations: int = DEFAULT_MAX_COMBINATIONS,
    runner: Runner | None = None,
    all_combinations: bool = False,
    readings: Sequence[str] = DEFAULT_READINGS,
    source_field: str | None = None,
) -> AssessSummary:
    """Assess every line of ``input_path`` (the id rule of ``corpus.py``); outputs are written atomically.

    The HTML report is written before the JSONL is put in place, so a failure leaves neither.
    With a ``runner`` (Dask workers, ``--workers``/``--scheduler``), chunks of documents are
    assessed on the workers, each of which maps the index itself (by path: shared storage
    on a cluster); the records are written in input order, identical to a run without one.
    Records list their combinations grouped (``assess_document``), or all with ``all_combinations``.
    With the retrieval index beside the index, each record also gets its BM25 rank of the
    source (``retrieval.assess``): the source named by ``source_field``, else the record's id.
    """
    check_k(k)
    check_arity(arity, allow_single=True)
    check_max_combinations(max_combinations)
    readings = index.require_readings(readings)
    check_assess_outputs(input_path, output_path, html_path)
    index.warn_if_k_exceeds_collection(k)
    started = time.perf_counter()
    summary = AssessSummary()
    stats = CorpusStats()
    documents = unique_ids(read_jsonl_documents(input_path, skip_invalid=skip_invalid, stats=stats))
    ranker, sources = _retrieval(index, input_path, source_field, skip_invalid)
    report: list[tuple[str, dict[str, Any]]] = []
    if runner is None:
        records: Iterator[tuple[DocId, str, dict[str, Any]]] = (
            (doc_id, text, assess_document(index, doc_id, text, k, arity, max_combinations, all_combinations, readings))
            for doc_id, text in documents
        )
    else:
        records = _assess_on(runner, index, documents, k, arity, max_combinations, all_combinations, readings)
    with write_output(output_path) as out:  # atomically, or streamed to stdout (-)
        with Progress("assess", "docs", count_lines([input_path]), enabled=progress) as bar:
            for doc_id, text, record in records:
                if ranker is not None:
                    record.update(ranker.fields(text, next(sources) if sources is not None else doc_id))
                out.write(dumps_jsonl_line(record))
                summary.documents += 1
                summary.linkable_documents += record["anonymity"] is not None
                if html_path is not None:
                    report.append((text, record))
                bar.update()
        if html_path is not None:
            write_html_report(report, html_path, ReportSettings(k, arity, str(index.path), tuple(readings)))
    summary.skipped_lines = stats.skipped_lines
    summary.seconds = time.perf_counter() - started
    return summary
