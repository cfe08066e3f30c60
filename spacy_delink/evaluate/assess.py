"""``delink assess``: the linkage attack's view of each document, as JSONL (and HTML)."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ..corpus import CorpusStats, read_jsonl_documents
from ..io import atomic_write, dumps_jsonl_line
from ..linkage.attack import DEFAULT_MAX_COMBINATIONS, assess_text
from ..linkage.combinations import check_arity, check_max_combinations
from ..linkage.index import CorpusIndex
from ..linkage.ngrams import check_k
from .report import write_html_report


@dataclass
class AssessSummary:
    documents: int = 0
    linkable_documents: int = 0
    skipped_lines: list[str] = field(default_factory=list)
    seconds: float = 0.0


def assess_file(
    index: CorpusIndex,
    input_path: Path,
    output_path: Path,
    k: int,
    arity: int = 1,
    html_path: Path | None = None,
    skip_invalid: bool = False,
    progress: bool = True,
    max_combinations: int = DEFAULT_MAX_COMBINATIONS,
) -> AssessSummary:
    """Assess every line of ``input_path``; outputs are written atomically."""
    check_k(k)
    check_arity(arity, allow_single=True)
    check_max_combinations(max_combinations)
    started = time.perf_counter()
    summary = AssessSummary()
    stats = CorpusStats()
    documents = read_jsonl_documents(input_path, skip_invalid=skip_invalid, stats=stats)
    report: list[tuple[str, dict[str, Any]]] = []
    with atomic_write(output_path) as out:
        for doc_id, text in tqdm(documents, desc="assessing", unit="doc", disable=not progress):
            record = assess_text(index, doc_id, text, k, arity, max_combinations)
            out.write(dumps_jsonl_line(record))
            summary.documents += 1
            summary.linkable_documents += record["anonymity"] is not None
            if html_path is not None:
                report.append((text, record))
    if html_path is not None:
        write_html_report(report, html_path)
    summary.skipped_lines = stats.skipped_lines
    summary.seconds = time.perf_counter() - started
    return summary
