"""``delink assess --html``: one ranked table of every document, most at risk first, then the documents in that order.

The page's script sorts and filters the table (whole linkable phrases, combinations and
their groups, the share of text at risk: ``DocumentRisk``); a plot of the distribution
follows; the documents' pages follow the ranking. ``delink serve``'s page computes the
same facts in report.js (``wholePhrases``, ``delinkRisk.facts``).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ..pages.markup import (
    DOCS_PER_PAGE,
    ReportDocument,
    ReportSettings,
    anonymity_text,
    combination_counts,
    combination_groups,
    page_name,
    png_base64,
    write_pages,
)
from .plots import assessment_plot, plots_unavailable

#: Characters that may separate two linkable N-grams of one whole phrase (report.js: GAP, the same set).
PHRASE_GAP = " \t\n\r\f\v\u00a0"


@dataclass(frozen=True)
class Phrase:
    """A whole linkable phrase: a run of linkable N-grams that overlap, touch or have only whitespace between them."""

    start: int
    end: int
    text: str
    support: int  # the smallest support of its N-grams: a search for that one narrows to this many documents


def whole_phrases(text: str, ngrams: Sequence[dict[str, Any]]) -> list[Phrase]:
    """The record's linkable N-grams joined into the phrases a reader sees, in text order.

    An N-gram is the shortest stretch whose search narrows below k ("flight. On 4"); the
    stretches a person must rewrite are their unions. report.js (``wholePhrases``) does the
    same for ``delink serve``'s page, so both count alike.
    """
    runs: list[list[int]] = []  # [start, end, support]
    for g in sorted(ngrams, key=lambda g: (g["start"], g["end"])):
        if runs and all(char in PHRASE_GAP for char in text[runs[-1][1] : g["start"]]):
            runs[-1][1] = max(runs[-1][1], g["end"])
            runs[-1][2] = min(runs[-1][2], g["support"])
        else:
            runs.append([g["start"], g["end"], g["support"]])
    return [Phrase(start, end, text[start:end], support) for start, end, support in runs]


@dataclass(frozen=True)
class DocumentRisk:
    """What the ranked table and a document's facts say about one assessed document (``delink serve``'s page says the same)."""

    anonymity: int | None
    phrases: list[Phrase]  # distinct whole phrases (by text), most at risk (smallest support) first, then in text order
    combinations: int
    groups: int
    capped: bool
    at_risk_permille: int  # characters inside linkable phrases per 1,000 characters of the text, rounded half up

    @classmethod
    def of(cls, text: str, record: dict[str, Any]) -> DocumentRisk:
        phrases = whole_phrases(text, record.get("ngrams", []))
        covered = sum(phrase.end - phrase.start for phrase in phrases)
        permille = (2000 * covered + len(text)) // (2 * len(text)) if text else 0
        count, groups, capped = combination_counts(record)
        distinct: dict[str, Phrase] = {}
        for phrase in sorted(phrases, key=lambda phrase: (phrase.support, phrase.start)):
            distinct.setdefault(phrase.text, phrase)
        return cls(record.get("anonymity"), list(distinct.values()), count, groups, capped, permille)

    def combinations_text(self) -> str:
        """"742 in 10 groups": combinations as found, and the groups that list them (sliding phrases are one group)."""
        if not self.combinations:
            return "0"
        return f"{self.combinations:,}{'+' if self.capped else ''} in {self.groups:,} group{'s' if self.groups != 1 else ''}"

    def at_risk_text(self) -> str:
        return f"{self.at_risk_permille // 10}.{self.at_risk_permille % 10}%"

    def facts(self) -> list[tuple[str, str]]:
        """A document's facts, in the words of the ranked table's columns."""
        return [("anonymity", anonymity_text(self.anonymity)), ("linkable phrases", f"{len(self.phrases):,}"),
                ("linkable combinations", self.combinations_text()), ("text at risk", self.at_risk_text())]

    def rank_key(self) -> tuple[Any, ...]:
        """Most at risk first: smallest anonymity (not linkable last), then more distinct linkable phrases, more
        combinations, a larger share of the text at risk."""
        return (self.anonymity is None, self.anonymity or 0, -len(self.phrases), -self.combinations, -self.at_risk_permille)


@dataclass(frozen=True)
class Column:
    """A column of the ranked table: its header, what it says (``title``), and how it sorts.

    A row holds one cell per column under ``key`` (``_ranked_rows``): ``{"text", "sort"}`` and
    any ``"class"``; a new measure is a column here and a cell there.
    """

    key: str
    label: str
    title: str
    numeric: bool = True


RANKED_COLUMNS = (
    Column("rank", "#", "Rank, most at risk first (sort by it to restore the ranking)"),
    Column("document", "document", "The document's id: select it for its text with every linkable phrase marked", numeric=False),
    Column("anonymity", "anonymity", "The size of the smallest set of documents a search narrows to: 1 = singled out"),
    Column("phrases", "linkable phrases", "Distinct whole phrases whose search narrows below k"),
    Column("combinations", "linkable combinations", "Combinations of up to arity phrases that narrow below k together; "
           "those that differ only by sliding phrases along the same words are one group"),
    Column("at_risk", "text at risk", "Share of the document's characters inside linkable phrases"),
    Column("worst", "most linkable phrase", "The whole phrase that narrows most (then the earliest); the others below it",
           numeric=False),
)
#: Whole phrases listed in a row of the ranked table (the document itself marks them all).
PHRASES_PER_ROW = 20


def _worst(risk: DocumentRisk, record: dict[str, Any]) -> tuple[str, int | None]:
    """The whole phrase with the smallest support (the earliest of equals), or the first combination group's phrases."""
    if risk.phrases:
        return f"“{risk.phrases[0].text}”", risk.phrases[0].support
    groups = combination_groups(record)
    if groups:
        return " + ".join(f"“{m['text']}”" for m in groups[0]["members"]), groups[0]["support"]
    return "–", None


def _ranked_rows(path: Path, risks: Sequence[tuple[int, DocumentRisk, dict[str, Any]]], per_page: int) -> list[dict[str, Any]]:
    """The ranked table's rows; ``risks`` is in rank order, and a document's text is on page ``rank // per_page + 1``."""
    rows = []
    for rank, (number, risk, record) in enumerate(risks):
        worst, support = _worst(risk, record)
        anonymity = risk.anonymity
        cells = {
            "rank": {"text": f"{rank + 1:,}", "sort": rank},
            "document": {"text": str(record["id"]), "sort": str(record["id"]), "href": f"{page_name(path, rank // per_page + 1)}#doc-{number}"},
            "anonymity": {"text": anonymity_text(anonymity), "sort": anonymity if anonymity is not None else "", "class": "bad" if anonymity == 1 else ""},
            "phrases": {"text": f"{len(risk.phrases):,}", "sort": len(risk.phrases)},
            "combinations": {"text": risk.combinations_text(), "sort": risk.combinations},
            "at_risk": {"text": risk.at_risk_text(), "sort": risk.at_risk_permille},
            "worst": {"text": worst, "sort": worst, "support": support,
                      "more": [(f"“{p.text}”", p.support) for p in risk.phrases[1:PHRASES_PER_ROW]],
                      "unlisted": max(0, len(risk.phrases) - PHRASES_PER_ROW)},
        }
        rows.append({"number": number, "anonymity": "" if anonymity is None else anonymity, "cells": cells})
    return rows


def write_html_report(
    report: list[tuple[str, dict[str, Any]]], path: Path, settings: ReportSettings
) -> list[Path]:
    """The ``assess`` report: one ranked table of every document, the distribution plot, then the documents in rank order.

    ``report`` pairs each text with its ``delink assess`` record (grouped, or every
    combination: either is shown by group); ``settings.skipped`` counts the inputs the run
    left out (said on every page when any). Returns the pages written.
    """
    anonymities = [record.get("anonymity") for _, record in report]
    distribution = Counter(anonymity_text(value) for value in anonymities)
    missing = plots_unavailable()
    png = None
    if missing is None:
        png = assessment_plot(anonymities, [len(record.get("ngrams", [])) for _, record in report], settings.k, settings.arity)
    risks = [(number, DocumentRisk.of(text, record), record) for number, (text, record) in enumerate(report)]
    risks.sort(key=lambda item: (*item[1].rank_key(), item[0]))
    summary = {
        "summary": {"documents": len(report), "linkable": sum(value is not None for value in anonymities), "skipped": settings.skipped},
        "columns": RANKED_COLUMNS,
        "ranked": _ranked_rows(path, risks, DOCS_PER_PAGE),
        "plot_png": png_base64(png),
        "plot_missing": missing or "",
        "distribution": sorted(distribution.items(), key=lambda item: (item[0] == "not linkable", item[0].zfill(9))),
    }
    documents = [
        ReportDocument(id=record["id"], before_text=report[number][0], before=record, facts=risk.facts(), number=number)
        for number, risk, record in risks
    ]
    return write_pages(path, "assess.html", "spacy-delink assessment report", settings, summary, documents)


# -- delink evaluate ------------------------------------------------------------------------
