"""``delink assess``: the linkage attack's view of each document, as JSONL (and HTML)."""
from __future__ import annotations

import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from ..claims import THREAT_MODEL_ARITY
from ..corpus.rows import InputRow, unique_rows
from ..corpus.rules import CorpusStats, DocId, check_doc_id, nothing_done
from ..corpus.source import InputRun, InputSource, output_format
from ..errors import InputError
from ..io.files import check_output_path, refuse_same_file, write_output
from ..io.jsonl import dumps_jsonl_line
from ..linkage.attack import DEFAULT_MAX_COMBINATIONS, assess_text
from ..linkage.combinations import check_arity, check_max_combinations
from ..linkage.index import CorpusIndex, open_index
from ..linkage.index.runners import Runner
from ..linkage.ngrams import check_k
from ..linkage.readings import DEFAULT_READINGS
from ..progress import Progress, count_lines
from ..retrieval.assess import RetrievalRanker
from ..pages.grouping import group_numbers, grouped_combinations
from ..pages.markup import ReportSettings
from .assess_page import write_html_report


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
    # The id names the source when the collection holds a document of that id (SPEC §9, as protect reads it).
    named = index.document_number(doc_id)
    record = assess_text(index, doc_id, text, k, arity, max_combinations + 1, readings, carried=() if named is None else (named,))
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
class AssessSummary(InputRun):
    """What `delink assess` found, for its closing line."""

    linkable_documents: int = 0


def _ranker(index: CorpusIndex, source_field: str | None) -> RetrievalRanker | None:
    """The BM25 ranker when the retrieval index is beside ``index``; ``--source-field`` without one is refused."""
    if RetrievalRanker.available(index):
        return RetrievalRanker(index)
    if source_field is not None:
        raise InputError(
            f"--source-field {source_field}: the BM25 rank needs the retrieval index beside {index.path}; "
            "build it with `delink index ... --retrieval`"
        )
    return None


def _source_of(row: InputRow, source_field: str | None) -> DocId:
    """The document of the collection ``row`` was made from: its ``source_field`` under the id rule, else its own id."""
    if source_field is None:
        return row.doc_id
    return check_doc_id(row.fields.get(source_field), row.where, source_field, hint="name the source field with --source-field")


def check_assess_outputs(input_path: Path | InputSource, output_path: Path, html_path: Path | None) -> None:
    """Refuse, before any work, outputs that would destroy the input or cannot be written."""
    source = input_path.path if isinstance(input_path, InputSource) else input_path
    inputs = [] if not isinstance(source, (str, Path)) else [source]
    refuse_same_file(inputs, output_path, "--output")
    check_output_path(output_path, "--output")
    fmt = output_format(output_path)
    if fmt != "jsonl" and str(output_path) == "-":
        raise InputError(f"--output -: stdout takes JSONL only; give a file named .{fmt}")
    if html_path is not None:
        refuse_same_file([*inputs, output_path], html_path, "--html")
        check_output_path(html_path, "--html")


def assess_file(
    index: CorpusIndex,
    input_path: Path | InputSource,
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
    *,
    id_field: str = "id",
    text_field: str = "text",
    input_format: str | None = None,
    allow_empty: bool = False,
    source_field: str | None = None,
) -> AssessSummary:
    """Assess every document of the input (any format ``corpus.source.InputSource`` reads; the id rule of
    ``corpus.py``); outputs are written atomically.

    Each output record holds every field of the input but its text, untouched, then the
    assessment; the output is JSONL, or CSV, TSV or Parquet when its name says so (a table
    input's columns keep their types). A run that assessed no document (an empty input,
    every line skipped) raises instead of writing an empty all-clear, unless ``allow_empty``.
    The HTML report is written before the output is put in place, so a failure leaves neither.
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
    source = input_path if isinstance(input_path, InputSource) else InputSource(input_path, input_format, id_field, text_field)
    check_assess_outputs(source, output_path, html_path)
    fmt = output_format(output_path)
    index.warn_if_k_exceeds_collection(k)
    started = time.perf_counter()
    summary = AssessSummary()
    stats = CorpusStats()
    pending: deque[InputRow] = deque()
    ranker = _ranker(index, source_field)

    def documents() -> Iterator[tuple[DocId, str]]:
        for row in unique_rows(source.rows(skip_invalid, stats)):
            pending.append(row)
            yield row.doc_id, row.text

    report: list[tuple[str, dict[str, Any]]] = []
    if runner is None:
        records: Iterator[tuple[DocId, str, dict[str, Any]]] = (
            (doc_id, text, assess_document(index, doc_id, text, k, arity, max_combinations, all_combinations, readings))
            for doc_id, text in documents()
        )
    else:
        records = _assess_on(runner, index, documents(), k, arity, max_combinations, all_combinations, readings)
    table: list[dict[str, Any]] = []
    positions: list[int] = []
    total = count_lines([source.path]) if source.format == "jsonl" and isinstance(source.path, (str, Path)) else None
    with write_output(output_path) if fmt == "jsonl" else _no_stream() as out:
        with Progress("assess", "docs", total, enabled=progress) as bar:
            for doc_id, text, record in records:
                row = pending.popleft()
                if ranker is not None:
                    record.update(ranker.fields(text, _source_of(row, source_field)))
                merged = row.with_results(record, source.id_field, source.text_field)
                if out is not None:
                    out.write(dumps_jsonl_line(merged))
                else:
                    table.append(merged)
                    positions.append(row.position)
                summary.documents += 1
                summary.linkable_documents += record["anonymity"] is not None
                if html_path is not None:
                    report.append((text, record))
                bar.update()
        summary.skipped_lines = stats.skipped_lines
        refusal = None if allow_empty else nothing_done("assess", summary.documents, stats, source.name)
        if refusal:
            raise InputError(refusal)  # inside the output's writing: nothing is put in place
        if html_path is not None:
            settings = ReportSettings(k, arity, str(index.path), tuple(readings), skipped=len(stats.skipped_lines))
            write_html_report(report, html_path, settings)
    if out is None:
        from ..tables import output_table, write_table

        write_table(output_table(table, source.table() if source.is_table else None, positions, source.text_field), output_path, fmt)
    summary.seconds = time.perf_counter() - started
    return summary


@contextmanager
def _no_stream() -> Iterator[None]:
    """A table output is written whole once every record is in (``tables.write_table``), not streamed."""
    yield None
