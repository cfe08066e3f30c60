"""The HTML reports: ``delink evaluate`` (warnings, summary, plots, documents before/after) and ``delink assess --html``.

A person should see at a glance how exposed each document is and what protection changed:

* every page states what it was checked under (k, arity, index: ``ReportSettings``, drawn
  by ``templates/_settings.html``), and what was not checked;
* the assess report opens with one table of every document, most at risk first, that the
  page's script sorts and filters (whole linkable phrases, combinations and their groups,
  the share of text at risk: ``DocumentRisk``), then a plot of the distribution; the
  documents' pages follow the ranking; the evaluate report with warnings in words (semantic linkage that
  stays high after protection, an engine or a check that did not run), then the summary
  table and the plots;
* then each document **as written** (its own whitespace and punctuation; the page never
  shows index tokens), risk by colour: the smaller the candidate set (df), the stronger the
  colour (df = 1 is singled out), with a legend; hovering a span explains it;
* combinations are listed by group (``grouping``: those that differ only by sliding
  phrases along the same words are one entry); selecting one outlines its phrases;
* with a protected version, the two views side by side, edits marked as masks or
  rewrites (removed text struck through on the left, inserted text marked on the right).

Pages are rendered from the Jinja2 templates in ``templates/`` with autoescaping on, so
everything from the inputs (texts, ids, phrases) is escaped; the per-document data goes
into ``<script type="application/json">`` with ``<``, ``>`` and ``&`` written as JSON
escapes, and the page's script reads it with ``JSON.parse`` and writes only
``textContent`` and ``title``. The page loads nothing from the network: CSS and script are
inline, plots are PNG data URIs; the script only reorders and hides the table's rows.
Documents are split into pages (``<name>-2.html``, ...)
and a document's marked-up text is capped (``DOC_BUDGET``), so pages stay small whatever
the collection.
"""
from __future__ import annotations

import base64
import html
import json
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

import jinja2

from ..io import atomic_write
from ..linkage.readings import DEFAULT_READINGS
from .grouping import grouped_combinations
from .plots import assessment_plot, plots_unavailable

#: Most bytes of marked-up text per document view; the rest is shown as plain text.
DOC_BUDGET = 25_000
DOCS_PER_PAGE = 20
#: Most combination groups listed per document view (the JSONL keeps its own cap).
COMBINATIONS_SHOWN = 50
#: Colour level by support: 1 (singled out), 2, 3-4, 5+.
LEVELS = ((1, "d1"), (2, "d2"), (4, "d3"))
#: Markup around a marked piece of text beyond its escaped text and attribute values (for ``DOC_BUDGET``).
_SPAN_MARKUP = len('<span class="" data-g="" data-m="" data-c=""></span>')


@dataclass(frozen=True)
class ReportSettings:
    """What a report was checked under; every page states it (``templates/_settings.html``).

    The one place that says which settings a report names: a new setting (a reading of
    the rules, say) is a line in ``facts``.
    """

    k: int
    arity: int
    index: str
    readings: tuple[str, ...] = DEFAULT_READINGS
    #: Inputs left out as invalid (``--skip-invalid``): documents the report says nothing about.
    skipped: int = 0

    def facts(self) -> list[tuple[str, str]]:
        return [("k", str(self.k)), ("arity", str(self.arity)), ("readings", " and ".join(self.readings)), ("index", self.index)]

    def caveat(self) -> str | None:
        """What these settings leave unchecked, in words (arity below the threat model's 3, a reading left out)."""
        notes = []
        if self.arity == 1:
            notes.append("Arity 1: combinations of phrases were not checked, only single phrases.")
        if self.arity == 2:
            notes.append("Arity 2: combinations of three phrases were not checked.")
        if "search" not in self.readings:
            notes.append(
                "The search reading was not checked: phrases across punctuation and with invisible or look-alike "
                "characters, which a search engine finds, were not searched for."
            )
        if self.skipped:
            notes.append(f"{self.skipped:,} input(s) were skipped as invalid and not assessed: this report says nothing about them.")
        return " ".join(notes) or None


def _json_for_script(data: Any) -> str:
    """JSON that cannot end its ``<script>`` element or start markup inside it."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    for char, escaped in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(char, escaped)
    return text


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("spacy_delink.evaluate", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["script_json"] = _json_for_script
    return environment


def report_asset(name: str) -> str:
    """A file of ``templates/`` as it is (the page's CSS and script, not Jinja templates); ``delink serve``'s page uses them too."""
    loader = _environment().loader
    assert loader is not None
    return loader.get_source(_environment(), name)[0]


def legend_html(k: int | None, with_edits: bool) -> str:
    """The reports' legend (colours and wording), for a page that shows the same marks (``delink serve``)."""
    return _environment().get_template("_legend.html").render(k=k, with_edits=with_edits)


def _level(support: int) -> str:
    for bound, name in LEVELS:
        if support <= bound:
            return name
    return "d4"


def _anonymity_text(value: int | None) -> str:
    return "not linkable" if value is None else str(value)


def _png(png: bytes | None) -> str | None:
    return None if png is None else base64.b64encode(png).decode("ascii")


@dataclass
class ReportDocument:
    """One document to draw: the assess records of its versions and the edits between them."""

    id: Any
    before_text: str
    before: dict[str, Any]
    after_text: str | None = None
    after: dict[str, Any] | None = None
    changes: Sequence[Any] = ()  # evaluate.metrics.Change
    facts: list[tuple[str, str]] = field(default_factory=list)  # (label, value) shown under the title
    number: int | None = None  # its place in the input (the anchor ``doc-N``), where pages list documents in another order


def _groups(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The record's combinations by group: as listed when ``delink assess`` grouped them, else grouped here."""
    combinations = record.get("combinations", [])
    if combinations and "group_size" in combinations[0]:
        return list(combinations)
    return grouped_combinations(combinations)


def _combination_counts(record: dict[str, Any]) -> tuple[int, int, bool]:
    """Combinations found, their groups, and whether a cap cut the list (from a ``delink assess`` record, else counted)."""
    if "combination_count" in record:
        return record["combination_count"], record["combination_groups"], record["combinations_capped"]
    combinations = record.get("combinations", [])
    return len(combinations), len(grouped_combinations(combinations)), False


def _spans(record: dict[str, Any]) -> tuple[list[tuple[int, int, int]], list[tuple[int, int]], dict[str, Any]]:
    """N-gram spans (start, end, support), combination member spans, and the data the script reads.

    The script's data holds phrases as text (``g``: [support, phrase], ``m``: phrase,
    ``c``: [support, member indices, group size]), so tooltips never depend on character offsets.
    """
    ngrams = [(g["start"], g["end"], g["support"]) for g in record.get("ngrams", [])]
    members: dict[tuple[int, int], int] = {}
    member_texts: list[str] = []
    combos = []
    for group in _groups(record)[:COMBINATIONS_SHOWN]:
        indices = []
        for member in group["members"]:
            key = (member["start"], member["end"])
            if key not in members:
                members[key] = len(member_texts)
                member_texts.append(member["text"])
            indices.append(members[key])
        combos.append([group["support"], indices, group["group_size"]])
    data = {"g": [[g["support"], g["text"]] for g in record.get("ngrams", [])], "m": member_texts, "c": combos}
    return ngrams, list(members), data


class _Active:
    """Marks covering the current piece of text, updated at each boundary (a sweep)."""

    def __init__(self, spans: Sequence[tuple[Any, ...]]) -> None:
        self.starts: dict[int, list[int]] = {}
        self.ends: dict[int, list[int]] = {}
        for i, span in enumerate(spans):
            if span[1] > span[0]:
                self.starts.setdefault(span[0], []).append(i)
                self.ends.setdefault(span[1], []).append(i)
        self.now: set[int] = set()

    def at(self, position: int) -> list[int]:
        self.now.difference_update(self.ends.get(position, ()))
        self.now.update(self.starts.get(position, ()))
        return sorted(self.now)


def _pieces(
    text: str,
    ngrams: list[tuple[int, int, int]],
    members: list[tuple[int, int]],
    combos: list[list[Any]],
    edits: list[tuple[int, int, str]],
    budget: int,
) -> tuple[list[dict[str, str]], str]:
    """The text cut into pieces under the same marks (one ``<span>`` each), and any unmarked rest.

    A piece is ``{"text", "classes", "g", "m", "c"}`` (marks as space-separated indices into
    the script's data). Past ``budget`` bytes of markup the rest of the text is returned
    separately (shown plain).
    """
    member_combos: dict[int, set[int]] = {}
    for c, (_, indices, _) in enumerate(combos):
        for i in indices:
            member_combos.setdefault(i, set()).add(c)
    cuts = {0, len(text)}
    for spans in (ngrams, members, edits):
        for span in spans:
            cuts.update((span[0], span[1]))
    bounds = sorted(b for b in cuts if 0 <= b <= len(text))
    active = [_Active(ngrams), _Active(members), _Active(edits)]
    pieces: list[dict[str, str]] = []
    size = 0
    for left, right in zip(bounds, bounds[1:]):
        g, m, e = (marks.at(left) for marks in active)
        if size > budget:
            return pieces, text[left:]
        classes = []
        if g:
            classes.append(_level(min(ngrams[i][2] for i in g)))
        if m:
            classes.append("cm")
        if e:
            classes.append(f"e-{edits[e[0]][2]}")
        combo_ids = sorted({c for i in m for c in member_combos.get(i, ())})
        piece = {
            "text": text[left:right],
            "classes": " ".join(classes),
            "g": " ".join(map(str, g)),
            "m": " ".join(map(str, m)),
            "c": " ".join(map(str, combo_ids)),
        }
        pieces.append(piece)
        escaped = len(html.escape(piece["text"]))
        size += escaped + (_SPAN_MARKUP + sum(len(piece[key]) for key in ("classes", "g", "m", "c")) if classes else 0)
    return pieces, ""


def _inserted(changes: Sequence[Any], side: str) -> list[tuple[int, int, str]]:
    edits = []
    for change in changes:
        start, end = getattr(change, side)
        if end > start:
            edits.append((start, end, ("removed" if side == "before" else change.kind)))
    return edits


def _combination_list(side: str, record: dict[str, Any], data: dict[str, Any]) -> dict[str, Any] | None:
    """The listed groups of one view, with a summary line that says how many there are in all."""
    if not data["c"]:
        return None
    count, groups, capped = _combination_counts(record)
    where = "de-identified" if side == "before" else "protected"
    summary = (
        f"{count:,}{'+' if capped else ''} linkable combination{'s' if count != 1 else ''} "
        f"in the {where} text, in {groups:,} group{'s' if groups != 1 else ''}"
    )
    if groups > len(data["c"]):
        summary += f" (first {len(data['c'])} shown)"
    items = [
        {"phrases": [data["m"][i] for i in indices], "support": support, "group_size": group_size}
        for support, indices, group_size in data["c"]
    ]
    return {"summary": summary, "groups": items}


def _view(side: str, title: str, text: str, record: dict[str, Any], changes: Sequence[Any]) -> dict[str, Any]:
    ngrams, members, data = _spans(record)
    pieces, rest = _pieces(text, ngrams, members, data["c"], _inserted(changes, side), DOC_BUDGET)
    return {
        "side": side, "title": title, "pieces": pieces, "rest": rest, "data": data,
        "combinations": _combination_list(side, record, data),
    }


def _document(number: int, document: ReportDocument) -> dict[str, Any]:
    """What ``templates/_document.html`` draws for one document."""
    has_after = document.after_text is not None and document.after is not None
    views = [_view("before", "De-identified" if has_after else "Document", document.before_text, document.before, document.changes)]
    if has_after:
        assert document.after_text is not None and document.after is not None
        views.append(_view("after", "Protected", document.after_text, document.after, document.changes))
    data: dict[str, Any] = {"k": document.before.get("k")}
    data.update({view["side"]: view["data"] for view in views})
    return {"number": number, "id": document.id, "facts": document.facts, "views": views, "data": data}


def page_name(path: Path, page: int) -> str:
    """The file name of page ``page`` of the report at ``path`` (``report.html``, ``report-2.html``, ...)."""
    return path.name if page == 1 else f"{path.stem}-{page}{path.suffix}"


def write_pages(
    path: Path,
    template: str,
    title: str,
    settings: ReportSettings,
    summary: dict[str, Any],
    documents: Sequence[ReportDocument],
    per_page: int = DOCS_PER_PAGE,
) -> list[Path]:
    """Write the report: page 1 at ``path`` holds the summary block of ``template`` and the first documents."""
    pages = [page_name(path, page) for page in range(1, max(1, -(-len(documents) // per_page)) + 1)]
    renderer = _environment().get_template(template)
    common = {
        "title": title, "settings": settings, "pages": pages, "first_page": pages[0], "total": len(documents),
        "with_edits": any(d.after_text is not None for d in documents), "k": settings.k,
        "css": report_asset("report.css"), "js": report_asset("report.js"), **summary,
    }
    written = []
    for page, name in enumerate(pages, 1):
        first = (page - 1) * per_page
        chunk = documents[first : first + per_page]
        page_html = renderer.render(
            common, page=page, first=first,
            documents=[_document(first + i if d.number is None else d.number, d) for i, d in enumerate(chunk)],
        )
        target = path.with_name(name)
        with atomic_write(target) as handle:
            handle.write(page_html)
        written.append(target)
    return written


# -- delink assess --html -------------------------------------------------------------------

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
        count, groups, capped = _combination_counts(record)
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
        return [("anonymity", _anonymity_text(self.anonymity)), ("linkable phrases", f"{len(self.phrases):,}"),
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
    groups = _groups(record)
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
            "anonymity": {"text": _anonymity_text(anonymity), "sort": anonymity if anonymity is not None else "", "class": "bad" if anonymity == 1 else ""},
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
    distribution = Counter(_anonymity_text(value) for value in anonymities)
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
        "plot_png": _png(png),
        "plot_missing": missing or "",
        "distribution": sorted(distribution.items(), key=lambda item: (item[0] == "not linkable", item[0].zfill(9))),
    }
    documents = [
        ReportDocument(id=record["id"], before_text=report[number][0], before=record, facts=risk.facts(), number=number)
        for number, risk, record in risks
    ]
    return write_pages(path, "assess.html", "spacy-delink assessment report", settings, summary, documents)


# -- delink evaluate ------------------------------------------------------------------------

#: The evaluate report's plots: file name → caption.
PLOT_CAPTIONS = {
    "linkage.png": "Documents linkable vs k, per arity (solid: our index; dashed: tantivy)",
    "anonymity.png": "Anonymity (smallest candidate set) at the report's setting",
    "similarity.png": "Similarity of protected to de-identified text",
    "semantic_topk.png": "Semantic linkage: true source ranked first / in the first ten",
}


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def _linkage_table(metrics: dict[str, Any]) -> dict[str, Any]:
    """The (k, arity) grid: linkable before/after (ours, tantivy), averted; and what "the attack succeeds" adds.

    The ``successful`` counts of metrics.json (a smallest candidate set holds the true
    source) equal ``linkable`` whenever every source is in the collection, so the table
    does not repeat them: one sentence under it says where they agree and lists any cell
    where they do not.
    """
    has_after = any("after" in cell for cell in metrics["linkage"])
    engine = metrics["engine"]["available"]
    header = ["k", "arity", "linkable before"] + (["tantivy before"] if engine else [])
    if has_after:
        header += ["linkable after"] + (["tantivy after"] if engine else []) + ["averted"]
    rows: list[list[Any]] = []
    differ = []
    for cell in metrics["linkage"]:
        before = cell["before"]
        row: list[Any] = [cell["k"], cell["arity"], f"{before['linkable']} ({_percent(before['linkable_share'])})"]
        if engine:
            row.append(str(before["engine_linkable"]))
        if has_after:
            after = cell["after"]
            must_be_zero = cell.get("within_protection", False)

            def verdict(count: int) -> str:
                return ("bad" if count else "good") if must_be_zero else ""

            row.append((f"{after['linkable']} ({_percent(after['linkable_share'])})", verdict(after["linkable"])))
            if engine:
                row.append((str(after["engine_linkable"]), verdict(after["engine_linkable"])))
            row.append(_percent(cell["averted"]["share"]))
        rows.append(row)
        for version in ("before", "after"):
            if version in cell and cell[version]["successful"] != cell[version]["linkable"]:
                differ.append(
                    f"k={cell['k']}, arity {cell['arity']} {version}: {cell[version]['successful']} of "
                    f"{cell[version]['linkable']} linkable"
                )
    if differ:
        success = (
            "The attack succeeds (a smallest candidate set holds the true source) for fewer documents than are "
            "linkable in: " + "; ".join(differ) + ". In every other cell it succeeds on every linkable document."
        )
    else:
        success = (
            "In every cell the attack succeeds on every linkable document: a smallest candidate set holds its "
            "true source (metrics.json: successful)."
        )
    return {"header": header, "rows": rows, "success": success}


def _notes(metrics: dict[str, Any]) -> list[str]:
    counts = metrics["documents"]
    notes = []
    for item in counts["excluded"].values():
        shown = ", ".join(map(str, item["ids"][:5]))
        notes.append(f"{item['count']:,} left out: {item['why']} (e.g. {shown})")
    if counts["protected_without_edits"]["count"]:
        notes.append(f"{counts['protected_without_edits']['count']:,} protected records carry no edits: derivation not checked")
    return notes


def _utility_rows(metrics: dict[str, Any]) -> list[list[str]]:
    utility = metrics.get("utility")
    if not utility:
        return []
    edits = utility["edits_per_document"] or {}
    rows = [
        ["tokens changed", f"{utility['tokens_changed']:,} of {utility['tokens']:,} ({_percent(utility['tokens_changed_share'])})"],
        ["masks added", f"{utility['masks_added']:,} ({utility['masks_added_per_document']:.1f} per document)"],
        ["edits per document", ", ".join(f"{kind} {value:.1f}" for kind, value in sorted(edits.items())) or "–"],
        ["documents unchanged", f"{utility['documents_unchanged']:,}"],
    ]
    semantic = metrics["semantic"]
    if semantic.get("available") and "similarity" in semantic:
        sim = semantic["similarity"]
        rows.append(["similarity de-identified vs protected", f"mean {sim['mean']:.3f}, median {sim['median']:.3f}, min {sim['min']:.3f}"])
    return rows


def _semantic(metrics: dict[str, Any]) -> dict[str, Any] | None:
    semantic = metrics["semantic"]
    if not semantic.get("available"):
        return None
    rows = [
        [version, _percent(semantic[version]["top1"]), _percent(semantic[version]["top10"]), f"{semantic[version]['mean_rank']:.1f}"]
        for version in ("before", "after")
        if version in semantic
    ]
    return {"model": semantic["model"]["name"], "vectors": semantic["collection_vectors"], "rows": rows}


def _verdict(verdict: dict[str, Any]) -> str:
    return f"anonymity {verdict['anonymity']}" if verdict["linkable"] else "not linkable"


def _disagreements(metrics: dict[str, Any]) -> dict[str, Any] | None:
    disagreements = metrics["engine"]["disagreements"]
    if not disagreements:
        return None
    rows = [
        [d["id"], d["version"], d["k"], d["arity"], d["kind"], _verdict(d["ours"]), _verdict(d["engine"]),
         " + ".join(d["engine"]["witness"]["phrases"]) if d["engine"].get("witness") else ""]
        for d in disagreements[:200]
    ]
    return {"total": len(disagreements), "rows": rows}


def _evaluation_summary(metrics: dict[str, Any], plots: dict[str, bytes], plots_missing: str | None) -> dict[str, Any]:
    """What ``templates/evaluate.html`` draws on page 1."""
    settings = metrics["settings"]
    warnings = list(metrics.get("warnings", []))
    if plots_missing:
        warnings.append(f"The plots were not drawn: {plots_missing}.")
    names = list(plots) if plots else [name for name in PLOT_CAPTIONS if name in ("linkage.png", "anonymity.png")]
    return {
        "warnings": warnings,
        "counts": metrics["documents"],
        "index": settings["index"],
        "protection": settings.get("protection"),
        "linkage": _linkage_table(metrics),
        "notes": _notes(metrics),
        "utility": _utility_rows(metrics),
        "semantic": _semantic(metrics),
        "semantic_missing": metrics["semantic"].get("reason", ""),
        "plots": [(name, PLOT_CAPTIONS.get(name, name), _png(plots.get(name))) for name in names],
        "plots_missing": plots_missing or "",
        "disagreements": _disagreements(metrics),
    }


def write_evaluation_report(
    evaluation: Any, plots: dict[str, bytes], path: Path, plots_missing: str | None = None
) -> list[Path]:
    """The ``evaluate`` report: warnings, summary and plots, then every document before/after at the report's (k, arity).

    ``plots_missing`` says why ``plots`` is empty (matplotlib missing); the page says so in words.
    """
    metrics = evaluation.metrics
    report = metrics["settings"]["report"]
    documents = []
    for entry in evaluation.documents:
        document = entry["document"]
        before = entry["assess"]["before"]
        after = entry["assess"].get("after")
        facts = [("anonymity before", _anonymity_text(before["anonymity"]))]
        if after is not None:
            facts.append(("after", _anonymity_text(after["anonymity"])))
        if "utility" in entry:
            utility = entry["utility"]
            facts.append(("tokens changed", f"{utility['tokens_changed']} of {utility['tokens']}"))
        semantic = entry.get("semantic") or {}
        if "before" in semantic:
            ranks = f"{semantic['before']['rank']}" + (f" → {semantic['after']['rank']}" if "after" in semantic else "")
            facts.append(("semantic rank of source", ranks))
        if "similarity_deidentified_protected" in semantic:
            facts.append(("similarity", f"{semantic['similarity_deidentified_protected']:.3f}"))
        documents.append(
            ReportDocument(
                id=document.id,
                before_text=document.deidentified,
                before=before,
                after_text=document.protected,
                after=after,
                changes=entry.get("changes", ()),
                facts=facts,
            )
        )
    settings = ReportSettings(report["k"], report["arity"], metrics["settings"]["index"], tuple(metrics["settings"]["readings"]))
    title = f"spacy-delink evaluation (report at k={report['k']}, arity {report['arity']})"
    return write_pages(path, "evaluate.html", title, settings, _evaluation_summary(metrics, plots, plots_missing), documents)
