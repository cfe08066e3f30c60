"""What the evaluation report states first, in words: linkage protection leaves, and checks that did not run."""
from __future__ import annotations

from typing import Any

from .settings import EvaluationSettings

#: Semantic linkage after protection at or above which the report warns: similarity alone
#: names the source of one document in five (top-1), or a reader who opens the ten most
#: similar originals finds the source of half the documents (top-10). Phrase protection
#: does not address this linkage (docs/evaluate.md).
SEMANTIC_WARNING = {"top1": 0.2, "top10": 0.5}
#: The BM25 attack's top-1 share after protection from which the report warns (as semantic top-1).
RANKED_WARNING_TOP1 = 0.2
#: How to get both optional checks (the independent engine and semantic linkage).
EVALUATE_EXTRA = "pip install 'spacy-delink[evaluate]'"


def _proximity_warnings(metrics: dict[str, Any], settings: EvaluationSettings) -> list[str]:
    """Sloppy phrases around masks that still link after protection at the report's (k, arity):
    inside the contract (the gap reading: protection should have removed them) and outside it."""
    cell = next((c for c in metrics["linkage"] if (c["k"], c["arity"]) == (settings.report_k, settings.report_arity)), None)
    near = (cell or {}).get("after", {}).get("proximity")
    if near is None:
        return []
    note = metrics["engine"]["proximity"]
    found = []
    if near["gap_reading"]["beyond_phrases"]:
        found.append(
            f"Sloppy phrases around masks (slop up to {note['max_gap']}, inside the contract: SPEC §9's gap reading) link "
            f"{near['gap_reading']['beyond_phrases']} protected document(s) that no phrase or AND of phrases links "
            f"({near['gap_reading']['beyond_phrases_singled_out']} singled out) at k={settings.report_k}, arity {settings.report_arity}; "
            "protection under the gap reading removes them: protect again with a version that reads it."
        )
    if near["beyond_contract"]:
        found.append(
            f"Outside the contract, {near['beyond_contract']} protected document(s) are linked "
            f"({near['beyond_contract_singled_out']} singled out) only by a sloppy phrase around a mask with a slop above "
            f"{note['max_gap']} (up to {note['slop']}) or a phrase longer than max_n: reported, not prevented (docs/evaluate.md)."
        )
    return found


def evaluation_warnings(metrics: dict[str, Any], settings: EvaluationSettings) -> list[str]:
    """What the report states first, in words: linkage the protection leaves, and checks that did not run."""
    warnings = []
    ranked = metrics.get("ranked", {})
    ranked_after = ranked.get("after") if ranked.get("available") else None
    if ranked_after is not None and ranked_after["top1"] >= RANKED_WARNING_TOP1:
        warnings.append(
            f"Ranked retrieval finds the source after protection: pasted whole into a search engine (BM25, tantivy), "
            f"the text ranks its true source first for {100 * ranked_after['top1']:.1f}% of the documents and in the first ten "
            f"for {100 * ranked_after['top10']:.1f}%. Phrase protection does not prevent this; `delink protect --retrieval K` "
            "does, at a cost in text (docs/evaluate.md)."
        )
    semantic = metrics["semantic"]
    after = semantic.get("after") if semantic.get("available") else None
    if after is not None and any(after[name] >= bound for name, bound in SEMANTIC_WARNING.items()):
        warnings.append(
            f"Semantic linkage stays high after protection: the true source is the most similar original for "
            f"{100 * after['top1']:.1f}% of the documents and among the ten most similar for {100 * after['top10']:.1f}% "
            f"(this report warns from top-1 {100 * SEMANTIC_WARNING['top1']:.0f}% or top-10 "
            f"{100 * SEMANTIC_WARNING['top10']:.0f}%). Protection against phrase search does not prevent linkage "
            "by meaning: an adversary who embeds the text can still find its source."
        )
    warnings += _proximity_warnings(metrics, settings)
    disagreements = metrics["engine"]["decision_disagreements"]
    if disagreements:
        warnings.append(f"tantivy disagrees with our index on {disagreements} decision(s); they are listed under the summary.")
    install = f" {EVALUATE_EXTRA} installs both optional checks."
    ranked_missing = settings.ranked and not ranked.get("available")
    if not metrics["engine"]["available"]:
        warnings.append(
            "The independent search engine (tantivy) did not run, so no second engine confirmed the linkage figures"
            + (" and ranked retrieval (BM25, the text as the query) was not measured" if ranked_missing else "") + ": "
            + str(metrics["engine"]["reason"]) + ("." + install if settings.adversary else ".")
        )
    elif ranked_missing:
        warnings.append(
            "Ranked retrieval (BM25, the text as the query) was not measured, so this report says nothing about a search "
            "box finding the source: " + str(ranked.get("reason")) + "."
        )
    if not semantic.get("available"):
        warnings.append(
            "Semantic linkage was not measured, so this report says nothing about finding a source by meaning, "
            "which phrase protection does not prevent: " + str(semantic.get("reason")) + ("." + install if settings.semantic else ".")
        )
    return warnings
