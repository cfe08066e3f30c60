"""The attack on one text: everything the adversary finds at (k, arity), with the SPEC scores.

``detect`` runs the n-gram lookups (SPEC §4) and, at arity 2–3, the combination search
(SPEC §5); ``Detection`` answers the questions the components, the rewriter and
``delink assess`` ask of it (anonymity, the §7 decision, what to rephrase).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .combinations import CombinationAnalysis, analyze_combinations, check_arity, combination_records
from .index import CorpusIndex
from .ngrams import LinkageAnalysis, Occurrence, analyze, ngram_records
from .scores import risk_from_anonymity

DEFAULT_MAX_COMBINATIONS = 1000


@dataclass
class Detection:
    """Everything the attack finds in one text at (k, arity): what the rewriter must change."""

    text: str
    analysis: LinkageAnalysis
    combinations: CombinationAnalysis | None

    @property
    def k(self) -> int:
        return self.analysis.k

    @property
    def anonymity(self) -> int | None:
        """SPEC §6 over both arities (exact whatever the report cap)."""
        if self.combinations is not None:
            return self.combinations.anonymity
        return self.analysis.anonymity()

    @property
    def linkage_risk(self) -> float:
        return risk_from_anonymity(self.anonymity)

    @property
    def combination_linkable(self) -> bool:
        return self.combinations is not None and self.combinations.combination_linkable

    @property
    def protected(self) -> bool:
        """SPEC §7: no linkable n-gram and not combination-linkable at (k, arity)."""
        return not self.analysis.minimal_columns()["start"] and not self.combination_linkable

    def to_rephrase(self) -> list[Occurrence]:
        """Minimal linkable n-grams plus each combination's flagged member, in text order."""
        spans = {(o.start, o.end): o for o in self.analysis.minimal()}
        if self.combinations is not None:
            for i in self.combinations.flagged():
                member = self.combinations.candidates[i]
                spans.setdefault((member.start, member.end), member)
        return [spans[key] for key in sorted(spans)]


def detect(
    index: CorpusIndex, text: str, k: int, arity: int = 1, max_combinations: int = 0, flags: bool = True
) -> Detection:
    """Run the attack on ``text``: n-grams always, combinations when ``arity`` >= 2.

    The defaults compute what rewriting needs — the decision, the exact scores and every
    flagged member — and list no combinations (``max_combinations=0``), which lets the
    search skip minimal triples that flag nothing new. A report asks for its cap instead.
    """
    check_arity(arity, allow_single=True)
    analysis = analyze(index, text, k)
    combinations = (
        analyze_combinations(index, analysis, arity, max_combinations=max_combinations, flags=flags)
        if arity >= 2
        else None
    )
    return Detection(text=text, analysis=analysis, combinations=combinations)


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
