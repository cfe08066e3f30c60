"""``delink assess``: the linkage attack's view of each document, as JSONL (and HTML)."""
from __future__ import annotations

import time
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from tqdm import tqdm

from .combinations import check_arity, check_max_combinations, combination_records, detect
from .corpus import CorpusStats, read_jsonl_documents
from .detection import check_k, ngram_records
from .index import CorpusIndex
from .io import atomic_write, dumps_jsonl_line

DEFAULT_MAX_COMBINATIONS = 1000


@dataclass
class AssessSummary:
    documents: int = 0
    linkable_documents: int = 0
    skipped_lines: list[str] = field(default_factory=list)
    seconds: float = 0.0


def assess_text(
    index: CorpusIndex,
    doc_id: Any,
    text: str,
    k: int,
    arity: int = 1,
    max_combinations: int = DEFAULT_MAX_COMBINATIONS,
) -> dict[str, Any]:
    """One output record (the schema of ``delink assess``) for one document."""
    detection = detect(index, text, k, arity, max_combinations=max_combinations, flags=False)
    return {
        "id": doc_id,
        "k": k,
        "arity": arity,
        "linkage_risk": detection.linkage_risk,
        "anonymity": detection.anonymity,
        "ngrams": ngram_records(detection.analysis),
        "combinations": (
            combination_records(text, detection.combinations, max_combinations) if detection.combinations else []
        ),
        "combination_linkable": detection.combination_linkable,
    }


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


def _report_docs(report: list[tuple[str, dict[str, Any]]]) -> Iterator[Any]:
    """Docs to render: linkable phrases labelled by df; each combination member once.

    A document can be in hundreds of listed combinations, so a member is drawn once,
    labelled with how many of them it joins (``combo×N``).
    """
    import spacy

    nlp = spacy.blank("xx")
    for text, record in report:
        doc = nlp.make_doc(text)
        spans = []
        for ngram in record["ngrams"]:
            span = doc.char_span(ngram["start"], ngram["end"], label=f"df={ngram['support']}", alignment_mode="expand")
            if span is not None:
                spans.append(span)
        members: Counter[tuple[int, int]] = Counter(
            (member["start"], member["end"]) for combination in record["combinations"] for member in combination["members"]
        )
        for (start, end), joined in sorted(members.items()):
            label = f"combo×{joined}"
            span = doc.char_span(start, end, label=label, alignment_mode="expand")
            if span is not None:
                spans.append(span)
        doc.spans["sc"] = spans
        anonymity = record["anonymity"]
        listed = len(record["combinations"])
        doc.user_data["title"] = (
            f"{record['id']} — anonymity {anonymity if anonymity is not None else '≥ k'} (k={record['k']}, "
            f"arity {record['arity']}): {len(record['ngrams'])} linkable phrases, {listed} combinations listed"
        )
        yield doc


def write_html_report(report: list[tuple[str, dict[str, Any]]], path: Path) -> None:
    """One page with every document and its linkable spans highlighted (displaCy spans)."""
    from spacy import displacy

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"\[W117\]")  # a document without spans is fine here
        html = displacy.render(list(_report_docs(report)), style="span", page=True, options={"spans_key": "sc"})
    with atomic_write(path) as handle:
        handle.write(html)
