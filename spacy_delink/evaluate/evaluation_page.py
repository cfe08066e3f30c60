"""``delink evaluate``'s report: warnings in words, the summary tables and plots, then every document before/after.

Warnings come first (semantic linkage that stays high after protection, an engine or a
check that did not run), then the summary table and the plots; each document is shown
before and after at the report's (k, arity).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..pages.markup import ReportDocument, ReportSettings, anonymity_text, png_base64, write_pages

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
        "plots": [(name, PLOT_CAPTIONS.get(name, name), png_base64(plots.get(name))) for name in names],
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
        facts = [("anonymity before", anonymity_text(before["anonymity"]))]
        if after is not None:
            facts.append(("after", anonymity_text(after["anonymity"])))
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
