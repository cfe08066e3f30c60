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

import difflib
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from ..errors import InputError
from ..linkage.attack import DEFAULT_MAX_COMBINATIONS, Detection, ReadingDetection, detect
from ..linkage.combinations import check_arity
from ..linkage.index import CorpusIndex
from ..linkage.ngrams import check_k
from ..linkage.readings import DEFAULT_READINGS, check_readings, token_readings
from ..linkage.tokenize import Tokenizer
from .adversary import EngineFindings, check_proximity_slop
from .proximity import DEFAULT_MAX_GAP, DEFAULT_WIDEST_SLOP, SIDE_WORDS
from .assess import assess_document
from ..progress import track
from .inputs import EXCLUSION_REASONS, Document, InputFields, Joined, check_original, join


#: Semantic linkage after protection at or above which the report warns: similarity alone
#: names the source of one document in five (top-1), or a reader who opens the ten most
#: similar originals finds the source of half the documents (top-10). Phrase protection
#: does not address this linkage (docs/evaluate.md).
SEMANTIC_WARNING = {"top1": 0.2, "top10": 0.5}
#: The BM25 attack's top-1 share after protection from which the report warns (as semantic top-1).
RANKED_WARNING_TOP1 = 0.2
#: How to get both optional checks (the independent engine and semantic linkage).
EVALUATE_EXTRA = "pip install 'spacy-delink[evaluate]'"


def parse_int_list(value: str, option: str, check: Callable[[int], Any]) -> list[int]:
    """``"2,3,5"`` → ``[2, 3, 5]`` (sorted, unique), each value checked."""
    values = []
    for part in value.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            number = int(part)
        except ValueError:
            raise InputError(f"{option} {value!r}: {part!r} is not an integer; write e.g. {option} 2,3,5") from None
        check(number)
        values.append(number)
    if not values:
        raise InputError(f"{option} is empty; write e.g. {option} 2,3,5")
    return sorted(set(values))


@dataclass
class EvaluationSettings:
    ks: list[int]
    arities: list[int]
    report_k: int | None = None
    report_arity: int | None = None
    max_combinations: int = DEFAULT_MAX_COMBINATIONS
    adversary: bool = True
    semantic: bool = True
    #: The readings of the rules our attack checks (SPEC §8).
    readings: Sequence[str] = DEFAULT_READINGS
    #: The widest slop of the engine's sloppy phrases around masks (search reading); those
    #: above ``max_gap`` are outside the contract. None: not run, as without the search reading.
    proximity_slop: int | None = DEFAULT_WIDEST_SLOP
    #: SPEC §9's G: the slop up to which a sloppy phrase around a mask is inside the contract;
    #: None: the index's own (``LinkageRules.max_gap``, what ``protect`` checked).
    max_gap: int | None = None
    #: How the three inputs are read: id and text fields, format where a name does not say it.
    fields: InputFields = field(default_factory=InputFields)
    #: Ranked retrieval: tantivy's BM25 with the text as the query (``evaluate.ranked``; outside the rules).
    ranked: bool = True

    def __post_init__(self) -> None:
        self.readings = check_readings(self.readings)
        if "search" not in self.readings:
            self.proximity_slop = None
        if self.proximity_slop is not None:
            check_proximity_slop(self.proximity_slop, self.readings, DEFAULT_MAX_GAP if self.max_gap is None else self.max_gap)
        for k in self.ks:
            check_k(k)
        for arity in self.arities:
            check_arity(arity, allow_single=True)
        self.report_k = self.ks[0] if self.report_k is None else check_k(self.report_k)
        self.report_arity = self.arities[-1] if self.report_arity is None else check_arity(self.report_arity, allow_single=True)

    @property
    def cells(self) -> list[tuple[int, int]]:
        return [(k, arity) for k in self.ks for arity in self.arities]


# -- our attack ---------------------------------------------------------------------------


def source_in_smallest(index: CorpusIndex, detection: Detection, source: int) -> bool:
    """Whether some candidate set of the smallest size (the anonymity) contains ``source``,
    under any reading checked.

    A set holds the source only if every phrase searched occurs in it, so only phrases and
    candidates whose posting lists contain the source need be combined.
    """
    smallest = detection.anonymity
    if smallest is None:
        return False
    return any(_source_in_smallest_part(index, part, smallest, source) for part in detection.parts)


def _has(documents: np.ndarray, source: int) -> bool:
    at = int(np.searchsorted(documents, source))
    return at < len(documents) and int(documents[at]) == source


def _source_in_smallest_part(index: CorpusIndex, part: ReadingDetection, smallest: int, source: int) -> bool:
    """``source_in_smallest`` under one reading."""
    levels = index.levels_of(part.reading)

    def holds(n: int, row: int) -> bool:
        return _has(levels[n].documents(row), source)

    for level in part.analysis.levels:
        rows = np.unique(level.rows[level.df == smallest])
        if any(holds(level.n, int(row)) for row in rows):
            return True
    combinations = part.combinations
    if combinations is None:
        return False
    # Each candidate's posting list as the search used it (a bridge's comes with it, not from the levels).
    lists = combinations.postings
    chosen = [i for i, documents in enumerate(lists) if _has(documents, source)]
    if len(chosen) < 2:
        return False
    postings = [lists[i] for i in chosen]
    members = [combinations.candidates[i] for i in chosen]
    universe = np.unique(np.concatenate(postings))
    matrix = np.zeros((len(members), len(universe)), dtype=np.float32)
    for row, posting in enumerate(postings):
        matrix[row, np.searchsorted(universe, posting)] = 1.0
    pairs = matrix @ matrix.T
    if (np.triu(pairs, 1) == smallest).any():
        return True
    if combinations.arity >= 3:
        for a in range(len(members) - 2):
            sub = matrix[a + 1 :, matrix[a] > 0]
            if (np.triu(sub @ sub.T, 1) == smallest).any():
                return True
    return False


def our_verdicts(
    index: CorpusIndex, text: str, source: int, cells: list[tuple[int, int]], readings: Sequence[str] = DEFAULT_READINGS
) -> dict[tuple[int, int], dict[str, Any]]:
    """Our attack's verdict on one text at each (k, arity), under ``readings``."""
    verdicts = {}
    for k, arity in cells:
        detection = detect(index, text, k, arity, max_combinations=0, readings=readings, carried=(source,))  # the source is known here
        anonymity = detection.anonymity
        verdicts[(k, arity)] = {
            "linkable": not detection.protected,
            "anonymity": anonymity,
            "success": source_in_smallest(index, detection, source) if anonymity is not None else False,
        }
    return verdicts


# -- utility ------------------------------------------------------------------------------


@dataclass
class Change:
    """One changed region: character ranges in the de-identified and protected texts, and its kind."""

    before: tuple[int, int]
    after: tuple[int, int]
    kind: str  # "mask" or "rewrite" (inserted on the protected side), "removed" (de-identified side only)


def _runs(starts: Any, ends: Any, first: int, last: int, text: str, masks: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Character ranges of tokens ``first..last-1``, consecutive tokens joined unless a mask lies between."""
    runs: list[list[int]] = []
    for i in range(first, last):
        start, end = int(starts[i]), int(ends[i])
        if runs and not any(runs[-1][1] <= m_start < start for m_start, _ in masks):
            runs[-1][1] = end
        else:
            runs.append([start, end])
    return [(a, b) for a, b in runs]


def compare_texts(tokenizer: Tokenizer, before: str, after: str) -> tuple[int, int, list[Change]]:
    """Tokens of ``before``, how many of them the protection changed, and the changed regions.

    The diff runs on tokens (so "tokens changed" counts words, not characters). Within a
    changed stretch, removed tokens are marked on the de-identified side, and on the
    protected side each inserted mask is a "mask" change and each run of new words a
    "rewrite"; masks put between kept tokens count too.
    """
    a, b = tokenizer.tokenize(before), tokenizer.tokenize(after)
    old_masks, new_masks = a.masks, b.masks
    matcher = difflib.SequenceMatcher(None, a.raw, b.raw, autojunk=False)
    opcodes = matcher.get_opcodes()
    kept = sum(i2 - i1 for tag, i1, i2, _, _ in opcodes if tag == "equal")
    changes: list[Change] = []

    def inserted_masks(old_low: int, old_high: int, low: int, high: int) -> list[tuple[int, int]]:
        """Masks in ``after[low:high]`` beyond those ``before[old_low:old_high]`` already had."""
        had = Counter(before[s:e] for s, e in old_masks if old_low <= s and e <= old_high)
        fresh = []
        for s, e in new_masks:
            if low <= s and e <= high:
                if had[after[s:e]]:
                    had[after[s:e]] -= 1
                else:
                    fresh.append((s, e))
        return fresh

    for tag, i1, i2, j1, j2 in opcodes:
        if tag == "equal":
            for i, j in zip(range(i1, i2 - 1), range(j1, j2 - 1)):
                gap_before = before[int(a.ends[i]) : int(a.starts[i + 1])]
                gap_after = after[int(b.ends[j]) : int(b.starts[j + 1])]
                if gap_before != gap_after:
                    at = int(a.ends[i])
                    fresh = inserted_masks(at, int(a.starts[i + 1]), int(b.ends[j]), int(b.starts[j + 1]))
                    changes += [Change((at, at), mask, "mask") for mask in fresh]
            continue
        low = int(b.ends[j1 - 1]) if j1 > 0 else 0
        high = int(b.starts[j2]) if j2 < len(b) else len(after)
        at = int(a.ends[i1 - 1]) if i1 > 0 else 0
        for run in _runs(a.starts, a.ends, i1, i2, before, old_masks):
            changes.append(Change(run, (low, low), "removed"))
        for run in _runs(b.starts, b.ends, j1, j2, after, new_masks):
            changes.append(Change((at, at), run, "rewrite"))
        old_high = int(a.starts[i2]) if i2 < len(a) else len(before)
        changes += [Change((at, at), mask, "mask") for mask in inserted_masks(at, old_high, low, high)]
    changes.sort(key=lambda change: (change.after, change.before))
    return len(a), len(a) - kept, changes


def utility_of(tokenizer: Tokenizer, document: Document) -> tuple[dict[str, Any], list[Change]]:
    assert document.protected is not None
    tokens, changed, changes = compare_texts(tokenizer, document.deidentified, document.protected)
    edits = Counter(str(edit.get("by", "unknown")) for edit in document.edits or [])
    return {
        "tokens": tokens,
        "tokens_changed": changed,
        "masks_added": len(tokenizer.mask_spans(document.protected)) - len(tokenizer.mask_spans(document.deidentified)),
        "edits": dict(edits) if document.edits is not None else None,
    }, changes


# -- the whole evaluation ------------------------------------------------------------------


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
