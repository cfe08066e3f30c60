"""The HTML reports: ``delink evaluate`` (summary, plots, documents before/after) and ``delink assess --html``.

A person should see at a glance how exposed each document is and what protection changed:

* a summary table and the plots first, then each document **as written** (its own
  whitespace and punctuation; the page never shows index tokens);
* risk by colour: the smaller the candidate set (df), the stronger the colour (df = 1 is
  singled out), with a legend; hovering a span explains it (support, why it links, the
  combinations it belongs to);
* combinations are listed as groups; selecting one outlines its members in the text,
  instead of stacking a bar per combination under the text;
* with a protected version, the two views side by side, edits marked as masks or
  rewrites (removed text struck through on the left, inserted text marked on the right).

Everything from the inputs (texts, ids, phrases) is escaped: HTML text and attributes
through ``html.escape``, the per-document data in ``<script type="application/json">``
with ``<``, ``>`` and ``&`` written as JSON escapes, and the page's script reads it with
``JSON.parse`` and writes only ``textContent`` and ``title``. The page loads nothing from
the network: CSS and script are inline, plots are PNG data URIs. Documents are split into
pages (``<name>-2.html``, ...) and a document's marked-up text is capped (``DOC_BUDGET``),
so pages stay small whatever the collection.
"""
from __future__ import annotations

import base64
import html
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..io import atomic_write

#: Most bytes of marked-up text per document view; the rest is shown as plain text.
DOC_BUDGET = 25_000
DOCS_PER_PAGE = 20
#: Most combinations listed per document (the JSONL keeps its own cap).
COMBINATIONS_SHOWN = 50
#: Colour level by support: 1 (singled out), 2, 3-4, 5+.
LEVELS = ((1, "d1"), (2, "d2"), (4, "d3"))


def _e(value: Any) -> str:
    """Escape any value for HTML text or a quoted attribute."""
    return html.escape(str(value), quote=True)


def _json_for_script(data: Any) -> str:
    """JSON that cannot end its ``<script>`` element or start markup inside it."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    for char, escaped in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(char, escaped)
    return text


def _level(support: int) -> str:
    for bound, name in LEVELS:
        if support <= bound:
            return name
    return "d4"


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


def _spans(record: dict[str, Any]) -> tuple[list[tuple[int, int, int]], list[tuple[int, int]], dict[str, Any]]:
    """N-gram spans (start, end, support), combination member spans, and the data the script reads.

    The script's data holds phrases as text (``g``: [support, phrase], ``m``: phrase,
    ``c``: [support, member indices]), so tooltips never depend on character offsets.
    """
    ngrams = [(g["start"], g["end"], g["support"]) for g in record.get("ngrams", [])]
    members: dict[tuple[int, int], int] = {}
    member_texts: list[str] = []
    combos = []
    for combination in record.get("combinations", [])[:COMBINATIONS_SHOWN]:
        indices = []
        for member in combination["members"]:
            key = (member["start"], member["end"])
            if key not in members:
                members[key] = len(member_texts)
                member_texts.append(member["text"])
            indices.append(members[key])
        combos.append([combination["support"], indices])
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


def _render_text(
    text: str,
    ngrams: list[tuple[int, int, int]],
    members: list[tuple[int, int]],
    combos: list[list[Any]],
    edits: list[tuple[int, int, str]],
    budget: int,
) -> tuple[str, str]:
    """The text with one ``<span>`` per run of characters under the same marks, and any unmarked rest.

    Past ``budget`` bytes of markup the rest of the text is returned separately (shown plain).
    """
    member_combos: dict[int, set[int]] = {}
    for c, (_, indices) in enumerate(combos):
        for i in indices:
            member_combos.setdefault(i, set()).add(c)
    cuts = {0, len(text)}
    for spans in (ngrams, members, edits):
        for span in spans:
            cuts.update((span[0], span[1]))
    bounds = sorted(b for b in cuts if 0 <= b <= len(text))
    active = [_Active(ngrams), _Active(members), _Active(edits)]
    parts: list[str] = []
    size = 0
    for left, right in zip(bounds, bounds[1:]):
        g, m, e = (marks.at(left) for marks in active)
        if size > budget:
            return "".join(parts), text[left:]
        piece = _e(text[left:right])
        classes = []
        attributes = ""
        if g:
            classes.append(_level(min(ngrams[i][2] for i in g)))
            attributes += f' data-g="{" ".join(map(str, g))}"'
        if m:
            classes.append("cm")
            combo_ids = sorted({c for i in m for c in member_combos.get(i, ())})
            attributes += f' data-m="{" ".join(map(str, m))}" data-c="{" ".join(map(str, combo_ids))}"'
        if e:
            classes.append(f"e-{edits[e[0]][2]}")
        markup = f'<span class="{" ".join(classes)}"{attributes}>{piece}</span>' if classes else piece
        parts.append(markup)
        size += len(markup)
    return "".join(parts), ""


def _inserted(changes: Sequence[Any], side: str) -> list[tuple[int, int, str]]:
    edits = []
    for change in changes:
        start, end = getattr(change, side)
        if end > start:
            edits.append((start, end, ("removed" if side == "before" else change.kind)))
    return edits


def _view(side: str, title: str, text: str, record: dict[str, Any], changes: Sequence[Any]) -> tuple[str, dict[str, Any], str]:
    ngrams, members, data = _spans(record)
    marked, rest = _render_text(text, ngrams, members, data["c"], _inserted(changes, side), DOC_BUDGET)
    body = f'<div class="view {side}" data-side="{side}"><h3>{_e(title)}</h3><div class="text">{marked}</div>'
    if rest:
        body += (
            f'<details class="rest"><summary>{len(rest):,} more characters, shown without marks</summary>'
            f'<div class="text plain">{_e(rest)}</div></details>'
        )
    return body + "</div>", data, _combination_list(side, record, data)


def _document_html(number: int, document: ReportDocument) -> str:
    has_after = document.after_text is not None and document.after is not None
    view, before_data, combos_html = _view(
        "before", "De-identified" if has_after else "Document", document.before_text, document.before, document.changes
    )
    views = [view]
    data: dict[str, Any] = {"k": document.before.get("k"), "before": before_data}
    if has_after:
        assert document.after_text is not None and document.after is not None
        view, data["after"], after_combos = _view("after", "Protected", document.after_text, document.after, document.changes)
        views.append(view)
        combos_html += after_combos
    facts = "".join(f"<span><b>{_e(label)}</b> {_e(value)}</span>" for label, value in document.facts)
    return (
        f'<article class="doc" id="doc-{number}" data-doc="{number}">'
        f'<h2>{_e(document.id)}</h2><p class="facts">{facts}</p>'
        f'<div class="views n{len(views)}">{"".join(views)}</div>{combos_html}'
        f'<script type="application/json" class="doc-data">{_json_for_script(data)}</script></article>'
    )


def _combination_list(side: str, record: dict[str, Any], data: dict[str, Any]) -> str:
    if not record.get("combinations"):
        return ""
    total = len(record["combinations"])
    items = []
    for c, (support, indices) in enumerate(data["c"]):
        phrases = " + ".join(f"“{_e(data['m'][i])}”" for i in indices)
        items.append(
            f'<li><button type="button" class="combo" data-side="{side}" data-combo="{c}">{phrases}'
            f' <span class="support">together in {support} document{"s" if support != 1 else ""}</span></button></li>'
        )
    shown = f" (first {len(data['c'])} shown)" if total > len(data["c"]) else ""
    where = "de-identified" if side == "before" else "protected"
    return (
        f'<details class="combos" data-side="{side}"><summary>{total} linkable combination{"s" if total != 1 else ""} '
        f"in the {where} text{shown}: select one to outline its phrases</summary><ol>{''.join(items)}</ol></details>"
    )


REPORT_CSS = """
:root{--d1:#e74c3c;--d2:#f39c12;--d3:#f7dc6f;--d4:#fcf3cf;--cm:#6c3483;--mask:#566573;--llm:#1e8449}
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:1200px;padding:1em 1.5em;color:#1b2631}
h1{font-size:1.5em;margin:.2em 0}h2{font-size:1.1em;margin:0 0 .2em;word-break:break-all}h3{font-size:.9em;margin:.2em 0;color:#566573;text-transform:uppercase;letter-spacing:.05em}
table{border-collapse:collapse;margin:.5em 0 1em;font-size:.9em}th,td{border:1px solid #d5d8dc;padding:.25em .6em;text-align:right}th{background:#f4f6f7}td:first-child,th:first-child{text-align:left}
td.bad{background:#fadbd8;font-weight:bold}td.good{background:#d5f5e3}
.plots{display:flex;flex-wrap:wrap;gap:1em}.plots figure{margin:0}.plots img{max-width:100%;border:1px solid #eaeded}figcaption{font-size:.8em;color:#566573}
.legend{display:flex;flex-wrap:wrap;gap:.4em 1.2em;padding:.5em .8em;background:#f8f9f9;border:1px solid #eaeded;border-radius:4px;font-size:.85em;position:sticky;top:0;z-index:2}
.legend span.sw{display:inline-block;padding:0 .35em;margin-right:.3em;border-radius:2px}
.doc{border-top:2px solid #d5d8dc;padding:1em 0;margin-top:1em;scroll-margin-top:5em}.facts span{margin-right:1.2em;font-size:.85em;color:#424949}
.views{display:grid;gap:1em}.views.n2{grid-template-columns:1fr 1fr}
.text{white-space:pre-wrap;word-wrap:break-word;font:14px/1.65 Georgia,"Times New Roman",serif;background:#fdfefe;border:1px solid #eaeded;padding:.6em .8em;border-radius:4px;max-height:36em;overflow:auto}
.d1{background:var(--d1);color:#fff}.d2{background:var(--d2)}.d3{background:var(--d3)}.d4{background:var(--d4)}
.cm{text-decoration:underline dotted var(--cm) 2px;text-underline-offset:3px}
.sel{background:#d2b4de;box-shadow:0 2px 0 var(--cm)}
.e-removed{text-decoration:line-through;text-decoration-color:#1b2631;opacity:.75}
.e-mask{background:#d6dbdf;color:#17202a;border-bottom:2px solid var(--mask)}.e-rewrite{background:#d5f5e3;border-bottom:2px solid var(--llm)}
[data-g],[data-m],.e-removed,.e-mask,.e-rewrite{cursor:help}
.combos{margin-top:.5em;font-size:.9em}.combos ol{max-height:14em;overflow:auto;margin:.3em 0}
button.combo{font:inherit;text-align:left;background:none;border:1px solid transparent;border-radius:3px;padding:.05em .3em;cursor:pointer}
button.combo:hover,button.combo.active{border-color:var(--cm);background:#f4ecf7}.support{color:#566573;font-size:.85em}
nav.pages a{margin-right:.6em}.notes{font-size:.9em;color:#7b241c}.ok{color:#1e8449}
@media (max-width:800px){.views.n2{grid-template-columns:1fr}}
"""

REPORT_JS = r"""
(function(){
  function data(article){
    if(!article.__data){article.__data=JSON.parse(article.querySelector('script.doc-data').textContent);}
    return article.__data;
  }
  function plural(n,word){return n+' '+word+(n===1?'':'s');}
  function tip(span){
    var article=span.closest('article.doc'); var d=data(article);
    var side=span.closest('.view').getAttribute('data-side'); var v=d[side]; var k=d.k; var lines=[];
    (span.getAttribute('data-g')||'').split(' ').filter(Boolean).forEach(function(i){
      var g=v.g[+i]; var s=g[0];
      lines.push('\u201c'+g[1]+'\u201d occurs in '+plural(s,'document')+' of the original collection'+
        (s===1?': a search for it singles out its source.':' (fewer than k='+k+'): a search for it narrows the candidates to '+s+'.'));
    });
    var ms=(span.getAttribute('data-m')||'').split(' ').filter(Boolean);
    if(ms.length){
      var cs=(span.getAttribute('data-c')||'').split(' ').filter(Boolean);
      var m=v.m[+ms[0]];
      var first=v.c[+cs[0]];
      var others=first[1].filter(function(j){return j!==+ms[0];}).map(function(j){return '\u201c'+v.m[j]+'\u201d';});
      lines.push('\u201c'+m+'\u201d is common on its own, but belongs to '+plural(cs.length,'linkable combination')+
        (others.length?'; e.g. together with '+others.join(' and ')+' it occurs in '+plural(first[0],'document')+' only.':'.'));
    }
    if(span.classList.contains('e-removed')){lines.push('Changed by the protection (see the protected text).');}
    if(span.classList.contains('e-mask')){lines.push('Masked by the protection.');}
    if(span.classList.contains('e-rewrite')){lines.push('Rewritten by the protection (LLM).');}
    return lines.join('\n');
  }
  document.addEventListener('mouseover',function(ev){
    var span=ev.target.closest && ev.target.closest('.text span[data-g],.text span[data-m],.text span.e-removed,.text span.e-mask,.text span.e-rewrite');
    if(span && !span.hasAttribute('title')){span.setAttribute('title',tip(span));}
  });
  document.addEventListener('click',function(ev){
    var button=ev.target.closest && ev.target.closest('button.combo'); if(!button){return;}
    var article=button.closest('article.doc'); var side=button.getAttribute('data-side'); var c=button.getAttribute('data-combo');
    var on=!button.classList.contains('active');
    article.querySelectorAll('button.combo.active').forEach(function(b){b.classList.remove('active');});
    article.querySelectorAll('.sel').forEach(function(s){s.classList.remove('sel');});
    if(!on){return;}
    button.classList.add('active');
    article.querySelectorAll('.view[data-side="'+side+'"] span[data-c]').forEach(function(s){
      if(s.getAttribute('data-c').split(' ').indexOf(c)>=0){s.classList.add('sel');}
    });
  });
})();
"""


def legend_html(k: int | None, with_edits: bool) -> str:
    below_k = f" (fewer than k={k})" if k else ""
    items = [
        ('<span class="sw d1">df = 1</span>singled out: the phrase occurs in one document only'),
        ('<span class="sw d2">df = 2</span>'),
        ('<span class="sw d3">df = 3–4</span>'),
        (f'<span class="sw d4">df ≥ 5</span>linkable phrases{_e(below_k)}'),
        ('<span class="sw cm">phrase</span>member of a linkable combination (select a combination below a document)'),
    ]
    if with_edits:
        items += [
            '<span class="sw e-removed">text</span>changed by the protection',
            '<span class="sw e-mask">[MASK]</span>mask inserted',
            '<span class="sw e-rewrite">words</span>rewritten (LLM)',
        ]
    return '<div class="legend" id="legend"><b>Legend</b>' + "".join(f"<span>{item}</span>" for item in items) + "</div>"


def _page(title: str, body: str) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{REPORT_CSS}</style></head><body>{body}<script>{REPORT_JS}</script></body></html>\n"
    )


def _page_name(path: Path, page: int) -> str:
    return path.name if page == 1 else f"{path.stem}-{page}{path.suffix}"


def _pages_nav(path: Path, pages: int, current: int) -> str:
    if pages <= 1:
        return ""
    links = " ".join(
        f"<b>{n}</b>" if n == current else f'<a href="{_e(_page_name(path, n))}">{n}</a>' for n in range(1, pages + 1)
    )
    return f'<nav class="pages">Pages of documents: {links}</nav>'


def write_pages(
    path: Path, title: str, head_html: str, documents: Sequence[ReportDocument], k: int | None, per_page: int = DOCS_PER_PAGE
) -> list[Path]:
    """Write the report: page 1 at ``path`` holds ``head_html`` (summary, plots) and the first documents."""
    pages = max(1, -(-len(documents) // per_page))
    with_edits = any(d.after_text is not None for d in documents)
    written = []
    for page in range(1, pages + 1):
        chunk = documents[(page - 1) * per_page : page * per_page]
        first = (page - 1) * per_page
        nav = _pages_nav(path, pages, page)
        body = [f"<header><h1>{_e(title)}</h1></header>"]
        if page == 1:
            body.append(head_html)
        else:
            body.append(f'<p><a href="{_e(_page_name(path, 1))}">← summary and plots</a></p>')
        body.append(legend_html(k, with_edits))
        body.append(f'<section id="documents"><h2>Documents {first + 1}–{first + len(chunk)} of {len(documents)}</h2>{nav}')
        body.extend(_document_html(first + i, document) for i, document in enumerate(chunk))
        body.append(f"{nav}</section>")
        target = path.with_name(_page_name(path, page))
        with atomic_write(target) as handle:
            handle.write(_page(title, "".join(body)))
        written.append(target)
    return written


def _table(header: Sequence[str], rows: Iterable[Sequence[Any]], classes: Iterable[Sequence[str]] | None = None) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    class_rows = list(classes) if classes is not None else None
    body = []
    for r, row in enumerate(rows):
        cells = []
        for c, value in enumerate(row):
            cls = class_rows[r][c] if class_rows is not None else ""
            cells.append(f'<td class="{cls}">{_e(value)}</td>' if cls else f"<td>{_e(value)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


# -- delink assess --html -------------------------------------------------------------------


def write_html_report(report: list[tuple[str, dict[str, Any]]], path: Path) -> list[Path]:
    """The ``assess`` report: a summary table and every document with its linkable spans.

    ``report`` pairs each text with its ``delink assess`` record; returns the pages written.
    """
    documents = []
    anonymity: Counter[str] = Counter()
    for text, record in report:
        value = record.get("anonymity")
        anonymity["not linkable" if value is None else str(value)] += 1
        documents.append(
            ReportDocument(
                id=record["id"],
                before_text=text,
                before=record,
                facts=[
                    ("anonymity", "not linkable" if value is None else str(value)),
                    ("linkable phrases", str(len(record.get("ngrams", [])))),
                    ("combinations", str(len(record.get("combinations", [])))),
                ],
            )
        )
    k = report[0][1].get("k") if report else None
    arity = report[0][1].get("arity") if report else None
    linkable = sum(record.get("anonymity") is not None for _, record in report)
    head = (
        f'<section id="summary"><p>{len(report):,} documents assessed at k={_e(k)}, arity {_e(arity)}: '
        f"<b>{linkable:,}</b> linkable (a phrase or combination that {('singles out' if k == 2 else 'narrows a search to fewer than k')} "
        "documents of the original collection).</p>"
        + _table(["anonymity (smallest candidate set)", "documents"], sorted(anonymity.items(), key=lambda i: (i[0] == "not linkable", i[0].zfill(9))))
        + "</section>"
    )
    return write_pages(path, "spacy-delink assessment report", head, documents, k)


# -- delink evaluate ------------------------------------------------------------------------


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def _summary_html(metrics: dict[str, Any], plots: dict[str, bytes]) -> str:
    settings = metrics["settings"]
    counts = metrics["documents"]
    has_after = any("after" in cell for cell in metrics["linkage"])
    engine = metrics["engine"]["available"]
    header = ["k", "arity", "linkable before"]
    if engine:
        header.append("tantivy before")
    header.append("attack succeeds before")
    if has_after:
        header += ["linkable after"] + (["tantivy after"] if engine else []) + ["attack succeeds after", "averted"]
    rows, classes = [], []
    for cell in metrics["linkage"]:
        before = cell["before"]
        row: list[Any] = [cell["k"], cell["arity"], f"{before['linkable']} ({_percent(before['linkable_share'])})"]
        cls = ["", "", ""]
        if engine:
            row.append(str(before["engine_linkable"]))
            cls.append("")
        row.append(str(before["successful"]))
        cls.append("")
        if has_after:
            after = cell["after"]
            must_be_zero = cell.get("within_protection", False)
            bad = "bad" if must_be_zero and after["linkable"] else "good" if must_be_zero else ""
            row.append(f"{after['linkable']} ({_percent(after['linkable_share'])})")
            cls.append(bad)
            if engine:
                row.append(str(after["engine_linkable"]))
                cls.append("bad" if must_be_zero and after["engine_linkable"] else "good" if must_be_zero else "")
            row += [str(after["successful"]), _percent(cell["averted"]["share"])]
            cls += ["", ""]
        rows.append(row)
        classes.append(cls)
    protection = settings.get("protection")
    parts = [
        '<section id="summary"><h2>Summary</h2>',
        f"<p>{counts['evaluated']:,} documents evaluated against index <code>{_e(settings['index'])}</code> "
        f"({counts['collection']:,} original documents)"
        + (
            f"; protected at k={_e(protection['k'])}, arity {_e(protection['arity'])}"
            + (" (green/red cells must be 0)" if protection.get("same_index") else " against another index")
            if protection
            else ""
        )
        + ".</p>",
        _table(header, rows, classes),
    ]
    notes = []
    for reason, item in counts["excluded"].items():
        shown = ", ".join(map(str, item["ids"][:5]))
        notes.append(f"{item['count']:,} left out: {item['why']} (e.g. {shown})")
    if counts["protected_without_edits"]["count"]:
        notes.append(f"{counts['protected_without_edits']['count']:,} protected records carry no edits: derivation not checked")
    if not metrics["engine"]["available"]:
        notes.append(f"independent engine not run: {metrics['engine'].get('reason')}")
    else:
        count = metrics["engine"]["decision_disagreements"]
        if count:
            notes.append(f"tantivy disagrees with our index on {count} decision(s); see the list below")
    if notes:
        parts.append('<ul class="notes">' + "".join(f"<li>{_e(n)}</li>" for n in notes) + "</ul>")
    utility = metrics.get("utility")
    semantic = metrics["semantic"]
    if utility:
        edits = utility["edits_per_document"] or {}
        rows_u = [
            ["tokens changed", f"{utility['tokens_changed']:,} of {utility['tokens']:,} ({_percent(utility['tokens_changed_share'])})"],
            ["masks added", f"{utility['masks_added']:,} ({utility['masks_added_per_document']:.1f} per document)"],
            ["edits per document", ", ".join(f"{kind} {value:.1f}" for kind, value in sorted(edits.items())) or "–"],
            ["documents unchanged", f"{utility['documents_unchanged']:,}"],
        ]
        if semantic.get("available") and "similarity" in semantic:
            sim = semantic["similarity"]
            rows_u.append(["similarity de-identified vs protected", f"mean {sim['mean']:.3f}, median {sim['median']:.3f}, min {sim['min']:.3f}"])
        parts.append("<h3>Utility</h3>" + _table(["measure", "value"], rows_u))
    if semantic.get("available"):
        rows_s = [
            [version, _percent(semantic[version]["top1"]), _percent(semantic[version]["top10"]), f"{semantic[version]['mean_rank']:.1f}"]
            for version in ("before", "after")
            if version in semantic
        ]
        parts.append(
            f"<h3>Semantic linkage</h3><p>Original collection ranked by cosine similarity ({_e(semantic['model']['name'])}; "
            f"{_e(semantic['collection_vectors'])}).</p>"
            + _table(["version", "top-1", "top-10", "mean rank of the source"], rows_s)
        )
    else:
        parts.append(f'<p class="notes">Semantic linkage and similarity not measured: {_e(semantic.get("reason"))}</p>')
    parts.append('<h3>Plots</h3><div class="plots" id="plots">')
    captions = {
        "linkage.png": "Documents linkable vs k, per arity (solid: our index; dashed: tantivy)",
        "anonymity.png": "Anonymity (smallest candidate set) at the report's setting",
        "similarity.png": "Similarity of protected to de-identified text",
        "semantic_topk.png": "Semantic linkage: true source ranked first / in the first ten",
    }
    for name, png in plots.items():
        data = base64.b64encode(png).decode("ascii")
        parts.append(
            f'<figure><img src="data:image/png;base64,{data}" alt="{_e(captions.get(name, name))}" data-plot="{_e(name)}">'
            f"<figcaption>{_e(captions.get(name, name))}</figcaption></figure>"
        )
    parts.append("</div>")
    disagreements = metrics["engine"]["disagreements"]
    if disagreements:
        rows_d = [
            [d["id"], d["version"], d["k"], d["arity"], d["kind"], _verdict(d["ours"]), _verdict(d["engine"]),
             " + ".join(d["engine"]["witness"]["phrases"]) if d["engine"].get("witness") else ""]
            for d in disagreements[:200]
        ]
        parts.append(
            f"<details><summary>{len(disagreements)} disagreement(s) between our index and tantivy</summary>"
            + _table(["id", "version", "k", "arity", "kind", "ours", "tantivy", "tantivy's search"], rows_d)
            + "</details>"
        )
    parts.append("</section>")
    return "".join(parts)


def _verdict(verdict: dict[str, Any]) -> str:
    return f"anonymity {verdict['anonymity']}" if verdict["linkable"] else "not linkable"


def write_evaluation_report(evaluation: Any, plots: dict[str, bytes], path: Path) -> list[Path]:
    """The ``evaluate`` report: summary and plots, then every document before/after at the report's (k, arity)."""
    metrics = evaluation.metrics
    report = metrics["settings"]["report"]
    documents = []
    for entry in evaluation.documents:
        document = entry["document"]
        before = entry["assess"]["before"]
        after = entry["assess"].get("after")
        facts = [("anonymity before", "not linkable" if before["anonymity"] is None else str(before["anonymity"]))]
        if after is not None:
            facts.append(("after", "not linkable" if after["anonymity"] is None else str(after["anonymity"])))
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
    title = f"spacy-delink evaluation (report at k={report['k']}, arity {report['arity']})"
    return write_pages(path, title, _summary_html(metrics, plots), documents, report["k"])
