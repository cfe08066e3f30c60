"""The pages' shared HTML markup: ``delink evaluate``'s and ``delink assess --html``'s reports, and ``delink serve``'s page.

Every page states what it was checked under (k, arity, index: ``ReportSettings``, drawn by
``templates/_settings.html``), and what was not checked. Each document is drawn **as
written** (its own whitespace and punctuation; the page never shows index tokens), risk by
colour: the smaller the candidate set (df), the stronger the colour (df = 1 is singled
out), with a legend; hovering a span explains it. Combinations are listed by group
(``grouping``: those that differ only by sliding phrases along the same words are
one entry); selecting one outlines its phrases. With a protected version, the two views
are side by side, edits marked as masks or rewrites (removed text struck through on the
left, inserted text marked on the right).

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
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

import jinja2

from .grouping import grouped_combinations
from ..io.files import atomic_write
from ..linkage.readings import DEFAULT_READINGS, listed

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
        return [("k", str(self.k)), ("arity", str(self.arity)), ("readings", listed(self.readings)), ("index", self.index)]

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


def json_for_script(data: Any) -> str:
    """JSON that cannot end its ``<script>`` element or start markup inside it."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    for char, escaped in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(char, escaped)
    return text


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("spacy_delink.pages", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["script_json"] = json_for_script
    return environment


def report_asset(name: str) -> str:
    """A file of ``templates/`` as it is (the page's CSS and script, not Jinja templates); ``delink serve``'s page uses them too."""
    loader = environment().loader
    assert loader is not None
    return loader.get_source(environment(), name)[0]


def legend_html(k: int | None, with_edits: bool) -> str:
    """The reports' legend (colours and wording), for a page that shows the same marks (``delink serve``)."""
    return environment().get_template("_legend.html").render(k=k, with_edits=with_edits)


def _level(support: int) -> str:
    for bound, name in LEVELS:
        if support <= bound:
            return name
    return "d4"


def anonymity_text(value: int | None) -> str:
    return "not linkable" if value is None else str(value)


def png_base64(png: bytes | None) -> str | None:
    return None if png is None else base64.b64encode(png).decode("ascii")


@dataclass
class ReportDocument:
    """One document to draw: the assess records of its versions and the edits between them."""

    id: Any
    before_text: str
    before: dict[str, Any]
    after_text: str | None = None
    after: dict[str, Any] | None = None
    changes: Sequence[Any] = ()  # evaluate.utility.Change
    facts: list[tuple[str, str]] = field(default_factory=list)  # (label, value) shown under the title
    number: int | None = None  # its place in the input (the anchor ``doc-N``), where pages list documents in another order


def combination_groups(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The record's combinations by group: as listed when ``delink assess`` grouped them, else grouped here."""
    combinations = record.get("combinations", [])
    if combinations and "group_size" in combinations[0]:
        return list(combinations)
    return grouped_combinations(combinations)


def combination_counts(record: dict[str, Any]) -> tuple[int, int, bool]:
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
    for group in combination_groups(record)[:COMBINATIONS_SHOWN]:
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
    count, groups, capped = combination_counts(record)
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
    renderer = environment().get_template(template)
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
