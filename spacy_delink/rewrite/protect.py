"""``delink protect``: stream a JSONL file through the rewriter, resumably and without loss.

Everything that can be checked is checked before the output is touched: the output path
(``output.check_output``), every input line and an existing output (``resume``). Only then
is the output opened, and each batch is appended and fsynced before the next starts. One
run at a time writes a file output (a lock beside it); a second gets one line and exit
status 1. The input may be ``-`` (stdin), which is read into memory once, since every line
is checked before anything is written.
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional

from ..components.rewriter import DelinkRewriter
from ..corpus.rows import InputRow
from ..corpus.rules import CorpusStats, nothing_done
from ..corpus.source import InputRun, InputSource
from ..errors import InputError
from ..io.files import is_stdio, output_lock
from ..io.streams import StdinCopy
from ..linkage.index.runners import Runner
from ..memory import check_document_size
from ..progress import Progress
from .config import RewriterSpec
from .loop import OUTCOMES
from .output import appending, check_output, journal_path, resumable, write_table_output
from .resume import INPUT_DIGEST, PROTECTED_UNDER, protection_settings, read_done, scan_input, settings_text

@dataclass
class ProtectSummary(InputRun):
    """What `delink protect` did, for its closing line."""

    #: Inputs an earlier run of this output already holds (resumed past, not redone).
    already_done: int = 0
    #: Documents by how they came out (the rewrite loop's counts): ``rewritten`` (by the
    #: model's rewrites alone), ``with_mask`` (a mask covered what rewriting left linkable)
    #: or ``unchanged`` (protected as they came).
    outcomes: Counter[str] = field(default_factory=Counter)
    llm_calls: int = 0
    #: Model calls that gave no answer, by kind (failed_timeout, failed_endpoint_down, ...).
    failures: Counter[str] = field(default_factory=Counter)
    #: Answers refused by the task's checks, by reason (rejected_echo, rejected_url, ...).
    rejected: Counter[str] = field(default_factory=Counter)
    #: The input's fields besides the id and the text, copied to the output as they are (never checked).
    copied_fields: list[str] = field(default_factory=list)
    repaired_last_line: bool = False
    #: Records of an earlier run dropped and redone, by why (``input_changed``, ``not_protected``).
    redone: Counter[str] = field(default_factory=Counter)

    @property
    def endpoint_down(self) -> int:
        """Prompts not sent because the circuit breaker held the endpoint for down."""
        return self.failures["failed_endpoint_down"]



#: Batches sent to the workers ahead of the one being written.
IN_FLIGHT_BATCHES = 8
_WORKER_REWRITERS: dict[RewriterSpec, DelinkRewriter] = {}


def _tally(rewriter: DelinkRewriter) -> Counter[str]:
    """The rewriter's running counts that the summary reports."""
    tally: Counter[str] = Counter({name: rewriter.stats[name] for name in ("documents", *OUTCOMES)})
    tally["llm_calls"] = rewriter.llm_calls()
    tally.update(rewriter.failures())
    return tally


def protected_records(rewriter: DelinkRewriter, batch: list[tuple[Any, str]], settings: dict[str, Any]) -> list[dict[str, Any]]:
    """The output records of one batch of ``(id, text)``, protected under ``settings`` (``protection_settings``).

    The settings are checked against the rewriter's index before and after the batch: an
    index replaced meanwhile (an update, a compaction, a rebuild) is reopened by the
    component, and records checked against it must not claim the settings of the old one.
    """
    _check_same_index(rewriter, settings)
    records = []
    # The id names the source (ranked retrieval needs it; the gap reading reads it as a source when
    # the collection holds a document of that id, docs/linkage-rules.md §9).
    sources = [doc_id for doc_id, _ in batch]
    for (doc_id, text), result in zip(batch, rewriter.rewrite_texts([text for _, text in batch], sources)):
        record = {"id": doc_id, **result.record(), PROTECTED_UNDER: settings, INPUT_DIGEST: rewriter.index.input_digest(doc_id, text)}
        record["edits"] = rewriter.published_edits(result.edits)  # no source phrase in the output by default
        records.append(record)
    _check_same_index(rewriter, settings)
    return records


def _check_same_index(rewriter: DelinkRewriter, settings: dict[str, Any]) -> None:
    if protection_settings(rewriter) != settings:
        raise InputError(
            f"the index changed during the run (now {settings_text(protection_settings(rewriter))}, the run protects "
            f"under {settings_text(settings)}); rerun it: it resumes, and checks again what was written"
        )


def protect_batch(
    spec: RewriterSpec, settings: dict[str, Any], batch: list[tuple[Any, str]]
) -> tuple[list[dict[str, Any]], Counter[str]]:
    """One worker task: a batch's records and the counts it added, by the worker's own rewriter.

    The rewriter is loaded once per worker process, and again when the index changed
    (an update); a worker whose index is not the one ``settings`` names refuses to write.
    """
    rewriter = _WORKER_REWRITERS.get(spec)
    if rewriter is None or protection_settings(rewriter) != settings:
        rewriter = _WORKER_REWRITERS[spec] = spec.load()
    before = _tally(rewriter)
    records = protected_records(rewriter, batch, settings)
    return records, _tally(rewriter) - before


def protect_file(
    rewriter: DelinkRewriter,
    input_path: Path | InputSource,
    output: Path,
    batch_size: int = 16,
    skip_invalid: bool = False,
    progress: bool = True,
    runner: Optional[Runner] = None,
    spec: Optional[RewriterSpec] = None,
    *,
    id_field: str = "id",
    text_field: str = "text",
    input_format: Optional[str] = None,
    allow_empty: bool = False,
) -> ProtectSummary:
    """Stream the input (any format ``corpus.source.InputSource`` reads) through the rewriter, appending one record per document to ``output``.

    Each record holds every field of the input untouched, its text protected, then the
    protection's fields. Resumable: documents already in a file ``output`` (protected under
    the same settings, from the same input) are skipped. Each batch is flushed and fsynced
    before the next starts, so a crash loses at most the batches in flight; a second run
    into the same file is refused while this one writes. ``-`` reads stdin or writes stdout;
    a stream output is written afresh. A CSV, TSV or Parquet output (by its name) is
    journaled as JSONL beside it (``journal_path``, resumed the same way) and written,
    atomically, once every document is in: a table input's rows and columns untouched, its
    text column protected. An input with no document to protect (empty, or every input
    skipped) is refused before anything is written, unless ``allow_empty``. With a
    ``runner`` (Dask workers, ``--workers``/``--scheduler``), each batch is protected on a
    worker by a rewriter loaded from ``spec``; batches are the same and written in input
    order, so the output is the output of a run without one.
    """
    if batch_size < 1:
        raise InputError(f"--batch-size must be >= 1, got {batch_size}")
    if (runner is None) != (spec is None):
        raise InputError("protecting on workers needs both a runner and the rewriter's spec")
    started = time.perf_counter()
    summary = ProtectSummary()
    source = input_path if isinstance(input_path, InputSource) else InputSource(input_path, input_format, id_field, text_field)
    check_output(output, source.path)
    journal = journal_path(output)
    with output_lock(output, "delink protect"):
        if not isinstance(source.path, StdinCopy) and is_stdio(source.path):
            source.path = StdinCopy.read()  # read twice: every line is checked before anything is written
        scan = scan_input(source, skip_invalid, rewriter.index.input_digest)
        summary.skipped_lines = scan.skipped
        copied = dict.fromkeys(name for names, _ in scan.carried.values() for name in names if name != source.id_field)
        summary.copied_fields = list(copied)
        refusal = None if allow_empty else nothing_done("protect", len(scan.lines), CorpusStats(skipped_lines=scan.skipped), source.name)
        if refusal:
            raise InputError(refusal)
        settings = protection_settings(rewriter)
        seen: set[Any] = set()
        if resumable(output):
            resumed = read_done(journal, settings, scan, rewriter.still_protected, source.id_field, source.text_field)
            seen, summary.repaired_last_line = resumed.done, resumed.repaired_last_line
            summary.redone.update(resumed.redo.values())
        rows: dict[Any, InputRow] = {}

        def batches() -> Iterator[list[tuple[Any, str]]]:
            batch: list[tuple[Any, str]] = []
            for row in source.rows(skip_invalid, CorpusStats(), check_document_size):
                if scan.lines.get(row.doc_id) != row.position:
                    raise InputError(f"{row.where}: the file changed while protect ran; rerun it (the run resumes)")
                if row.doc_id in seen:
                    summary.already_done += 1
                    continue
                rows[row.doc_id] = row
                batch.append((row.doc_id, row.text))
                if len(batch) == batch_size:
                    yield batch
                    batch = []
            if batch:
                yield batch

        def output_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return [rows.pop(record["id"]).with_results(record, source.id_field, source.text_field) for record in records]

        tally: Counter[str] = Counter()
        with Progress("protect", "docs", len(scan.lines) - len(seen), enabled=progress) as bar, appending(journal) as write:
            if runner is None:
                for batch in batches():
                    write(output_records(protected_records(rewriter, batch, settings)))
                    bar.update(len(batch))
                tally = _tally(rewriter)
            else:
                arguments = ((spec, settings, batch) for batch in batches())
                for records, added in runner.ordered(protect_batch, arguments, IN_FLIGHT_BATCHES):
                    write(output_records(records))
                    bar.update(len(records))
                    tally += added
        if journal != output:
            write_table_output(journal, output, source, scan)
    summary.documents = tally["documents"]
    summary.outcomes.update({outcome: tally[outcome] for outcome in OUTCOMES})
    summary.llm_calls = tally["llm_calls"]
    for name, count in tally.items():
        if name.startswith(("rejected_", "failed_")):
            (summary.rejected if name.startswith("rejected_") else summary.failures)[name] += count
    summary.seconds = time.perf_counter() - started
    return summary
