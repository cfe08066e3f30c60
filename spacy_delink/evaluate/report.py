"""The HTML report of ``delink assess``: every document with its linkable spans highlighted."""
from __future__ import annotations

import warnings
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

from ..io import atomic_write


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
