"""``delink evaluate``: the attack before and after protection, an independent engine, utility, semantic linkage.

For every joined document (see ``inputs``) and every (k, arity) asked for:

* **our attack** (``linkage.attack.detect``): linkable or not, the anonymity (size of the
  smallest candidate set) and whether a smallest candidate set contains the true source
  (a *successful* attack: some search the adversary can run returns a set of that size
  holding the source; with several smallest sets this is the adversary's best case);
* **the independent engine** (``adversary``): the same attack with tantivy under the same
  readings, and every document on which its verdict differs from ours; then with the gap
  reading's sloppy phrases around masks added (slop <= max_gap: inside the contract, SPEC
  §9), then with the proximity searches still outside it (slop above max_gap, phrases
  longer than max_n);
* **utility**: tokens changed (token-level diff of de-identified vs protected text), masks
  added, edits per document by kind, and the cosine similarity of their embeddings;
* **semantic linkage**: the exact rank of the true source when the original collection
  is ordered by similarity to the document (top-1, top-10, mean rank).

"Averted" counts documents linkable before protection that are not linkable after.
``warnings`` says in words what a reader must not miss (``evaluation_warnings``).
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ..linkage.index import CorpusIndex
from ..linkage.readings import token_readings
from ..progress import track
from .adversary import EngineFindings
from .assess import assess_document
from .inputs import EXCLUSION_REASONS, Document, Joined, check_original, join
from .proximity import SIDE_WORDS
from .report_warnings import evaluation_warnings
from .settings import EvaluationSettings
from .utility import utility_of
from .verdicts import our_verdicts


@dataclass
class Evaluation:
    """Everything ``delink evaluate`` writes: ``metrics`` (JSON) and what the report draws."""

    metrics: dict[str, Any]
    documents: list[dict[str, Any]] = field(default_factory=list)  # per document, with texts, for the report
    seconds: float = 0.0


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _histogram(values: Iterable[int | None]) -> dict[str, int]:
    counts = Counter("none" if value is None else str(value) for value in values)
    return dict(sorted(counts.items(), key=lambda item: (item[0] == "none", int(item[0]) if item[0] != "none" else 0)))


def _protection_setting(documents: list[Document]) -> dict[str, Any] | None:
    settings = {tuple(sorted(d.settings.items())) if d.settings else None for d in documents if d.protected is not None}
    if len(settings) == 1:
        only = settings.pop()
        return dict(only) if only else None
    return None


def evaluate(
    index: CorpusIndex,
    original: Path,
    deidentified: Path,
    protected: Path | None,
    settings: EvaluationSettings,
    progress: bool = True,
) -> Evaluation:
    """Evaluate the documents of ``deidentified`` (and ``protected``) that join with the collection."""
    started = time.perf_counter()
    collection = check_original(index, original, settings.fields)
    joined = join(index, deidentified, protected, settings.fields)
    documents = joined.documents
    cells = settings.cells
    engine = None
    engine_absent = "skipped with --no-engine; run without it to include this check"
    if settings.adversary:
        from .adversary import SearchEngineAdversary, engine_unavailable

        engine_absent = engine_unavailable() or ""
        if not engine_absent:
            engine = SearchEngineAdversary(
                (text for _, text in collection), index.rules, index.max_n, token_readings(settings.readings), settings.proximity_slop,
                max_gap_of(settings, index),
            )
    per_document: list[dict[str, Any]] = []
    versions = [("before", "deidentified")] + ([("after", "protected")] if joined.has_protected else [])
    for document in track(documents, "evaluate", "docs", enabled=progress):
        entry: dict[str, Any] = {"id": document.id, "ours": {}, "engine": {}}
        for version, attribute in versions:
            text = getattr(document, attribute)
            entry["ours"][version] = our_verdicts(index, text, document.source, cells, settings.readings)
            if version == "after" and not document.derived:  # cannot be shown to be what was checked: linkable
                for verdict in entry["ours"][version].values():
                    verdict.update(linkable=True, unverified=True)
            if engine is not None:
                entry["engine"][version] = engine.attack(text, settings.ks, settings.arities, document.source)
        report_cell = (settings.report_k, settings.report_arity)
        entry["assess"] = {
            version: assess_document(index, document.id, getattr(document, attribute), *report_cell, settings.max_combinations, readings=settings.readings)  # type: ignore[arg-type]
            for version, attribute in versions
        }
        if document.protected is not None:
            entry["utility"], entry["changes"] = utility_of(index.tokenizer, document)
        entry["document"] = document
        per_document.append(entry)
    if settings.semantic:
        from .semantic import semantic_linkage

        semantic = semantic_linkage(index, collection, documents, progress)
        for entry, row in zip(per_document, semantic.pop("per_document", [])):
            entry["semantic"] = row
    else:
        semantic = {"available": False, "reason": "skipped with --no-semantic; run without it to include this check"}
    ranked = _ranked(index, collection, documents, per_document, settings, progress)
    metrics = _summarize(index, joined, per_document, settings, semantic, engine is not None, collection)
    metrics["ranked"] = ranked
    _ranked_cells(metrics["linkage"], ranked)
    if engine is None:
        metrics["engine"]["reason"] = engine_absent
    metrics["warnings"] = evaluation_warnings(metrics, settings)
    metrics["seconds"] = round(time.perf_counter() - started, 1)
    return Evaluation(metrics=metrics, documents=per_document, seconds=metrics["seconds"])


def _ranked(
    index: CorpusIndex, collection: list[tuple[Any, str]], documents: list[Document], per_document: list[dict[str, Any]],
    settings: EvaluationSettings, progress: bool,
) -> dict[str, Any]:
    """The BM25 attack's summary; each document's ranks go to its entry (``ranked``)."""
    if not settings.ranked:
        return {"available": False, "reason": "skipped with --no-ranked; run without it to include this check"}
    from .ranked import ranked_linkage

    ranked = ranked_linkage(collection, documents, index.rules.mask_patterns, progress)
    for entry, row in zip(per_document, ranked.pop("per_document", [])):
        entry["ranked"] = row
    return ranked


def _ranked_cells(cells: list[dict[str, Any]], ranked: dict[str, Any]) -> None:
    """Each (k, arity) cell carries the BM25 figures beside its own (they do not depend on k or arity)."""
    if not ranked.get("available"):
        return
    for cell in cells:
        for version in ("before", "after"):
            if version in cell and version in ranked:
                summary = ranked[version]
                cell[version]["ranked"] = {name: summary[name] for name in ("top1", "top10", "mean_rank")}


def _summarize(
    index: CorpusIndex,
    joined: Joined,
    per_document: list[dict[str, Any]],
    settings: EvaluationSettings,
    semantic: dict[str, Any],
    with_engine: bool,
    collection: list[tuple[Any, str]],
) -> dict[str, Any]:
    protection = _protection_setting(joined.documents)
    if protection is not None:
        # Protection holds against the index it was checked with; another index proves nothing here.
        protection["same_index"] = protection.get("index") in (None, index.manifest["key_id"])
    versions = ["before"] + (["after"] if joined.has_protected else [])
    cells = []
    disagreements = []
    for k, arity in settings.cells:
        cell: dict[str, Any] = {"k": k, "arity": arity}
        if protection is not None and protection["same_index"]:
            cell["within_protection"] = k <= protection["k"] and arity <= protection["arity"]
        for version in versions:
            ours = [entry["ours"][version][(k, arity)] for entry in per_document]
            linkable = sum(v["linkable"] for v in ours)
            cell[version] = {
                "documents": len(ours),
                "linkable": linkable,
                "linkable_share": _share(linkable, len(ours)),
                "successful": sum(v["success"] for v in ours),
                "successful_share": _share(sum(v["success"] for v in ours), len(ours)),
                "singled_out": sum(v["anonymity"] == 1 for v in ours),
                "anonymity": _histogram(v["anonymity"] for v in ours),
            }
            if with_engine:
                findings: list[EngineFindings] = [entry["engine"][version] for entry in per_document]
                theirs = [found.verdict((k, arity)) for found in findings]
                cell[version].update(_engine_counts(findings, (k, arity)))
                for entry, mine, other in zip(per_document, ours, theirs):
                    if mine["linkable"] != other.linkable or mine["anonymity"] != other.anonymity:
                        disagreements.append(
                            {
                                "id": entry["id"],
                                "version": version,
                                "k": k,
                                "arity": arity,
                                "kind": "decision" if mine["linkable"] != other.linkable else "anonymity",
                                "ours": {"linkable": mine["linkable"], "anonymity": mine["anonymity"]},
                                "engine": {"linkable": other.linkable, "anonymity": other.anonymity, "witness": other.witness},
                            }
                        )
        if joined.has_protected:
            before = [entry["ours"]["before"][(k, arity)]["linkable"] for entry in per_document]
            after = [entry["ours"]["after"][(k, arity)]["linkable"] for entry in per_document]
            averted = sum(b and not a for b, a in zip(before, after))
            cell["averted"] = {"linkable_before": sum(before), "averted": averted, "share": _share(averted, sum(before))}
        cells.append(cell)
    excluded = {reason: {"count": len(ids), "ids": ids[:50], "why": EXCLUSION_REASONS[reason]} for reason, ids in joined.excluded.items()}
    metrics: dict[str, Any] = {
        "settings": {
            "index": str(index.path),
            "readings": list(settings.readings),
            "k": settings.ks,
            "arity": settings.arities,
            "report": {"k": settings.report_k, "arity": settings.report_arity},
            "rules": index.rules.to_dict(),
            "protection": protection,
        },
        "documents": {
            "collection": len(collection),
            "evaluated": len(per_document),
            "excluded": excluded,
            "excluded_total": sum(len(ids) for ids in joined.excluded.values()),
            "protected_without_edits": {"count": len(joined.unverified), "ids": joined.unverified[:50], "counted_as": "linkable"},
            "protected_not_derived": {"count": len(joined.not_derived), "ids": joined.not_derived[:50], "counted_as": "linkable"},
            "protected_not_in_deidentified": {"count": len(joined.extra_protected), "ids": joined.extra_protected[:50]},
        },
        "linkage": cells,
        "engine": {
            "name": "tantivy" if with_engine else None,
            "available": with_engine,
            "readings": list(token_readings(settings.readings)) if with_engine else [],
            "proximity": _proximity_note(settings.proximity_slop if with_engine else None, max_gap_of(settings, index), index.max_n),
            "disagreements": disagreements,
            "decision_disagreements": sum(d["kind"] == "decision" for d in disagreements),
        },
        "semantic": semantic,
    }
    if joined.has_protected:
        utilities = [entry["utility"] for entry in per_document]
        tokens = sum(u["tokens"] for u in utilities)
        changed = sum(u["tokens_changed"] for u in utilities)
        with_edits = [u["edits"] for u in utilities if u["edits"] is not None]
        kinds = sorted({kind for edits in with_edits for kind in edits})
        metrics["utility"] = {
            "tokens": tokens,
            "tokens_changed": changed,
            "tokens_changed_share": _share(changed, tokens),
            "masks_added": sum(u["masks_added"] for u in utilities),
            "masks_added_per_document": sum(u["masks_added"] for u in utilities) / len(utilities),
            "edits_per_document": {kind: sum(e.get(kind, 0) for e in with_edits) / len(with_edits) for kind in kinds}
            if with_edits
            else None,
            "documents_unchanged": sum(u["tokens_changed"] == 0 for u in utilities),
        }
    metrics["per_document"] = [_document_metrics(entry) for entry in per_document]
    return metrics


def _engine_counts(findings: list[EngineFindings], cell: tuple[int, int]) -> dict[str, Any]:
    """One (k, arity) cell's engine figures: linkable by phrases and ANDs of phrases (any
    reading, and per reading), with the gap reading's sloppy phrases added (``proximity.gap_reading``:
    inside the contract), and with every proximity search added (``proximity``: what is
    still outside the contract is ``beyond_contract``)."""
    verdicts = [found.verdict(cell) for found in findings]
    linkable = sum(v.linkable for v in verdicts)
    counts: dict[str, Any] = {
        "engine_linkable": linkable,
        "engine_linkable_share": _share(linkable, len(verdicts)),
        "engine_linkable_by_reading": {
            reading: sum(found.readings[reading][cell].linkable for found in findings) for reading in findings[0].readings
        } if findings else {},
    }
    if findings and findings[0].proximity is not None:
        gap = [found.gap[cell] for found in findings if found.gap is not None]
        near = [found.proximity[cell] for found in findings if found.proximity is not None]
        by_phrases = [v.linkable for v in verdicts]
        safe = [not g.linkable for g in gap]  # not linkable by any search the contract covers
        beyond = sum(n.linkable and s for n, s in zip(near, safe))
        counts["proximity"] = {
            "gap_reading": {
                "linkable": sum(g.linkable for g in gap),
                "singled_out": sum(g.anonymity == 1 for g in gap),
                "beyond_phrases": sum(g.linkable and not p for g, p in zip(gap, by_phrases)),
                "beyond_phrases_singled_out": sum(g.anonymity == 1 and not p for g, p in zip(gap, by_phrases)),
            },
            "linkable": sum(n.linkable for n in near),
            "singled_out": sum(n.anonymity == 1 for n in near),
            "not_linkable_in_contract": sum(safe),
            "beyond_contract": beyond,
            "beyond_contract_singled_out": sum(n.anonymity == 1 and s for n, s in zip(near, safe)),
            "beyond_contract_share": _share(beyond, sum(safe)),
        }
    return counts


def max_gap_of(settings: EvaluationSettings, index: CorpusIndex) -> int:
    """The G a sloppy phrase around a mask is read with: the settings', else the index's (what protect checked)."""
    return index.rules.max_gap if settings.max_gap is None else settings.max_gap


def _proximity_note(slop: int | None, max_gap: int, max_n: int) -> dict[str, Any]:
    """What the proximity figures are (metrics.json says it beside the numbers)."""
    if slop is None:
        return {"run": False}
    around = (
        f"the last 1-{SIDE_WORDS} words before each stretch of masks and the first 1-{SIDE_WORDS} after it as a "
        'sloppy phrase ("a * b"~s), read in order on token positions (a, then 1..s words, then b) at the smallest '
        "slop that reaches the document's source"
    )
    return {
        "run": True,
        "max_gap": max_gap,
        "slop": slop,
        "words_each_side": SIDE_WORDS,
        "gap_reading": {
            "in_contract": True,
            "what": f"{around}, s <= {max_gap}, alone or ANDed with the text's candidate phrases (SPEC §9: "
            "protect removes it)",
        },
        "beyond_contract": {
            "in_contract": False,
            "what": f"{around}, {max_gap} < s <= {slop}, alone or ANDed with candidate phrases; and phrases longer "
            f"than {max_n} words that no mask separates, alone: reported, not prevented",
            "not_measured": "other proximity between phrases no mask separates (A NEAR/n B), fuzzy terms, stemming, synonyms",
        },
    }


def _document_metrics(entry: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {"id": entry["id"]}
    for version, cells in entry["ours"].items():
        row[version] = [{"k": k, "arity": m, **value} for (k, m), value in cells.items()]
        if entry["engine"]:
            findings: EngineFindings = entry["engine"][version]
            for item in row[version]:
                cell = (item["k"], item["arity"])
                verdict = findings.verdict(cell)
                item["engine_linkable"], item["engine_anonymity"] = verdict.linkable, verdict.anonymity
                item["engine_readings"] = {reading: verdicts[cell].linkable for reading, verdicts in findings.readings.items()}
                if findings.gap is not None and findings.proximity is not None:
                    gap, near = findings.gap[cell], findings.proximity[cell]
                    item["gap_linkable"], item["gap_anonymity"] = gap.linkable, gap.anonymity
                    item["proximity_linkable"], item["proximity_anonymity"] = near.linkable, near.anonymity
    if "utility" in entry:
        row["utility"] = entry["utility"]
    if "semantic" in entry:
        row["semantic"] = entry["semantic"]
    if "ranked" in entry:
        row["ranked"] = entry["ranked"]
    return row
